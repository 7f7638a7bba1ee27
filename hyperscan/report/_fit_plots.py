# SPDX-License-Identifier: GPL-3.0-or-later
"""PNG plots of one fit's output folder: PDF bands at Q0 (and at 100 GeV once evolved), chi2 per
dataset, training histories.

Reads only the files a fit writes (no TensorFlow): ``pdfs.npz`` (x*f of every member at Q0 in
the fitted evolution basis), ``results.json`` (status and chi2 of every member),
``history.npz`` (chi2 of every member at every host sync) and ``runcard.yml`` (whether the fit
is a closure test, and of which data; the datasets each fold of a k-fold fit held out). The
truth of a closure fit is :func:`hyperscan.data.toy_pdf`: the closure data of both levels are
predictions of the normalised toy PDF (level 1 only adds one fluctuation to the data, not to
the truth).

The format (file names, arrays, member statuses) is :mod:`hyperscan.fit`'s, which loads
without TensorFlow. Bands are over the members with status ``ok``, as NNPDF discards replicas
that fail positivity; members excluded are counted in the figures.
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from hyperscan._files import umask
from hyperscan.data import FIT_BASIS, closure_problem, flavour_combination, toy_pdf
from hyperscan.fit import (
    DIVERGED,
    HISTORY_FILE,
    INTERRUPTED,
    OK,
    PDF_FILE,
    POSITIVITY_VETO,
    RESULTS_FILE,
    RUNCARD_FILE,
    RUNNING,
)
from hyperscan.pdfset import EvolveError
from hyperscan.report._evolved_plots import (
    EvolvedPdfs,
    evolved_figure,
    load_evolved,
    truth_ratio_figure,
)
from hyperscan.report._style import (
    BAND,
    HELD_OUT,
    PARTON_LABELS,
    TRUTH,
    new_figure,
    png_bytes,
    style,
    wants_log,
)

__all__ = [
    "EVOLUTION",
    "PHYSICAL",
    "FitOutput",
    "FitPlotError",
    "dataset_chi2_figure",
    "fit_figures",
    "history_figure",
    "load_fit",
    "pdf_figure",
    "pdf_overview_figure",
    "plot_fit",
    "sea_ratio_figure",
]

EVOLUTION = "evolution"
PHYSICAL = "physical"
#: Physical flavours plotted (c = cbar at Q0 in the fitted basis, so cbar is not repeated).
PHYSICAL_PLOTTED = ("u", "ubar", "d", "dbar", "s", "sbar", "c", "g")
_LABELS = {
    **PARTON_LABELS,
    "Sigma": r"$\Sigma$",
    "V": "$V$",
    "V3": "$V_3$",
    "V8": "$V_8$",
    "T3": "$T_3$",
    "T8": "$T_8$",
    "T15": "$T_{15}$",
    "c": "$c = \\bar c$",  # at Q0, in the fitted basis
}
_CATEGORIES = ("training", "validation", "held-out")
_X_AXIS = "$x$"


class FitPlotError(Exception):
    """The folder is not a fit's output (a file is missing or unreadable)."""


def _rotation(basis: str) -> tuple[tuple[str, ...], np.ndarray]:
    """Names and the (8, n) matrix taking fitted-basis x*f to the plotted ones."""
    if basis == EVOLUTION:
        return FIT_BASIS, np.eye(len(FIT_BASIS))
    rows = [flavour_combination({name: 1.0}) for name in PHYSICAL_PLOTTED]
    return PHYSICAL_PLOTTED, np.stack(rows, axis=1)


