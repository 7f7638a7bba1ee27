# SPDX-License-Identifier: GPL-3.0-or-later
"""Datasets, positivity sets and the fit problem (data + covariance) as immutable numpy objects."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from ._flavours import FK_BASIS
from ._tables import FkTable, combine, on_grid, operation

#: The low-rank χ² needs each point's uncorrelated variance above this fraction of its variance.
UNCORRELATED_FLOOR = 1e-12


def _frozen(a: np.ndarray | Sequence[float], name: str, ndim: int) -> np.ndarray:
    """float64, C-contiguous, read-only copy of ``a`` (no copy if it already is one).

    Why: Problem caches its Cholesky factor and fingerprint, so its arrays must not change.
    """
    arr = np.asarray(a)
    if arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-d, got shape {arr.shape}")
    if arr.dtype == np.float64 and arr.flags.c_contiguous and _read_only(arr):
        return arr
    out = np.array(arr, dtype=np.float64, order="C", copy=True)
    out.setflags(write=False)
    return out


def _read_only(arr: np.ndarray) -> bool:
    """True if neither ``arr`` nor any array it views is writeable."""
    base: object = arr
    while isinstance(base, np.ndarray):
        if base.flags.writeable:
            return False
        base = base.base
    return True


def _whole_total(operation: str, tables: Sequence[FkTable], i: int) -> bool:
    """Whether table ``i`` is a RATIO's one-point denominator: a total that normalises every
    point, which cuts leave whole (validphys's "protected" table)."""
    return operation == "RATIO" and i == len(tables) - 1 and tables[i].n_data == 1


@dataclass(frozen=True, eq=False)
class Dataset:
    """One dataset: its FK tables at Q0, the operation that combines them, its central values.

    ``tables`` all have n_data rows, but for a RATIO's denominator of one row (a total that
    divides every point); ``operation`` is validphys's (NULL for one table, RATIO, ASY, ...:
    ``OPERATIONS``). kinematics (n_data, 3): the commondata's three kinematic
    variables (for DIS x, Q2, y; y may be NaN).
    """

    name: str
    process: str
    tables: tuple[FkTable, ...]
    central: np.ndarray
    kinematics: np.ndarray
    operation: str = "NULL"

    def __post_init__(self) -> None:
        tables = tuple(self.tables)
        if not tables or not all(isinstance(t, FkTable) for t in tables):
            raise TypeError(f"{self.name}: tables must be a non-empty sequence of FkTable")
        try:
            op = operation(self.operation)
        except ValueError as err:
            raise ValueError(f"{self.name}: {err}") from None
        if len(tables) != op.arity:
            raise ValueError(
                f"{self.name}: operation {op.name} takes {op.arity} tables, got {len(tables)}"
            )
        central = _frozen(self.central, f"{self.name}: central", 1)
        kinematics = _frozen(self.kinematics, f"{self.name}: kinematics", 2)
        n = central.shape[0]
        rows = [t.n_data for t in tables]
        if any(r != n and not _whole_total(op.name, tables, i) for i, r in enumerate(rows)):
            raise ValueError(f"{self.name}: its tables have {rows} rows, its data {n} points")
        if kinematics.shape != (n, 3):
            raise ValueError(
                f"{self.name}: kinematics must have shape ({n}, 3), got {kinematics.shape}"
            )
        object.__setattr__(self, "tables", tables)
        object.__setattr__(self, "operation", op.name)
        object.__setattr__(self, "central", central)
        object.__setattr__(self, "kinematics", kinematics)

    @property
    def n_data(self) -> int:
        return int(self.central.shape[0])

    @property
    def table(self) -> FkTable:
        """The one table of a NULL dataset (DIS, or one hadronic table)."""
        if len(self.tables) != 1:
            raise ValueError(f"{self.name} combines {len(self.tables)} tables ({self.operation})")
        return self.tables[0]

    @cached_property
    def xgrid(self) -> np.ndarray:
        """The union of its tables' x grids, on which ``predictions`` takes the PDF."""
        out = np.unique(np.concatenate([t.xgrid for t in self.tables]))
        out.setflags(write=False)
        return out

    def rows(self, keep: np.ndarray) -> Dataset:
        """The dataset of the points ``keep`` (a mask or indices), as cuts keep them."""
        return Dataset(
            self.name,
            self.process,
            tuple(
                t if _whole_total(self.operation, self.tables, i) else t.rows(keep)
                for i, t in enumerate(self.tables)
            ),
            self.central[keep],
            self.kinematics[keep],
            self.operation,
        )

    def predictions(self, xf_fk: np.ndarray) -> np.ndarray:
        """Theory predictions: xf_fk (..., 14, n_x) on ``self.xgrid`` -> (..., n_data)."""
        xf_fk = np.asarray(xf_fk, dtype=np.float64)
        if xf_fk.shape[-2:] != (len(FK_BASIS), self.xgrid.size):
            raise ValueError(
                f"xf_fk must end in ({len(FK_BASIS)}, {self.xgrid.size}) (FK basis, this "
                f"dataset's xgrid), got shape {xf_fk.shape}"
            )
        parts = [
            t.predictions(xf_fk[..., on_grid(self.xgrid, t.xgrid, self.name)]) for t in self.tables
        ]
        return combine(self.operation, parts)


@dataclass(frozen=True, eq=False)
class PositivitySet:
    """Observables that must be >= 0: one FK table (DIS-like or hadronic) acting on x*f."""

    name: str
    table: FkTable

    def __post_init__(self) -> None:
        if not isinstance(self.table, FkTable):
            raise TypeError(f"{self.name}: table must be an FkTable")

    @property
    def xgrid(self) -> np.ndarray:
        return self.table.xgrid

    @property
    def n_points(self) -> int:
        return self.table.n_data

    def predictions(self, xf_fk: np.ndarray) -> np.ndarray:
        """xf_fk (..., 14, n_x) on ``self.xgrid`` -> (..., n_points)."""
        return self.table.predictions(xf_fk)


def _components(coupled: np.ndarray) -> list[list[int]]:
    """Connected components of a symmetric boolean (n, n) matrix, each sorted, by first member."""
    n = coupled.shape[0]
    seen = [False] * n
    out = []
    for start in range(n):
        if seen[start]:
            continue
        stack, comp = [start], []
        seen[start] = True
        while stack:
            i = stack.pop()
            comp.append(i)
            for j in np.flatnonzero(coupled[i]).tolist():
                if not seen[j]:
                    seen[j] = True
                    stack.append(j)
        out.append(sorted(comp))
    return out


def _uncorrelated(covmat: np.ndarray, systematics: np.ndarray) -> np.ndarray:
    """(N,) diag(covmat) minus the row sums of systematics^2, read-only."""
    out = np.diag(covmat) - (systematics * systematics).sum(axis=1)
    out.setflags(write=False)
    return out


def _tidy_systematics(
    systematics: np.ndarray, covmat: np.ndarray, blocks: Sequence[slice]
) -> np.ndarray:
    """Check ``systematics`` against covmat and its blocks; drop zero columns, sort by block.

    Why: the chi2 solves diag(d) + S S^T block by block (Woodbury), which is only right if every
    column stays inside one block and the factorisation reproduces covmat.
    """
    n = covmat.shape[0]
    block_of = np.empty(n, dtype=np.intp)
    for k, b in enumerate(blocks):
        block_of[b] = k
    nonzero = systematics != 0.0
    used = np.flatnonzero(nonzero.any(axis=0))
    first = nonzero[:, used].argmax(axis=0)
    last = n - 1 - nonzero[::-1, used].argmax(axis=0)
    across = np.flatnonzero(block_of[first] != block_of[last])
    if across.size:
        j = int(across[0])
        raise ValueError(
            f"systematics column {int(used[j])} is nonzero in two covariance blocks (rows "
            f"{int(first[j])} and {int(last[j])}); a correlated systematic must stay within "
            f"datasets correlated in covmat ({across.size} such column(s))"
        )
    order = used[np.argsort(block_of[first], kind="stable")]
    if order.size == systematics.shape[1] and np.array_equal(order, np.arange(order.size)):
        out = systematics
    else:
        out = _frozen(systematics[:, order], "systematics", 2)
    column_block = np.sort(block_of[first], kind="stable")
    for k, b in enumerate(blocks):
        lo, hi = np.searchsorted(column_block, [k, k + 1])
        s_b = out[b, lo:hi]
        c_b = covmat[b, b]
        resid = c_b - s_b @ s_b.T
        np.fill_diagonal(resid, 0.0)
        worst = float(np.max(np.abs(resid))) if resid.size else 0.0
        scale = float(np.max(np.abs(c_b)))
        if not worst <= 1e-10 * scale:
            raise ValueError(
                f"systematics are inconsistent with covmat: off-diagonal of covmat - S S^T in "
                f"rows {b.start}..{b.stop - 1} reaches {worst:.3g} (> 1e-10 x {scale:.3g})"
            )
    d = _uncorrelated(covmat, out)
    bad = np.flatnonzero(~(d > UNCORRELATED_FLOOR * np.diag(covmat)))
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"uncorrelated variance diag(covmat) - rowsum(systematics^2) must be > 0, got "
            f"{d[i]:.3g} at row {i} ({bad.size} row(s)): the systematics exceed the variance"
        )
    return out


