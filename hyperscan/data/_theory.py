# SPDX-License-Identifier: GPL-3.0-or-later
"""Datasets from an NNPDF theory folder: PineAPPL FK tables combined as commondata says.

A theory folder is laid out as NNPDF's share folder: ``theory_<ID>/fastkernel/<FK table
name>.pineappl.lz4``. Which tables a dataset needs, and how they combine, come from its
commondata metadata (nnpdf-data 4.1.5), read as validphys reads it: ``FK_tables`` (operands,
each the concatenation of its tables), ``operation``, ``conversion_factor``, ``normalization``
and ``shifts``. Each table is converted once into the arrays the model needs (acting on x·f in
FK_BASIS, on its non-zero flavours or flavour pairs only) and cached by the hash of its bytes
under ``$XDG_CACHE_HOME/hyperscan/fktables/``: a scan worker never parses a table twice.
"""

from __future__ import annotations

import hashlib
import math
import zipfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from hyperscan._files import cache_root
from hyperscan.runcard import real_datasets as meta
from hyperscan.runcard.real_datasets import RealDataError

from ._cache import store_npz
from ._commondata import read_commondata
from ._cuts import unsupported
from ._flavours import FK_BASIS
from ._problem import PositivitySet
from ._tables import FkTable, Operation, operation

#: Bump when the converted arrays change for the same file: old cache entries are then unused.
CONVERTER_VERSION = 1
#: PineAPPL's evolution-basis ids of FK_BASIS, in its order (validphys's FK flavours).
EVOLUTION_PIDS: tuple[int, ...] = (
    22,
    100,
    21,
    200,
    203,
    208,
    215,
    224,
    235,
    103,
    108,
    115,
    124,
    135,
)
_PROTON = 2212
_Q0_TOLERANCE = 1e-6


@dataclass(frozen=True)
class Theory:
    """A theory folder: its ID, its FK tables' folder, its card and the Q0 the card gives."""

    id: int
    fastkernel: Path
    q0: float
    pto: int  # perturbative order (0 LO, 1 NLO, 2 NNLO): some cut rules depend on it
    card: Path


def find_theory(path: Path | str) -> Theory:
    """The theory at ``path``: a ``theory_<ID>`` folder, or a share folder holding one.

    Its card is ``theory_<ID>/theory.yaml``, ``theory_<ID>.yaml`` or ``theory_cards/<ID>.yaml``
    beside the folder, or nnpdf-data's ``theory_cards/<ID>.yaml``.
    """
    root = Path(path).expanduser()
    if not root.is_dir():
        raise RealDataError(f"theory folder {root} does not exist")
    if not (root / "fastkernel").is_dir():
        found = sorted(p for p in root.glob("theory_*") if (p / "fastkernel").is_dir())
        if len(found) != 1:
            what = "none" if not found else ", ".join(p.name for p in found)
            raise RealDataError(
                f"theory folder {root} holds no fastkernel/ folder and not exactly one "
                f"theory_<ID>/fastkernel/ (found: {what})"
            )
        root = found[0]
    try:
        theory_id = int(root.name.removeprefix("theory_"))
    except ValueError:
        raise RealDataError(f"theory folder {root} is not named theory_<ID>") from None
    cards = [
        root / "theory.yaml",
        root.parent / f"theory_{theory_id}.yaml",
        root.parent / "theory_cards" / f"{theory_id}.yaml",
    ]
    commondata = meta.nnpdf_commondata_dir()
    if commondata is not None:
        cards.append(commondata.parent / "theory_cards" / f"{theory_id}.yaml")
    card = next((c for c in cards if c.is_file()), None)
    if card is None:
        raise RealDataError(
            f"no theory card for theory {theory_id}: looked for {', '.join(map(str, cards))}"
        )
    values = {}
    for key, kind in (("Q0", float), ("PTO", int)):
        try:
            values[key] = kind(meta.read_yaml(card)[key])
        except Exception as err:  # not YAML, not a mapping, no such key, not a number
            raise RealDataError(f"theory card {card}: no number at key {key} ({err})") from None
    return Theory(theory_id, root / "fastkernel", values["Q0"], values["PTO"], card)


def theory_dataset(theory: Theory, name: str, variant: str | None):  # -> RealDataset
    """Dataset ``name`` (``variant``) of nnpdf-data with its tables from ``theory``."""
    from ._real import RealDataset  # the shipped sets' type; _real imports this module

    files = meta.commondata_files(name, variant)
    why = unsupported(name, files.process_type)
    if why is not None:
        raise RealDataError(f"{name} (process type {files.process_type}) is not supported: {why}")
    data = read_commondata(name, variant)
    op, tables = _tables(theory, files, data.n_data)
    return RealDataset.of_commondata(data, tables, op.name)


