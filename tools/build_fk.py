# SPDX-License-Identifier: GPL-3.0-or-later
"""Regenerate one shipped NLO DIS FK table with yadism -> eko -> pineko (the `theory` extra).

    pip install -e '.[theory]'        # best in a separate venv: it pulls numba, eko, yadism, ...
    python tools/build_fk.py DATASET [--kit ../shared/data] [--out DIR] [--check] [--grid-only]

DATASET is one of the shipped real-data sets (``hyperscan/data/dis/<DATASET>.npz``). The
kinematics (x, Q2, y bin mids) come from that file's ``kinematics`` column (or from the kit's
``<DATASET>.npz``), the theory from the kit's ``theory_99000001.yaml``. Pipeline, with the
settings the shipped tables were made with (see docs/fk-tables.md):

1. yadism observables card (XSHERANC / XSHERACC / F2_total, NLO ZM-VFNS, 50-point pineko x grid,
   degree 4 in log x) -> ``yadism.run_yadism`` -> ``yadbox.export.dump_pineappl_to_file``;
2. ``pineko.evolve.write_operator_card_from_file`` (nf0 = 4, mu2 = the data Q2) ->
   ``eko.runner.managed.solve``;
3. ``pineko.evolve.evolve_grid`` (max_as = 2, max_al = 0, scale ratios 1, Nf4Ind).

Writes ``DIR/<DATASET>.pineappl.lz4`` and the PineAPPL grid before evolution,
``DIR/<DATASET>.grid.pineappl.lz4`` (the grid the self-consistency check convolves with an
LHAPDF set), each atomically (temporary file + rename; default DIR: the current directory), and
prints the wall time of each stage. ``--grid-only`` stops after the grid (no EKO: seconds).
``--check`` compares the FK table with the kit's ``fktables/<DATASET>.pineappl.lz4``: the raw FK
arrays (per bin, relative to the bin's largest entry) and the convolution with a fixed PDF (per
bin, relative); exit 1 when either max relative difference exceeds ``--tolerance`` (1e-10).
With ``--grid-only`` it checks the grid against the shipped table's record of its grid instead:
the observables runcard, theory (ID aside), yadism version and bins in the metadata.

The first run compiles eko's numba kernels (~25 min on 2 cores, cached afterwards in eko's
``__pycache__``). Exit status 2: the `theory` extra is missing, or the dataset or kit is unknown.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import logging
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import yaml

from hyperscan._files import umask
from hyperscan.data import STANDARD_XGRID

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DATA = ROOT / "hyperscan" / "data" / "dis"
DEFAULT_KIT = ROOT.parent / "shared" / "data"
THEORY_CARD = "theory_99000001.yaml"

# The `theory` extra of pyproject.toml: the versions the shipped tables were made with.
THEORY_PINS = {"yadism": "0.13.12", "eko": "0.15.7", "pineko": "0.6.0", "pineappl": "1.5.0"}
INSTALL_HINT = "pip install -e '.[theory]'  (from the hyperscan checkout; a separate venv is best)"

# Keys of the NNPDF theory card that theory_99000001.yaml leaves to nnpdf_data's defaults; the
# shipped tables were made with exactly these values (their `theory_card` metadata).
THEORY_DEFAULTS = {
    "XIA": 1.0,
    "nfref": 5,
    "MaxNfPdf": 5,
    "nf0": 4,
    "IterEv": None,
    "ModSV": None,
    "DAMPPOWERc": None,
    "DAMPPOWERb": None,
    "FONLLParts": None,
    "n3lo_ad_variation": [0, 0, 0, 0, 0, 0, 0],
    "n3lo_cf_variation": 0,
    "use_fhmruvv": True,
    "MaxNfAs": None,
    "SxRes": None,
    "SxOrd": None,
    "EScaleVar": None,
    "Qedref": None,
    "global_nx": None,
}

# pineko's default interpolation grid (pineko.opcard_template.xgrid): 50 points, 2e-7 .. 1,
# the grid of every shipped FK table.
PINEKO_XGRID = STANDARD_XGRID
INTERPOLATION_DEGREE = 4
MAX_AS = 2  # 1 + PTO: LO and NLO QCD
MAX_AL = 0
ASSUMPTIONS = "Nf4Ind"  # Q0 = 1.65 GeV between mc and mb, intrinsic charm


class UsageError(Exception):
    """A problem with the command line or the inputs: message, exit status 2, no traceback."""


# --- pure parts (numpy + pyyaml only; tested without the theory extra) --------------------------


def known_datasets(kit: Path | None = None) -> list[str]:
    """Datasets with kinematics in the package (and, if given, in the kit)."""
    names = {p.stem for p in PACKAGE_DATA.glob("*.npz")}
    if kit is not None and kit.is_dir():
        names |= {p.stem for p in kit.glob("*.npz")}
    return sorted(names)


def load_dataset(dataset: str, kit: Path | None = None) -> dict:
    """Kinematics and identifiers of a shipped dataset (package arrays first, then the kit)."""
    for folder in (PACKAGE_DATA, kit):
        path = folder / f"{dataset}.npz" if folder is not None else None
        if path is not None and path.is_file():
            with np.load(path) as z:
                return {
                    "dataset": dataset,
                    "kinematics": np.array(z["kinematics"], dtype=float),
                    "process_type": str(z["process_type"]),
                    "observable": str(z["observable"]),
                    "source": path,
                }
    known = ", ".join(known_datasets(kit))
    raise UsageError(f"unknown dataset {dataset!r}; known: {known}")


def yadism_observable(process_type: str, observable: str) -> tuple[str, str, str]:
    """(yadism observable name, prDIS, projectile) for a commondata process and observable."""
    projectile = "positron" if observable.upper().startswith("EP") else "electron"
    if process_type == "DIS_CC":
        return "XSHERACC", "CC", projectile
    if process_type == "DIS_NC" and "SIGMARED" in observable.upper():
        return "XSHERANC", "NC", projectile
    if process_type == "DIS_NC" and "F2" in observable.upper():
        # NMC/BCDMS are muon beams: identical couplings, so yadism's "electron" is right.
        return "F2_total", "NC", projectile
    raise UsageError(f"no yadism observable for process {process_type!r}, {observable!r}")


def load_theory(kit: Path) -> dict:
    """NNPDF-style theory card of the kit, completed with the defaults the tables used."""
    path = kit / THEORY_CARD
    if not path.is_file():
        raise UsageError(f"theory card {path} not found (use --kit DIR)")
    try:
        card = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        raise UsageError(f"theory card {path} is not readable YAML: {error}") from None
    if not isinstance(card, dict):
        raise UsageError(f"theory card {path} is not a mapping of theory parameters")
    for key, value in THEORY_DEFAULTS.items():
        card.setdefault(key, copy.deepcopy(value))
    return card


def observables_card(data: dict) -> dict:
    """yadism observables runcard for one dataset: one observable, one entry per data point."""
    name, current, projectile = yadism_observable(data["process_type"], data["observable"])
    points = [
        # y is NaN for F2 data (commondata gives none); F2 does not depend on it.
        {"x": float(x), "Q2": float(q2), "y": 0.0 if math.isnan(y) else float(y)}
        for x, q2, y in data["kinematics"]
    ]
    return {
        "NCPositivityCharge": None,
        "PolarizationDIS": 0.0,
        "ProjectileDIS": projectile,
        "PropagatorCorrection": 0.0,
        "TargetDIS": "proton",
        "interpolation_is_log": True,
        "interpolation_polynomial_degree": INTERPOLATION_DEGREE,
        "interpolation_xgrid": PINEKO_XGRID.tolist(),
        "observables": {name: points},
        "prDIS": current,
    }


def expected_mugrid(q2: np.ndarray, theory: dict) -> list[tuple[float, int]]:
    """(mu, nf) per distinct data Q2, as pineko puts them in the operator card: nf = 3 below
    the charm matching scale, +1 at each matching scale passed (up to MaxNfPdf)."""
    walls = [
        (theory[f"k{q}Thr"] * theory[f"m{q}"]) ** 2
        for n, q in ((4, "c"), (5, "b"), (6, "t"))
        if n <= theory["MaxNfPdf"]
    ]
    return [(math.sqrt(v), 3 + sum(bool(v >= w) for w in walls)) for v in np.unique(q2).tolist()]


def expected_operator_card(data: dict, theory: dict) -> dict:
    """The parts of pineko's operator card that matter for this table (checked against it)."""
    return {
        "init": [theory["Q0"], theory["nf0"]],
        "mugrid": [list(m) for m in expected_mugrid(data["kinematics"][:, 1], theory)],
        "xgrid": PINEKO_XGRID.tolist(),
        "configs": {
            "evolution_method": {"TRN": "truncated", "EXA": "iterate-exact"}[theory["ModEv"]],
            "interpolation_polynomial_degree": INTERPOLATION_DEGREE,
            "interpolation_is_log": True,
            "scvar_method": None,
            "n_integration_cores": 1,
        },
    }


