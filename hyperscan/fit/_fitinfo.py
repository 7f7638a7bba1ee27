# SPDX-License-Identifier: GPL-3.0-or-later
"""n3fit's per-replica fit information, which its postfit selects replicas on.

Each exported replica gets ``nnfit/replica_<i>/<fit>.json`` with n3fit 4.1.5's keys (χ²s,
epochs, positivity state, arc lengths, integrability numbers) and a ``chi2exps.log``, so that
``hyperscan postfit`` and validphys' ``vp-postfit`` judge a hyperscan fit as they judge n3fit's.
The arc lengths and integrability numbers follow validphys 4.1.5's definitions (``arclength``),
evaluated, as n3fit evaluates them, on the network at Q0.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from hyperscan._version import __version__
from hyperscan.data import FIT_BASIS
from hyperscan.fit._exportgrid import NNFIT_FOLDER, exported_members
from hyperscan.fit._format import OK

if TYPE_CHECKING:
    from hyperscan.fit._fit import FitResult

#: Arc lengths: x·(x·f) over three linear segments of 199 points each (validphys' grid;
#: its integrand is the derivative of x times the grid values, which are x·f).
ARC_LENGTH_SEGMENTS = ((1e-6, 1e-4), (1e-4, 1e-2), (1e-2, 1.0))
ARC_LENGTH_POINTS = 199
ARC_LENGTH_FLAVOURS = ("Sigma", "g", "V", "V3", "V8")
#: Integrability: Σ |x·f| over x = 1e-9, 1e-8, 1e-7, of these flavours.
INTEGRABILITY_X = np.logspace(-9, -6, 3, endpoint=False)
INTEGRABILITY_FLAVOURS = ("V", "T3", "V3", "T8", "V8")
#: n3fit's positivity states; postfit's convergence test passes POS_PASS only.
POS_PASS, POS_VETO = "POS_PASS", "POS_VETO"


def arc_length_xgrid() -> np.ndarray:
    """The x of the three segments, one after the other (597 points)."""
    return np.concatenate(
        [np.linspace(a, b, ARC_LENGTH_POINTS, endpoint=False) for a, b in ARC_LENGTH_SEGMENTS]
    )


def _columns(names: tuple[str, ...]) -> list[int]:
    return [FIT_BASIS.index(name) for name in names]


def arc_lengths(xf: np.ndarray) -> np.ndarray:
    """xf (M, 597, 8) on :func:`arc_length_xgrid` → (M, 5): per flavour of ARC_LENGTH_FLAVOURS,
    Σ over the segments of Simpson's ∫ √(1 + (d(x·xf)/dx)²) on forward differences."""
    values = np.asarray(xf, dtype=np.float64)[:, :, _columns(ARC_LENGTH_FLAVOURS)]
    total = np.zeros((values.shape[0], len(ARC_LENGTH_FLAVOURS)))
    for s, (a, b) in enumerate(ARC_LENGTH_SEGMENTS):
        x = np.linspace(a, b, ARC_LENGTH_POINTS, endpoint=False)
        segment = values[:, s * ARC_LENGTH_POINTS : (s + 1) * ARC_LENGTH_POINTS] * x[:, None]
        slope = np.diff(segment, axis=1) / ((b - a) / ARC_LENGTH_POINTS)
        total += _simpson(np.sqrt(1 + slope**2), x[1:])
    return total


def _simpson(y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Simpson's rule over axis 1 on evenly spaced ``x``, as scipy's ``simpson`` takes an even
    number of intervals: the last interval by the cubic through the last four points."""
    h = x[1] - x[0]
    n = y.shape[1] - 1
    if n % 2 == 0:
        return h / 3 * (y[:, 0] + 4 * y[:, 1:-1:2].sum(1) + 2 * y[:, 2:-1:2].sum(1) + y[:, -1])
    head = _simpson(y[:, :-1], x[:-1])
    last = h * (5 * y[:, -1] + 8 * y[:, -2] - y[:, -3]) / 12
    return head + last


def integrability_numbers(xf: np.ndarray) -> np.ndarray:
    """xf (M, 3, 8) on :data:`INTEGRABILITY_X` → (M, 5): Σ_x |x·f| per INTEGRABILITY_FLAVOURS."""
    values = np.abs(np.asarray(xf, dtype=np.float64))[:, :, _columns(INTEGRABILITY_FLAVOURS)]
    return values.sum(axis=1)


def fitinfo_document(result: FitResult, member: int) -> dict:
    """One member's ``<fit>.json``: n3fit's keys, χ²s per point, epochs counted from 1."""
    m = member
    chi2 = result.chi2_per_point
    small_x = result.small_x_pdf[m : m + 1, : INTEGRABILITY_X.size]
    return {
        "preprocessing": [],
        "stop_epoch": int(result.stop_epoch[m]) if result.stop_epoch[m] >= 0 else result.steps,
        "best_epoch": int(result.best_epoch[m]),
        "erf_tr": float(chi2["training"][m]),
        "erf_vl": _finite_or(chi2["validation"][m], chi2["training"][m]),
        "chi2": float(chi2["experimental"][m]),
        "pos_state": POS_PASS if result.status[m] == OK else POS_VETO,
        "arc_lengths": result.arc_lengths[m].tolist(),
        "integrability": integrability_numbers(small_x)[0].tolist(),
        "timing": {"walltime": {"total": round(result.seconds, 3)}},
        "version": {"hyperscan": __version__},
    }


def _finite_or(value: float, fallback: float) -> float:
    """n3fit's validation χ² is its training χ² when nothing is held for validation."""
    return float(value) if np.isfinite(value) else float(fallback)


def chi2_log(result: FitResult, member: int) -> dict:
    """``chi2exps.log``: at each host sync, the member's training and validation χ² per point
    (n3fit logs its losses there every 100 epochs; a person reads it, postfit only wants it)."""
    log = {}
    for report in result.history:
        training, validation = report.chi2_per_point[member, :2]
        log[str(report.step)] = {
            "training_loss": float(training),
            "validation_loss": _finite_or(validation, training),
        }
    return log


def write_fitinfos(folder: Path, fit_name: str, result: FitResult) -> None:
    """Each exported member's ``<fit>.json`` and ``chi2exps.log`` beside its exportgrid."""
    if result.arc_lengths is None or result.small_x_pdf is None:
        return
    for m in exported_members(result):
        replica_folder = folder / NNFIT_FOLDER / f"replica_{int(result.replicas[m])}"
        replica_folder.mkdir(parents=True, exist_ok=True)
        document = json.dumps(fitinfo_document(result, m), indent=2)
        (replica_folder / f"{fit_name}.json").write_text(document + "\n")
        (replica_folder / "chi2exps.log").write_text(json.dumps(chi2_log(result, m), indent=2))
