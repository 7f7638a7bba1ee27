# SPDX-License-Identifier: GPL-3.0-or-later
"""Which real datasets (and variants) hyperscan can load, in plain Python.

It lives in the runcard layer, the lowest, so that the schema can check dataset names and
variants without importing numpy; the data layer, which loads the datasets it names, uses it
as a public module of this package.

Each dataset ships with one commondata variant (``REAL_DATASETS``: the NLO DIS sets and the LO
hadronic ones). With the optional ``nnpdf-data`` package installed (``INSTALL_HINT``) any other
variant of a shipped dataset is accepted too, as long as it keeps the FK tables: the FK table
depends on the observable, a variant only swaps central values and uncertainties. This module
finds a variant's files from the set's ``metadata.yaml`` (nnpdf-data's layout, variants applied
as validphys does); ``hyperscan.data._commondata`` reads them.
"""

from __future__ import annotations

import difflib
import importlib.metadata
import importlib.util
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

#: Shipped NLO DIS datasets -> the variant shipped (None: the commondata default). One variant
#: each; ``data.real: {}`` fits these.
DIS_DATASETS: dict[str, str | None] = {
    "BCDMS_NC_NOTFIXED_P_EM-F2-HEPDATA": "rzero",
    "HERA_CC_318GEV_EM-SIGMARED": None,
    "HERA_CC_318GEV_EP-SIGMARED": None,
    "HERA_NC_225GEV_EP-SIGMARED": None,
    "HERA_NC_251GEV_EP-SIGMARED": None,
    "HERA_NC_318GEV_EM-SIGMARED": None,
    "NMC_NC_NOTFIXED_P_EM-F2-HEPDATA": None,
}
#: Shipped hadronic datasets, built here with LO partonic cross sections (docs/hadronic.md), in
#: the variants NNPDF4.0 fits.
HADRONIC_DATASETS: dict[str, str | None] = {
    "DYE866_Z0_800GEV_DW_RATIO_PDXSECRATIO": "legacy",
    "DYE866_Z0_800GEV_PXSEC": "legacy",
    "CDF_Z0_1P96TEV_ZRAP": "legacy",
    "D0_Z0_1P96TEV_ZRAP": "legacy",
    "D0_WPWM_1P96TEV_ASY": "legacy",
}
#: Every shipped dataset -> its variant.
REAL_DATASETS: dict[str, str | None] = DIS_DATASETS | HADRONIC_DATASETS
#: Named selections of shipped datasets that ``data.real.datasets`` accepts instead of a list.
PRESETS: dict[str, tuple[str, ...]] = {
    "dis": tuple(DIS_DATASETS),
    "dis+hadronic": tuple(REAL_DATASETS),
}

#: How to get the other variants: the package of hyperscan's ``nnpdf`` extra, by its own name.
#: Not ``pip install 'hyperscan[nnpdf]'``: on PyPI "hyperscan" is another project (bindings of
#: Intel's regex library), which that command installs or, with -U, puts in place of this one.
INSTALL_HINT = "pip install nnpdf-data==4.1.5 pineappl==1.5.0"

#: What a variant may replace (validphys' ``Variant``; ``experiment`` only relabels).
_VARIANT_KEYS = ("data_central", "data_uncertainties", "theory")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+-]*(_[A-Za-z0-9.+-]+)+")


class RealDataError(ValueError):
    """A real dataset, variant or data file that cannot be used; the message says which and why."""


def variant_text(variant: str | None) -> str:
    return "the default variant (none)" if variant is None else f"variant {variant!r}"


def nnpdf_commondata_dir() -> Path | None:
    """``commondata/`` of the installed nnpdf-data, found without importing it (it pulls pandas)."""
    spec = importlib.util.find_spec("nnpdf_data")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "commondata"
    return path if path.is_dir() else None


def nnpdf_data_version() -> str:
    try:
        return importlib.metadata.version("nnpdf-data")
    except importlib.metadata.PackageNotFoundError:
        return "?"


def read_yaml(path: Path) -> Any:
    """Parse a YAML file with libyaml when available (big uncertainty files take seconds)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(path.read_text(encoding="utf-8"), Loader=loader)


@dataclass(frozen=True)
class CommondataFiles:
    """One dataset's commondata files once its variant is applied, and what validphys keeps."""

    name: str
    variant: str | None
    folder: Path
    ndata: int
    process_type: str
    data_central: str
    data_uncertainties: tuple[str, ...]
    kinematics: str
    kinematic_coverage: tuple[str, ...]
    fk_tables: tuple[tuple[str, ...], ...]
    variants: tuple[str, ...]
    operation: str = "NULL"
    conversion_factor: float = 1.0
    normalization: tuple[tuple[str, float], ...] = ()  # per FK table name
    shifts: tuple[tuple[str, int], ...] = ()  # per FK table name: points skipped before it


def missing_nnpdf(name: str) -> RealDataError:
    return RealDataError(f"{name}: reading commondata needs nnpdf-data, which is not installed: "
                         f"{INSTALL_HINT}")  # fmt: skip


def split_name(name: str) -> tuple[str, str]:
    """``<setname>_<observable>`` -> (setname, observable), as nnpdf-data names datasets."""
    if not _NAME.fullmatch(name):
        raise RealDataError(f"{name!r} is not a commondata dataset name (<setname>_<observable>)")
    setname, observable = name.rsplit("_", 1)
    return setname, observable


