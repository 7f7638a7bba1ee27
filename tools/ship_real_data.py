# SPDX-License-Identifier: GPL-3.0-or-later
"""Build hyperscan/data/dis/*.npz: FK tables from the real-data kit, data from nnpdf-data.

    python tools/ship_real_data.py [KIT_DIR] [--out DIR]

Needs ``pip install -e '.[nnpdf]'`` (nnpdf-data 4.1.5). Per kit file ``<DATASET>.npz`` it writes
``<DATASET>.npz`` (np.savez_compressed): the FK table restricted to its non-zero flavour rows
(``fk`` (n, 9, n_x) + ``fk_flavours`` (9,) indices into FK_BASIS; the loader restores
(n, 14, n_x)), ``xgrid`` and the identifiers from the kit; ``kinematics``, ``central``, ``stat``,
``sys``, ``sys_names``, ``sys_treatment``, ``sys_type`` read from nnpdf-data by
``hyperscan.data._commondata`` (the kit's variant, parsed afresh, not from the cache), so the
shipped data are traceable to nnpdf-data. It also compares them with the kit's arrays and exits
with status 1 if any differ. The covariance and the cut mask are *not* shipped: the loader
builds both (tests compare them with the kit's). Deterministic: same inputs, same bytes (numpy
fixes the zip timestamps).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

from hyperscan.data._commondata import CommonData, read_commondata
from hyperscan.runcard.real_datasets import nnpdf_data_version

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "hyperscan" / "data" / "dis"
DATA = ("kinematics", "central", "stat", "sys", "sys_names", "sys_treatment", "sys_type")
IDS = ("dataset", "variant", "fk_name", "process_type", "setname", "observable")


def commondata_arrays(data: CommonData) -> dict[str, np.ndarray]:
    """The shipped data arrays of one dataset, in the shipped order and dtypes."""
    return {
        "kinematics": data.kinematics,
        "central": data.central,
        "stat": data.stat,
        "sys": np.asfortranarray(data.sys),  # column-major as first shipped: same bytes
        "sys_names": np.asarray(data.sys_names, dtype=str),
        "sys_treatment": np.asarray(data.sys_treatment, dtype=str),
        "sys_type": np.asarray(data.sys_type, dtype=str),
    }


def differences(ours: dict[str, np.ndarray], kit: np.lib.npyio.NpzFile) -> list[str]:
    """Keys whose values differ from the kit's (NaN = NaN: NMC F2 has no y)."""
    out = []
    for key, value in ours.items():
        ref = kit[key]
        same = value.shape == ref.shape and (
            np.array_equal(value, ref, equal_nan=True)
            if value.dtype.kind == "f"
            else np.array_equal(value, ref)
        )
        if not same:
            out.append(key)
    return out


def main(kit: Path, out: Path) -> int:
    sources = sorted(kit.glob("*.npz"))
    if not sources:
        print(f"error: no kit files (*.npz) in {kit}; give the kit's folder", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    print(f"commondata from nnpdf-data {nnpdf_data_version()}, FK tables from {kit}")
    total, failed = 0, []
    with tempfile.TemporaryDirectory() as cache:
        for src in sources:
            z = np.load(src)
            name, variant = str(z["dataset"]), str(z["variant"]) or None
            data = read_commondata(name, variant, cache_dir=cache)
            fk = z["fk"]
            rows = np.flatnonzero(np.any(fk != 0.0, axis=(0, 2)))
            arrays = {"fk": np.ascontiguousarray(fk[:, rows]), "fk_flavours": rows.astype(np.int64)}
            arrays["xgrid"] = z["xgrid"]
            arrays.update(commondata_arrays(data))
            diff = differences({k: arrays[k] for k in DATA}, z)
            if data.process_type != str(z["process_type"]):
                diff.append("process_type")
            arrays.update({k: np.asarray(str(z[k])) for k in IDS})
            arrays["theory_id"] = np.asarray(int(z["theory_id"]))
            arrays["q0"] = np.asarray(float(z["q0"]))
            dst = out / src.name
            np.savez_compressed(dst, **arrays)
            total += dst.stat().st_size
            note = f"DIFFERS from the kit in {', '.join(diff)}" if diff else "data = kit's"
            print(f"{dst}: {dst.stat().st_size / 1e6:.2f} MB, {note}")
            failed += [name] if diff else []
    print(f"total {total / 1e6:.2f} MB")
    return 1 if failed else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kit", nargs="?", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument(
        "--out", type=Path, default=OUT, help="output folder (default: %(default)s)"
    )
    args = parser.parse_args()
    sys.exit(main(args.kit, args.out))
