"""benchmarks/xla_bundle.py: the loop exported from TensorFlow runs under jaxlib alone."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from _theory_folder import POSITIVITY, SHARED_DATA, build_theory_folder

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "xla_bundle.py"


def _script(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, str(SCRIPT), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("bundle") / "tiny"
    exported = _script("export", str(directory), "--size", "tiny", "--replicas", "2")
    assert exported.returncode == 0, exported.stderr
    return directory


def test_the_exported_loop_reproduces_tensorflows_step_and_trains(bundle):
    run = _script(
        "run", str(bundle), "--platform", "cpu", "--epochs", "30", "--steps-per-call", "10"
    )
    assert run.returncode == 0, run.stderr
    assert "one step against TensorFlow's" in run.stdout
    assert "2 replicas x 30 epochs in 3 calls of 10" in run.stdout
    assert "2 running, 0 diverged" in run.stdout


def test_a_module_that_does_not_reproduce_the_step_is_refused(bundle, tmp_path):
    wrong = tmp_path / "wrong"
    shutil.copytree(bundle, wrong)
    with np.load(wrong / "reference.npz") as stored:
        reference = dict(stored)
    reference["params"] = reference["params"] + 1e-3  # one learning-rate step off
    np.savez_compressed(wrong / "reference.npz", **reference)
    run = _script("run", str(wrong), "--platform", "cpu", "--epochs", "10")
    assert run.returncode != 0
    assert "does not reproduce TensorFlow's first step" in run.stderr


def test_running_without_a_bundle_says_what_is_missing(tmp_path):
    run = _script("run", str(tmp_path / "nowhere"))
    assert run.returncode != 0
    assert "run export first" in run.stderr
    assert "Traceback" not in run.stderr


def test_export_leaves_an_existing_folder_alone(bundle):
    before = sorted(path.name for path in bundle.iterdir())
    exported = _script("export", str(bundle), "--size", "tiny", "--replicas", "2")
    assert exported.returncode != 0
    assert "exists" in exported.stderr
    assert sorted(path.name for path in bundle.iterdir()) == before


@pytest.mark.parametrize(("option", "value"), [("--steps-per-call", "0"), ("--epochs", "-1")])
def test_counts_that_are_not_positive_are_refused(tmp_path, option, value):
    # 0 steps per call would loop for ever on the GPU node, 0 epochs divide by zero.
    run = _script("run", str(tmp_path), option, value)
    assert run.returncode == 2
    assert f"argument {option}: {value} is not positive" in run.stderr


def test_a_loop_of_hadronic_and_compound_observables_runs_under_jaxlib(
    tmp_path, skip_or_fail_on_ci
):
    """--data-from: the loop of a theory folder's DIS, Drell–Yan, RATIO and ASY data with a
    hadronic positivity set, exported and run as a GPU node runs it (here on the CPU)."""
    if not (SHARED_DATA / "fktables").is_dir():
        skip_or_fail_on_ci(f"real-data kit not found at {SHARED_DATA}")
    theory = build_theory_folder(tmp_path / "share")
    names = [
        "NMC_NC_NOTFIXED_P_EM-F2-HEPDATA",
        "DYE605_Z0_38P8GEV_DW_PXSEC",
        "DYE866_Z0_800GEV_DW_RATIO_PDXSECRATIO",
        "D0_WPWM_1P96TEV_ASY",
    ]
    real = {
        "theory": str(theory),
        "datasets": [{"dataset": name} for name in names],
        "closure": {"level": 1},
        "positivity": [POSITIVITY],
    }
    runcard = tmp_path / "hadronic.yml"
    runcard.write_text(yaml.safe_dump({"data": {"real": real}}))
    directory = tmp_path / "bundle"
    exported = _script("export", str(directory), "--replicas", "2", "--data-from", str(runcard))
    assert exported.returncode == 0, exported.stderr
    run = _script(
        "run", str(directory), "--platform", "cpu", "--epochs", "20", "--steps-per-call", "10"
    )
    assert run.returncode == 0, run.stderr
    assert f"the data of {runcard}, 2 replicas" in run.stdout
    assert "one step against TensorFlow's" in run.stdout
    assert "2 running, 0 diverged" in run.stdout
