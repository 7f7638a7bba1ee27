# SPDX-License-Identifier: GPL-3.0-or-later
"""The evolved PDFs of a fit at Q = 100 GeV, from its LHAPDF set, and a closure fit's ratio to
its evolved truth.

The set is the final one when ``hyperscan postfit`` has made it (its replicas are those postfit
selected), otherwise the one ``hyperscan evolve`` wrote, of which the replicas with status
``ok`` are drawn, as at Q0. The truth is the set ``<name>_truth`` that ``hyperscan evolve``
writes beside a closure fit's: the toy PDF through the same EKO.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from hyperscan.fit import OK
from hyperscan.pdfset import EvolveError, read_set
from hyperscan.report._style import BAND, PARTON_LABELS, TRUTH, new_figure

#: Where the evolved PDFs are drawn (GeV): the electroweak scale, where NNPDF shows them.
PLOT_Q = 100.0
#: The ratio to the truth stops where the PDFs vanish (x → 1), where it is noise.
RATIO_X_MAX = 0.9
#: Flavours drawn at PLOT_Q: b is no longer zero there.
EVOLVED_FLAVOURS = {
    "u": 2,
    "ubar": -2,
    "d": 1,
    "dbar": -1,
    "s": 3,
    "sbar": -3,
    "c": 4,
    "b": 5,
    "g": 21,
}


@dataclass(frozen=True)
class EvolvedPdfs:
    """x·f at PLOT_Q of the replicas drawn (replicas, x, EVOLVED_FLAVOURS) and of the truth
    (x, EVOLVED_FLAVOURS) when there is one; ``note`` says which replicas and from which set."""

    x: np.ndarray
    xf: np.ndarray
    truth: np.ndarray | None
    note: str


def load_evolved(fitdir: Path, status: dict[int, str], x_min: float) -> EvolvedPdfs | None:
    """The fit's evolved PDFs on the set's x nodes from ``x_min``, or None without a set."""
    name = fitdir.resolve().name
    final, evolved = fitdir / "postfit" / name, fitdir / "lhapdf" / name
    if (final / f"{name}.info").is_file():
        pdf_set = read_set(final)
        members = list(range(1, len(pdf_set.replicas)))
        note = f"the {len(members)} replicas postfit selected"
    elif (evolved / f"{name}.info").is_file():
        pdf_set = read_set(evolved)
        members = [m for m, r in enumerate(pdf_set.replicas) if m and status.get(r) == OK]
        note = f"{len(members)} replicas with status ok of the evolved set"
    else:
        return None
    if not members:
        return None
    keep = pdf_set.x >= x_min
    columns = [pdf_set.pids.index(pid) for pid in EVOLVED_FLAVOURS.values()]
    values = pdf_set.at(PLOT_Q)[:, columns][:, :, keep]
    truth = None
    truth_folder = fitdir / "lhapdf" / f"{name}_truth"
    if (truth_folder / f"{truth_folder.name}.info").is_file():
        truth_set = read_set(truth_folder)
        if not np.array_equal(truth_set.x, pdf_set.x):
            raise EvolveError(f"{truth_folder}: its x nodes are not the set's")
        truth = truth_set.at(PLOT_Q)[0, columns][:, keep].T
    return EvolvedPdfs(
        x=pdf_set.x[keep],
        xf=np.moveaxis(values[members], 1, 2),
        truth=truth,
        note=f"{note} ({pdf_set.folder.relative_to(fitdir)})",
    )


def _log_x(ax, x: np.ndarray) -> None:
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlim(x.min(), x.max())


def evolved_figure(evolved: EvolvedPdfs, title: str) -> Figure:
    """Each flavour at PLOT_Q: 68% band and median over the replicas, and the truth."""
    figure = new_figure(12.0, 9.0)
    for k, (ax, name) in enumerate(zip(figure.subplots(3, 3).flat, EVOLVED_FLAVOURS, strict=True)):
        q16, q50, q84 = np.quantile(evolved.xf[:, :, k], (0.16, 0.5, 0.84), axis=0)
        ax.fill_between(evolved.x, q16, q84, color=BAND, alpha=0.35, lw=0, label="68% of replicas")
        ax.plot(evolved.x, q50, color=BAND, lw=1.6, label="median")
        if evolved.truth is not None:
            ax.plot(evolved.x, evolved.truth[:, k], color=TRUTH, lw=1.3, ls="--", label="truth")
        ax.axhline(0.0, color="0.3", lw=0.6, zorder=0)
        _log_x(ax, evolved.x)
        ax.set_title(PARTON_LABELS[name])
        if k % 3 == 0:
            ax.set_ylabel(f"$x f(x, Q = {PLOT_Q:g}$ GeV$)$")
        if k >= 6:
            ax.set_xlabel("$x$")
    handles, labels = figure.axes[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncols=len(labels), frameon=False)
    figure.suptitle(f"PDFs at Q = {PLOT_Q:g} GeV, {evolved.note} — {title}", wrap=True)
    return figure


def truth_ratio_figure(evolved: EvolvedPdfs, title: str) -> Figure:
    """Each flavour at PLOT_Q divided by the truth: where the closure fit's band covers 1."""
    figure = new_figure(12.0, 9.0)
    for k, (ax, name) in enumerate(zip(figure.subplots(3, 3).flat, EVOLVED_FLAVOURS, strict=True)):
        truth = evolved.truth[:, k]
        nonzero = np.abs(truth) > 0  # b vanishes below its threshold, and in a toy EKO
        q16, q50, q84 = np.full((3, truth.size), np.nan)
        if nonzero.any():
            ratio = evolved.xf[:, nonzero, k] / truth[nonzero]
            q16[nonzero], q50[nonzero], q84[nonzero] = np.quantile(ratio, (0.16, 0.5, 0.84), axis=0)
        ax.fill_between(evolved.x, q16, q84, color=BAND, alpha=0.35, lw=0, label="68% of replicas")
        ax.plot(evolved.x, q50, color=BAND, lw=1.6, label="median")
        ax.axhline(1.0, color=TRUTH, lw=1.3, ls="--", label="truth")
        _log_x(ax, evolved.x)
        ax.set_xlim(evolved.x.min(), RATIO_X_MAX)
        ax.set_ylim(0.5, 1.5)
        ax.set_title(PARTON_LABELS[name])
        if k % 3 == 0:
            ax.set_ylabel("ratio to the truth")
        if k >= 6:
            ax.set_xlabel("$x$")
    handles, labels = figure.axes[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncols=len(labels), frameon=False)
    figure.suptitle(
        f"PDFs at Q = {PLOT_Q:g} GeV over the evolved truth, {evolved.note} — {title}", wrap=True
    )
    return figure
