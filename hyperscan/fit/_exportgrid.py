# SPDX-License-Identifier: GPL-3.0-or-later
"""n3fit's exportgrids: each replica's x·f at Q0 on n3fit's export x grid, in its LHA basis.

Written as n3fit 4.1.5 writes them, into the layout its ``evolven3fit`` reads
(``nnfit/replica_<i>/<fit>.exportgrid``, ``<fit>`` the fit folder's name), so that a fit of
hyperscan's becomes an LHAPDF set with NNPDF's own tools, or with ``hyperscan evolve``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import yaml

from hyperscan.data import LHA_BASIS, export_xgrid, fit_to_fk_rotation, fk_to_lha_rotation

if TYPE_CHECKING:
    from hyperscan.data import FitTheory
    from hyperscan.fit._fit import FitResult

NNFIT_FOLDER = "nnfit"
#: hyperscan fits 4 flavours at Q0 (c = cbar, FIT_BASIS): b and t are written as zero.
ACTIVE_FLAVOURS = 4

_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def exportgrid_path(fit_name: str, replica: int) -> Path:
    """Where a replica's exportgrid lies in a fit folder named ``fit_name``."""
    return Path(NNFIT_FOLDER, f"replica_{replica}", f"{fit_name}.exportgrid")


def exported_members(result: FitResult) -> list[int]:
    """The members that make the fit's PDF set, or none when it is not one set.

    A k-fold fit's members each miss a fold, and several level-1 fits are several sets: neither
    is what an LHAPDF set holds. A member whose PDF is not finite (diverged) has nothing to
    evolve; postfit's tests judge the others, as n3fit leaves them to it.
    """
    if result.export_pdf is None or (result.folds >= 0).any() or (result.level1 > 0).any():
        return []
    finite = np.isfinite(result.export_pdf).all(axis=(1, 2))
    return [m for m in range(result.n_members) if finite[m]]


def exportgrid_text(xf_fit_basis: np.ndarray, replica: int, theory: FitTheory) -> str:
    """One replica's exportgrid (YAML) from its x·f in FIT_BASIS on export_xgrid()."""
    rotation = fk_to_lha_rotation(ACTIVE_FLAVOURS) @ fit_to_fk_rotation()
    document = {
        "replica": int(replica),
        "q20": float(theory.q0) ** 2,
        "xgrid": export_xgrid().tolist(),
        "labels": list(LHA_BASIS),
        "pdfgrid": (np.asarray(xf_fit_basis, dtype=np.float64) @ rotation.T).tolist(),
    }
    return yaml.dump(document, Dumper=_Dumper, sort_keys=False, default_flow_style=None)


def write_exportgrids(folder: Path, fit_name: str, result: FitResult, theory: FitTheory) -> int:
    """Write the exported members' exportgrids under ``folder``; how many were written."""
    members = exported_members(result)
    for m in members:
        path = folder / exportgrid_path(fit_name, int(result.replicas[m]))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(exportgrid_text(result.export_pdf[m], result.replicas[m], theory))
    return len(members)
