"""Observables of the member-batched PDF: FK tables, one PDF or two, and their operations.

All DIS-like tables contract in one matrix product, their rotation to the fitted basis folded
in once. A hadronic table takes the luminosity of its non-zero flavour pairs at its own x
nodes per member, (M, P·n_x·n_x), and contracts it with the table in one matrix product,
the table stored (n, P·n_x·n_x) and multiplied transposed: luminosity first, not the table
with one PDF first, by measurement (docs/performance.md#hadronic-observables). Its pairs are
those of the fitted basis, each unordered pair once: the rotation is folded into the table and
the (j, i) half added, transposed in x, onto the (i, j) half, which leaves 26–36 pairs of the
51 in the FK basis of the shipped tables (both PDFs are a proton's). Compound
observables (RATIO, ASY, ...) combine their tables' columns with validphys's operations, the
same functions the host uses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from hyperscan.data import FIT_BASIS, FkTable, combine, fit_to_fk_rotation, on_grid


@dataclass(frozen=True)
class Observable:
    """What one dataset (or positivity set) predicts: its tables and their operation."""

    name: str
    tables: tuple[FkTable, ...]
    operation: str = "NULL"


@dataclass(frozen=True)
class _Hadronic:
    nodes: tf.Tensor  # (n_x,) the table's x nodes in the union grid
    left: tf.Tensor  # (P,) each pair's first fitted flavour
    right: tf.Tensor  # (P,) ... and its second
    fk: tf.Tensor  # (n, P·n_x·n_x): multiplied transposed, which XLA's CPU GEMV runs 3x faster


def fitted_pairs(table: FkTable, rotation: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A hadronic table on the fitted basis's unordered flavour pairs: (P, 2) pairs i ≤ j and
    (n, P, n_x, n_x) entries, in float64, that give its predictions from the fitted PDF g with
    O_n = Σ_p Σ_αβ fk[n,p,α,β] g_i(x_α) g_j(x_β); pairs zero everywhere are left out.

    ``rotation`` (14, 8) takes g to the FK basis: the table's entry for (a, b) goes to every
    (i, j) with rotation[a, i]·rotation[b, j], then (j, i) to (i, j) with α and β swapped."""
    left, right = rotation[table.pairs[:, 0]], rotation[table.pairs[:, 1]]  # (P_fk, 8)
    full = np.einsum("pi,pj,npab->nijab", left, right, table.fk)
    upper = np.triu_indices(rotation.shape[1])
    folded = full + np.swapaxes(np.swapaxes(full, 1, 2), 3, 4)
    diagonal = np.arange(rotation.shape[1])
    folded[:, diagonal, diagonal] = full[:, diagonal, diagonal]
    fk = folded[:, upper[0], upper[1]]  # (n, 36, n_x, n_x)
    used = np.flatnonzero(np.any(fk != 0, axis=(0, 2, 3)))
    return np.stack(upper, axis=1)[used], fk[:, used]


