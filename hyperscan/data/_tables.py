# SPDX-License-Identifier: GPL-3.0-or-later
"""FK tables at Q0, one PDF (DIS) or two (hadronic), and the operations that combine them.

A hadronic table is kept on its non-zero flavour pairs only, as n3fit's luminosity mask keeps
it: the dense (n, 14, n_x, 14, n_x) form is 196 pairs, of which a Drell–Yan table uses a few
dozen. The operations are validphys's (``validphys.convolution.OP``), written with ``+``, ``-``
and ``/`` only, so that the same function combines numpy arrays on the host and tensors in the
differentiable model.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._flavours import FK_BASIS

_N_FK = len(FK_BASIS)


def _total(terms: Sequence[Any]) -> Any:
    return functools.reduce(operator.add, terms)


@dataclass(frozen=True)
class Operation:
    """How a dataset's table predictions combine into its observable: ``arity`` tables in."""

    name: str
    arity: int
    combine: Callable[..., Any]


#: validphys 4.1.5's operations by name (``validphys.convolution.OP``).
OPERATIONS: dict[str, Operation] = {
    op.name: op
    for op in (
        Operation("NULL", 1, lambda a: a),
        Operation("ADD", 2, operator.add),
        Operation("RATIO", 2, operator.truediv),
        Operation("ASY", 2, lambda a, b: (a - b) / (a + b)),
        Operation("SMN", 4, lambda a, b, c, d: (a + b) / (c + d)),
        Operation("COM", 20, lambda *t: _total(t[:10]) / _total(t[10:])),
        Operation("SMT", 10, lambda *t: _total(t)),
        Operation("SUBTRACT_ABS", 2, lambda a, b: a - abs(b)),
        Operation("SUBTRACT_ABSPAIR", 4, lambda a, b, c, d: a + b - abs(c + d)),
    )
}


def operation(name: str) -> Operation:
    """The operation called ``name`` (any case, as metadata write it); ValueError otherwise."""
    found = OPERATIONS.get(str(name).upper())
    if found is None:
        raise ValueError(f"operation {name!r} is not supported; supported: {', '.join(OPERATIONS)}")
    return found


def _frozen(a: np.ndarray, dtype: type = np.float64) -> np.ndarray:
    out = np.array(a, dtype=dtype, order="C", copy=True)
    out.setflags(write=False)
    return out