def card_mismatches(card: dict, expected: dict, prefix: str = "") -> list[str]:
    """Keys of `expected` whose value differs in `card` (numbers compared to 1e-12 relative)."""
    out = []
    for key, want in expected.items():
        have = card.get(key) if isinstance(card, dict) else None
        if isinstance(want, dict):
            out += card_mismatches(have or {}, want, f"{prefix}{key}.")
        elif isinstance(want, list):
            try:
                ok = np.allclose(np.asarray(have, float), np.asarray(want, float), rtol=1e-12)
            except (TypeError, ValueError):
                ok = False
            if not ok:
                out.append(f"{prefix}{key}")
        elif have != want:
            out.append(f"{prefix}{key}: {have!r} != {want!r}")
    return out


def max_rel_diff(new: np.ndarray, ref: np.ndarray) -> float:
    """max_i |new_i - ref_i| / max(|ref_i|, tiny) over the leading axis, each entry's block
    normalised by the largest |ref| in it (so zero entries cannot blow up the ratio)."""
    new = np.asarray(new, float).reshape(len(ref), -1)
    ref = np.asarray(ref, float).reshape(len(ref), -1)
    scale = np.maximum(np.abs(ref).max(axis=1), np.finfo(float).tiny)
    return float((np.abs(new - ref).max(axis=1) / scale).max())


