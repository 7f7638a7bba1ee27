# SPDX-License-Identifier: GPL-3.0-or-later
"""Build hyperscan/data/hadronic/<DATASET>.npz from the LO hadronic FK tables and nnpdf-data.

    python tools/ship_hadronic.py FK_DIR [--out DIR]
    python tools/ship_hadronic.py FK_DIR --check

FK_DIR holds the PineAPPL FK tables that ``tools/evolve_hadronic.py --out FK_DIR`` writes. Each
shipped dataset (``HADRONIC_DATASETS``, its shipped variant) is read from them as a theory
folder of theory 99000001 (``hyperscan.data._theory``: tables converted to act on x·f, their
non-zero flavour pairs only, operands concatenated and normalised as the commondata metadata
say) and written with its commondata (nnpdf-data 4.1.5, read afresh): ``operation``, per operand
k ``fk_k`` (n, P, n_x, n_x), ``pairs_k`` (P, 2) and ``xgrid_k`` (n_x,); the data arrays of
``tools/ship_real_data.py``; ``kinematics_names``, ``process_type``, ``dataset``, ``variant``.
Compacted losslessly for every fit (``compacted``): entries below 1e-16 of a table's largest
(the evolution's rounding noise) and the rows of points that the cut rules drop at every
perturbative order are zero, and the x nodes where a table is zero are left out. Deterministic:
the same FK tables give the same bytes (numpy fixes the zip timestamps).

``--check`` writes nothing: it compares what it would write with the shipped files, identical
byte for byte or, for the FK arrays, to 1e-12 relative to each table's largest entry (it says
which), and exits 1 when one differs. Needs pineappl and nnpdf-data (the `test` extra).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

TOOLS = Path(__file__).resolve().parent
sys.path.insert(0, str(TOOLS))

from ship_real_data import commondata_arrays  # noqa: E402  (tools/ is not a package)

from hyperscan.data import HADRONIC_DATASETS  # noqa: E402
from hyperscan.data._commondata import read_commondata  # noqa: E402
from hyperscan.data._real import (  # noqa: E402
    HADRONIC_DATA_DIR,
    SHIPPED_THEORY_CARD,
    RealDataset,
)
from hyperscan.data._tables import FkTable  # noqa: E402
from hyperscan.data._theory import find_theory, theory_dataset  # noqa: E402
from hyperscan.runcard import SHIPPED_THEORY_ID  # noqa: E402

TOLERANCE = 1e-12
#: Entries below this fraction of a table's largest are rounding noise of the evolution.
NOISE = 1e-16


def compacted(table: FkTable, never_fitted: np.ndarray) -> FkTable:
    """The table as shipped: rounding noise (entries below NOISE of its largest) and the rows of
    ``never_fitted`` points set to zero, which the zip stores in a few bytes, then only the x
    nodes where it is not zero (on either PDF's axis). E866's tables lose the small-x half of
    the grid, which its x ≥ 0.015 never reaches; pineko leaves 30% of a Tevatron table at
    1e-20 of its largest entry or below, which an exact zero predicts as well."""
    fk = np.where(np.abs(table.fk) < NOISE * np.abs(table.fk).max(), 0.0, table.fk)
    fk[never_fitted] = 0.0
    used = np.any(fk != 0.0, axis=(0, 1, 3)) | np.any(fk != 0.0, axis=(0, 1, 2))
    return FkTable(fk[:, :, used][:, :, :, used], table.xgrid[used], table.pairs)


def never_fitted(dataset: RealDataset) -> np.ndarray:
    """Points that the dataset's cut rules drop at every perturbative order (E866 pp: 96 of 184,
    by kinematics alone), for a NULL observable only, whose other points need no other row."""
    keep = np.zeros(dataset.n_data, dtype=bool)
    for pto in range(4):
        keep |= dataset.cut_mask(pto=pto)
    return ~keep if dataset.operation == "NULL" else np.zeros_like(keep)


def dataset_arrays(theory_dir: Path, name: str, variant: str | None, cache: Path) -> dict:
    """The shipped arrays of one dataset, its FK tables read from ``theory_dir``."""
    dataset = theory_dataset(find_theory(theory_dir), name, variant)
    arrays: dict[str, np.ndarray] = {"operation": np.asarray(dataset.operation)}
    dropped = never_fitted(dataset)
    for k, table in enumerate(dataset.tables):
        table = compacted(table, dropped if table.n_data == dataset.n_data else [])
        arrays |= {f"fk_{k}": table.fk, f"pairs_{k}": table.pairs, f"xgrid_{k}": table.xgrid}
    data = read_commondata(name, variant, cache_dir=cache)  # parsed afresh, not from a cache
    arrays |= commondata_arrays(data)
    arrays["kinematics_names"] = np.asarray(data.kinematics_names, dtype=str)
    arrays["process_type"] = np.asarray(data.process_type)
    arrays["dataset"] = np.asarray(name)
    arrays["variant"] = np.asarray(variant or "")
    return arrays


def theory_folder(fk_dir: Path, root: Path) -> Path:
    """``root/theory_<ID>/`` with links to the FK tables and the shipped card."""
    folder = root / f"theory_{SHIPPED_THEORY_ID}"
    (folder / "fastkernel").mkdir(parents=True)
    for table in sorted(fk_dir.glob("*.pineappl.lz4")):
        os.symlink(table.resolve(), folder / "fastkernel" / table.name)
    shutil.copyfile(SHIPPED_THEORY_CARD, folder / "theory.yaml")
    return folder


def difference(ours: dict[str, np.ndarray], shipped: Path) -> str | None:
    """None when ``ours`` equals the shipped file's arrays (FK arrays to TOLERANCE), else why."""
    if not shipped.is_file():
        return "not shipped"
    with np.load(shipped, allow_pickle=False) as z:
        theirs = {k: z[k] for k in z.files}
    if set(theirs) != set(ours):
        return f"other arrays: {sorted(set(theirs) ^ set(ours))}"
    for key, value in ours.items():
        ref = theirs[key]
        if value.shape != ref.shape or value.dtype != ref.dtype:
            return f"{key}: {ref.dtype}{ref.shape} shipped, {value.dtype}{value.shape} rebuilt"
        if key.startswith("fk_"):
            scale = float(np.max(np.abs(ref))) or 1.0
            worst = float(np.max(np.abs(value - ref))) / scale
            if worst > TOLERANCE:
                return f"{key} differs by {worst:.1e} of its largest entry"
        elif not np.array_equal(value, ref, equal_nan=value.dtype.kind == "f"):
            return f"{key} differs"
    return None