def _hash_array(h: hashlib._Hash, a: np.ndarray) -> None:
    """Feed shape and little-endian float64 bytes; -0.0 and NaN payloads made canonical."""
    a = np.asarray(a, dtype=np.float64) + 0.0  # -0.0 -> +0.0
    a = np.where(np.isnan(a), np.nan, a)
    h.update(repr(a.shape).encode())
    h.update(np.ascontiguousarray(a, dtype="<f8").tobytes())


def _hash_str(h: hashlib._Hash, s: str) -> None:
    b = s.encode("utf-8")
    h.update(len(b).to_bytes(8, "little"))
    h.update(b)


@dataclass(frozen=True, eq=False)
class Problem:
    """What a fit sees: datasets, their joint covariance, positivity sets, optional truth.

    covmat (N, N) is over the datasets concatenated in order (N = sum of n_data). Datasets
    correlated with each other (nonzero cross-covariance) are moved next to each other at
    construction time, keeping the first-appearance order otherwise, so that covariance blocks
    are contiguous. truth (N,) is the closure-test truth (FK x toy PDF), on the built-in or the
    real tables, or None when the data are measured.

    systematics (N, K), optional: absolute correlated systematics with
    ``covmat == diag(uncorrelated_variance) + systematics @ systematics.T`` (to rounding), so a
    chi2 can use the low-rank structure (Woodbury) instead of a dense Cholesky factor. Rows
    follow the dataset reordering; all-zero columns are dropped and the rest sorted by the
    block they lie in (each column must lie within one block).
    """

    datasets: tuple[Dataset, ...]
    covmat: np.ndarray
    positivity: tuple[PositivitySet, ...] = ()
    truth: np.ndarray | None = None
    systematics: np.ndarray | None = None
    _block_groups: tuple[tuple[int, ...], ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        datasets = tuple(self.datasets)
        positivity = tuple(self.positivity)
        if not datasets:
            raise ValueError("a Problem needs at least one dataset")
        if not all(isinstance(d, Dataset) for d in datasets):
            raise TypeError("datasets must be Dataset instances")
        if not all(isinstance(p, PositivitySet) for p in positivity):
            raise TypeError("positivity must be PositivitySet instances")
        names = [d.name for d in datasets]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"duplicate dataset names: {dupes}")
        n_total = sum(d.n_data for d in datasets)
        covmat = _frozen(self.covmat, "covmat", 2)
        if covmat.shape != (n_total, n_total):
            raise ValueError(f"covmat must have shape ({n_total}, {n_total}), got {covmat.shape}")
        if not np.all(np.isfinite(covmat)):
            raise ValueError("covmat has non-finite entries")
        truth = None if self.truth is None else _frozen(self.truth, "truth", 1)
        if truth is not None and truth.shape != (n_total,):
            raise ValueError(f"truth must have shape ({n_total},), got {truth.shape}")
        systematics = None
        if self.systematics is not None:
            systematics = _frozen(self.systematics, "systematics", 2)
            if systematics.shape[0] != n_total:
                raise ValueError(
                    f"systematics must have shape ({n_total}, K) (one row per data point), "
                    f"got {systematics.shape}"
                )
            if not np.all(np.isfinite(systematics)):
                raise ValueError("systematics has non-finite entries")

        # dataset-level coupling: any nonzero entry in the (i, j) dataset block
        offsets = np.cumsum([0] + [d.n_data for d in datasets])
        nonzero = covmat != 0.0
        starts = offsets[:-1]
        coupled = np.logical_or.reduceat(
            np.logical_or.reduceat(nonzero, starts, axis=0), starts, axis=1
        )
        groups = _components(coupled | coupled.T)
        # symmetry, checked inside the coupled groups only (entries outside are all zero)
        for g in groups:
            index = np.concatenate([np.arange(offsets[i], offsets[i + 1]) for i in g])
            block = covmat[np.ix_(index, index)]
            if not np.array_equal(block, block.T):
                scale = float(np.max(np.abs(block)))
                if not np.allclose(block, block.T, rtol=0.0, atol=1e-12 * scale):
                    raise ValueError("covmat is not symmetric")
                sym = np.array(covmat)
                sym[np.ix_(index, index)] = 0.5 * (block + block.T)
                covmat = _frozen(sym, "covmat", 2)
        order = [i for g in groups for i in g]
        if order != list(range(len(datasets))):
            index = np.concatenate([np.arange(offsets[i], offsets[i + 1]) for i in order])
            datasets = tuple(datasets[i] for i in order)
            covmat = _frozen(covmat[np.ix_(index, index)], "covmat", 2)
            truth = None if truth is None else _frozen(truth[index], "truth", 1)
            if systematics is not None:
                systematics = _frozen(systematics[index], "systematics", 2)
            position = {old: new for new, old in enumerate(order)}
            groups = [[position[i] for i in g] for g in groups]
        object.__setattr__(self, "datasets", datasets)
        object.__setattr__(self, "positivity", positivity)
        object.__setattr__(self, "covmat", covmat)
        object.__setattr__(self, "truth", truth)
        object.__setattr__(self, "_block_groups", tuple(tuple(g) for g in groups))
        if systematics is not None:
            systematics = _tidy_systematics(systematics, covmat, self.blocks())
        object.__setattr__(self, "systematics", systematics)

    @property
    def n_data(self) -> int:
        return int(self.covmat.shape[0])

    @property
    def names(self) -> tuple[str, ...]:
        """Dataset names in problem order."""
        return tuple(d.name for d in self.datasets)

    @cached_property
    def central(self) -> np.ndarray:
        """(N,) central values of all datasets, concatenated in order."""
        out = np.concatenate([d.central for d in self.datasets])
        out.setflags(write=False)
        return out

    def dataset_slices(self) -> tuple[slice, ...]:
        """Slice of each dataset (in order) in the concatenated (N,) vectors."""
        out, start = [], 0
        for d in self.datasets:
            out.append(slice(start, start + d.n_data))
            start += d.n_data
        return tuple(out)

    def blocks(self) -> tuple[slice, ...]:
        """Contiguous disjoint covariance blocks covering 0..N; no nonzero entry crosses two.

        Why: Cholesky factors, solves and pseudo-data can then be done block by block. Blocks
        are whole datasets or runs of datasets correlated with each other.
        """
        slices = self.dataset_slices()
        return tuple(slice(slices[g[0]].start, slices[g[-1]].stop) for g in self._block_groups)

    @cached_property
    def cholesky(self) -> np.ndarray:
        """(N, N) lower-triangular L with covmat = L L^T, computed block by block."""
        out = np.zeros_like(self.covmat)
        for b in self.blocks():
            try:
                out[b, b] = np.linalg.cholesky(self.covmat[b, b])
            except np.linalg.LinAlgError as err:
                names = [
                    d.name
                    for d, s in zip(self.datasets, self.dataset_slices(), strict=True)
                    if b.start <= s.start < b.stop
                ]
                raise ValueError(f"covariance block of {names} is not positive definite") from err
        out.setflags(write=False)
        return out

    @cached_property
    def whiteners(self) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
        """L⁻¹ of each covariance block and of each dataset's own covariance, read-only: χ² on
        the host (``experimental_chi2``, for every fit and scan trial) is then a product, not a
        factorisation and solve per call."""

        def inverse(factor: np.ndarray) -> np.ndarray:
            out = np.linalg.inv(factor)
            out.setflags(write=False)
            return out

        return (
            tuple(inverse(self.cholesky[b, b]) for b in self.blocks()),
            tuple(inverse(np.linalg.cholesky(self.covmat[s, s])) for s in self.dataset_slices()),
        )

    @cached_property
    def uncorrelated_variance(self) -> np.ndarray:
        """(N,) d = diag(covmat) - rowsum(systematics^2) > 0, read-only.

        Why: with the systematics it gives covmat = diag(d) + S S^T for a Woodbury chi2.
        Raises ValueError when the Problem was built without systematics.
        """
        return _uncorrelated(self.covmat, self._require_systematics())

    def block_systematics(self, block: slice) -> np.ndarray:
        """(n_b, k_b) the systematics columns nonzero on rows ``block``, restricted to them.

        Why: the model builds its per-block Woodbury solves from these. ``block`` is usually
        one of ``blocks()``; (n_b, 0) if no column touches it. Read-only (a view when the columns
        are contiguous, as they are for a block). Raises ValueError without systematics.
        """
        s = self._require_systematics()
        if not isinstance(block, slice) or block.step not in (None, 1):
            raise ValueError(f"block must be a slice with step 1, got {block!r}")
        rows = s[block]
        cols = np.flatnonzero(np.any(rows != 0.0, axis=0))
        if cols.size and cols[-1] - cols[0] + 1 == cols.size:
            return rows[:, cols[0] : cols[-1] + 1]
        out = rows[:, cols]
        out.setflags(write=False)
        return out

    def _require_systematics(self) -> np.ndarray:
        if self.systematics is None:
            raise ValueError("this Problem has no systematics (built from a dense covmat only)")
        return self.systematics

    def select(self, names: Sequence[str]) -> Problem:
        """Sub-problem with only ``names`` (kept in problem order), covariance restricted.

        Positivity sets are kept; systematics keep their rows and lose columns that become zero.
        Unknown names raise ValueError listing the available ones.
        """
        if isinstance(names, str):
            raise TypeError("select() takes a sequence of dataset names, not a single string")
        wanted = list(names)
        if not wanted:
            raise ValueError("select() needs at least one dataset name")
        available = self.names
        unknown = [n for n in wanted if n not in available]
        if unknown:
            raise ValueError(
                f"unknown dataset name(s) {unknown}; available: {', '.join(available)}"
            )
        if len(set(wanted)) != len(wanted):
            raise ValueError(f"duplicate names in select(): {wanted}")
        keep = set(wanted)
        slices = self.dataset_slices()
        chosen = [i for i, d in enumerate(self.datasets) if d.name in keep]
        index = np.concatenate([np.arange(slices[i].start, slices[i].stop) for i in chosen])
        covmat = self.covmat[np.ix_(index, index)]
        covmat.setflags(write=False)  # a fresh array: no need for Problem to copy it again
        return Problem(
            datasets=tuple(self.datasets[i] for i in chosen),
            covmat=covmat,
            positivity=self.positivity,
            truth=None if self.truth is None else self.truth[index],
            systematics=None if self.systematics is None else self.systematics[index],
        )

    def fingerprint(self) -> str:
        """sha256 hex of names and all arrays, in a fixed byte order (little-endian float64).

        Why: a worker compares it with the coordinator's before fitting, to refuse mismatching
        data. The covariance enters through its blocks (entries outside are zero by definition).
        The systematics do not enter: they only factorise covmat, which is already hashed.
        """
        return self._fingerprint

    @cached_property
    def _fingerprint(self) -> str:
        h = hashlib.sha256(b"hyperscan.data.Problem/v1")
        h.update(len(self.datasets).to_bytes(8, "little"))
        for d in self.datasets:
            _hash_str(h, d.name)
            _hash_str(h, d.process)
            if d.operation != "NULL" or d.table.hadronic:
                _hash_str(h, d.operation)
                h.update(len(d.tables).to_bytes(8, "little"))
            for t in d.tables:
                t.hash_into(lambda a: _hash_array(h, a))
            for a in (d.central, d.kinematics):
                _hash_array(h, a)
        blocks = self.blocks()
        h.update(repr([(b.start, b.stop) for b in blocks]).encode())
        for b in blocks:
            _hash_array(h, self.covmat[b, b])
        h.update(len(self.positivity).to_bytes(8, "little"))
        for p in self.positivity:
            _hash_str(h, p.name)
            p.table.hash_into(lambda a: _hash_array(h, a))
        if self.truth is None:
            h.update(b"no truth")
        else:
            h.update(b"truth")
            _hash_array(h, self.truth)
        return h.hexdigest()
