# SPDX-License-Identifier: GPL-3.0-or-later
"""Read one dataset's experimental data from the ``nnpdf-data`` package, with an on-disk cache.

The files (``metadata.yaml``, ``data_*``, ``uncertainties_*``, ``kinematics_*``) are read by
validphys' ``load_commondata`` rules; parsed sets are cached as ``.npz`` under
``$XDG_CACHE_HOME/hyperscan/commondata/``, keyed by a hash of their inputs and
``READER_VERSION`` (docs/methods.md#reading-commondata).
"""

from __future__ import annotations

import hashlib
import math
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hyperscan._files import cache_root
from hyperscan.runcard import real_datasets as meta
from hyperscan.runcard.real_datasets import RealDataError

from ._cache import store_npz

#: Bump when the parsed arrays change for the same files: old cache entries are then unused.
READER_VERSION = 1

_TREATMENTS = ("ADD", "MULT")
_ARRAYS = ("central", "stat", "sys", "sys_names", "sys_treatment", "sys_type", "kinematics")
_SCALARS = ("kinematics_names", "process_type", "key")


@dataclass(frozen=True, eq=False)
class CommonData:
    """One dataset with one variant: the fields of the shipped ``hyperscan/data/dis`` arrays."""

    name: str
    variant: str | None
    process_type: str
    central: np.ndarray  # (n,)
    stat: np.ndarray  # (n,) absolute
    sys: np.ndarray  # (n, n_sys) absolute, also MULT columns
    sys_names: tuple[str, ...]
    sys_treatment: tuple[str, ...]  # ADD or MULT
    sys_type: tuple[str, ...]  # UNCORR, CORR, ... or a name shared across datasets
    kinematics: np.ndarray  # (n, 3)
    kinematics_names: tuple[str, ...]  # "" for a padding column

    @property
    def n_data(self) -> int:
        return int(self.central.shape[0])


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/hyperscan/commondata`` (``cache_root``)."""
    return cache_root() / "commondata"


def read_commondata(
    name: str,
    variant: str | None = None,
    *,
    commondata_dir: Path | str | None = None,
    cache_dir: Path | str | None = None,
) -> CommonData:
    """Central values, uncertainties and kinematics of ``name`` with ``variant`` from nnpdf-data.

    commondata_dir: nnpdf-data's ``commondata`` folder (None: the installed package).
    cache_dir: where parsed results are kept (None: ``default_cache_dir()``).
    Raises RealDataError (a ValueError) for a missing nnpdf-data, dataset or variant.
    """
    root = meta.nnpdf_commondata_dir() if commondata_dir is None else Path(commondata_dir)
    if root is None:
        raise meta.missing_nnpdf(name)
    setname, _ = meta.split_name(name)
    folder = root / setname
    if not (folder / "metadata.yaml").is_file():
        meta.commondata_files(name, variant, root)  # raises, listing close set names
    key = _cache_key(folder, name, variant)
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    path = cache / f"{name}-{key[:24]}.npz"
    hit = _load_cached(path, key, name, variant)
    if hit is not None:
        return hit
    files = meta.commondata_files(name, variant, root)
    arrays = _parse(files)
    arrays["key"] = np.asarray(key)
    store_npz(path, arrays)
    return _from_arrays(arrays, name, variant)


def _cache_key(folder: Path, name: str, variant: str | None) -> str:
    """sha256 of the reader version, the dataset, the variant and every file of the set."""
    digest = hashlib.sha256(f"{READER_VERSION}\0{name}\0{variant or ''}\0".encode())
    for f in sorted(folder.iterdir()):
        if f.is_file():
            digest.update(f.name.encode() + b"\0")
            digest.update(hashlib.sha256(f.read_bytes()).digest())
    return digest.hexdigest()


def _load_cached(path: Path, key: str, name: str, variant: str | None) -> CommonData | None:
    """The cached result, or None when it is missing, unreadable or not for this key."""
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in (*_ARRAYS, *_SCALARS)}
        if str(arrays["key"]) != key:
            return None
        return _from_arrays(arrays, name, variant)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None  # corrupt entry: parse again and overwrite it


def _from_arrays(a: dict[str, np.ndarray], name: str, variant: str | None) -> CommonData:
    n = a["central"].shape[0]
    n_sys = a["sys_names"].shape[0]
    if (
        a["central"].shape != (n,)
        or a["stat"].shape != (n,)
        or a["sys"].shape != (n, n_sys)
        or a["sys_treatment"].shape != (n_sys,)
        or a["sys_type"].shape != (n_sys,)
        or a["kinematics"].shape != (n, 3)
    ):
        raise ValueError("inconsistent shapes")
    return CommonData(
        name=name,
        variant=variant,
        process_type=str(a["process_type"]),
        central=np.asarray(a["central"], dtype=np.float64),
        stat=np.asarray(a["stat"], dtype=np.float64),
        sys=np.asarray(a["sys"], dtype=np.float64),
        sys_names=tuple(str(s) for s in a["sys_names"]),
        sys_treatment=tuple(str(s) for s in a["sys_treatment"]),
        sys_type=tuple(str(s) for s in a["sys_type"]),
        kinematics=np.asarray(a["kinematics"], dtype=np.float64),
        kinematics_names=tuple(str(s) for s in a["kinematics_names"]),
    )


# --------------------------------------------------------------------------------------------
# parsing


def _corrupt(path: Path, why: str) -> RealDataError:
    return RealDataError(f"corrupt commondata file {path}: {why}")


def _number(value: Any, path: Path, where: str) -> float:
    """A finite float; YAML 1.1 reads ``1e-5`` as a string, so strings are converted too."""
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise _corrupt(path, f"{where} is {value!r}, not a number") from None
    if not math.isfinite(out):
        raise _corrupt(path, f"{where} is {value!r}")
    return out


def _parse(files: meta.CommondataFiles) -> dict[str, np.ndarray]:
    n = files.ndata
    central = _central(files.folder / files.data_central, n)
    stat: np.ndarray | None = None
    columns: list[np.ndarray] = []
    names: list[str] = []
    treatments: list[str] = []
    types: list[str] = []
    for f in files.data_uncertainties:
        for col, treatment, kind, values in _uncertainties(files.folder / f, n):
            if col.lower() != "stat":
                columns.append(values)
                names.append(col)
                treatments.append(treatment)
                types.append(kind)
                continue
            if (treatment, kind) != ("ADD", "UNCORR") or stat is not None:
                why = "a second stat column" if stat is not None else f"stat is {treatment} {kind}"
                raise _corrupt(files.folder / f, f"{why} (validphys wants one, ADD UNCORR)")
            stat = values
    kin, kin_names = _kinematics(files.folder / files.kinematics, files.kinematic_coverage, n)
    return {
        "central": central,
        "stat": np.zeros(n) if stat is None else stat,
        "sys": np.stack(columns, axis=1) if columns else np.zeros((n, 0)),
        "sys_names": np.asarray(names, dtype=str),
        "sys_treatment": np.asarray(treatments, dtype=str),
        "sys_type": np.asarray(types, dtype=str),
        "kinematics": kin,
        "kinematics_names": np.asarray(kin_names, dtype=str),
        "process_type": np.asarray(files.process_type),
    }


def _load(path: Path) -> Any:
    try:
        return meta.read_yaml(path)
    except FileNotFoundError:
        raise _corrupt(path, "missing (named by metadata.yaml)") from None
    except Exception as err:  # yaml.YAMLError, UnicodeDecodeError, ...
        raise _corrupt(path, f"{type(err).__name__}: {err}") from err


def _central(path: Path, n: int) -> np.ndarray:
    doc = _load(path)
    values = doc.get("data_central") if isinstance(doc, dict) else None
    if not isinstance(values, list) or len(values) != n:
        raise _corrupt(path, f"data_central is not a list of ndata={n} values")
    return np.array([_number(v, path, f"data_central[{i}]") for i, v in enumerate(values)])


def _uncertainties(path: Path, n: int) -> list[tuple[str, str, str, np.ndarray]]:
    """(name, treatment, type, values) per column, in the order of ``definitions``."""
    doc = _load(path)
    if not isinstance(doc, dict):
        raise _corrupt(path, "not a mapping with definitions and bins")
    definitions, bins = doc.get("definitions"), doc.get("bins")
    if not isinstance(definitions, dict) or not isinstance(bins, list) or len(bins) != n:
        raise _corrupt(path, f"needs definitions and ndata={n} bins")
    out = []
    for col, spec in definitions.items():
        if not isinstance(spec, dict):
            raise _corrupt(path, f"definition of {col} is {spec!r}, not a mapping with treatment")
        treatment, kind = str(spec.get("treatment")), str(spec.get("type"))
        if treatment not in _TREATMENTS:
            raise _corrupt(path, f"{col} has treatment {treatment!r}, not ADD or MULT")
        try:
            values = [_number(b[col], path, f"bin {i} {col}") for i, b in enumerate(bins)]
        except (KeyError, TypeError):
            raise _corrupt(path, f"a bin lacks {col}") from None
        out.append((str(col), treatment, kind, np.array(values)))
    return out


def _kinematics(path: Path, coverage: tuple[str, ...], n: int) -> tuple[np.ndarray, list[str]]:
    doc = _load(path)
    bins = doc.get("bins") if isinstance(doc, dict) else None
    if not isinstance(bins, list) or len(bins) != n:
        raise _corrupt(path, f"needs ndata={n} bins")
    if not 1 <= len(coverage) <= 3:
        raise _corrupt(path, f"kinematic_coverage {list(coverage)} is not 1 to 3 variables")
    out = np.full((n, 3), np.nan)
    for i, b in enumerate(bins):
        for j, var in enumerate(coverage):
            d = b.get(var) if isinstance(b, dict) else None
            if not isinstance(d, dict):
                raise _corrupt(path, f"bin {i} lacks {var}")
            if d.get("mid") is None:
                lo, hi = (_number(d.get(k), path, f"bin {i} {var} {k}") for k in ("min", "max"))
                out[i, j] = 0.5 * (hi + lo)
            else:
                out[i, j] = _number(d["mid"], path, f"bin {i} {var} mid")
    return out, [*coverage, *[""] * (3 - len(coverage))]