@dataclass(frozen=True)
class FitOutput:
    """What a fit folder holds, as arrays."""

    path: Path
    x: np.ndarray  # (n_x,)
    xf: np.ndarray  # (M, n_x, 8) in FIT_BASIS
    replicas: np.ndarray  # (M,)
    status: tuple[str, ...]  # (M,) one of hyperscan.fit.MEMBER_STATUSES each
    members: list[dict[str, Any]]  # results.json members
    runcard: dict[str, Any]  # runcard.yml as written
    history: dict[str, np.ndarray] | None = None  # step (S,), chi2_per_point (S, M, 3), status
    datasets: dict[str, tuple[int, float, float]] = field(default_factory=dict)  # n, x range
    folds: tuple[int, ...] = ()  # (M,) each member's fold, -1 without folds
    held_out: tuple[frozenset[str], ...] = ()  # (M,) the datasets its fold held out of its fit
    evolved: EvolvedPdfs | None = None  # at Q = 100 GeV, when the fit has an LHAPDF set

    @property
    def n_members(self) -> int:
        return int(self.xf.shape[0])

    @property
    def closure(self) -> dict[str, Any] | None:
        """The runcard's ``data.closure`` section; None for a fit of other data."""
        data = self.runcard.get("data")
        closure = data.get("closure") if isinstance(data, dict) else None
        return closure if isinstance(closure, dict) else None

    @property
    def kfold(self) -> bool:
        return any(fold >= 0 for fold in self.folds)

    @property
    def used(self) -> np.ndarray:
        """(M,) members in the bands: status ok with finite PDFs; if none is, the pos-veto and
        interrupted ones (trained, if not yet or never positive), and the diverged ones only if
        nothing else is left."""
        finite = np.isfinite(self.xf).all(axis=(1, 2))
        for wanted in ({OK}, {POSITIVITY_VETO, INTERRUPTED}):
            chosen = finite & np.array([s in wanted for s in self.status], dtype=bool)
            if chosen.any():
                return chosen
        return finite

    def truth(self, basis: str = EVOLUTION) -> np.ndarray | None:
        """(n_x, n) the closure truth x*f in the plotted basis; None when not a closure fit."""
        if self.closure is None:
            return None
        return toy_pdf(self.x) @ _rotation(basis)[1]

    def pdfs(self, basis: str = EVOLUTION) -> tuple[tuple[str, ...], np.ndarray]:
        """Names and (M, n_x, n) x*f of every member in the plotted basis."""
        names, matrix = _rotation(basis)
        return names, self.xf.astype(np.float64) @ matrix

    def members_note(self) -> str:
        used = int(self.used.sum())
        excluded = [s for s, u in zip(self.status, self.used, strict=True) if not u]
        text = f"{used} of {self.n_members} members"
        if OK not in self.status:
            text = f"no member ok: {text}"
        if excluded:
            counts = {s: excluded.count(s) for s in dict.fromkeys(excluded)}
            text += " (excluded: " + ", ".join(f"{n} {s}" for s, n in counts.items()) + ")"
        return text

    @property
    def steps_per_call(self) -> int | None:
        training = self.runcard.get("training")
        value = training.get("steps_per_call") if isinstance(training, dict) else None
        if isinstance(value, int):
            return value
        if self.history is not None and self.history["step"].size > 1:
            return int(np.diff(self.history["step"]).min())
        return None

    def data_x_range(self) -> tuple[float, float] | None:
        if not self.datasets:
            return None
        return (
            min(lo for _, lo, _ in self.datasets.values()),
            max(hi for _, _, hi in self.datasets.values()),
        )


