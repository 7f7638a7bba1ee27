"""The toy PDF written as n3fit 4.1.5 writes a replica's PDF (an exportgrid), for the tests of
the benchmarks that read n3fit's fits."""

from __future__ import annotations

import numpy as np

from hyperscan.data import LHA_BASIS, export_xgrid
from hyperscan.data._flavours import PHYSICAL_FLAVOURS, _toy_physical

N3FIT_LABELS = list(LHA_BASIS)
N3FIT_X = export_xgrid()


def toy_exportgrid() -> np.ndarray:
    """x·f of the toy PDF per n3fit label at N3FIT_X: (196, 14)."""
    physical = _toy_physical(N3FIT_X)
    names = {"ubar": "UBAR", "dbar": "DBAR", "sbar": "SBAR", "cbar": "CBAR", "g": "GLUON"}
    exportgrid = np.zeros((N3FIT_X.size, len(N3FIT_LABELS)))
    for column, flavour in enumerate(PHYSICAL_FLAVOURS):
        exportgrid[:, N3FIT_LABELS.index(names.get(flavour, flavour.upper()))] = physical[:, column]
    return exportgrid
