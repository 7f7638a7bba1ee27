# SPDX-License-Identifier: GPL-3.0-or-later
"""A fit folder's exportgrids, read back for evolution, with what is wrong with it in one line."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from hyperscan.data import LHA_BASIS, FitTheory, fit_theory
from hyperscan.fit import RESULTS_FILE, RUNCARD_FILE, exportgrid_path
from hyperscan.runcard import RuncardError, load_fit_runcard
from hyperscan.runcard.real_datasets import RealDataError

from ._errors import EvolveError

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class ExportedFit:
    """A fit's replicas at Q0: x·f (replicas, x, LHA_BASIS) on the grid they were written on;
    ``closure``: the data were made from the toy PDF, the truth a plot compares with."""

    folder: Path
    theory: FitTheory
    replicas: tuple[int, ...]
    q20: float
    xgrid: np.ndarray
    xf: np.ndarray
    closure: bool = False


def read_fit(folder: Path | str) -> ExportedFit:
    """The exportgrids of the hyperscan fit in ``folder``, checked against each other."""
    folder = Path(folder)
    if not (folder / RESULTS_FILE).is_file() or not (folder / RUNCARD_FILE).is_file():
        raise EvolveError(
            f"{folder} is not a hyperscan fit folder (no {RESULTS_FILE} and {RUNCARD_FILE}): "
            "give the folder `hyperscan fit -o` wrote"
        )
    try:
        runcard = load_fit_runcard(folder / RUNCARD_FILE)
        theory = fit_theory(runcard.data)
    except (RuncardError, RealDataError) as error:
        raise EvolveError(f"{folder / RUNCARD_FILE}: {error}") from None
    members = json.loads((folder / RESULTS_FILE).read_text())["members"]
    replicas = sorted({int(m["replica"]) for m in members})
    paths = {r: folder / exportgrid_path(folder.name, r) for r in replicas}
    present = {r: p for r, p in paths.items() if p.is_file()}
    if not present:
        raise EvolveError(
            f"{folder} holds no exportgrid ({exportgrid_path(folder.name, replicas[0])} …): a "
            "k-fold fit, or several level-1 fits, is not one PDF set"
        )
    grids = {r: _read_exportgrid(p) for r, p in present.items()}
    first = grids[min(grids)]
    for replica, grid in grids.items():
        if grid["q20"] != first["q20"] or grid["xgrid"] != first["xgrid"]:
            raise EvolveError(f"{present[replica]}: its Q0 or x grid differs from the others'")
        if grid["labels"] != list(LHA_BASIS):
            raise EvolveError(f"{present[replica]}: labels are not {list(LHA_BASIS)}")
    return ExportedFit(
        folder=folder,
        theory=theory,
        replicas=tuple(grids),
        q20=float(first["q20"]),
        xgrid=np.array(first["xgrid"], dtype=np.float64),
        xf=np.array([grids[r]["pdfgrid"] for r in grids], dtype=np.float64),
        closure=runcard.data.closure is not None
        or (runcard.data.real is not None and runcard.data.real.closure is not None),
    )


def _read_exportgrid(path: Path) -> dict:
    try:
        grid = yaml.load(path.read_text(), Loader=_Loader)
        if not isinstance(grid, dict) or not {"q20", "xgrid", "labels", "pdfgrid"} <= set(grid):
            raise ValueError("not an exportgrid (keys q20, xgrid, labels, pdfgrid)")
        if np.shape(grid["pdfgrid"]) != (len(grid["xgrid"]), len(grid["labels"])):
            raise ValueError("pdfgrid is not (x, labels)")
    except (yaml.YAMLError, ValueError) as error:
        raise EvolveError(f"{path}: {str(error).splitlines()[0]}") from None
    return grid
