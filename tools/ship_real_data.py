# SPDX-License-Identifier: GPL-3.0-or-later
"""Copy the real-data kit (../shared/data/*.npz) into the package as compressed arrays.

    python tools/ship_real_data.py [KIT_DIR]

Writes ``hyperscan/data/dis/<DATASET>.npz`` (np.savez_compressed): the FK table restricted to
its non-zero flavour rows (``fk`` (n, 9, n_x) + ``fk_flavours`` (9,) indices into FK_BASIS;
the loader restores (n, 14, n_x)), ``xgrid``, ``kinematics``, ``central``, ``stat``, ``sys``,
``sys_names``, ``sys_treatment``, ``sys_type`` and the identifiers. The covariance and the cut
mask are *not* shipped: the loader builds both (tests compare them with the kit's).
Deterministic: same kit, same bytes (zip timestamps aside, which numpy fixes).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "hyperscan" / "data" / "dis"
KEEP = ("xgrid", "kinematics", "central", "stat", "sys", "sys_names", "sys_treatment", "sys_type")
IDS = ("dataset", "variant", "fk_name", "process_type", "setname", "observable")


def main(kit: Path) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    total = 0
    for src in sorted(kit.glob("*.npz")):
        z = np.load(src)
        fk = z["fk"]
        rows = np.flatnonzero(np.any(fk != 0.0, axis=(0, 2)))
        arrays = {"fk": np.ascontiguousarray(fk[:, rows]), "fk_flavours": rows.astype(np.int64)}
        arrays.update({k: z[k] for k in KEEP})
        arrays.update({k: np.asarray(str(z[k])) for k in IDS})
        arrays["theory_id"] = np.asarray(int(z["theory_id"]))
        arrays["q0"] = np.asarray(float(z["q0"]))
        dst = OUT / src.name
        np.savez_compressed(dst, **arrays)
        total += dst.stat().st_size
        print(f"{dst.relative_to(ROOT)}: {dst.stat().st_size / 1e6:.2f} MB")
    print(f"total {total / 1e6:.2f} MB")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT.parent / "shared" / "data")