def main(fk_dir: Path, out: Path, check: bool) -> int:
    if not any(fk_dir.glob("*.pineappl.lz4")):
        print(f"error: no FK tables (*.pineappl.lz4) in {fk_dir}", file=sys.stderr)
        return 2
    failed, total = [], 0
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        folder = theory_folder(fk_dir, work / "theory")
        with tempfile.TemporaryDirectory(dir=work) as staging:
            for name, variant in HADRONIC_DATASETS.items():
                arrays = dataset_arrays(folder, name, variant, work / "commondata")
                target = (Path(staging) if check else out) / f"{name}.npz"
                target.parent.mkdir(parents=True, exist_ok=True)
                partial = target.with_name(f".partial.{target.name}")
                np.savez_compressed(partial, **arrays)
                partial.replace(target)  # no half-written file under the final name
                size = target.stat().st_size
                total += size
                if not check:
                    print(f"{target}: {size / 1e6:.2f} MB")
                    continue
                shipped = HADRONIC_DATA_DIR / target.name
                same = shipped.is_file() and shipped.read_bytes() == target.read_bytes()
                why = None if same else difference(arrays, shipped)
                verdict = "identical, byte for byte" if same else why or f"equal to {TOLERANCE:g}"
                print(f"{name}: {verdict}")
                failed += [name] if why else []
    print(f"total {total / 1e6:.2f} MB")
    return 1 if failed else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("fk_dir", type=Path, help="folder of the FK tables (evolve_hadronic.py)")
    parser.add_argument(
        "--out", type=Path, default=HADRONIC_DATA_DIR, help="output folder (default: %(default)s)"
    )
    parser.add_argument(
        "--check", action="store_true", help="compare with the shipped files; write nothing"
    )
    args = parser.parse_args()
    sys.exit(main(args.fk_dir, args.out, args.check))