def test_pdf(pid: int, x: float, q2: float) -> float:
    """A fixed smooth x*f for every PID (the same function for both tables)."""
    return x**0.4 * (1.0 - x) ** 3 * (1.0 + 0.01 * abs(pid)) * (1.0 + 0.3 * math.sqrt(x))


# --- the pipeline (needs the theory extra) ----------------------------------------------------


def import_theory() -> tuple[ModuleType, ...]:
    """Import the theory stack; UsageError naming the pip command when it is missing."""
    try:
        import eko
        import eko.io.runcards
        import eko.runner.managed
        import pineappl
        import pineko.evolve
        import yadbox.export
        import yadism
    except ImportError as exc:
        missing = exc.name or str(exc)
        raise UsageError(
            f"the `theory` extra is not installed (cannot import {missing}).\n"
            f"Install it with: {INSTALL_HINT}"
        ) from None
    from importlib import metadata

    for dist, pin in THEORY_PINS.items():
        have = metadata.version(dist)
        if have != pin:
            print(f"warning: {dist} {have} installed, the shipped tables used {pin}", flush=True)
    return yadism, yadbox.export, eko, pineko.evolve, pineappl


@contextlib.contextmanager
def stage(name: str, timings: dict) -> Iterator[None]:
    print(f"[{name}] ...", flush=True)
    start = time.perf_counter()
    yield
    timings[name] = time.perf_counter() - start
    print(f"[{name}] {timings[name]:.2f} s", flush=True)


def grid_file(out: Path, dataset: str) -> Path:
    """Where the PineAPPL grid before evolution goes, beside the FK table."""
    return out / f"{dataset}.grid.pineappl.lz4"


