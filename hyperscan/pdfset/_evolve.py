# SPDX-License-Identifier: GPL-3.0-or-later
"""`hyperscan evolve`: a fit folder's exportgrids to an LHAPDF set, through a cached EKO."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from ._eko import cached_eko, nnpdf_theory
from ._errors import EvolveError
from ._fit_folder import read_fit
from ._lhapdf import evolve, write_set

#: Points of the EKO's interpolation grid by default: chosen by measurement
#: (docs/outputs.md#the-eko): its cost grows as their square, its error falls fast with them.
EKO_X_POINTS = 50


def eko_xgrid(exported: np.ndarray, points: int) -> np.ndarray:
    """About ``points`` of the exportgrid's own nodes, spread evenly in y = ln(1/x) + 5 (1 - x)
    (pineko's grid variable: logarithmic at small x, close to linear at large x), both ends
    kept. The export grid itself crowds 125 of its 196 nodes above x = 0.1."""
    if not 5 <= points <= exported.size:
        raise EvolveError(f"the EKO's x grid takes 5 to {exported.size} points, not {points}")
    y = np.log(1 / exported) + 5 * (1 - exported)
    wanted = np.linspace(y[0], y[-1], points)
    return exported[np.unique(np.abs(y[:, None] - wanted[None, :]).argmin(axis=0))]


def evolve_fit(
    folder: Path | str,
    output: Path | str | None = None,
    name: str | None = None,
    eko: Path | str | None = None,
    x_points: int = EKO_X_POINTS,
    cache_dir: Path | None = None,
    progress: Callable[[int, int], None] | None = None,
    force: bool = False,
) -> Path:
    """The LHAPDF set of the fit in ``folder``, written to ``output/name`` (default: the fit
    folder's ``lhapdf/`` and its name); its folder. A set already there is replaced only with
    ``force``, which is checked before any work.

    ``eko``: an EKO file to use as it is; otherwise one made under the fit's theory card, on
    ``x_points`` of the export grid, from the cache or computed into it.
    """
    fit = read_fit(folder)
    name = name or fit.folder.resolve().name
    target = Path(output) if output is not None else fit.folder / "lhapdf"
    if (target / name).exists() and not force:
        raise EvolveError(f"{target / name} exists; use --force to replace it")
    if eko is None:
        theory = nnpdf_theory(fit.theory.card)
        eko = cached_eko(theory, eko_xgrid(fit.xgrid, x_points), cache_dir, progress)
    elif not Path(eko).is_file():
        raise EvolveError(f"EKO {eko} does not exist")
    info, blocks = evolve(fit, Path(eko))
    return write_set(fit, info, blocks, target, name)
