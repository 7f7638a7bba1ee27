# SPDX-License-Identifier: GPL-3.0-or-later
"""A worker whose memory grew past --max-growth since its first trial (TensorFlow keeps every
model it compiled) lets its trials end and goes on in a fresh process: `hyperscan worker` by
exec, the same process id, with what is left of its limits; `hyperscan scan` by starting that
worker again.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
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
    merged,
    trials_of,
    write_card,
)
from optuna.trial import TrialState

from hyperscan.cli import _scan as _scan_cli
from hyperscan.cli._render import event_line
from hyperscan.runcard import scan_runcard_from_dict
from hyperscan.scan import _limits, _local, open_storage
from hyperscan.scan._local import RESTART_EXIT, supervise
from hyperscan.scan._study import create_study
from hyperscan.scan._worker import run_worker
from hyperscan.scan.results import WorkerReport
from hyperscan.scan.storage import load_study

MIB = _limits.MIB


@pytest.mark.parametrize("slots", [1, 2])
def test_a_worker_takes_no_trial_once_its_memory_outgrew_the_limit(tmp_path, monkeypatch, slots):
    """Memory that grows by 1 MiB per trial, against a limit of 2.5 MiB: the worker takes no
    trial once it grew by 3 MiB since its first trial, lets those in flight end (none is cut
    short), and says how far it grew; without a limit it takes the whole budget."""
    memory = [100 * MIB]
    monkeypatch.setattr(_limits, "resident_bytes", lambda: memory[0])

    def grow(trial: optuna.trial.FrozenTrial) -> None:
        memory[0] += MIB

    storage = open_storage(str(tmp_path / "s.journal"), create=True)
    card = merged(TINY_SCAN, {"scan": {"trials": 8}})
    create_study(scan_runcard_from_dict(card), storage, "s")
    report = run_worker("s", storage, on_trial=grow, slots=slots, max_growth_mib=2.5)
    trials = load_study(storage, "s").get_trials()
    assert report.grown_mib is not None and report.grown_mib > 2.5
    assert not report.budget_reached
    assert 3 <= report.trials < 8
    assert [t.state for t in trials] == [TrialState.COMPLETE] * report.trials

    unlimited = run_worker("s", storage, on_trial=grow, slots=slots)
    assert unlimited.grown_mib is None and unlimited.budget_reached
    assert len(load_study(storage, "s").get_trials()) == 8


def _fake_worker(monkeypatch, report: WorkerReport) -> dict:
    """`hyperscan worker` in this process, its trials a stand-in that ends with ``report``;
    returns what the worker loop was asked, and the restart asked of the worker, if any."""
    asked: dict = {}

    def worker_loop(*args, **kwargs):
        asked["loop"] = kwargs
        return report

    def restart(earlier):
        asked["restart"] = earlier
        raise SystemExit(0)

    monkeypatch.setattr(_scan_cli, "configure_or_fail", lambda device, threads: "CPU")
    monkeypatch.setattr("hyperscan.scan._worker.run_worker", worker_loop)
    monkeypatch.setattr(_scan_cli, "_restart", restart)
    return asked


def test_a_restarting_worker_hands_its_next_process_what_is_left(tmp_path, monkeypatch):
    """The restarted process counts on from what the earlier ones did: its trials against
    --n-trials, its time against --timeout and --stop-after, and the closing counts."""
    url = str(tmp_path / "scan.journal")
    create(write_card(tmp_path / "scan.yml", TINY_SCAN), url, "s")
    started = time.monotonic() - 100
    earlier = {"trials": 2, "requeued": 1, "started": started, "restarts": 1}
    monkeypatch.setenv(_scan_cli.RESTART_ENV, json.dumps(earlier))
    grown = WorkerReport(3, stopped_by_signal=False, budget_reached=False, grown_mib=2100.0)
    asked = _fake_worker(monkeypatch, grown)
    options = ["--n-trials", "9", "--timeout", "1000", "--stop-after", "5000"]
    result = cli("worker", "--study", "s", "--storage", url, *options)
    assert result.exit_code == 0, result.output
    loop = asked["loop"]
    assert loop["n_trials"] == 7 and loop["max_growth_mib"] == 2048
    assert 890 < loop["timeout"] <= 900 and 4890 < loop["stop_after"] <= 4900
    assert asked["restart"] == _scan_cli._Earlier(5, 1, started, 2)
    assert _scan_cli.RESTART_ENV not in os.environ  # read, then gone
    lines = result.output.splitlines()
    assert lines[0].endswith("CPU, 1 trial slot, restart 1")
    assert lines[-1] == (
        "worker restarting: its memory grew by 2100 MiB since its first trial, past "
        "--max-growth 2048 MiB (TensorFlow keeps every model it compiled); 5 trials "
        "(1 re-queued) so far"
    )


@pytest.mark.parametrize(
    ("options", "report", "closing"),
    [
        ([], {"budget_reached": True}, "worker done: 3 trials, budget reached"),
        (["--n-trials", "3"], {}, "worker done: 3 trials, limit reached"),
        (["--timeout", "0"], {}, "worker done: 3 trials, limit reached"),
        ([], {"stopped_by_signal": True}, "worker done: 3 trials, stopped by signal"),
    ],
)
def test_a_worker_ended_otherwise_does_not_restart(tmp_path, monkeypatch, options, report, closing):
    """Grown, but its budget, its own limits or a signal ended it anyway: a fresh process would
    take nothing."""
    url = str(tmp_path / "scan.journal")
    create(write_card(tmp_path / "scan.yml", TINY_SCAN), url, "s")
    ended = {"stopped_by_signal": False, "budget_reached": False} | report
    asked = _fake_worker(monkeypatch, WorkerReport(3, **ended, grown_mib=2100.0))
    result = cli("worker", "--study", "s", "--storage", url, "--quiet", *options)
    assert (result.exit_code, result.output) == (0, closing + "\n")
    assert "restart" not in asked


def test_max_growth_0_never_restarts_and_a_stray_hand_over_is_refused(tmp_path, monkeypatch):
    url = str(tmp_path / "scan.journal")
    create(write_card(tmp_path / "scan.yml", TINY_SCAN), url, "s")
    asked = _fake_worker(monkeypatch, WorkerReport(0, False, True))
    result = cli("worker", "--study", "s", "--storage", url, "--max-growth", "0")
    assert result.exit_code == 0, result.output
    assert asked["loop"]["max_growth_mib"] is None
    monkeypatch.setenv(_scan_cli.RESTART_ENV, "{not json")
    refused = assert_clean_failure(cli("worker", "--study", "s", "--storage", url))
    assert refused.startswith(f"error: ${_scan_cli.RESTART_ENV} is not what a restarting worker")


def test_a_worker_restarts_itself_in_its_own_process(tmp_path):
    """The real thing: a worker allowed 1 MiB of growth restarts after its second trial (the
    second traces a model of its own), as the same process, and the restarted process takes
    only the trials --n-trials leaves, drawn anew."""
    url = str(tmp_path / "scan.journal")
    space = {"layers": {"low": 1, "high": 2}, "units": {"low": 2, "high": 40}}
    card = merged(TINY_SCAN, {"scan": {"trials": 10, "space": space}})
    create(write_card(tmp_path / "scan.yml", card), url, "s")
    command = [sys.executable, "-m", "hyperscan", "worker", "--study", "s", "--storage", url]
    worker = subprocess.Popen(
        [*command, "--max-growth", "1", "--n-trials", "3", "--threads", "1"],
        env=os.environ | WORKER_ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = worker.communicate(timeout=300)
    assert worker.returncode == 0, out + err
    starts = re.findall(r"^worker \S+:(\d+) on study .*$", out, flags=re.MULTILINE)
    assert starts == [str(worker.pid)] * 2, out  # one restart, as the same process
    assert out.count("restart 1\n") == 1, out
    assert "worker restarting: its memory grew by " in out
    assert out.endswith("worker done: 3 trials, limit reached\n"), out
    trials = trials_of(url, "s")
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 3
    assert len({repr(sorted(t.params.items())) for t in trials}) == 3


def _exits(code: int) -> multiprocessing.process.BaseProcess:
    process = multiprocessing.get_context("spawn").Process(target=sys.exit, args=(code,))
    process.start()
    return process


def test_the_scan_starts_a_worker_again_once_it_outgrew_its_memory():
    """`hyperscan scan`'s worker that exits RESTART_EXIT is started again, and the scan says
    so; a worker exiting so while the scan stops is not."""

    class Study:
        def get_trials(self, deepcopy=True):
            return []

    started: list[int] = []

    def restart(number: int):
        started.append(number)
        return _exits(0)

    lines: list[str] = []
    codes = supervise(
        [_exits(0), _exits(RESTART_EXIT)],
        Study(),
        lambda e: lines.append(event_line(e)),
        "journal:///s.journal",
        restart=restart,
    )
    assert codes == ([0, 0], False)
    assert started == [1]
    assert lines == [
        "worker 1 restarted: its memory grew by more than 2048 MiB since its first trial "
        "(TensorFlow keeps every model it compiled)"
    ]
    assert supervise([_exits(RESTART_EXIT)], Study(), lines.append, "journal:///s.journal") == (
        [RESTART_EXIT],
        False,
    )


@pytest.mark.parametrize(
    ("report", "code"),
    [
        ({"budget_reached": False}, RESTART_EXIT),
        ({"budget_reached": True}, None),  # the budget is spent: nothing for a fresh worker
    ],
)
def test_a_scan_worker_exits_for_a_restart_only_with_trials_left(
    tmp_path, monkeypatch, report, code
):
    storage = open_storage(str(tmp_path / "s.journal"), create=True)
    create_study(scan_runcard_from_dict(TINY_SCAN), storage, "s")
    asked = {}

    def worker_loop(self, **kwargs):
        asked.update(kwargs)
        return WorkerReport(2, stopped_by_signal=False, **report, grown_mib=2100.0)

    monkeypatch.setattr(_local, "configure_tensorflow", lambda threads: None)
    monkeypatch.setattr("hyperscan.scan._api.Study.run_worker", worker_loop)
    if code is None:
        _local.worker_process("s", str(tmp_path / "s.journal"), 1, 1, 0)
    else:
        with pytest.raises(SystemExit) as exit:
            _local.worker_process("s", str(tmp_path / "s.journal"), 1, 1, 0)
        assert exit.value.code == code
    assert asked["max_growth_mib"] == 2048
