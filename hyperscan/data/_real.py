# SPDX-License-Identifier: GPL-3.0-or-later
"""Real data: FK tables and NNPDF 4.1.5 commondata shipped in ``hyperscan/data/dis`` (NLO DIS)
and ``hyperscan/data/hadronic`` (LO Drell–Yan, W and Z: docs/hadronic.md).

Each DIS ``<DATASET>.npz`` holds the FK table (n3fit convention, acting on x*f at Q0 = 1.65 GeV,
only its non-zero flavour rows), the x grid, the kinematics (x, Q2, y) and the experimental
data of one variant: central values, statistical errors and the systematics with their
treatment (ADD/MULT) and type (UNCORR, CORR, or a *name* shared across datasets). The FK tables
come from the real-data kit, the data from nnpdf-data (``tools/ship_real_data.py``); see
``dis/NOTICE.md`` for the licence (GPL-3) and attribution. A hadronic file holds the same data
arrays, the names of its kinematics, and its operation with one table per operand (``fk_k``
on its non-zero flavour pairs ``pairs_k`` and x grid ``xgrid_k``), as ``_theory.py`` converts
them from PineAPPL (``tools/ship_hadronic.py``). Another variant of a shipped dataset
(same FK table, other data or uncertainties) is read from an installed nnpdf-data
(``_commondata.py``, cached); without it only the shipped variant loads.

The covariance follows validphys (``covmat_from_systematics``), optionally with t0, summed in
a fixed order so that every machine builds the same bytes; the construction:
docs/methods.md#the-covariance-of-real-data.
"""

from __future__ import annotations

import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from hyperscan.runcard import DEFAULT_Q2MIN, DEFAULT_W2MIN
from hyperscan.runcard.real_datasets import (
    DIS_DATASETS,
    HADRONIC_DATASETS,
    REAL_DATASETS,
    RealDataError,
    check_real_dataset,
    variant_text,
)

from ._closure import _outer_sum, _toy_fk_basis, with_closure_data
from ._commondata import CommonData, read_commondata
from ._cuts import default_cut_mask
from ._flavours import FK_BASIS
from ._problem import UNCORRELATED_FLOOR, Dataset, Problem
from ._tables import FkTable, Operation, combine, operation
from ._theory import find_theory, theory_dataset, theory_positivity

#: Folder of the shipped DIS tables.
REAL_DATA_DIR = Path(__file__).resolve().parent / "dis"
#: Folder of the shipped hadronic tables (LO partonic cross sections, docs/hadronic.md).
HADRONIC_DATA_DIR = Path(__file__).resolve().parent / "hadronic"
#: The theory of the shipped tables (NOTICE.md, SHIPPED_THEORY_ID): x·f at Q0 = 1.65 GeV.
SHIPPED_Q0 = 1.65
SHIPPED_THEORY_CARD = REAL_DATA_DIR / "theory_99000001.yaml"
#: The card's perturbative order (NLO): the cut rules of NNLO and beyond do not apply.
SHIPPED_PTO = 1

_DIAGONAL_TYPES = ("UNCORR", "THEORYUNCORR")
_INTRA_TYPES = ("CORR", "THEORYCORR")
_SKIP_TYPES = ("SKIP",)
_REQUIRED_DATA = (
    "kinematics",
    "central",
    "stat",
    "sys",
    "sys_treatment",
    "sys_type",
    "process_type",
    "variant",
)
_DIS = ("fk", "fk_flavours", "xgrid")
_HADRONIC = ("operation", "kinematics_names")  # and fk_k, pairs_k, xgrid_k per operand k


