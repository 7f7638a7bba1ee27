# SPDX-License-Identifier: GPL-3.0-or-later
"""From a fit to the field's PDF set: exportgrids evolved by an EKO into an LHAPDF 6 set, and
postfit's selection of the replicas that make the final set.

Needs eko and nnpdf-data (``pip install 'hyperscan[evolve]'``), imported on first use: a fit or
a scan never pays for them.
"""

from __future__ import annotations

from ._eko import cache_key, cached_eko, default_cache_dir, eko_cards, nnpdf_theory
from ._errors import EvolveError
from ._evolve import EKO_X_POINTS, eko_xgrid, evolve_fit
from ._fit_folder import ExportedFit, read_fit
from ._lhapdf import PIDS, evolve, member_blocks, write_set
from ._postfit import (
    ARCLENGTH_THRESHOLD,
    CHI2_THRESHOLD,
    INTEGRABILITY_THRESHOLD,
    PostfitResult,
    ReplicaInfo,
    postfit,
    postfit_order,
    vetoes,
)
from ._reader import PdfSet, log_bicubic, read_set
from ._scales import evolution_points, q2_grid

__all__ = [
    "ARCLENGTH_THRESHOLD",
    "CHI2_THRESHOLD",
    "EKO_X_POINTS",
    "INTEGRABILITY_THRESHOLD",
    "PIDS",
    "EvolveError",
    "ExportedFit",
    "PdfSet",
    "PostfitResult",
    "ReplicaInfo",
    "cache_key",
    "cached_eko",
    "default_cache_dir",
    "eko_cards",
    "eko_xgrid",
    "evolution_points",
    "evolve",
    "evolve_fit",
    "log_bicubic",
    "member_blocks",
    "nnpdf_theory",
    "postfit",
    "postfit_order",
    "q2_grid",
    "read_fit",
    "read_set",
    "vetoes",
    "write_set",
]