class TableProducts:
    """Observables (M, N) from the normalised PDF (M, X, 8) on the union grid ``xgrid``."""

    def __init__(self, observables: Sequence[Observable], xgrid: np.ndarray, dtype: tf.DType):
        self.dtype = dtype
        self._n_x = xgrid.size
        rotation = fit_to_fk_rotation()
        linear = [t for o in observables for t in o.tables if not t.hadronic]
        hadronic = [(t, o.name) for o in observables for t in o.tables if t.hadronic]
        self._rows, self._linear = self._used_rows(self._flat(linear, xgrid, rotation))
        self._hadronic, starts = self._grouped(hadronic, xgrid, rotation)
        # where each table's predictions sit in the raw output: DIS-like first, in the
        # observables' order, then the hadronic products, table by table as _grouped put them
        n_linear = sum(t.n_data for t in linear)
        linear_start, hadronic_index = 0, 0
        combined = []
        for o in observables:
            columns = []
            for t in o.tables:
                if t.hadronic:
                    start = n_linear + starts[hadronic_index]
                    hadronic_index += 1
                else:
                    start, linear_start = linear_start, linear_start + t.n_data
                columns.append((start, start + t.n_data))
            combined.append((o.operation, tuple(columns)))
        self._combined = tuple(combined)
        # One NULL DIS-like table each: the raw output is already the observables, in order.
        self._direct = not hadronic and all(o.operation == "NULL" for o in observables)
        self._n_points = sum(max(t.n_data for t in o.tables) for o in observables)

    @property
    def n_points(self) -> int:
        """Observables predicted (columns of the output)."""
        return self._n_points

    def flops(self) -> float:
        """Matmul FLOPs of the products per member-step, forward and backward."""
        tables = ([] if self._linear is None else [self._linear]) + [t.fk for t in self._hadronic]
        return float(sum(2 * 2 * t.shape[0] * t.shape[1] for t in tables))

    @property
    def linear_rows(self) -> int:
        """Rows of the DIS-like matrix (the PDF's used (x, flavour) columns)."""
        return 0 if self._linear is None else int(self._linear.shape[0])

    def _constant(self, value: np.ndarray) -> tf.Tensor:
        return tf.constant(value, dtype=self.dtype)

    @staticmethod
    def _flat(tables: list[FkTable], xgrid: np.ndarray, rotation: np.ndarray) -> np.ndarray:
        """DIS-like tables → one (X·8, n_total) matrix on the union grid, fitted basis.

        The flavour rotation is linear, so it is folded into the tables once instead of
        rotating the PDF every step.
        """
        columns = []
        for table in tables:
            fk_fit = np.einsum("nka,kf->naf", table.fk, rotation)
            on_union = np.zeros((table.n_data, xgrid.size, len(FIT_BASIS)))
            on_union[:, np.searchsorted(xgrid, table.xgrid), :] = fk_fit
            columns.append(on_union.reshape(table.n_data, -1))
        if not columns:
            return np.zeros((xgrid.size * len(FIT_BASIS), 0))
        return np.concatenate(columns).T

    def _used_rows(self, fk: np.ndarray) -> tuple[tf.Tensor | None, tf.Tensor | None]:
        """The rows of the PDF the matrix uses (None: all) and the matrix on those only.

        A dataset's table is zero for the flavours its observable does not probe and off its
        own x grid, so on the union grid whole (x, flavour) rows can be zero (23% of the
        nnpdf40 problem's): a gather of the PDF's few used columns spares that much GEMM.
        """
        if fk.shape[1] == 0:
            return None, None
        used = np.flatnonzero(np.any(fk != 0, axis=1))
        if used.size == fk.shape[0]:
            return None, self._constant(fk)
        return tf.constant(used, tf.int32), self._constant(fk[used])

    def _grouped(
        self, hadronic: list[tuple[FkTable, str]], xgrid: np.ndarray, rotation: np.ndarray
    ) -> tuple[tuple[_Hadronic, ...], list[int]]:
        """The hadronic products, one per x grid: the tables on the same nodes (E866's three, a
        W asymmetry's two and a Z rapidity's) share one luminosity on the union of their pairs
        and one matrix product, their rows one after another. Also each table's first row in
        the products' output."""
        groups: dict[bytes, list[int]] = {}
        for i, (table, _) in enumerate(hadronic):
            groups.setdefault(table.xgrid.tobytes(), []).append(i)
        folded = [fitted_pairs(table, rotation) for table, _ in hadronic]
        products, starts, offset = [], [0] * len(hadronic), 0
        for members in groups.values():
            pairs = np.unique(np.concatenate([folded[i][0] for i in members]), axis=0)
            blocks = []
            for i in members:
                own, fk = folded[i]
                block = np.zeros((fk.shape[0], len(pairs), *fk.shape[2:]))
                block[:, [pairs.tolist().index(p) for p in own.tolist()]] = fk
                blocks.append(block.reshape(fk.shape[0], -1))
                starts[i], offset = offset, offset + fk.shape[0]
            table, name = hadronic[members[0]]
            products.append(
                _Hadronic(
                    tf.constant(on_grid(xgrid, table.xgrid, name), tf.int32),
                    tf.constant(pairs[:, 0], tf.int32),
                    tf.constant(pairs[:, 1], tf.int32),
                    self._constant(np.concatenate(blocks)),
                )
            )
        return tuple(products), starts

    def __call__(self, pdf: tf.Tensor) -> tf.Tensor:
        """pdf (M, X, 8), x·f in the fitted basis on the union grid → (M, N)."""
        parts = []
        if self._linear is not None:
            flat = tf.reshape(pdf, [-1, self._n_x * len(FIT_BASIS)])
            used = flat if self._rows is None else tf.gather(flat, self._rows, axis=1)
            parts.append(used @ self._linear)
        for table in self._hadronic:
            at_nodes = tf.transpose(tf.gather(pdf, table.nodes, axis=1), [0, 2, 1])  # (M, 8, n_x)
            left = tf.gather(at_nodes, table.left, axis=1)  # (M, P, n_x)
            right = tf.gather(at_nodes, table.right, axis=1)
            luminosity = left[:, :, :, None] * right[:, :, None, :]
            flat = tf.reshape(luminosity, [tf.shape(pdf)[0], -1])
            parts.append(tf.matmul(flat, table.fk, transpose_b=True))
        raw = parts[0] if len(parts) == 1 else tf.concat(parts, axis=1)
        if self._direct:
            return raw
        return tf.concat(
            [
                combine(operation, [raw[:, a:b] for a, b in columns])
                for operation, columns in self._combined
            ],
            axis=1,
        )