@dataclass(frozen=True, eq=False)
class RealDataset:
    """One shipped dataset, all points (before cuts), with its uncertainty breakdown."""

    name: str
    variant: str | None
    process: str
    tables: tuple[FkTable, ...]
    operation: str
    kinematics: np.ndarray  # (n, 3): for DIS x, Q2, y
    central: np.ndarray
    stat: np.ndarray
    sys: np.ndarray  # (n, n_sys) absolute, also MULT columns
    sys_treatment: tuple[str, ...]
    sys_type: tuple[str, ...]
    kinematics_names: tuple[str, ...] = ("x", "Q2", "y")

    @classmethod
    def of_commondata(
        cls, data: CommonData, tables: tuple[FkTable, ...], operation: str
    ) -> RealDataset:
        """The dataset of ``data``'s points, predicted by ``tables`` combined by ``operation``."""
        return cls(
            name=data.name,
            variant=data.variant,
            process=data.process_type,
            tables=tables,
            operation=operation,
            kinematics=data.kinematics,
            central=data.central,
            stat=data.stat,
            sys=data.sys,
            sys_treatment=data.sys_treatment,
            sys_type=data.sys_type,
            kinematics_names=data.kinematics_names,
        )

    @property
    def n_data(self) -> int:
        return int(self.central.shape[0])

    def cut_mask(
        self, q2min: float = DEFAULT_Q2MIN, w2min: float = DEFAULT_W2MIN, pto: int = 2
    ) -> np.ndarray:
        """Points kept by NNPDF4.0's default cuts: for DIS Q2 > q2min and W2 = Q2 (1 - x) / x >
        w2min; for hadronic data the rules of the dataset (``_cuts.py``) at order ``pto``."""
        return default_cut_mask(
            self.name,
            self.process,
            self.kinematics,
            self.kinematics_names,
            self.central,
            q2min=q2min,
            w2min=w2min,
            pto=pto,
        )

    def toy_prediction(self) -> np.ndarray:
        """FK x Les Houches toy PDF (normalised, as the closure truth), all points."""
        parts = [t.fixed_order_predictions(_toy_fk_basis(t.xgrid)) for t in self.tables]
        return combine(self.operation, parts)

    def dataset(self, keep: np.ndarray) -> Dataset:
        """The fitted dataset of the points ``keep``."""
        everything = Dataset(
            self.name, self.process, self.tables, self.central, self.kinematics, self.operation
        )
        return everything.rows(keep)


def _corrupt(path: Path, why: str) -> RealDataError:
    return RealDataError(f"corrupt FK file {path}: {why}")


def shipped_folder(name: str) -> Path:
    """The folder of a shipped dataset's arrays: ``dis/`` or ``hadronic/``."""
    return HADRONIC_DATA_DIR if name in HADRONIC_DATASETS else REAL_DATA_DIR


def load_real_dataset(
    name: str, variant: str | None = None, data_dir: Path | str | None = None
) -> RealDataset:
    """Read one shipped dataset; unknown names, variants, missing or corrupt files raise.

    A variant other than the shipped one takes its data from nnpdf-data (needs the extra).
    """
    check_real_dataset(name, variant)
    folder = shipped_folder(name) if data_dir is None else Path(data_dir)
    path = folder / f"{name}.npz"
    if not path.is_file():
        raise RealDataError(
            f"FK file of {name} is missing: {path} (reinstall hyperscan, or rebuild the folder "
            "with tools/ship_real_data.py or tools/ship_hadronic.py)"
        )
    shipped = _read(path, name, REAL_DATASETS[name])
    if variant == shipped.variant:
        return shipped
    return _with_commondata(shipped, read_commondata(name, variant))


def _with_commondata(shipped: RealDataset, data: CommonData) -> RealDataset:
    """The shipped FK table with another variant's data: same points, same kinematics."""
    if not np.array_equal(data.kinematics, shipped.kinematics, equal_nan=True):
        raise RealDataError(
            f"{shipped.name}: {variant_text(data.variant)} has other points or kinematics than "
            f"the shipped FK table ({data.n_data} vs {shipped.n_data} points)"
        )
    return RealDataset.of_commondata(data, shipped.tables, shipped.operation)


