# SPDX-License-Identifier: GPL-3.0-or-later
"""`hyperscan evolve`: a fit folder's exportgrids to an LHAPDF set, through a cached EKO."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np

from hyperscan.data import fit_to_fk_rotation, fk_to_lha_rotation, toy_pdf

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


def toy_pdf_lha(x: np.ndarray) -> np.ndarray:
    """(x, LHA_BASIS) the closure truth at Q0, as the exportgrids hold a replica."""
    return toy_pdf(x) @ (fk_to_lha_rotation(4) @ fit_to_fk_rotation()).T


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
    ``force``, which is checked before any work. A closure fit's truth, the toy PDF evolved by
    the same EKO, is written beside it as the one-member set ``name_truth``.

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
    if not fit.closure:
        return write_set(fit, *evolve(fit, Path(eko)), target, name)
    # The truth rides along as one more replica: the EKO (hundreds of MB) is read once.
    truth = toy_pdf_lha(fit.xgrid)[None]
    info, blocks = evolve(replace(fit, xf=np.concatenate([fit.xf, truth])), Path(eko))
    truth_info = info | {"SetDesc": f"the toy PDF of closure fit {fit.folder.name}, evolved"}
    truth_blocks = {nf: (mu2, xf[-1:]) for nf, (mu2, xf) in blocks.items()}
    truth_fit = replace(fit, replicas=(0,), xf=truth)
    write_set(truth_fit, truth_info, truth_blocks, target, f"{name}_truth", central_only=True)
    fit_blocks = {nf: (mu2, xf[:-1]) for nf, (mu2, xf) in blocks.items()}
    return write_set(fit, info, fit_blocks, target, name)