def _read_json(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise FitPlotError(f"cannot read {path}: {error}") from None
    if not isinstance(document, dict) or not isinstance(document.get("members"), list):
        raise FitPlotError(f"{path} is not a hyperscan results file (no 'members' list)")
    return document


def _read_npz(path: Path, keys: tuple[str, ...]) -> dict[str, np.ndarray]:
    if path.is_file() and not zipfile.is_zipfile(path):  # else numpy talks about pickles
        raise FitPlotError(f"{path} is not an .npz archive: damaged, or not written by a fit")
    try:
        with np.load(path) as archive:
            missing = [key for key in keys if key not in archive]
            if missing:
                raise FitPlotError(f"{path} lacks {', '.join(missing)}")
            return {key: archive[key] for key in archive.files}
    except (OSError, ValueError) as error:
        raise FitPlotError(f"cannot read {path}: {error}") from None


def _closure_datasets(closure: dict[str, Any], names: list[str]) -> dict:
    """Points and x range of each fitted closure dataset (for labels and the data region)."""
    try:
        problem = closure_problem(
            str(closure.get("size", "small")),
            level=int(closure.get("level", 1)),
            seed=int(closure.get("seed", 0)),
        )
    except (TypeError, ValueError):
        return {}
    found = {d.name: d for d in problem.datasets}
    if not all(name in found for name in names):
        return {}
    return {
        name: (
            found[name].n_data,
            float(np.min(found[name].kinematics[:, 0])),
            float(np.max(found[name].kinematics[:, 0])),
        )
        for name in names
    }


def _held_out(
    members: list[dict[str, Any]], runcard: dict[str, Any], where: Path
) -> tuple[tuple[int, ...], tuple[frozenset[str], ...]]:
    """Each member's fold and the datasets it held out of its fit: results.json numbers a
    member's fold (-1 without folds), the runcard's ``folds`` lists each fold's datasets."""
    folds = runcard.get("folds")
    folds = folds if isinstance(folds, list) else []
    numbers, held_out = [], []
    for member in members:
        fold = member.get("fold", -1)
        if fold == -1:
            held_out.append(frozenset())
        elif isinstance(fold, int) and 0 <= fold < len(folds) and isinstance(folds[fold], list):
            held_out.append(frozenset(str(name) for name in folds[fold]))
        else:
            raise FitPlotError(
                f"{where}: {RESULTS_FILE} has a member of fold {fold!r}, but {RUNCARD_FILE} "
                f"lists {len(folds)} folds (files of different fits?)"
            )
        numbers.append(fold)
    return tuple(numbers), tuple(held_out)


def load_fit(fitdir: str | Path) -> FitOutput:
    """Read a fit folder; :class:`FitPlotError` names what is missing or damaged."""
    fitdir = Path(fitdir)
    if not fitdir.is_dir():
        raise FitPlotError(f"{fitdir} is not a folder (expected the OUTDIR of `hyperscan fit`)")
    missing = [f for f in (RESULTS_FILE, PDF_FILE, RUNCARD_FILE) if not (fitdir / f).is_file()]
    if missing:
        raise FitPlotError(
            f"{fitdir} is not a fit's output: it has no {', '.join(missing)} "
            "(expected the OUTDIR of `hyperscan fit`)"
        )
    results = _read_json(fitdir / RESULTS_FILE)
    pdfs = _read_npz(fitdir / PDF_FILE, ("x", "xf", "status"))
    try:
        runcard = yaml.safe_load((fitdir / RUNCARD_FILE).read_text()) or {}
    except (OSError, ValueError, yaml.YAMLError) as error:  # ValueError: not UTF-8
        raise FitPlotError(f"cannot read {fitdir / RUNCARD_FILE}: {error}") from None
    history = None
    if (fitdir / HISTORY_FILE).is_file():
        history = _read_npz(fitdir / HISTORY_FILE, ("step", "chi2_per_point", "status"))
    xf = np.asarray(pdfs["xf"])
    if xf.ndim != 3 or xf.shape[2] != len(FIT_BASIS) or xf.shape[1] != pdfs["x"].size:
        raise FitPlotError(f"{fitdir / PDF_FILE}: xf has shape {xf.shape}, expected (M, x, 8)")
    members = results["members"]
    if not all(isinstance(m, dict) for m in members):
        raise FitPlotError(f"{fitdir / RESULTS_FILE}: a member is not a mapping (damaged file?)")
    if history is not None:
        steps = np.shape(history["step"])
        if len(steps) != 1 or np.shape(history["chi2_per_point"]) != (*steps, xf.shape[0], 3):
            raise FitPlotError(
                f"{fitdir / HISTORY_FILE}: chi2_per_point has shape "
                f"{np.shape(history['chi2_per_point'])}, expected (syncs, {xf.shape[0]}, 3)"
            )
    runcard = runcard if isinstance(runcard, dict) else {}
    data = runcard.get("data")
    closure = data.get("closure") if isinstance(data, dict) else None
    datasets = {}
    if isinstance(closure, dict) and members:
        names = list(members[0].get("dataset_chi2_per_point", {}))
        datasets = _closure_datasets(closure, names)
    if len(members) != xf.shape[0] or pdfs["status"].shape != (xf.shape[0],):
        raise FitPlotError(
            f"{fitdir}: {RESULTS_FILE} has {len(members)} members, {PDF_FILE} {xf.shape[0]} "
            "(files of different fits?)"
        )
    folds, held_out = _held_out(members, runcard, fitdir)
    status = {m.get("replica"): m.get("status") for m in members}
    try:
        evolved = load_evolved(fitdir, status, float(np.min(pdfs["x"])))
    except EvolveError as error:
        raise FitPlotError(str(error)) from None
    return FitOutput(
        path=fitdir,
        x=np.asarray(pdfs["x"], dtype=np.float64),
        xf=xf,
        replicas=np.asarray(pdfs.get("replicas", np.arange(1, xf.shape[0] + 1))),
        status=tuple(str(s) for s in pdfs["status"]),
        members=members,
        runcard=runcard,
        history=history,
        datasets=datasets,
        folds=folds,
        held_out=held_out,
        evolved=evolved,
    )


# --------------------------------------------------------------------------- PDFs


def _bands(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(M, n_x) -> 16%, 50%, 84% quantiles over members."""
    q16, q50, q84 = np.quantile(values, (0.16, 0.5, 0.84), axis=0)
    return q16, q50, q84


def _limits(*curves: np.ndarray, margin: float = 0.12) -> tuple[float, float]:
    """y limits from the band and truth, not from wild replicas far outside the data."""
    values = np.concatenate([np.ravel(c) for c in curves])
    values = values[np.isfinite(values)]
    lo, hi = (float(values.min()), float(values.max())) if values.size else (0.0, 1.0)
    span = hi - lo or max(abs(hi), 1e-3)
    return lo - margin * span, hi + margin * span


def _shade_no_data(ax: Axes, fit: FitOutput) -> None:
    region = fit.data_x_range()
    if region is None:
        return
    lo, hi = region
    ax.axvspan(fit.x.min(), lo, color="0.5", alpha=0.08, lw=0)
    if hi < fit.x.max():
        ax.axvspan(hi, fit.x.max(), color="0.5", alpha=0.08, lw=0)


def _draw_pdf(
    ax: Axes, fit: FitOutput, values: np.ndarray, truth: np.ndarray | None, replicas: bool
) -> None:
    """Replicas (thin), 68% band, median and truth of one flavour on log x."""
    used = values[fit.used]
    q16, q50, q84 = _bands(used)
    if replicas and used.shape[0] <= 200:
        for curve in used:
            ax.plot(fit.x, curve, color=BAND, lw=0.5, alpha=0.25, zorder=1)
    ax.fill_between(fit.x, q16, q84, color=BAND, alpha=0.35, lw=0, label="68% of members", zorder=2)
    ax.plot(fit.x, q50, color=BAND, lw=1.6, label="median", zorder=3)
    if truth is not None:
        ax.plot(fit.x, truth, color=TRUTH, lw=1.3, ls="--", label="truth (toy PDF)", zorder=4)
    ax.axhline(0.0, color="0.3", lw=0.6, zorder=0)
    ax.set_xscale("log")
    # Five decades: minor ticks carry no label, and formatting them costs half the figure.
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlim(fit.x.min(), fit.x.max())
    curves = [q16, q84] + ([truth] if truth is not None else [])
    ax.set_ylim(*_limits(*curves))
    _shade_no_data(ax, fit)


def _title(fit: FitOutput) -> str:
    """What the fit is, for the figures' titles, which are set with ``wrap=True``: the folder
    name and the members note have no bound, and a line wider than the figure is cut off.
    A k-fold fit says so: its members did not all fit the same data."""
    closure = fit.closure
    kind = f"k-fold ({len(set(fit.folds) - {-1})} folds) " if fit.kfold else ""
    what = (
        f"{kind}closure test (level {closure.get('level', '?')}, {closure.get('size', '?')} data)"
        if closure is not None
        else f"{kind}fit"
    )
    return f"{fit.path.name}: {what}, {fit.members_note()}"


def pdf_overview_figure(fit: FitOutput, basis: str = EVOLUTION) -> Figure:
    """All flavours of one basis at Q0 in a 2 x 4 grid: 68% band, median, truth."""
    names, values = fit.pdfs(basis)
    truth = fit.truth(basis)
    figure = new_figure(13.0, 6.2)
    axes = figure.subplots(2, 4)
    for k, (ax, name) in enumerate(zip(axes.flat, names, strict=True)):
        _draw_pdf(ax, fit, values[:, :, k], None if truth is None else truth[:, k], False)
        ax.set_title(_LABELS.get(name, name))
        if k >= 4:
            ax.set_xlabel(_X_AXIS)
        if k % 4 == 0:
            ax.set_ylabel("$x f(x, Q_0)$")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    if fit.data_x_range() is not None:
        from matplotlib.patches import Patch

        handles.append(Patch(color="0.5", alpha=0.15, lw=0))
        labels.append("outside the data's x range")
    figure.legend(handles, labels, loc="outside lower center", ncols=len(labels), frameon=False)
    basis_name = "evolution basis (fitted)" if basis == EVOLUTION else "physical basis"
    figure.suptitle(f"PDFs at $Q_0$, {basis_name} — {_title(fit)}", wrap=True)
    return figure


def pdf_figure(fit: FitOutput, name: str, basis: str = EVOLUTION) -> Figure:
    """One flavour: members, 68% band, median and truth; for closure fits the pull below."""
    names, values = fit.pdfs(basis)
    k = names.index(name)
    truth_all = fit.truth(basis)
    truth = None if truth_all is None else truth_all[:, k]
    figure = new_figure(7.0, 5.6 if truth is not None else 4.4)
    if truth is None:
        top = figure.subplots()
        bottom = None
    else:
        top, bottom = figure.subplots(2, 1, sharex=True, height_ratios=(3, 1.3))
    _draw_pdf(top, fit, values[:, :, k], truth, replicas=True)
    top.plot([], [], color=BAND, lw=0.5, alpha=0.5, label="members")
    top.set_ylabel(f"$x f(x, Q_0)$, {_LABELS.get(name, name)}")
    top.legend(loc="best")
    top.set_title(f"{_LABELS.get(name, name)} at $Q_0$ — {_title(fit)}", fontsize=9.5, wrap=True)
    if bottom is None:
        top.set_xlabel(_X_AXIS)
        return figure
    q16, q50, q84 = _bands(values[fit.used][:, :, k])
    sigma = 0.5 * (q84 - q16)
    with np.errstate(divide="ignore", invalid="ignore"):
        pull = np.where(sigma > 1e-12 * (1 + np.abs(q50)), (q50 - truth) / sigma, np.nan)
    bottom.axhspan(-1, 1, color=BAND, alpha=0.15, lw=0)
    bottom.axhline(0, color=TRUTH, lw=1.0, ls="--")
    bottom.plot(fit.x, pull, color=BAND, lw=1.4)
    bottom.set_ylim(-4, 4)
    bottom.set_ylabel("(median − truth)\n/ half 68% width")
    bottom.set_xlabel(_X_AXIS)
    _shade_no_data(bottom, fit)
    return figure


#: The x range of the d̄/ū figure: E866's pd/pp ratio reaches 0.015 < x < 0.35; above x ≈ 0.5
#: both antiquarks vanish and their ratio is noise.
_SEA_X = (1e-3, 0.5)


def sea_ratio_figure(fit: FitOutput) -> Figure:
    """d̄/ū at Q0, which DIS barely fixes and E866's pd/pp Drell–Yan ratio measures: a fit with
    the hadronic sets against one without shows what they constrain (docs/hadronic.md)."""
    names, values = fit.pdfs(PHYSICAL)
    keep = (fit.x >= _SEA_X[0]) & (fit.x <= _SEA_X[1])
    x, used = fit.x[keep], values[fit.used][:, keep]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = used[:, :, names.index("dbar")] / used[:, :, names.index("ubar")]
    ratio[~np.isfinite(ratio)] = np.nan  # a ū through zero: that member has no ratio there
    q16, q50, q84 = np.nanquantile(ratio, (0.16, 0.5, 0.84), axis=0)
    figure = new_figure(7.0, 4.4)
    ax = figure.subplots()
    ax.fill_between(x, q16, q84, color=BAND, alpha=0.35, lw=0, label="68% of members")
    ax.plot(x, q50, color=BAND, lw=1.6, label="median")
    curves = [q16, q84]
    truth = fit.truth(PHYSICAL)
    if truth is not None:
        true_ratio = truth[keep, names.index("dbar")] / truth[keep, names.index("ubar")]
        ax.plot(x, true_ratio, color=TRUTH, lw=1.3, ls="--", label="truth (toy PDF)")
        curves.append(true_ratio)
    ax.axhline(1.0, color="0.3", lw=0.6)
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlim(*_SEA_X)
    ax.set_ylim(*_limits(*curves))
    ax.set_xlabel(_X_AXIS)
    ax.set_ylabel(r"$\bar d / \bar u$ at $Q_0$")
    ax.legend(loc="best")
    ax.set_title(f"Light-sea asymmetry — {_title(fit)}", fontsize=9.5, wrap=True)
    return figure


# --------------------------------------------------------------------------- chi2


_MEDIAN = "#ff7f0e"


def _strip(
    ax: Axes, values: np.ndarray, y: float, colour: str, rng, half: float = 0.18, tick: float = 14
) -> bool:
    """One row of chi2: every member (jittered by up to ``half`` a row), the 68% range and the
    median (a tick of ``tick`` points); False when no member has a value to draw."""
    values = values[np.isfinite(values)]
    if not values.size:
        return False
    jitter = rng.uniform(-half, half, values.size)
    ax.scatter(values, y + jitter, s=9, color=colour, alpha=0.45, lw=0, zorder=2)
    q16, q50, q84 = np.quantile(values, (0.16, 0.5, 0.84))
    ax.plot([q16, q84], [y, y], color=colour, lw=3.2, alpha=0.8, zorder=3)
    ax.plot([q50], [y], marker="|", ms=tick, mew=2.4, color=_MEDIAN, zorder=4)
    return True


def _dataset_label(fit: FitOutput, name: str) -> str:
    label = f"{name} ({fit.datasets[name][0]} pts)" if name in fit.datasets else name
    folds = sorted({f for f, out in zip(fit.folds, fit.held_out, strict=True) if name in out})
    if folds:
        label += f"\nheld out by fold{'s' if len(folds) > 1 else ''} {', '.join(map(str, folds))}"
    return label


def dataset_chi2_figure(fit: FitOutput) -> Figure:
    """Experimental chi2 per point of each dataset: every member, median and 68% range.

    In a k-fold fit each dataset has two rows: the members that fitted it, and those whose fold
    held it out, for which its chi2 is a prediction (the k-fold score), usually larger: pooled,
    the two would make one wide band that says how well neither does.
    """
    used = [m for m, u in zip(fit.members, fit.used, strict=True) if u]
    held_out = [out for out, u in zip(fit.held_out, fit.used, strict=True) if u]
    names = list(fit.members[0].get("dataset_chi2_per_point", {})) if fit.members else []
    rows = ["total"] + names
    table = np.full((len(used), len(rows)), np.nan)
    for i, member in enumerate(used):
        total = member.get("chi2_per_point", {}).get("experimental")
        table[i, 0] = np.nan if total is None else total
        for j, name in enumerate(names, start=1):
            value = member.get("dataset_chi2_per_point", {}).get(name)
            table[i, j] = np.nan if value is None else value
    figure = new_figure(8.0, 1.6 + (0.55 if fit.kfold else 0.34) * len(rows))
    ax = figure.subplots()
    rng = np.random.default_rng(0)
    y = np.arange(len(rows))[::-1].astype(float)
    _strip(ax, table[:, 0], y[0], TRUTH, rng)
    for j, name in enumerate(names, start=1):
        if not any(name in held for held in fit.held_out):  # every member fitted it
            _strip(ax, table[:, j], y[j], BAND, rng)
            continue
        out = np.array([name in held for held in held_out], dtype=bool)
        for members, dy, colour, what in (
            (~out, 0.2, BAND, "fitted"),
            (out, -0.2, HELD_OUT, "held out"),
        ):
            if not _strip(ax, table[members, j], y[j] + dy, colour, rng, half=0.12, tick=10):
                # Said, or the other group's lone row reads as either (a fold's members can all
                # be excluded, or the fit has only one fold).
                ax.text(
                    0.01,
                    y[j] + dy,
                    f"{what}: no member",
                    transform=ax.get_yaxis_transform(),
                    color=colour,
                    fontsize=7.5,
                    va="center",
                    bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.5},
                )
    labels = ["total (all data)"] + [_dataset_label(fit, name) for name in names]
    ax.set_yticks(y, labels)
    if fit.kfold:  # room for the lowest row's notes, which do not widen the axis
        ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.grid(axis="y", alpha=0)
    ax.axvline(1.0, color="0.3", lw=0.9, ls="--", zorder=1)
    if wants_log(table):
        ax.set_xscale("log")
    ax.set_xlabel(r"experimental $\chi^2 / N_\mathrm{dat}$")
    if fit.kfold:
        ax.plot([], [], color=BAND, lw=3.2, label="fitted: 68% of members")
        ax.plot([], [], color=HELD_OUT, lw=3.2, label="held out: 68% of members")
    else:
        ax.plot([], [], color=BAND, lw=3.2, label="68% of members")
    ax.plot([], [], marker="|", ms=10, mew=2.2, ls="", color=_MEDIAN, label="median")
    ax.scatter([], [], s=9, color=BAND, label="one member")
    figure.legend(loc="outside lower center", ncols=4, frameon=False)  # off the data
    ax.set_title(f"$\\chi^2$ per point by dataset — {_title(fit)}", fontsize=9.5, wrap=True)
    return figure


def history_figure(fit: FitOutput) -> Figure:
    """chi2 per point of every member at every host sync: training, validation (held-out)."""
    history = fit.history
    if history is None:
        raise FitPlotError(f"{fit.path} has no {HISTORY_FILE}")
    steps = np.asarray(history["step"])
    chi2 = np.asarray(history["chi2_per_point"], dtype=float)  # (S, M, 3)
    status = np.asarray(history["status"])  # (S, M)
    shown = [0, 1] + ([2] if fit.kfold else [])
    figure = new_figure(4.6 * len(shown) + 0.6, 4.4)
    axes = np.atleast_1d(figure.subplots(1, len(shown), sharey=True))
    # A member's curve ends at the sync where it stopped or diverged.
    before = np.vstack([np.full((1, status.shape[1]), RUNNING), status[:-1]])
    live = before == RUNNING
    many = chi2.shape[1] > 10
    colours = [f"C{m % 10}" for m in range(chi2.shape[1])]
    for ax, category in zip(axes, shown, strict=True):
        values = np.where(live & np.isfinite(chi2[:, :, category]), chi2[:, :, category], np.nan)
        values = np.where(values > 0, values, np.nan)
        for m in range(values.shape[1]):
            fold = f", fold {fit.folds[m]}" if fit.folds[m] >= 0 else ""
            label = None if many else f"replica {fit.replicas[m]}{fold}"
            colour = BAND if many else colours[m]
            ax.plot(
                steps,
                values[:, m],
                color=colour,
                lw=0.8,
                alpha=0.4 if many else 0.9,
                label=label,
                marker="o" if steps.size == 1 else None,  # a line of one point shows nothing
                ms=3,
            )
            diverged = np.flatnonzero(status[:, m] == DIVERGED)
            if diverged.size:
                s = diverged[0]
                y = values[s, m] if np.isfinite(values[s, m]) else np.nanmax(values)
                ax.plot(steps[s], y, marker="x", ms=8, mew=2, color="#d62728", zorder=5)
            if category == 1 and m < len(fit.members):
                best = int(fit.members[m].get("best_epoch", -1))
                curve = values[:, m]
                ok = np.isfinite(curve)
                if best >= 0 and ok.any():
                    at = np.interp(best + 1, steps[ok], curve[ok])
                    ax.plot(best + 1, at, marker="o", ms=4.5, color=colour, mec="k", mew=0.6)
        if many:
            with np.errstate(all="ignore"):
                median = np.nanmedian(values, axis=1)
            ax.plot(steps, median, color="k", lw=1.8, label="median of members")
        ax.set_yscale("log")
        ax.set_xlabel("training step")
        ax.set_title(f"{_CATEGORIES[category]} $\\chi^2$ per point")
    axes[0].set_ylabel(r"$\chi^2 / N_\mathrm{dat}$")
    axes[-1].plot([], [], marker="o", ms=4.5, ls="", color="0.6", mec="k", label="best step")
    if (status == DIVERGED).any():
        axes[-1].plot([], [], marker="x", ms=8, mew=2, ls="", color="#d62728", label="diverged")
    axes[-1].legend(loc="upper right", ncols=2 if not many and chi2.shape[1] > 5 else 1)
    every = fit.steps_per_call
    if steps.size == 1:
        recorded = "one record: the fit ended at its first host sync"
    else:
        recorded = f"recorded every {every} steps" if every else "recorded at every host sync"
    # Every member, the excluded ones too: how a member diverged or stalled is the point here.
    figure.suptitle(
        f"Training history of all {fit.n_members} members ({recorded}) — {fit.path.name}",
        wrap=True,
    )
    return figure


# --------------------------------------------------------------------------- all of it


def fit_figures(fit: FitOutput) -> dict[str, Figure]:
    """Every figure of :func:`plot_fit` by file name (build them in ``style()``)."""
    figures: dict[str, Figure] = {}
    for basis in (EVOLUTION, PHYSICAL):
        figures[f"pdfs_{basis}.png"] = pdf_overview_figure(fit, basis)
        for name in fit.pdfs(basis)[0]:
            figures[f"pdf_{basis}_{name}.png"] = pdf_figure(fit, name, basis)
    if fit.evolved is not None:
        figures["pdfs_100GeV.png"] = evolved_figure(fit.evolved, _title(fit))
        if fit.evolved.truth is not None:
            figures["pdfs_100GeV_ratio_to_truth.png"] = truth_ratio_figure(fit.evolved, _title(fit))
    figures["dbar_over_ubar.png"] = sea_ratio_figure(fit)
    figures["chi2_datasets.png"] = dataset_chi2_figure(fit)
    if fit.history is not None:
        figures["training_history.png"] = history_figure(fit)
    return figures


@contextmanager
def _told_as_damaged(fit: FitOutput) -> Iterator[None]:
    """What a damaged fit output raises in a figure's drawing, as a message."""
    try:
        yield
    except (AttributeError, KeyError, TypeError, ValueError, IndexError) as error:
        raise FitPlotError(
            f"{fit.path}: damaged fit output ({type(error).__name__}: {error})"
        ) from None


def plot_fit(fitdir: str | Path, outdir: str | Path) -> list[Path]:
    """Write every plot of the fit in ``fitdir`` as PNG into ``outdir``; returns the files.

    ``pdfs_evolution.png`` / ``pdfs_physical.png`` (all flavours at Q0),
    ``pdf_<basis>_<flavour>.png`` (one flavour with members, and the pull to the truth for
    closure fits), ``dbar_over_ubar.png`` (the light-sea asymmetry at Q0),
    ``chi2_datasets.png`` and ``training_history.png``; with an LHAPDF set (after
    ``hyperscan evolve``), ``pdfs_100GeV.png`` and, for a closure fit, its ratio to the evolved
    truth ``pdfs_100GeV_ratio_to_truth.png``.
    """
    fit = load_fit(fitdir)
    if not fit.used.any():
        raise FitPlotError(f"{fit.path}: no member has finite PDFs ({fit.members_note()})")
    outdir = Path(outdir)
    # Every figure is drawn and rendered before any file is written: a fit folder damaged in a
    # way the checks above miss fails here, with a message, and leaves no half set of plots.
    # What is in the way of a file is told before the rendering, which takes most of the time.
    with style():
        with _told_as_damaged(fit):
            figures = fit_figures(fit)
        written = [outdir / name for name in figures]
        for path in written:
            if os.path.lexists(path) and not path.is_file():
                raise FitPlotError(f"{path} exists and is not a file: the plot cannot replace it")
        with _told_as_damaged(fit):
            images = {name: png_bytes(figure) for name, figure in figures.items()}
    outdir.mkdir(parents=True, exist_ok=True)
    # Each file is written in full beside its place, then all are renamed into place: a full
    # disk leaves the plots as they were, not a mix of old, new and truncated ones.
    staged: list[Path] = []
    mode = 0o666 & ~umask()
    try:
        for path in written:
            handle, name = tempfile.mkstemp(prefix=f".{path.name}.", dir=outdir)
            staged.append(Path(name))
            with os.fdopen(handle, "wb") as file:
                file.write(images[path.name])
            os.chmod(name, mode)
    except BaseException:
        for name in staged:
            name.unlink(missing_ok=True)
        raise
    for name, path in zip(staged, written, strict=True):
        os.replace(name, path)
    return written