def _read(path: Path, name: str, variant: str | None) -> RealDataset:
    try:
        with open(path, "rb") as file:  # np.load would take any other file for a pickle
            if file.read(4) != b"PK\x03\x04":
                raise _corrupt(path, "it is not an .npz archive")
        with np.load(path, allow_pickle=False) as z:
            hadronic = "operation" in z.files
            required = _REQUIRED_DATA + (_HADRONIC if hadronic else _DIS)
            missing = [k for k in required if k not in z.files]
            if missing:
                raise _corrupt(path, f"missing arrays {missing}")
            a = {k: z[k] for k in required}
            if hadronic:
                op = _shipped_operation(path, a["operation"])
                tables = tuple(_hadronic_table(path, z, k) for k in range(op.arity))
            else:
                op, tables = operation("NULL"), (_dis_table(path, a),)
    except RealDataError:
        raise
    except PermissionError as err:
        raise RealDataError(f"cannot read the FK file {path}: {err.strerror}") from err
    except (OSError, ValueError, zipfile.BadZipFile, EOFError, KeyError) as err:
        raise _corrupt(path, f"{type(err).__name__}: {err}") from err
    stored = str(a["variant"]) or None
    if stored != variant:
        raise _corrupt(path, f"it holds {variant_text(stored)}, expected {variant_text(variant)}")
    n = max(t.n_data for t in tables)  # a one-point denominator divides every point
    for key in ("central", "stat"):
        if a[key].shape != (n,):
            raise _corrupt(path, f"{key} has shape {a[key].shape}, expected ({n},)")
    if any(t.n_data not in (n, 1) for t in tables):
        raise _corrupt(path, f"its tables have {[t.n_data for t in tables]} points")
    n_sys = a["sys_type"].shape[0]
    if a["sys"].shape != (n, n_sys) or a["sys_treatment"].shape != (n_sys,):
        raise _corrupt(path, "systematics arrays have inconsistent shapes")
    if a["kinematics"].shape != (n, 3):
        raise _corrupt(path, f"kinematics has shape {a['kinematics'].shape}, expected ({n}, 3)")
    for key in ("central", "stat", "sys"):
        if not np.all(np.isfinite(a[key])):
            raise _corrupt(path, f"{key} has non-finite entries")
    names = ("x", "Q2", "y")
    if hadronic:
        names = tuple(str(k) for k in a["kinematics_names"])
        if len(names) != 3:
            raise _corrupt(path, f"kinematics_names {names} do not name 3 columns")
    else:
        x, q2 = a["kinematics"][:, 0], a["kinematics"][:, 1]  # the cuts' inputs (y may be NaN)
        if not np.all((x > 0) & (x < 1) & (q2 > 0)):
            raise _corrupt(path, "kinematics outside 0 < x < 1, Q2 > 0")
    return RealDataset(
        name=name,
        variant=variant,
        process=str(a["process_type"]),
        tables=tables,
        operation=op.name,
        kinematics=np.asarray(a["kinematics"], dtype=np.float64),
        central=np.asarray(a["central"], dtype=np.float64),
        stat=np.asarray(a["stat"], dtype=np.float64),
        sys=np.asarray(a["sys"], dtype=np.float64),
        sys_treatment=tuple(str(t) for t in a["sys_treatment"]),
        sys_type=tuple(str(t) for t in a["sys_type"]),
        kinematics_names=names,
    )


def _dis_table(path: Path, a: Mapping[str, np.ndarray]) -> FkTable:
    """A DIS file's table: its non-zero flavour rows put back into FK_BASIS."""
    rows, fk = a["fk_flavours"], a["fk"]
    n_x = a["xgrid"].shape[0]
    if fk.ndim != 3 or fk.shape[1:] != (rows.shape[0], n_x) or np.any(rows < 0):
        raise _corrupt(path, f"fk of shape {fk.shape} does not match its flavours/x grid")
    if np.any(rows >= len(FK_BASIS)):
        raise _corrupt(path, f"fk_flavours {rows.tolist()} are not FK_BASIS rows")
    full = np.zeros((fk.shape[0], len(FK_BASIS), n_x))
    full[:, rows] = fk
    return _table(path, full, a["xgrid"])