def theory_positivity(theory: Theory, name: str) -> PositivitySet:
    """Positivity set ``name`` of nnpdf-data (``NNPDF_POS_...``), its table from ``theory``."""
    files = meta.commondata_files(name, None)
    if not files.process_type.startswith("POS_"):
        raise RealDataError(
            f"{name} is not a positivity set: its process type is {files.process_type}, not "
            "POS_DIS, POS_DY or POS_XPDF"
        )
    op, tables = _tables(theory, files, files.ndata)
    if op.name != "NULL":
        raise RealDataError(f"{name}: a positivity set of operation {op.name} is not supported")
    return PositivitySet(name, tables[0])


def _tables(
    theory: Theory, files: meta.CommondataFiles, n_data: int
) -> tuple[Operation, tuple[FkTable, ...]]:
    """The operation and the operands' tables of one commondata observable."""
    name = files.name
    try:
        op = operation(files.operation)
    except ValueError as err:
        raise RealDataError(f"{name}: {err}") from None
    if not files.fk_tables:
        raise RealDataError(f"{name}: its commondata metadata name no FK tables")
    normalization, shifts = dict(files.normalization), dict(files.shifts)
    tables = []
    for operand in files.fk_tables:
        parts = []
        for table in operand:
            path = theory.fastkernel / f"{table}.pineappl.lz4"
            if not path.is_file():
                raise RealDataError(
                    f"{name} needs the FK table {table}, which theory {theory.id} lacks: no {path}"
                )
            converted = converted_table(path, theory.q0)
            factor = files.conversion_factor * normalization.get(table, 1.0)
            parts.append((shifts.get(table, 0), converted, factor))
        tables.append(_concatenated(parts, name))
    if len(tables) != op.arity:
        raise RealDataError(
            f"{name}: operation {op.name} takes {op.arity} operands, its metadata give "
            f"{len(tables)}"
        )
    last = tables[-1]
    if op.name == "RATIO" and len(files.fk_tables[-1]) == 1 and not np.any(last.fk[1:]):
        # a total padded with empty rows: validphys keeps its first row, which divides every point
        tables[-1] = last.rows(np.array([0]))
    for table in tables:
        if table.n_data not in (n_data, 1):
            raise RealDataError(
                f"{name}: an FK table of theory {theory.id} has {table.n_data} points, the "
                f"data {n_data}"
            )
    return op, tuple(tables)


def _concatenated(parts: list[tuple[int, FkTable, float]], name: str) -> FkTable:
    """An operand's tables one after another, ``shift`` empty points before each (validphys's
    ``shifts``), on the union of their x grids."""
    kinds = {t.hadronic for _, t, _ in parts}
    if len(kinds) != 1:
        raise RealDataError(f"{name}: an operand mixes DIS-like and hadronic tables")
    if len(parts) == 1 and parts[0][0] == 0:
        _, table, factor = parts[0]
        return table if factor == 1.0 else FkTable(table.fk * factor, table.xgrid, table.pairs)
    xgrid = np.unique(np.concatenate([t.xgrid for _, t, _ in parts]))
    hadronic = kinds.pop()
    pairs = None
    if hadronic:
        pairs = np.array(sorted({tuple(p) for _, t, _ in parts for p in t.pairs.tolist()}))
    rows = []
    for shift, table, factor in parts:
        nodes = np.searchsorted(xgrid, table.xgrid)
        if shift:
            rows.append(np.zeros((shift, *_row_shape(xgrid, pairs))))
        block = np.zeros((table.n_data, *_row_shape(xgrid, pairs)))
        if hadronic:
            index = [pairs.tolist().index(p) for p in table.pairs.tolist()]
            block[np.ix_(range(table.n_data), index, nodes, nodes)] = table.fk * factor
        else:
            block[:, :, nodes] = table.fk * factor
        rows.append(block)
    return FkTable(np.concatenate(rows), xgrid, pairs)