@cache
def _set_metadata(path: Path, stamp: tuple[int, int]) -> dict[str, Any]:
    del stamp  # part of the cache key only: an edited metadata.yaml is read again
    try:
        meta = read_yaml(path)
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise _corrupt_metadata(path, f"{type(err).__name__}: {err}") from err
    observables = meta.get("implemented_observables") if isinstance(meta, dict) else None
    if not isinstance(observables, list) or not all(isinstance(o, dict) for o in observables):
        raise _corrupt_metadata(path, "no implemented_observables")
    return meta


def _corrupt_metadata(path: Path, why: str) -> RealDataError:
    return RealDataError(f"corrupt commondata metadata {path}: {why}")


def commondata_files(name: str, variant: str | None, root: Path | None = None) -> CommondataFiles:
    """Files of ``name`` with ``variant`` in nnpdf-data (``root``: its commondata folder).

    Unknown datasets, observables and variants, and a default without uncertainties (BCDMS),
    raise RealDataError naming what exists; a metadata.yaml that is not YAML or lacks what is
    read from it, one naming the file and the key.
    """
    root = nnpdf_commondata_dir() if root is None else root
    if root is None:
        raise missing_nnpdf(name)
    setname, observable = split_name(name)
    path = root / setname / "metadata.yaml"
    if not path.is_file():
        sets = sorted(p.name for p in root.iterdir() if (p / "metadata.yaml").is_file())
        close = difflib.get_close_matches(setname, sets, n=5, cutoff=0.6)
        raise RealDataError(
            f"unknown commondata dataset {name!r}: nnpdf-data {nnpdf_data_version()} has no set "
            f"{setname!r} in {root}" + (f"; close matches: {', '.join(close)}" if close else "")
        )
    stat = path.stat()
    meta = _set_metadata(path, (stat.st_mtime_ns, stat.st_size))
    observables = {str(o.get("observable_name")): o for o in meta["implemented_observables"]}
    obs = observables.get(observable)
    if obs is None:
        names = ", ".join(f"{setname}_{o}" for o in observables)
        raise RealDataError(f"unknown commondata dataset {name!r}; set {setname} has: {names}")
    variants: dict[str, Any] = obs.get("variants") or {}
    chosen = dict(obs)
    if variant is not None:
        if variant not in variants:
            raise RealDataError(
                f"{name}: {variant_text(variant)} does not exist in nnpdf-data "
                f"{nnpdf_data_version()}; available variants: {', '.join(variants) or 'none'}"
            )
        swaps = variants[variant] or {}
        chosen.update({k: swaps[k] for k in _VARIANT_KEYS if swaps.get(k) is not None})
    special = setname.startswith("NNPDF_")  # positivity and integrability: no data (validphys)
    if not special and (not chosen.get("data_uncertainties") or not chosen.get("data_central")):
        raise RealDataError(
            f"{name}: {variant_text(variant)} has no central values or uncertainties in "
            f"nnpdf-data; choose one of the variants: {', '.join(variants) or 'none'}"
        )
    ndata, kinematics = chosen.get("ndata"), chosen.get("kinematics")
    if isinstance(ndata, bool) or not isinstance(ndata, int) or ndata < 0:
        why = "lacks ndata" if ndata is None else f"has ndata {ndata!r}, not a number of points"
        raise _corrupt_metadata(path, f"{name} {why}")
    if not isinstance(kinematics, dict) or not isinstance(kinematics.get("file"), str):
        raise _corrupt_metadata(path, f"{name} lacks kinematics: file")
    theory = chosen.get("theory") or {}
    return CommondataFiles(
        name=name,
        variant=variant,
        folder=path.parent,
        ndata=ndata,
        process_type=str(chosen.get("process_type")),
        data_central=str(chosen.get("data_central") or ""),
        data_uncertainties=tuple(str(f) for f in chosen.get("data_uncertainties") or ()),
        kinematics=kinematics["file"],
        kinematic_coverage=tuple(str(k) for k in chosen.get("kinematic_coverage") or ()),
        fk_tables=tuple(tuple(str(t) for t in op) for op in theory.get("FK_tables") or ()),
        variants=tuple(variants),
        operation=str(theory.get("operation") or "NULL").upper(),
        conversion_factor=float(theory.get("conversion_factor", 1.0)),
        normalization=tuple(
            (str(k), float(v)) for k, v in (theory.get("normalization") or {}).items()
        ),
        shifts=tuple((str(k), int(v)) for k, v in (theory.get("shifts") or {}).items()),
    )


def check_real_dataset(name: str, variant: str | None) -> None:
    """Raise RealDataError with a clear message unless hyperscan can load ``name``/``variant``.

    The shipped variant always loads; another one needs nnpdf-data, must exist there and must
    keep the shipped FK tables.
    """
    if name not in REAL_DATASETS:
        raise RealDataError(
            f"unknown real dataset {name!r}; available: {', '.join(sorted(REAL_DATASETS))}"
        )
    shipped = REAL_DATASETS[name]
    if variant == shipped:
        return
    hint = "" if shipped is None else f" (write variant: {shipped})"
    root = nnpdf_commondata_dir()
    if root is None:
        raise RealDataError(
            f"{name}: {variant_text(variant)} is not shipped; only {variant_text(shipped)} "
            f"is available{hint}; other variants need nnpdf-data: {INSTALL_HINT}"
        )
    try:
        wanted = commondata_files(name, variant, root)
    except RealDataError as err:
        raise RealDataError(f"{err}{hint}") from None
    tables = commondata_files(name, shipped, root).fk_tables
    if wanted.fk_tables != tables:
        raise RealDataError(
            f"{name}: {variant_text(variant)} needs the FK tables {wanted.fk_tables}, but "
            f"hyperscan ships only {tables} ({variant_text(shipped)})"
        )