def _install(source: Path, target: Path) -> None:
    """Copy source to target atomically: a temporary file beside it, renamed into place."""
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    os.close(fd)
    try:
        shutil.copyfile(source, tmp)
        os.chmod(tmp, 0o666 & ~umask())  # mkstemp makes it 0600
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def build(dataset: str, kit: Path, out: Path, grid_only: bool = False) -> tuple[Path, dict]:
    """Build DATASET's grid into out/<DATASET>.grid.pineappl.lz4 and (unless grid_only) its FK
    table into out/<DATASET>.pineappl.lz4; returns (the last file written, timings)."""
    data = load_dataset(dataset, kit)
    theory = load_theory(kit)
    runcard = observables_card(data)
    timings: dict[str, float] = {}
    yadism, yadbox_export, eko, evolve, pineappl = import_theory()
    obsname = next(iter(runcard["observables"]))
    n_q2 = len(np.unique(data["kinematics"][:, 1]))
    print(f"{dataset}: {obsname}, {len(data['kinematics'])} points, {n_q2} distinct Q2")

    out.mkdir(parents=True, exist_ok=True)
    target = out / f"{dataset}.pineappl.lz4"
    with tempfile.TemporaryDirectory(prefix=f".build_fk-{dataset}-", dir=out) as work:
        work = Path(work)
        # the grid's own name: pineko records it (grid_name) and its md5 (grid_hash)
        grid_path = work / f"{dataset}.pineappl.lz4"
        with stage("yadism", timings):
            # yadism edits the dicts it gets (n3lo_cf_variation): hand it copies.
            output = yadism.run_yadism(copy.deepcopy(theory), copy.deepcopy(runcard))
            yadbox_export.dump_pineappl_to_file(output, str(grid_path), obsname)
            _install(grid_path, grid_file(out, dataset))
        if grid_only:
            return grid_file(out, dataset), timings

        with stage("operator card", timings):
            card_path = work / "operator_card.yaml"
            evolve.write_operator_card_from_file(grid_path, card_path, copy.deepcopy(theory))
            ocard = yaml.safe_load(card_path.read_text(encoding="utf-8"))
            ocard["configs"]["n_integration_cores"] = 1
            bad = card_mismatches(ocard, expected_operator_card(data, theory))
            if bad:
                raise RuntimeError(f"pineko's operator card differs from the expected: {bad}")

        with stage("eko", timings):
            # as pineko's `theory.eko`: eko still reads these deprecated keys
            eko_theory = dict(copy.deepcopy(theory), Qedref=theory["Qref"])
            eko_theory["MaxNfAs"] = theory["MaxNfPdf"]
            legacy = eko.io.runcards.Legacy(eko_theory, ocard)
            eko_path = work / "eko.tar"
            eko.runner.managed.solve(
                legacy.new_theory, eko.io.runcards.OperatorCard.from_dict(ocard), eko_path
            )

        with stage("evolve", timings):
            grid = pineappl.grid.Grid.read(str(grid_path))
            grid.optimize()
            fd, tmp = tempfile.mkstemp(prefix=f".{dataset}.", suffix=".pineappl.lz4", dir=out)
            os.close(fd)
            try:
                with eko.EKO.edit(eko_path) as operator:
                    evolve.evolve_grid(
                        grid,
                        [operator],
                        tmp,
                        MAX_AS,
                        MAX_AL,
                        xir=1.0,
                        xif=1.0,
                        xia=1.0,
                        theory_meta=copy.deepcopy(theory),
                        assumptions=ASSUMPTIONS,
                        grid_path=grid_path,
                    )
                os.chmod(tmp, 0o666 & ~umask())  # mkstemp makes it 0600
                os.replace(tmp, target)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
    return target, timings


def compare(new_path: Path, ref_path: Path) -> dict:
    """Raw FK arrays and a fixed-PDF convolution of two FK tables: max relative differences."""
    import pineappl

    new = pineappl.fk_table.FkTable.read(str(new_path))
    ref = pineappl.fk_table.FkTable.read(str(ref_path))
    result: dict = {"same_layout": True}
    for what in ("channels", "x_grid"):
        a, b = getattr(new, what)(), getattr(ref, what)()
        same = np.array_equal(np.asarray(a, dtype=object), np.asarray(b, dtype=object))
        if what == "x_grid" and not same and len(a) == len(b):
            same = np.allclose(a, b, rtol=1e-14, atol=0.0)
        if not same:
            result["same_layout"] = False
            result[f"{what}_differ"] = f"{len(a)} vs {len(b)}"
    if new.table().shape != ref.table().shape:
        result["same_layout"] = False
        result["table_shapes"] = f"{new.table().shape} vs {ref.table().shape}"
    if not result["same_layout"]:
        return result
    result["table"] = max_rel_diff(new.table(), ref.table())
    pred_new = new.convolve(ref.convolutions, [test_pdf])
    pred_ref = ref.convolve(ref.convolutions, [test_pdf])
    result["convolution"] = max_rel_diff(pred_new[:, None], pred_ref[:, None])
    # provenance: same observables and theory (ID and comment aside) as the shipped table
    meta_new, meta_ref = new.metadata, ref.metadata
    result["same_runcard"] = json.loads(meta_new["runcard"]) == json.loads(meta_ref["runcard"])
    drop = ("ID", "Comments")
    tn, tr = (json.loads(m["theory_card"]) for m in (meta_new, meta_ref))
    result["same_theory"] = {k: v for k, v in tn.items() if k not in drop} == {
        k: v for k, v in tr.items() if k not in drop
    }
    result["same_eko_cards"] = all(
        json.loads(meta_new[k]) == json.loads(meta_ref[k])
        for k in ("eko_theory_card", "eko_operator_card")
    )
    return result