def _row_shape(xgrid: np.ndarray, pairs: np.ndarray | None) -> tuple[int, ...]:
    if pairs is None:
        return (len(FK_BASIS), xgrid.size)
    return (len(pairs), xgrid.size, xgrid.size)


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/hyperscan/fktables``."""
    return cache_root() / "fktables"


def converted_table(path: Path, q0: float, cache_dir: Path | None = None) -> FkTable:
    """The PineAPPL FK table at ``path`` as an FkTable on x·f, from the cache when it holds it.

    Refused with a RealDataError naming the file: a damaged file or one that is not PineAPPL,
    a Q0 other than ``q0``, flavours outside the evolution basis, convolutions other than of
    unpolarised protons.
    """
    blob = path.read_bytes()
    key = hashlib.sha256(f"{CONVERTER_VERSION}\0".encode() + blob).hexdigest()
    return _cached_conversion(path, key, q0, cache_dir or default_cache_dir())


@cache
def _cached_conversion(path: Path, key: str, q0: float, cache_dir: Path) -> FkTable:
    cached = cache_dir / f"{key[:32]}.npz"
    arrays = _load(cached)
    if arrays is None:
        arrays = _convert(path)
        store_npz(cached, arrays)
    table_q0 = float(arrays["q0"])
    if not math.isclose(table_q0, q0, rel_tol=_Q0_TOLERANCE):
        raise RealDataError(
            f"FK table {path}: its Q0 is {table_q0:.6g} GeV, the theory card's {q0:.6g} GeV"
        )
    pairs = arrays["pairs"] if arrays["pairs"].size else None
    return FkTable(arrays["fk"], arrays["xgrid"], pairs)


def _load(path: Path) -> dict[str, np.ndarray] | None:
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in ("fk", "xgrid", "pairs", "q0")}
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None  # a damaged entry: convert again and overwrite it


def _read_pineappl(path: Path):  # -> pineappl.fk_table.FkTable
    try:
        from pineappl.fk_table import FkTable as PineapplTable
    except ImportError:
        raise RealDataError(
            f"reading {path} needs pineappl, which is not installed: {meta.INSTALL_HINT}"
        ) from None
    try:
        return PineapplTable.read(str(path))
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as err:  # PineAPPL's Rust panics are BaseExceptions
        why = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise RealDataError(f"FK table {path} is damaged or not a PineAPPL file: {why}") from None


def _convert(path: Path) -> dict[str, np.ndarray]:
    """PineAPPL's table (acting on f, per bin width) → FK_BASIS arrays acting on x·f."""
    table = _read_pineappl(path)
    convolutions = table.convolutions
    if len(convolutions) not in (1, 2) or any(
        c.pid != _PROTON or c.convolution_types.polarized or c.convolution_types.time_like
        for c in convolutions
    ):
        raise RealDataError(
            f"FK table {path}: only unpolarised proton PDFs are supported, it convolves "
            f"{[(c.pid, c.convolution_types.polarized) for c in convolutions]}"
        )
    hadronic = len(convolutions) == 2
    channels = table.channels()
    unknown = sorted({pid for c in channels for pid in c if pid not in EVOLUTION_PIDS})
    if unknown:
        raise RealDataError(
            f"FK table {path}: its flavours {unknown} are not the evolution basis of the "
            f"theory (pids {EVOLUTION_PIDS}); PineAPPL basis {table.pid_basis}"
        )
    xgrid = np.asarray(table.x_grid(), dtype=np.float64)
    raw = np.asarray(table.table(), dtype=np.float64)
    widths = np.asarray(table.bin_normalizations(), dtype=np.float64)
    raw = raw / widths.reshape((-1,) + (1,) * (raw.ndim - 1))
    index = [[EVOLUTION_PIDS.index(p) for p in c] for c in channels]
    if hadronic:
        raw = raw / (xgrid[:, None] * xgrid[None, :])
        pairs = sorted({tuple(i) for i in index})
        fk = np.zeros((raw.shape[0], len(pairs), xgrid.size, xgrid.size))
        for c, i in enumerate(index):
            fk[:, pairs.index(tuple(i))] += raw[:, c]
        used = np.any(fk != 0, axis=(0, 2, 3))
        fk, pairs_array = fk[:, used], np.array(pairs, dtype=np.int64)[used]
    else:
        raw = raw / xgrid
        fk = np.zeros((raw.shape[0], len(FK_BASIS), xgrid.size))
        for c, (i,) in enumerate(index):
            fk[:, i] += raw[:, c]
        pairs_array = np.zeros((0, 2), dtype=np.int64)
    if not np.all(np.isfinite(fk)):
        raise RealDataError(f"FK table {path}: non-finite entries")
    return {
        "fk": fk,
        "xgrid": xgrid,
        "pairs": pairs_array,
        "q0": np.asarray(math.sqrt(table.fac0())),
    }
