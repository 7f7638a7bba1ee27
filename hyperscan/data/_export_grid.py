# SPDX-License-Identifier: GPL-3.0-or-later
"""n3fit's export x grid: where a fit's PDFs are written for evolution (exportgrids, LHAPDF)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np

_FILE = Path(__file__).with_name("export_xgrid.txt")


@cache
def export_xgrid() -> np.ndarray:
    """The 196 x values of n3fit 4.1.5's exportgrids, bit for bit (1e-9 … 1).

    The same grid, not a finer or coarser one, so that an EKO made for n3fit's fits evolves
    hyperscan's without an interpolation between the two.
    """
    grid = np.loadtxt(_FILE)
    grid.setflags(write=False)
    return grid