def _hadronic_table(path: Path, z: Mapping[str, np.ndarray], k: int) -> FkTable:
    """Operand ``k`` of a hadronic file: ``fk_k`` (n, P, n_x, n_x) on ``xgrid_k``, flavour pairs
    ``pairs_k``, as the converted theory-folder table (``_theory.py``)."""
    keys = [f"{what}_{k}" for what in ("fk", "pairs", "xgrid")]
    missing = [key for key in keys if key not in z]
    if missing:
        raise _corrupt(path, f"missing arrays {missing}")
    fk, pairs, xgrid = (z[key] for key in keys)
    return _table(path, fk, xgrid, pairs)


def _table(
    path: Path, fk: np.ndarray, xgrid: np.ndarray, pairs: np.ndarray | None = None
) -> FkTable:
    try:
        return FkTable(fk, np.asarray(xgrid, dtype=np.float64), pairs)
    except ValueError as err:
        raise _corrupt(path, str(err)) from None


def _shipped_operation(path: Path, value: np.ndarray) -> Operation:
    try:
        return operation(str(value))
    except ValueError as err:
        raise _corrupt(path, str(err)) from None


def _systematics(data: RealDataset, mask: np.ndarray, t0: np.ndarray | None) -> np.ndarray:
    """(n_cut, n_sys) absolute systematics after cuts; MULT ones rescaled to t0 if given."""
    sys = data.sys[mask]
    if t0 is None:
        return sys
    mult = np.array([t == "MULT" for t in data.sys_treatment])
    out = np.array(sys)
    out[:, mult] = sys[:, mult] / data.central[mask][:, None] * t0[:, None]
    return out


