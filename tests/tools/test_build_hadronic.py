# SPDX-License-Identifier: GPL-3.0-or-later
"""tools/build_hadronic.py: it rebuilds the shipped LO grids (byte for byte on an AVX-512 CPU),
and --check fails on a grid that differs. Needs pineappl and nnpdf-data (the test extra), not
the theory extra."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "build_hadronic.py"
GRIDS = ROOT / "hyperscan" / "data" / "hadronic" / "grids"
TABLES = (
    "DYE866R_D",
    "DYE866R_P",
    "DYE866P",
    "CDFZRAP_NEW-CDF_ZRAP_MCgrid_500M_last_two_bins_combined",
    "D0ZRAP-D0_ZRAP_MCgrid_500M",
    "D0ZRAP-D0_ZNORM_MCgrid_500M",
    "D0WMASY-grid-40-6-15-3-Wplus_wly_pt25",
    "D0WMASY-grid-40-6-15-3-Wminus_wly_pt25",
)


def run(*args: str) -> subprocess.CompletedProcess:
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=300
    )


def avx512() -> bool:
    """Whether numpy's float64 exp and log take their AVX-512 loops here, as on the machine that
    built the shipped grids; without AVX-512 they call libm, which rounds some last bits apart."""
    from numpy._core._multiarray_umath import __cpu_features__

    return bool(__cpu_features__.get("AVX512F"))


def test_the_shipped_grids_are_exactly_what_the_tool_builds():
    """Byte for byte where numpy computes as on the machine that built them; elsewhere each
    grid's convolution within a few float64 roundings (on an AVX2 CPU: 5 grids, 3.3e-16)."""
    assert sorted(p.name for p in GRIDS.glob("*.pineappl.lz4")) == sorted(
        f"{t}.pineappl.lz4" for t in TABLES
    )
    done = run("--check")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == len(TABLES), done.stdout
    exact = avx512()
    for line in lines:
        if line.endswith("identical to the shipped grid"):
            continue
        assert not exact, line
        difference = re.fullmatch(
            r".*, bytes differ; max rel\. difference of the convolution (\S+)", line
        )
        assert difference and float(difference.group(1)) <= 1e-15, line


def test_a_rebuilt_grid_differs_from_a_wrong_one(tmp_path: Path, monkeypatch):
    """--check's comparison can fail: a grid rescaled by 1 + 1e-9 is caught."""
    monkeypatch.syspath_prepend(str(ROOT / "tools"))
    import build_hadronic

    table = build_hadronic.TABLES["DYE866R_P"]
    path = build_hadronic.write(table, tmp_path)
    from pineappl.grid import Grid

    grid = Grid.read(str(path))
    grid.scale(1 + 1e-9)
    wrong = tmp_path / "wrong" / path.name
    wrong.parent.mkdir()
    grid.write_lz4(str(wrong))
    new, ref = build_hadronic.convolve(path), build_hadronic.convolve(wrong)
    assert 5e-10 < float(np.max(np.abs(new / ref - 1))) < 2e-9
    monkeypatch.setattr(build_hadronic, "SHIPPED", wrong.parent)
    assert build_hadronic.main(["DYE866R_P", "--check"]) == 1


def test_an_unknown_table_is_a_usage_error():
    done = run("NOT_A_TABLE")
    assert done.returncode == 2
    assert "unknown table" in done.stderr


@pytest.mark.parametrize("table", TABLES)
def test_each_grid_has_one_bin_per_data_point(table, monkeypatch):
    from pineappl.grid import Grid

    from hyperscan.runcard.real_datasets import commondata_files

    monkeypatch.syspath_prepend(str(ROOT / "tools"))
    import build_hadronic

    grid = Grid.read(str(GRIDS / f"{table}.pineappl.lz4"))
    dataset = build_hadronic.TABLES[table].dataset
    points = 1 if build_hadronic.TABLES[table].total else commondata_files(dataset, None).ndata
    assert grid.bins() == points
    assert table in {t for operand in commondata_files(dataset, None).fk_tables for t in operand}
    assert np.all(np.asarray(grid.bin_normalizations()) == 1.0)


def test_tables_at_the_same_scales_share_an_eko(monkeypatch):
    """tools/evolve_hadronic.py computes one EKO per set of scales (pineko's x grid is always
    its 50 points): the E866 ratio's two tables share one, the three Z tables one at M_Z, the
    W tables one at M_W (what is cheap to test without eko)."""
    monkeypatch.syspath_prepend(str(ROOT / "tools"))
    import evolve_hadronic

    layouts = {t: evolve_hadronic.grid_layout(GRIDS / f"{t}.pineappl.lz4") for t in TABLES}
    scales = {t: mu2 for t, (_, mu2) in layouts.items()}
    assert scales["DYE866R_D"] == scales["DYE866R_P"]
    assert scales[TABLES[3]] == scales[TABLES[4]] == scales[TABLES[5]] == (91.1876**2,)
    assert scales[TABLES[6]] == scales[TABLES[7]] == (80.398**2,)
    assert len(set(scales.values())) == 4
    x, mu2 = layouts["DYE866P"]
    assert x[-1] == 1.0 and len(mu2) == 13