@dataclass(frozen=True, eq=False)
class FkTable:
    """An FK table acting on x·f at Q0, FK_BASIS flavours, on its own x grid.

    One PDF (DIS): ``fk`` (n, 14, n_x), ``pairs`` None, O_n = Σ_aα fk[n,a,α] xf_a(x_α).
    Two PDFs (hadronic): ``fk`` (n, P, n_x, n_x) and ``pairs`` (P, 2), the FK_BASIS indices
    (a, b) of its non-zero flavour pairs: O_n = Σ_p Σ_αβ fk[n,p,α,β] xf_a(x_α) xf_b(x_β).
    """

    fk: np.ndarray
    xgrid: np.ndarray
    pairs: np.ndarray | None = None

    def __post_init__(self) -> None:
        fk, xgrid = _frozen(self.fk), _frozen(self.xgrid)
        n_x = xgrid.shape[0] if xgrid.ndim == 1 else -1
        if xgrid.ndim != 1 or n_x == 0 or not np.all(np.diff(xgrid) > 0):
            raise ValueError("xgrid must be non-empty and strictly increasing")
        if not (xgrid[0] > 0.0 and xgrid[-1] <= 1.0):
            raise ValueError("xgrid must lie in (0, 1]")
        if self.pairs is None:
            if fk.ndim != 3 or fk.shape[1:] != (_N_FK, n_x):
                raise ValueError(f"fk must have shape (n, {_N_FK}, n_x={n_x}), got {fk.shape}")
            pairs = None
        else:
            pairs = _frozen(self.pairs, np.int64)
            if pairs.ndim != 2 or pairs.shape[1] != 2 or np.any(pairs < 0):
                raise ValueError(f"pairs must be (P, 2) FK_BASIS indices, got {pairs.tolist()}")
            if np.any(pairs >= _N_FK) or len({tuple(p) for p in pairs.tolist()}) != len(pairs):
                raise ValueError(f"pairs must be distinct FK_BASIS indices, got {pairs.tolist()}")
            if fk.ndim != 4 or fk.shape[1:] != (pairs.shape[0], n_x, n_x):
                raise ValueError(
                    f"fk must have shape (n, P={pairs.shape[0]}, n_x={n_x}, n_x), got {fk.shape}"
                )
        if not np.all(np.isfinite(fk)):
            raise ValueError("fk has non-finite entries")
        object.__setattr__(self, "fk", fk)
        object.__setattr__(self, "xgrid", xgrid)
        object.__setattr__(self, "pairs", pairs)

    @property
    def hadronic(self) -> bool:
        return self.pairs is not None

    @property
    def n_data(self) -> int:
        return int(self.fk.shape[0])

    def rows(self, keep: np.ndarray) -> FkTable:
        """The table of the points ``keep`` (a mask or indices), as cuts keep them."""
        return FkTable(self.fk[keep], self.xgrid, self.pairs)

    def predictions(self, xf_fk: np.ndarray) -> np.ndarray:
        """xf_fk (..., 14, n_x) on ``self.xgrid`` -> (..., n)."""
        xf_fk = np.asarray(xf_fk, dtype=np.float64)
        if xf_fk.shape[-2:] != (_N_FK, self.xgrid.shape[0]):
            raise ValueError(
                f"xf_fk must end in ({_N_FK}, {self.xgrid.shape[0]}) (FK basis, this xgrid), "
                f"got shape {xf_fk.shape}"
            )
        if self.pairs is None:
            return np.tensordot(xf_fk, self.fk, axes=([-2, -1], [1, 2]))
        left, right = xf_fk[..., self.pairs[:, 0], :], xf_fk[..., self.pairs[:, 1], :]
        return np.einsum("npab,...pa,...pb->...n", self.fk, left, right, optimize=True)

    def fixed_order_predictions(self, xf14: np.ndarray) -> np.ndarray:
        """xf14 (14, n_x) -> (n,) from elementwise products, summed in a fixed order: the same
        bits on every CPU, as closure data and t0 covariances must be."""
        if self.pairs is None:
            products = self.fk * xf14[None]
        else:
            left, right = xf14[self.pairs[:, 0]], xf14[self.pairs[:, 1]]
            products = self.fk * (left[:, :, None] * right[:, None, :])[None]
        return products.reshape(self.n_data, -1).sum(axis=1)

    def hash_into(self, update: Callable[[np.ndarray], None]) -> None:
        """Feed the table's arrays to a fingerprint (``update`` takes one array)."""
        update(self.fk)
        update(self.xgrid)
        if self.pairs is not None:
            update(self.pairs.astype(np.float64))


def combine(name: str, parts: Sequence[Any]) -> Any:
    """Operation ``name`` applied to its tables' predictions (numpy arrays or tensors)."""
    op = operation(name)
    if len(parts) != op.arity:
        raise ValueError(f"operation {op.name} takes {op.arity} tables, got {len(parts)}")
    return op.combine(*parts)


def on_grid(union: np.ndarray, xgrid: np.ndarray, what: str) -> np.ndarray:
    """Indices of ``xgrid``'s nodes in the sorted ``union``; ValueError if one is missing."""
    nodes = np.searchsorted(union, xgrid)
    if np.any(nodes >= union.size) or not np.array_equal(
        union[np.minimum(nodes, union.size - 1)], xgrid
    ):
        raise ValueError(f"{what}: the PDF grid does not hold every FK node")
    return nodes
