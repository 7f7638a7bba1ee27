# SPDX-License-Identifier: GPL-3.0-or-later
"""The shipped hadronic data as the PineAPPL FK tables of a theory folder that validphys and
n3fit read.

    python tools/hadronic_theory_folder.py FOLDER

Writes ``FOLDER/fastkernel/<FK table>.pineappl.lz4`` for each operand of the shipped hadronic
datasets (``HADRONIC_DATASETS``), under the names their commondata metadata give, and
``FOLDER/theory.yaml`` (the card of theory 99000001) where FOLDER has none: FOLDER may be the
``theory_99000001`` folder of an NNPDF share folder that already holds the DIS tables, as the
peer kit's. The tables are the shipped arrays written back (``hyperscan.data._fk_writer``): read
by validphys, or by hyperscan from the folder, they predict what the shipped arrays predict, to
float64 rounding. They are not the files ``tools/evolve_hadronic.py`` writes: the shipped
compaction has left out pineko's rounding noise, the points cut at every order and unused x
nodes. Each file is written whole or not at all. Needs pineappl (the test extra).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from hyperscan.data import HADRONIC_DATASETS, load_real_dataset
from hyperscan.data._fk_writer import write_hadronic_table
from hyperscan.data._real import SHIPPED_THEORY_CARD
from hyperscan.data._theory import find_theory
from hyperscan.runcard import SHIPPED_THEORY_ID
from hyperscan.runcard.real_datasets import commondata_files


def table_names(name: str) -> list[str]:
    """The FK table of each operand of shipped dataset ``name``, as its metadata name them."""
    files = commondata_files(name, HADRONIC_DATASETS[name])
    if any(len(operand) != 1 for operand in files.fk_tables):
        raise SystemExit(
            f"{name}: an operand of several FK tables {files.fk_tables} is not shipped"
        )
    return [table for (table,) in files.fk_tables]


def write_folder(folder: Path) -> list[Path]:
    """Write the hadronic FK tables (and the card, if missing) into ``folder``; their paths."""
    fastkernel = folder / "fastkernel"
    fastkernel.mkdir(parents=True, exist_ok=True)
    card = folder / "theory.yaml"
    if not card.exists():
        shutil.copy(SHIPPED_THEORY_CARD, card)
    q0 = find_theory(folder).q0
    written = []
    for name in HADRONIC_DATASETS:
        dataset = load_real_dataset(name, HADRONIC_DATASETS[name])
        for table_name, table in zip(table_names(name), dataset.tables, strict=True):
            path = fastkernel / f"{table_name}.pineappl.lz4"
            partial = path.with_name(f".{path.name}.part")
            write_hadronic_table(partial, table, q0)
            partial.replace(path)
            written.append(path)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="the theory_<ID> folder to write into")
    args = parser.parse_args()
    if args.folder.exists() and not args.folder.is_dir():
        sys.exit(f"{args.folder} is not a folder")
    if args.folder.name != f"theory_{SHIPPED_THEORY_ID}":
        sys.exit(
            f"{args.folder}: the shipped tables are theory {SHIPPED_THEORY_ID}'s, and validphys "
            f"finds them in a folder named theory_{SHIPPED_THEORY_ID}"
        )
    for path in write_folder(args.folder):
        print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