def compare_grid(grid_path: Path, ref_path: Path) -> dict:
    """A grid against the shipped FK table's record of the grid it was evolved from: the same
    observables runcard (kinematics, x grid, projectile), theory (ID and comment aside: the kit
    labelled its card 40000000), yadism version and bins. Not the md5 (pineko's grid_hash):
    the theory ID is part of the file."""
    import pineappl

    grid = pineappl.grid.Grid.read(str(grid_path))
    ref = pineappl.fk_table.FkTable.read(str(ref_path))
    meta, meta_ref = grid.metadata, ref.metadata

    def theory(m: dict) -> dict:
        card = json.loads(m.get("theory", "{}"))
        return {k: v for k, v in card.items() if k not in ("ID", "Comments")}

    return {
        "same_runcard": json.loads(meta.get("runcard", "null"))
        == json.loads(meta_ref.get("runcard", "null")),
        "same_theory": theory(meta) == theory(meta_ref),
        "same_yadism": meta.get("yadism_version") == meta_ref.get("yadism_version"),
        "same_bins": np.array_equal(grid.bin_limits(), ref.bin_limits()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Regenerate a shipped NLO DIS FK table (yadism -> eko -> pineko).",
        epilog=f"Needs the `theory` extra: {INSTALL_HINT}",
    )
    parser.add_argument("dataset", help="e.g. HERA_CC_318GEV_EM-SIGMARED")
    parser.add_argument("--kit", type=Path, default=DEFAULT_KIT, help="real-data kit folder")
    parser.add_argument("--out", type=Path, default=Path("."), help="output folder")
    parser.add_argument("--check", action="store_true", help="compare with the kit's table")
    parser.add_argument(
        "--grid-only", action="store_true", help="stop after the grid (no EKO, no FK table)"
    )
    parser.add_argument("--tolerance", type=float, default=1e-10)
    parser.add_argument("--verbose", action="store_true", help="keep yadism's and eko's logs")
    args = parser.parse_args(argv)
    if not args.verbose:
        # read by yadism at import time; yadism sets eko's logger to the same level. Its
        # "NaNs are encountered and set to zero" CRITICAL line is logged for every point.
        os.environ.setdefault("YADISM_LOG_LEVEL", str(logging.CRITICAL + 1))
        os.environ.setdefault("YADISM_SILENT_MODE", "1")  # no banner and progress output
    try:
        # fail fast, before the heavy imports: the dataset, and yadism's observable for it
        observables_card(load_dataset(args.dataset, args.kit))
        load_theory(args.kit)
        reference = args.kit / "fktables" / f"{args.dataset}.pineappl.lz4"
        if args.check and not reference.is_file():
            raise UsageError(f"--check: shipped table {reference} not found")
        start = time.perf_counter()
        import_theory()
        timings = {"imports": time.perf_counter() - start}
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    path, build_timings = build(args.dataset, args.kit, args.out, grid_only=args.grid_only)
    timings.update(build_timings)
    total = time.perf_counter() - start
    parts = ", ".join(f"{k} {v:.1f} s" for k, v in timings.items())
    print(f"wrote {path}\ntotal {total:.1f} s ({parts})", flush=True)
    if not args.check:
        return 0
    if args.grid_only:
        result = compare_grid(path, reference)
        print(f"check against {reference}'s record of its grid:")
        for key, value in result.items():
            print(f"  {key}: {value}")
        ok = all(result.values())
        print("the grid is the one the shipped table was evolved from" if ok else "MISMATCH")
        return 0 if ok else 1
    result = compare(path, reference)
    print(f"check against {reference}:")
    for key, value in result.items():
        print(f"  {key}: {value:.3e}" if isinstance(value, float) else f"  {key}: {value}")
    worst = max(result.get("table", math.inf), result.get("convolution", math.inf))
    ok = result["same_layout"] and worst <= args.tolerance
    print(f"max relative difference {worst:.3e} {'<=' if ok else '>'} {args.tolerance:g}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
