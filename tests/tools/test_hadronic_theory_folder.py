# SPDX-License-Identifier: GPL-3.0-or-later
"""tools/hadronic_theory_folder.py: the shipped hadronic arrays written back as PineAPPL FK
tables, which read back (as validphys reads them, hyperscan/data/_theory.py) as the arrays."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hyperscan.data import FK_BASIS, HADRONIC_DATASETS, FkTable, load_real_dataset, real_problem
from hyperscan.data._theory import find_theory, theory_dataset

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "hadronic_theory_folder.py"


def _tool(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, check=False
    )


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("share") / "theory_99000001"
    run = _tool(folder)
    assert run.returncode == 0, run.stderr
    return folder


def _all_pairs(table: FkTable) -> np.ndarray:
    """(n, 14, 14, n_x, n_x): the table on every flavour pair, zero where it keeps none (the
    reader leaves out pairs that are zero everywhere, the shipped arrays may keep them)."""
    out = np.zeros((table.n_data, len(FK_BASIS), len(FK_BASIS), *table.fk.shape[2:]))
    for p, (a, b) in enumerate(table.pairs.tolist()):
        out[:, a, b] = table.fk[:, p]
    return out


@pytest.mark.parametrize("name", list(HADRONIC_DATASETS))
def test_each_written_table_reads_back_as_the_shipped_one(folder, name) -> None:
    variant = HADRONIC_DATASETS[name]
    shipped = load_real_dataset(name, variant)
    read = theory_dataset(find_theory(folder), name, variant)
    assert read.operation == shipped.operation
    assert len(read.tables) == len(shipped.tables)
    for ours, theirs in zip(read.tables, shipped.tables, strict=True):
        np.testing.assert_array_equal(ours.xgrid, theirs.xgrid)
        scale = np.max(np.abs(theirs.fk))
        np.testing.assert_allclose(_all_pairs(ours), _all_pairs(theirs), rtol=0, atol=1e-14 * scale)


def test_the_folder_fits_as_the_shipped_data(folder) -> None:
    """Same points after cuts, same covariance, same toy predictions, from the folder and
    shipped."""
    datasets = [{"dataset": k, "variant": v} for k, v in HADRONIC_DATASETS.items()]
    from_folder = real_problem(datasets, theory=folder, closure_level=0)
    shipped = real_problem(datasets, closure_level=0)
    assert [d.n_data for d in from_folder.datasets] == [d.n_data for d in shipped.datasets]
    np.testing.assert_allclose(from_folder.covmat, shipped.covmat, rtol=1e-13, atol=0)
    np.testing.assert_allclose(from_folder.truth, shipped.truth, rtol=1e-13, atol=0)


def test_a_folder_of_another_theory_is_refused(tmp_path) -> None:
    run = _tool(tmp_path / "theory_400")
    assert run.returncode != 0
    assert "theory 99000001's" in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "theory_400").exists()
