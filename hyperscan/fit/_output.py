"""Writing a fit's results: all files appear at once or not at all.

No TensorFlow here (a FitResult is only read): the format is ``_format``'s.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from hyperscan._files import umask
from hyperscan._version import __version__
from hyperscan.data import FIT_BASIS, FK_BASIS, fit_theory, fit_to_fk_rotation
from hyperscan.fit._exportgrid import write_exportgrids
from hyperscan.fit._fitinfo import write_fitinfos
from hyperscan.fit._format import (
    DIVERGED_STATUS,
    HISTORY_FILE,
    INTERRUPTED,
    OK,
    PDF_FILE,
    POSITIVITY_VETO,
    RESULTS_FILE,
    RUNCARD_FILE,
)

if TYPE_CHECKING:
    from hyperscan.fit._fit import FitResult
    from hyperscan.runcard import FitRuncard


class ResultsKeptError(Exception):
    """The results were written but could not be moved to their folder: they are kept where
    they were written, since a fit may have taken hours."""

    def __init__(self, kept: Path, outdir: Path, why: str) -> None:
        self.kept = kept
        super().__init__(f"cannot move the results into {outdir}: {why}; they are kept in {kept}")


def _finite_or_none(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def results_document(result: FitResult, runcard: FitRuncard | None = None) -> dict:
    """The content of ``results.json``: plain JSON, so a non-finite χ² (a diverged member) is
    null; ``divergence`` and ``redrawn_starts`` appear only on the members they concern.
    ``trial``: the scan trial whose methodology the member fitted (``runcard``'s
    ``methodologies``), null for none."""
    members = []
    for m in range(result.n_members):
        replica = int(result.replicas[m])
        members.append(
            {
                "replica": replica,
                "fold": int(result.folds[m]),
                "level1": int(result.level1[m]),
                "trial": runcard.member_trial(replica) if runcard is not None else None,
                "status": result.status[m],
                "best_epoch": int(result.best_epoch[m]),
                "stop_epoch": int(result.stop_epoch[m]),
                **({"divergence": result.divergence[m]} if result.divergence[m] else {}),
                **({"redrawn_starts": int(result.redraws[m])} if _redrawn(result, m) else {}),
                "chi2_per_point": {
                    name: _finite_or_none(values[m])
                    for name, values in result.chi2_per_point.items()
                },
                "dataset_chi2_per_point": {
                    name: _finite_or_none(result.dataset_chi2_per_point[m, d])
                    for d, name in enumerate(result.dataset_names)
                },
            }
        )
    return {
        "hyperscan_version": __version__,
        "steps": result.steps,
        "seconds": round(result.seconds, 3),
        "training_seconds": round(result.training_seconds, 3),
        "interrupted": result.interrupted,
        "members": members,
    }


def _redrawn(result: FitResult, member: int) -> bool:
    return result.redraws is not None and result.redraws[member] > 0


def write_fit(
    result: FitResult,
    runcard_text: str,
    outdir: Path,
    force: bool = False,
    runcard: FitRuncard | None = None,
) -> None:
    """Write into a temporary sibling folder, then move it into place; ``runcard`` (the one
    fitted) names each member's trial in ``results.json`` and gives the theory of the
    exportgrids, which are written only with it.

    The caller checks `outdir` before the fit; should it still not take the results (made by
    another process meanwhile, or not movable), they stay in the temporary folder, which
    `ResultsKeptError` names.
    """
    outdir = Path(outdir)
    outdir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{outdir.name}.", dir=outdir.parent))
    os.chmod(staging, 0o777 & ~umask())  # mkdtemp's 0700 would hide results from a group
    try:
        (staging / RESULTS_FILE).write_text(json.dumps(results_document(result, runcard), indent=2))
        (staging / RUNCARD_FILE).write_text(runcard_text)
        np.savez_compressed(
            staging / PDF_FILE,
            x=result.pdf_x,
            xf=result.pdf,
            xf_flavour_basis=np.einsum("mxf,kf->mxk", result.pdf, fit_to_fk_rotation()),
            grid_x=result.grid_x,
            grid_xf_flavour_basis=np.einsum("mxf,kf->mxk", result.grid_pdf, fit_to_fk_rotation()),
            basis=np.array(FIT_BASIS),
            flavour_basis=np.array(FK_BASIS),
            replicas=result.replicas,
            folds=result.folds,
            status=np.array(result.status),
        )
        if runcard is not None:
            write_exportgrids(staging, outdir.name, result, fit_theory(runcard.data))
            write_fitinfos(staging, outdir.name, result)
        np.savez_compressed(
            staging / HISTORY_FILE,
            step=np.array([r.step for r in result.history]),
            chi2_per_point=np.array([r.chi2_per_point for r in result.history]),
            status=np.array([r.status for r in result.history]),
        )
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if outdir.exists() and not force:
        raise ResultsKeptError(staging, outdir, "it was made while the fit ran")
    try:
        _move_into_place(staging, outdir)
    except OSError as error:
        raise ResultsKeptError(staging, outdir, error.strerror or str(error)) from error


def _move_into_place(staging: Path, outdir: Path) -> None:
    """Rename the finished folder to `outdir`; a folder there is replaced, or left as it was."""
    if not outdir.exists():
        os.rename(staging, outdir)
        return
    retired = Path(tempfile.mkdtemp(prefix=f".{outdir.name}.old.", dir=outdir.parent))
    try:
        os.rename(outdir, retired / outdir.name)
    except OSError:
        retired.rmdir()
        raise
    try:
        os.rename(staging, outdir)
    except OSError:
        os.rename(retired / outdir.name, outdir)
        retired.rmdir()
        raise
    shutil.rmtree(retired, ignore_errors=True)  # the new results are in place: done


def summary(result: FitResult) -> str:
    """A few lines for a person: counts by status and χ² per point across members. The count
    of interrupted members appears when the fit was interrupted, and says that it was."""
    lines = [
        f"{result.n_members} members, {result.steps} steps in {result.seconds:.1f} s: "
        f"{result.count(OK)} ok, {result.count(POSITIVITY_VETO)} pos-veto, "
        f"{result.count(DIVERGED_STATUS)} diverged"
        + (f", {result.count(INTERRUPTED)} interrupted" if result.interrupted else ""),
    ]
    lines += _folds_lines(result)
    ok = np.array([s == OK for s in result.status])
    if not ok.any():
        lines.append("no member ended ok, so no chi2 summary (results.json has each member's)")
        return "\n".join(lines)
    lines.append(
        f"{'chi2/point':<14}{'mean':>10}{'median':>10}{'min':>10}{'max':>10}  (ok members)"
    )
    for name, values in result.chi2_per_point.items():
        values = values[ok & np.isfinite(values)]
        if values.size:
            stats = (values.mean(), np.median(values), values.min(), values.max())
            lines.append(f"{name:<14}" + "".join(f"{v:>10.4f}" for v in stats))
    return "\n".join(lines)


def _folds_lines(result: FitResult) -> list[str]:
    """A k-fold fit's held-out χ² per fold over every member, whatever its status: what a scan
    trial's value reduces (its `folds` attribute, the mean over them for the default objective),
    so a refit of an exported trial can be compared with it. The table of ok members cannot:
    it pools the folds and leaves out the pos-veto members that the trial counts."""
    folds = np.unique(result.folds[result.folds >= 0])
    if not folds.size:
        return []
    held_out = result.chi2_per_point["held_out"]
    means = [float(np.mean(held_out[result.folds == k])) for k in folds]
    shown = ", ".join(f"fold {k} {mean:.4f}" for k, mean in zip(folds, means, strict=True))
    return [
        f"held_out by fold, mean over each fold's members (every status, as a scan trial "
        f"counts them): {shown}; mean over the folds {np.mean(means):.4f}"
    ]
