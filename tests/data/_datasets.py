"""A small random Dataset for the hand-made problems of the data tests."""

from __future__ import annotations

import numpy as np

from hyperscan.data import STANDARD_XGRID, Dataset, FkTable


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
