# SPDX-License-Identifier: GPL-3.0-or-later
"""PineAPPL FK tables written from arrays: the inverse of ``_theory.py``'s conversion.

validphys and n3fit read only PineAPPL files: for them to fit the data hyperscan ships as arrays,
the arrays are written back as the FK tables of a theory folder
(tools/hadronic_theory_folder.py). The tests make small tables of known entries the same way.
Needs pineappl (the nnpdf or test extra).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ._tables import FkTable
from ._theory import EVOLUTION_PIDS


def _interpolation(lo: float, hi: float, nodes: int, on_x: bool):
    from pineappl.interpolation import (
        Interp,
        InterpolationMethod,
        MappingMethod,
        ReweightingMethod,
    )

    return Interp(
        min=lo,
        max=hi,
        nodes=nodes,
        order=3,
        reweight_meth=ReweightingMethod.ApplGridX if on_x else ReweightingMethod.NoReweight,
        map=MappingMethod.ApplGridF2 if on_x else MappingMethod.ApplGridH0,
        interpolation_meth=InterpolationMethod.Lagrange,
    )


def write_fk_table(
    path: Path,
    channels: Sequence[tuple[int, ...]],
    xgrid: np.ndarray,
    values: np.ndarray,
    q0: float,
    evolution_basis: bool = True,
) -> None:
    """An FK table file of ``values`` (bins, channels, n_x[, n_x]), acting on f (PineAPPL's
    convention), on ``xgrid`` (ascending) at ``q0``: one PDF per pid in each channel tuple, the
    PDFs of unpolarised protons, bins of width 1."""
    from pineappl.boc import BinsWithFillLimits, Channel, Kinematics, Order, ScaleFuncForm, Scales
    from pineappl.convolutions import Conv, ConvType
    from pineappl.fk_table import FkTable as PineapplTable
    from pineappl.grid import Grid
    from pineappl.pids import PidBasis
    from pineappl.subgrid import ImportSubgridV1

    n_conv = len(channels[0])
    proton = Conv(convolution_types=ConvType(polarized=False, time_like=False), pid=2212)
    grid = Grid(
        pid_basis=PidBasis.Evol if evolution_basis else PidBasis.Pdg,
        channels=[Channel([(list(c), 1.0)]) for c in channels],
        orders=[Order(0, 0, 0, 0, 0)],
        bins=BinsWithFillLimits.from_fill_limits(
            fill_limits=[float(i) for i in range(values.shape[0] + 1)]
        ),
        convolutions=[proton] * n_conv,
        interpolations=[_interpolation(1e2, 1e8, 40, False)]
        + [_interpolation(2e-7, 1.0, 50, True)] * n_conv,
        kinematics=[Kinematics.Scale(0)] + [Kinematics.X(i) for i in range(n_conv)],
        scale_funcs=Scales(
            ren=ScaleFuncForm.Scale(0), fac=ScaleFuncForm.Scale(0), frg=ScaleFuncForm.NoScale(0)
        ),
    )
    x = np.asarray(xgrid, dtype=float)
    for b in range(values.shape[0]):
        for c in range(len(channels)):
            subgrid = ImportSubgridV1(
                array=values[b, c][None, ...], node_values=[np.array([q0 * q0])] + [x] * n_conv
            )
            grid.set_subgrid(0, b, c, subgrid.into())
    PineapplTable(grid).write_lz4(str(path))


def write_hadronic_table(path: Path, table: FkTable, q0: float) -> None:
    """Hadronic ``table`` (acting on x·f) as the PineAPPL FK table that ``_theory.py`` reads
    back as it: one channel per flavour pair, the x factors put back."""
    x = table.xgrid
    channels = [(EVOLUTION_PIDS[a], EVOLUTION_PIDS[b]) for a, b in table.pairs.tolist()]
    write_fk_table(path, channels, x, table.fk * (x[:, None] * x[None, :]), q0)
