# SPDX-License-Identifier: GPL-3.0-or-later
"""docker/slurm-workers.sbatch: syntax, shellcheck, and what it starts, with stand-ins for
SLURM's environment, squeue and hyperscan."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

# Prints the argv it was given, one per line, as the stand-in for `hyperscan`.
ECHO_ARGS = '#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done\n'


def _sbatch(deploy, tmp_path: Path, *args: str, squeue: str | None = None, **env: str):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    launcher = bin_dir / "fake-hyperscan"
    launcher.write_text(ECHO_ARGS)
    launcher.chmod(0o755)
    if squeue is not None:
        (bin_dir / "squeue").write_text(f"#!/bin/sh\necho '{squeue}'\n")
        (bin_dir / "squeue").chmod(0o755)
    base = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("SLURM", "HYPERSCAN"))
    }
    base["PATH"] = f"{bin_dir}{os.pathsep}{base.get('PATH', '')}"
    base["HYPERSCAN_LAUNCHER"] = str(launcher)
    return subprocess.run(
        ["bash", str(deploy.slurm_script), *args],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=30,
    )


def _worker_args(result) -> list[str]:
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    return lines[lines.index("worker") :]


def test_slurm_script_is_valid_bash(deploy):
    subprocess.run(["bash", "-n", str(deploy.slurm_script)], check=True)
    assert os.access(deploy.slurm_script, os.X_OK)
    header = deploy.slurm_script.read_text()
    for directive in ("--array=", "--gres=gpu:1", "--time=", "--signal=B:TERM@"):
        assert re.search(rf"^#SBATCH {re.escape(directive)}", header, re.MULTILINE), directive
    # the storage URL comes from the submitting environment, never from the script
    assert not re.search(r"(?m)^\s*(export\s+)?HYPERSCAN_STORAGE=", header)


def test_slurm_script_passes_shellcheck(deploy, skip_or_fail_on_ci):
    if shutil.which("shellcheck") is None:
        skip_or_fail_on_ci(
            "shellcheck is not installed (apt-get install shellcheck)",
            on_ci="shellcheck is missing (.ci/run installs it)",
        )
    result = subprocess.run(
        ["shellcheck", "--severity=style", str(deploy.slurm_script)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout


def test_one_worker_on_the_allotted_gpu_stopping_before_the_walltime(deploy, tmp_path):
    end = int(time.time()) + 3600
    result = _sbatch(
        deploy,
        tmp_path,
        "kfold-scan",
        "--quiet",
        HYPERSCAN_STORAGE="postgresql://user@dbhost/scans",
        SLURM_JOB_END_TIME=str(end),
        SLURM_CPUS_PER_TASK="8",
        SLURM_ARRAY_TASK_ID="3",
    )
    args = _worker_args(result)
    contexts = deploy.parse_invocation(args, {"HYPERSCAN_STORAGE": "postgresql://u@h/d"})
    params = contexts[-1].params
    assert params["name"] == "kfold-scan"
    assert params["device"] == "gpu:0"  # SLURM's CUDA_VISIBLE_DEVICES makes it the allotted one
    assert params["threads"] == 8
    assert params["quiet"] is True
    assert 3600 - 300 - 5 <= params["stop_after"] <= 3600 - 300  # the default margin
    assert "postgresql" not in result.stdout  # the URL travels in the environment only


@pytest.mark.parametrize(
    ("left", "expected"),
    [("1-02:03:04", 93784), ("2:03:04", 7384), ("59:09", 3549), ("45", 45), ("08:09", 489)],
)
def test_walltime_from_squeue_when_slurm_does_not_export_the_end(deploy, tmp_path, left, expected):
    result = _sbatch(
        deploy,
        tmp_path,
        squeue=left,
        HYPERSCAN_STORAGE="x",
        HYPERSCAN_STUDY="s",
        SLURM_JOB_ID="42",
        HYPERSCAN_WALLTIME_MARGIN="30",
        HYPERSCAN_DEVICE="cpu",
    )
    params = deploy.parse_invocation(_worker_args(result), {"HYPERSCAN_STORAGE": "x"})[-1].params
    assert params["stop_after"] == max(expected - 30, 0)
    assert params["device"] == "cpu" and params["name"] == "s"


def test_no_stop_after_without_a_known_walltime(deploy, tmp_path):
    for squeue in ("UNLIMITED", "NOT_SET", None):
        result = _sbatch(
            deploy, tmp_path, "s", squeue=squeue, HYPERSCAN_STORAGE="x", SLURM_JOB_ID="42"
        )
        assert "--stop-after" not in _worker_args(result), squeue


def test_a_missing_study_or_storage_is_refused_with_exit_code_2(deploy, tmp_path):
    no_storage = _sbatch(deploy, tmp_path, "s")
    assert no_storage.returncode == 2 and "HYPERSCAN_STORAGE" in no_storage.stderr
    no_study = _sbatch(deploy, tmp_path, HYPERSCAN_STORAGE="x")
    assert no_study.returncode == 2 and "study" in no_study.stderr
    bad_margin = _sbatch(
        deploy, tmp_path, "s", HYPERSCAN_STORAGE="x", HYPERSCAN_WALLTIME_MARGIN="5m"
    )
    assert bad_margin.returncode == 2