def experimental_covariance(
    data: Sequence[RealDataset],
    masks: Sequence[np.ndarray],
    t0: Sequence[np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Joint covariance (N, N) and its correlated systematics (N, K), from one loop.

    Datasets are concatenated in order, after their masks. t0: per dataset, predictions on the
    kept points; None gives the experimental covariance. Named systematic types are correlated
    across datasets (validphys' special systematics). The systematics are each dataset's CORR
    columns on its rows, then one column per named type over all datasets, so that
    covmat = diag(stat^2 + UNCORR^2) + S S^T; built together so the two cannot disagree.
    """
    sizes = [int(m.sum()) for m in masks]
    offsets = np.cumsum([0, *sizes])
    n = int(offsets[-1])
    covmat = np.zeros((n, n))
    named: dict[str, np.ndarray] = {}
    intra: list[np.ndarray] = []
    for i, (d, m) in enumerate(zip(data, masks, strict=True)):
        sys = _systematics(d, m, None if t0 is None else np.asarray(t0[i]))
        types = d.sys_type
        diag_cols = [j for j, t in enumerate(types) if t in _DIAGONAL_TYPES]
        intra_cols = [j for j, t in enumerate(types) if t in _INTRA_TYPES]
        stat = d.stat[m]
        diagonal = stat * stat
        for j in diag_cols:
            diagonal = diagonal + sys[:, j] * sys[:, j]
        block = slice(offsets[i], offsets[i + 1])
        covmat[block, block] = np.diag(diagonal) + _outer_sum(sys[:, intra_cols])
        for j in intra_cols:
            column = np.zeros(n)
            column[block] = sys[:, j]
            intra.append(column)
        for j, t in enumerate(types):
            if t in _DIAGONAL_TYPES or t in _INTRA_TYPES or t in _SKIP_TYPES:
                continue
            column = named.setdefault(t, np.zeros(n))
            column[block] = column[block] + sys[:, j]
    all_columns = intra + [named[k] for k in sorted(named)]
    columns = np.stack(all_columns, axis=1) if all_columns else np.zeros((n, 0))
    if named:
        shared = columns[:, len(intra) :]
        rows = np.flatnonzero(np.any(shared != 0.0, axis=1))
        if rows.size:
            covmat[np.ix_(rows, rows)] = covmat[np.ix_(rows, rows)] + _outer_sum(shared[rows])
    return covmat, columns


@cache
def _cached(name: str, variant: str | None) -> RealDataset:
    return load_real_dataset(name, variant)


def real_problem(
    datasets: Sequence[str | Mapping[str, str | None]] | None = None,
    *,
    q2min: float = DEFAULT_Q2MIN,
    w2min: float = DEFAULT_W2MIN,
    t0: bool = True,
    closure_level: int | None = None,
    closure_seed: int = 0,
    data_dir: Path | str | None = None,
    theory: Path | str | None = None,
    positivity: Sequence[str] = (),
) -> Problem:
    """Problem of real datasets, cuts applied: shipped sets, or with ``theory`` (a theory
    folder, ``_theory.py``) any dataset of nnpdf-data whose tables it holds.

    datasets: names, or ``{"dataset": NAME, "variant": VARIANT}`` mappings (None: the shipped
    DIS sets with their variants). t0: MULT systematics rescaled by the toy-PDF predictions
    (t0 covariance); False: the experimental covariance. closure_level None fits the measured
    data (``truth`` None); 0 or 1 replaces them by toy-PDF predictions (+ one fluctuation drawn
    from the covariance with ``np.random.default_rng(closure_seed)`` at level 1), truth = toy.
    positivity: positivity sets of nnpdf-data (``NNPDF_POS_...``) whose tables ``theory``
    holds; none by default (as in the n3fit peer runcards).
    """
    if datasets is None:
        datasets = [{"dataset": k, "variant": v} for k, v in DIS_DATASETS.items()]
    specs: list[tuple[str, str | None]] = []
    for d in datasets:
        if isinstance(d, str):
            specs.append((d, REAL_DATASETS.get(d)))
        else:
            specs.append((str(d["dataset"]), d.get("variant")))
    if not specs:
        raise ValueError("real_problem needs at least one dataset")
    if closure_level not in (None, 0, 1):
        raise ValueError(f"closure level must be 0 or 1, got {closure_level!r}")
    pto, positivity_sets = SHIPPED_PTO, ()
    if positivity and theory is None:
        raise ValueError("positivity sets are read from a theory folder: give one")
    if theory is not None:
        folder = find_theory(theory)
        pto = folder.pto
        loaded = [theory_dataset(folder, n, v) for n, v in specs]
        positivity_sets = tuple(theory_positivity(folder, n) for n in positivity)
    elif data_dir is None:
        loaded = [_cached(n, v) for n, v in specs]
    else:
        loaded = [load_real_dataset(n, v, data_dir) for n, v in specs]
    masks = [d.cut_mask(q2min, w2min, pto) for d in loaded]
    for d, m in zip(loaded, masks, strict=True):
        if not m.any():
            raise ValueError(f"{d.name}: no point passes the cuts q2min={q2min}, w2min={w2min}")
    toys = [d.toy_prediction()[m] for d, m in zip(loaded, masks, strict=True)]
    covmat, systematics = experimental_covariance(loaded, masks, toys if t0 else None)
    covmat.setflags(write=False)
    out = [d.dataset(m) for d, m in zip(loaded, masks, strict=True)]
    if not np.all(
        np.diag(covmat) - (systematics * systematics).sum(axis=1)
        > UNCORRELATED_FLOOR * np.diag(covmat)
    ):
        # every uncertainty of some point is correlated (systematics made from a covariance
        # matrix, as E906's): no diagonal to split off, so the χ² factorises covmat densely
        systematics = None
    problem = Problem(tuple(out), covmat, positivity_sets, systematics=systematics)
    if closure_level is None:
        return problem
    # closure test on the real tables: data = toy predictions (+ one fluctuation)
    truth = np.concatenate([toys[[d.name for d in loaded].index(n)] for n in problem.names])
    return with_closure_data(problem, truth, closure_level, closure_seed)
