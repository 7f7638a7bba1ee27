# SPDX-License-Identifier: GPL-3.0-or-later
"""`hyperscan worker`: its options, a stop while it starts or ends, the threads its study
pins, and the data it must share with its study.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import optuna
import pytest
from _service import (
    TINY_SCAN,
    WORKER_ENV,
    assert_clean_failure,
    cli,
    create,
    scan_card,
    snapshot,
    trials_of,
    write_card,
)
from optuna.trial import TrialState

from hyperscan.cli import _scan as _scan_cli
from hyperscan.runcard import load_fit_runcard
from hyperscan.scan import open_storage
from hyperscan.scan.results import WorkerReport
from hyperscan.scan.storage import load_study


def test_worker_options_are_named_as_typed(tmp_path):
    """A grace period within the heartbeat interval is refused before the storage is opened,
    by the options' names rather than the Python arguments'."""
    url = str(tmp_path / "scan.journal")
    result = cli("worker", "--study", "s", "--storage", url, "--grace-period", "30")
    message = assert_clean_failure(result)
    assert message.startswith("error: --grace-period (30 s) must exceed --heartbeat-interval (60")
    assert snapshot(url) is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--timeout", "nan"], "Invalid value for '--timeout': 'nan' is not a number of seconds"),
        (["--stop-after", "NaN"], "'--stop-after': 'NaN' is not a number of seconds"),
        (["--storage", " "], "'--storage': is empty (an unset variable?)"),
    ],
)
def test_worker_refuses_values_that_would_pass_for_none(tmp_path, monkeypatch, args, message):
    """NaN passes every range check, and an empty --storage would pick the default storage."""
    monkeypatch.chdir(tmp_path)
    result = cli("worker", "--study", "s", *args)
    assert result.exit_code == 2 and message in result.output, result.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("how", ["SIGTERM", "Ctrl-C"])
def test_a_worker_stopped_while_it_starts_exits_0(tmp_path, monkeypatch, how):
    """TensorFlow's import takes seconds: a batch system's SIGTERM then ends the worker as one
    during a trial does (exit 0 and the closing line), not with 143 or click's "Aborted!"."""
    url = str(tmp_path / "scan.journal")
    create(write_card(tmp_path / "scan.yml", TINY_SCAN), url, "s")

    def stopped_while_importing(device, threads):
        if how == "SIGTERM":
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler interrupts this
        raise KeyboardInterrupt

    monkeypatch.setattr(_scan_cli, "configure_or_fail", stopped_while_importing)
    before = signal.getsignal(signal.SIGTERM)
    result = cli("worker", "--study", "s", "--storage", url)
    assert result.exit_code == 0, result.output
    assert result.output.endswith("worker done: 0 trials, stopped by signal\n")
    assert signal.getsignal(signal.SIGTERM) is before
    assert not load_study(open_storage(url), "s").get_trials()


def test_a_worker_stopped_as_it_ends_counts_its_trials(tmp_path, monkeypatch):
    """Between its last trial and its exit a SIGTERM still ends the worker cleanly, and its
    closing line counts the trials it ran, and of those the ones a signal re-queued."""
    url = str(tmp_path / "scan.journal")
    create(write_card(tmp_path / "scan.yml", TINY_SCAN), url, "s")

    def one_trial_then_stopped(*args, on_trial, **kwargs):
        on_trial(optuna.trial.create_trial(value=1.0))
        requeued = {"requeued": True, "worker": "elsewhere:1"}
        on_trial(optuna.trial.create_trial(state=TrialState.FAIL, user_attrs=requeued))
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler interrupts this

    monkeypatch.setattr(_scan_cli, "configure_or_fail", lambda device, threads: None)
    monkeypatch.setattr("hyperscan.scan._worker.run_worker", one_trial_then_stopped)
    result = cli("worker", "--study", "s", "--storage", url, "--quiet")
    closing = "worker done: 2 trials (1 re-queued), stopped by signal\n"
    assert (result.exit_code, result.output) == (0, closing)


@pytest.mark.parametrize(("runs_on", "args", "hinted"), [
    ("GPU 0 (stand-in)", [], True),
    ("GPU 0 (stand-in)", ["--slots", "2"], False),
    ("CPU, all cores", [], False),
])  # fmt: skip
def test_a_one_slot_worker_on_a_gpu_says_what_slots_save(
    tmp_path, monkeypatch, runs_on, args, hinted
):
    """On a GPU a model compiles for 20-40 s: a worker of one slot says so and names
    --slots auto; with slots, or on a CPU, it says nothing of it."""
    url = str(tmp_path / "scan.journal")
    create(write_card(tmp_path / "scan.yml", TINY_SCAN), url, "s")
    monkeypatch.setattr(_scan_cli, "configure_or_fail", lambda device, threads: runs_on)
    no_trials = WorkerReport(0, stopped_by_signal=False, budget_reached=True)
    monkeypatch.setattr("hyperscan.scan._worker.run_worker", lambda *a, **k: no_trials)
    result = cli("worker", "--study", "s", "--storage", url, *args)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].endswith(f"{runs_on}, {args[1] if args else 1} trial slot{'s' if args else ''}")
    assert (_scan_cli.GPU_ONE_SLOT_HINT in lines) == hinted
    assert ("--slots auto" in result.output) == hinted


def test_a_worker_takes_the_threads_its_study_pins(tmp_path):
    """Without --threads a worker uses the study runcard's training.threads; the trial records
    them and the export keeps them, so the refit runs with the trial's thread count."""
    url = str(tmp_path / "scan.journal")
    card = scan_card(scan={"trials": 1}, training={"threads": 2})
    create(write_card(tmp_path / "scan.yml", card), url, "pinned")
    command = [sys.executable, "-m", "hyperscan", "worker", "--study", "pinned"]
    worker = subprocess.run(
        [*command, "--storage", url, "--quiet"],
        env=os.environ | WORKER_ENV,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert worker.returncode == 0, worker.stdout + worker.stderr
    assert worker.stderr == ""  # the study was read before TensorFlow, which starts quietly
    assert worker.stdout == "worker done: 1 trial, budget reached\n"  # --quiet: no trial line
    (trial,) = trials_of(url, "pinned")
    assert trial.user_attrs["fit"]["threads"] == 2
    best = tmp_path / "best.yml"
    assert cli("export", "--study", "pinned", "--storage", url, "-o", best).exit_code == 0
    assert load_fit_runcard(best).training.threads == 2


def test_worker_refuses_data_other_than_the_study_s(url, tmp_path):
    """A worker that builds other data (another hyperscan version, other tables) adds no
    trial; status and export, which need no data, still answer."""
    create(write_card(tmp_path / "scan.yml", TINY_SCAN), url, "s")
    load_study(open_storage(url), "s").set_user_attr("hyperscan:data_fingerprint", "0" * 64)
    before = snapshot(url)
    message = assert_clean_failure(cli("worker", "--study", "s", "--storage", url))
    assert "the data this worker builds differ from those study 's' was created with" in message
    assert "000000000000 in the study" in message
    assert snapshot(url) == before
    status = cli("study", "status", "--study", "s", "--storage", url)
    assert status.exit_code == 0, status.output
    assert "trials: 0 complete" in status.stdout
    export = cli("export", "--study", "s", "--storage", url, "-o", tmp_path / "best.yml")
    assert "study 's' has no complete trial yet" in assert_clean_failure(export)
