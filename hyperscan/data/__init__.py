# SPDX-License-Identifier: GPL-3.0-or-later
"""Fit data in pure numpy: flavour bases, toy PDF, datasets, closure problems, replicas.

No tensorflow here on purpose: data preparation, fingerprints and pseudo-data must be cheap to
import on a coordinator and identical on every worker.
"""

from __future__ import annotations

from ._closure import CLOSURE_SIZES, STANDARD_XGRID, closure_problem
from ._compare import experimental_chi2, grid_predictions
from ._export_grid import export_xgrid
from ._flavours import (
    FIT_BASIS,
    FK_BASIS,
    LHA_BASIS,
    PHYSICAL_FLAVOURS,
    fit_to_fk_rotation,
    fk_to_lha_rotation,
    flavour_combination,
    toy_pdf,
)
from ._from_runcard import (
    FitTheory,
    empty_folds,
    fit_theory,
    level1_data,
    load_problem,
    unknown_names,
    untrained_members,
)
from ._problem import Dataset, PositivitySet, Problem
from ._real import (
    DIS_DATASETS,
    HADRONIC_DATASETS,
    REAL_DATASETS,
    load_real_dataset,
    real_problem,
)
from ._replicas import replica_data, training_mask
from ._tables import FkTable, combine, on_grid

__all__ = [
    "CLOSURE_SIZES",
    "DIS_DATASETS",
    "FIT_BASIS",
    "FK_BASIS",
    "HADRONIC_DATASETS",
    "LHA_BASIS",
    "PHYSICAL_FLAVOURS",
    "REAL_DATASETS",
    "STANDARD_XGRID",
    "Dataset",
    "FitTheory",
    "FkTable",
    "PositivitySet",
    "Problem",
    "closure_problem",
    "combine",
    "empty_folds",
    "experimental_chi2",
    "export_xgrid",
    "fit_theory",
    "fit_to_fk_rotation",
    "fk_to_lha_rotation",
    "flavour_combination",
    "grid_predictions",
    "level1_data",
    "load_problem",
    "load_real_dataset",
    "on_grid",
    "real_problem",
    "replica_data",
    "toy_pdf",
    "training_mask",
    "unknown_names",
    "untrained_members",
]
