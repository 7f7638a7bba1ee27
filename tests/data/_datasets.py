"""Helpers of the data tests: a small random Dataset, the toy PDF as LHAPDF's xfx."""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from hyperscan.data import PHYSICAL_FLAVOURS, STANDARD_XGRID, Dataset, FkTable
from hyperscan.data._flavours import _toy_physical

_PDG = {2: "u", -2: "ubar", 1: "d", -1: "dbar", 3: "s", -3: "sbar", 4: "c", -4: "cbar", 21: "g"}


def toy_xfx() -> Callable[[int, float, float], float]:
    """The toy PDF as LHAPDF's xfx(pid, x, Q²), for PineAPPL's own convolution."""

    @functools.cache
    def toy(x: float) -> np.ndarray:
        return _toy_physical(np.array([x]))[0]

    def xfx(pid: int, x: float, q2: float) -> float:
        flavour = _PDG.get(pid)
        return 0.0 if flavour is None else float(toy(x)[PHYSICAL_FLAVOURS.index(flavour)])

    return xfx


def random_dataset(name: str, n: int, key: int) -> Dataset:
    """n points with random FK tables and central values on the last 10 standard x nodes."""
    grid = np.array(STANDARD_XGRID[-10:])
    rng = np.random.default_rng(key)
    return Dataset(
        name=name,
        process="DIS_NC",
        tables=(FkTable(rng.normal(size=(n, 14, grid.size)), grid),),
        central=rng.normal(size=n),
        kinematics=np.column_stack([np.full(n, 0.5), np.full(n, 10.0), np.full(n, np.nan)]),
    )
