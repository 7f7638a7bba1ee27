# SPDX-License-Identifier: GPL-3.0-or-later
"""End to end on a theory folder that mixes DIS and hadronic tables (issue #50), as a user
runs it: `hyperscan fit`, `hyperscan scan --slots 4`, and `export` → `fit` giving back each
trial's value."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _service import WORKER_ENV, assert_clean_failure, cli, scan_card, write_card
from _theory_folder import SHARED_DATA, build_theory_folder
from optuna.trial import TrialState

from hyperscan.scan import open_storage
from hyperscan.scan.storage import load_study

DATASETS = [
    "NMC_NC_NOTFIXED_P_EM-F2-HEPDATA",
    "DYE605_Z0_38P8GEV_DW_PXSEC",
    "DYE866_Z0_800GEV_DW_RATIO_PDXSECRATIO",
    "D0_WPWM_1P96TEV_ASY",
]


@pytest.fixture(scope="module")
def theory(tmp_path_factory, skip_or_fail_on_ci) -> Path:
    if not (SHARED_DATA / "fktables").is_dir():
        skip_or_fail_on_ci(f"real-data kit not found at {SHARED_DATA}")
    return build_theory_folder(tmp_path_factory.mktemp("share")).parent


def _data(theory: Path) -> dict:
    return {
        "closure": None,
        "real": {
            "theory": str(theory),
            "datasets": [{"dataset": d} for d in DATASETS],
            "closure": {"level": 1, "seed": 1},
        },
    }


def hyperscan(*args: object, cwd: Path) -> subprocess.CompletedProcess:
    """The `hyperscan` command as a user types it, on the workers' CPU settings."""
    done = subprocess.run(
        [sys.executable, "-m", "hyperscan", *map(str, args)],
        env=os.environ | WORKER_ENV,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def _members(outdir: Path) -> list[dict]:
    return json.loads((outdir / "results.json").read_text())["members"]


def test_a_fit_on_dis_and_hadronic_data(theory, tmp_path):
    card = scan_card(data=_data(theory), replicas=[1, 2], epochs=300)
    del card["scan"]
    hyperscan("fit", write_card(tmp_path / "fit.yml", card), "-o", "out", cwd=tmp_path)
    members = _members(tmp_path / "out")
    assert [m["replica"] for m in members] == [1, 2]
    for member in members:
        assert set(member["dataset_chi2_per_point"]) == set(DATASETS)
        assert 0 < member["chi2_per_point"]["validation"] < 100


def test_a_slotted_scan_then_export_and_fit_give_back_each_trial(theory, tmp_path):
    card = scan_card(
        data=_data(theory),
        epochs=150,
        training={"precision": "float64", "steps_per_call": 25},
        scan={"trials": 4, "replicas": 2},
    )
    runcard = write_card(tmp_path / "mixed.yml", card)
    url = tmp_path / "scan.journal"
    done = hyperscan(
        "scan",
        runcard,
        "--workers",
        1,
        "--slots",
        4,
        "--storage",
        url,
        "-o",
        "best.yml",
        cwd=tmp_path,
    )
    assert (tmp_path / "best.yml").is_file(), done.stdout
    study = load_study(open_storage(str(url)), "mixed")
    complete = study.get_trials(states=(TrialState.COMPLETE,))
    assert len(complete) >= 2, [t.state for t in study.trials]
    for trial in complete:
        chosen = tmp_path / f"trial{trial.number}.yml"
        args = ("export", "--study", "mixed", "--storage", url, "--trial", trial.number)
        assert cli(*args, "-o", chosen).exit_code == 0
        hyperscan("fit", chosen, "-o", f"fit{trial.number}", "--no-progress", cwd=tmp_path)
        validation = [
            m["chi2_per_point"]["validation"] for m in _members(tmp_path / f"fit{trial.number}")
        ]
        assert sum(validation) / 2 == trial.value  # bit for bit: refitted in its batch


def _broken(theory: Path, tmp_path: Path, how: str) -> tuple[Path, str]:
    """A copy of the theory folder broken `how`, and the dataset to ask of it."""
    share = tmp_path / "share"
    shutil.copytree(theory, share)
    table = share / "theory_99000001" / "fastkernel" / "DYE605.pineappl.lz4"
    if how == "missing table":
        table.unlink()
    elif how == "damaged table":
        table.write_bytes(table.read_bytes()[:100])
    elif how == "no folder":
        shutil.rmtree(share)
    return share, "DYE999_Z0_XSEC" if how == "unknown dataset" else "DYE605_Z0_38P8GEV_DW_PXSEC"


@pytest.mark.parametrize(
    ("how", "message"),
    [
        ("no folder", r"data\.real: theory folder .*share does not exist"),
        ("missing table", "needs the FK table DYE605, which theory 99000001 lacks"),
        ("damaged table", "DYE605.pineappl.lz4 is damaged or not a PineAPPL file"),
        ("unknown dataset", "unknown commondata dataset 'DYE999_Z0_XSEC'"),
    ],
)
def test_a_bad_theory_folder_is_one_line_and_writes_nothing(theory, tmp_path, how, message):
    share, dataset = _broken(theory, tmp_path, how)
    card = scan_card(data=_data(share), epochs=10)
    card["data"]["real"]["datasets"] = [{"dataset": dataset}]
    del card["scan"]
    result = cli("fit", write_card(tmp_path / "fit.yml", card), "-o", tmp_path / "out")
    error = assert_clean_failure(result)
    assert re.search(message, error), error
    assert error.count("\n") == 1
    assert not (tmp_path / "out").exists()
