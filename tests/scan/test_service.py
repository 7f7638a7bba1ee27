# SPDX-License-Identifier: GPL-3.0-or-later
"""The scan service as users run it: real worker processes on one study, on the embedded
journal file and on PostgreSQL; kills, signals, diverging trials, bad input, export → fit.

Every worker is a separate ``python -m hyperscan worker`` process (each imports TensorFlow, a few
seconds), with a 1 s heartbeat and a 3 s grace period so that a dead worker's trial is retried
within seconds. The runcards are tiny (tiny closure data, one small layer, 100 epochs, no XLA)
except where a trial must last long enough to be interrupted.
"""

from __future__ import annotations

import copy
import errno
import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

import optuna
import pytest
import sqlalchemy
import yaml
from _waiting import wait_for
from click.testing import CliRunner, Result
from optuna.exceptions import StorageInternalError
from optuna.trial import FrozenTrial, TrialState

import hyperscan.scan._api
from hyperscan.cli import _scan as _scan_cli
from hyperscan.cli import main
from hyperscan.cli._render import trial_line
from hyperscan.runcard import FitRuncard, load_fit_runcard, scan_runcard_from_dict
from hyperscan.scan import ScanError, StorageError, open_storage, write_atomically
from hyperscan.scan._local import trial_record
from hyperscan.scan._storage import STORAGE_ENV, load_study, redact, resolve_url, study_names
from hyperscan.scan._study import create_study

optuna.logging.set_verbosity(optuna.logging.WARNING)

HEARTBEAT_INTERVAL = 1
GRACE_PERIOD = 3
WORKER_ENV = {
    "HYPERSCAN_HEARTBEAT_INTERVAL": str(HEARTBEAT_INTERVAL),
    "HYPERSCAN_GRACE_PERIOD": str(GRACE_PERIOD),
    # Workers and fits on the CPU, whatever the machine: reproducible and comparable.
    "CUDA_VISIBLE_DEVICES": "-1",
    "TF_CPP_MIN_LOG_LEVEL": "2",
}
# Many TensorFlow processes on a couple of cores can starve a worker's heartbeat thread for
# longer than 3 s; a live trial would then be failed as stale, which crashes its worker (see
# test_worker_survives_its_trial_failed_as_stale). Tests of parallel workers that kill nobody
# give them a long grace period instead.
PARALLEL = {"HYPERSCAN_GRACE_PERIOD": "600"}
HOST = socket.gethostname()
FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)

ADAM = {"adam": {"learning_rate": {"low": 1.0e-3, "high": 3.0e-2, "log": True}}}
# Without clipping, SGD at these learning rates blows the loss past divergence.max_loss at once.
SGD_DIVERGING = {"sgd": {"learning_rate": {"low": 1.0e6, "high": 1.0e8, "log": True}}}

TINY_SCAN: dict[str, Any] = {
    "data": {"closure": {"size": "tiny", "level": 1}},
    "architecture": {"nodes": [4], "activations": ["tanh"]},
    "optimizer": {"clipnorm": None},
    "epochs": 100,
    "training": {"steps_per_call": 50, "jit": False},
    "scan": {
        "trials": 4,
        "replicas": 1,
        "sampler": {"name": "random", "seed": 0},
        "pruner": {"name": "none"},
        "space": {"optimizer": ADAM},
    },
}


def long_card(epochs: int = 3000) -> dict[str, Any]:
    """Trials of a few seconds (3000 epochs) or more, to catch one mid-fit and interrupt it.

    A patience of all the epochs never runs out, so every trial runs all its epochs; the
    trial reports at every sync (the median pruner prunes nothing in a study's first 5 trials),
    so an intermediate value in the storage shows that its fit is under way.
    """
    return scan_card(
        scan={"trials": 2, "pruner": {"name": "median", "report_every": 1}},
        epochs=epochs,
        stopping={"patience": 1.0},
    )


DIVERGENCE_REASON = (
    r"replica \d+ at epoch \d+: (non-finite loss|loss above divergence\.max_loss|"
    r"non-finite gradient|non-finite parameters after the update)"
)


# --------------------------------------------------------------------------- helpers


def merged(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of ``base`` with ``changes`` merged in, section by section."""
    out = copy.deepcopy(base)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def scan_card(*, scan: dict[str, Any] | None = None, **fit: Any) -> dict[str, Any]:
    """The tiny scan runcard with changes to its `scan` section and to fit sections."""
    return merged(TINY_SCAN, {**fit, "scan": scan or {}})


def write_card(path: Path, card: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(card, sort_keys=False))
    return path


def cli(*args: str) -> Result:
    """`hyperscan ARGS` in this process (no TensorFlow start-up per call)."""
    return CliRunner().invoke(main, [str(a) for a in args])


def assert_clean_failure(result: Result) -> str:
    """Exit code 2, one `error:` message on stderr, no traceback; returns the message."""
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    assert result.stderr.startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    return result.stderr


def create(runcard: Path, url: str, name: str) -> None:
    result = cli("study", "create", runcard, "--storage", url, "--name", name)
    assert result.exit_code == 0, result.output
    assert f"study {name!r} created" in result.stdout


def trials_of(url: str, name: str) -> list[FrozenTrial]:
    return load_study(open_storage(url), name).get_trials()


def by_state(trials: list[FrozenTrial], *states: TrialState) -> list[FrozenTrial]:
    return [t for t in trials if t.state in states]


def snapshot(url: str) -> Any:
    """Everything the storage holds: the journal's bytes, or every row of every table."""
    if not url.startswith("postgresql"):
        path = Path(url)
        return path.read_bytes() if path.exists() else None
    engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool)
    try:
        with engine.connect() as connection:
            tables = sorted(sqlalchemy.inspect(connection).get_table_names())
            return {
                table: sorted(
                    (
                        tuple(row)
                        for row in connection.execute(sqlalchemy.text(f'SELECT * FROM "{table}"'))
                    ),
                    key=repr,
                )
                for table in tables
            }
    finally:
        engine.dispose()


def worker_done(log: str) -> int:
    """The trial count of a worker's closing line `worker done: N trials, ...`."""
    match = re.search(r"^worker done: (\d+) trials?, (.*)$", log, flags=re.MULTILINE)
    assert match, f"no closing line in the worker's output:\n{log}"
    return int(match.group(1))


class Worker:
    """One `python -m hyperscan worker` process, its output in files (no pipe to fill up)."""

    def __init__(
        self, folder: Path, index: int, url: str, study: str, *extra: str, **env: str
    ) -> None:
        self.out = folder / f"worker-{index}.out"
        self.err = folder / f"worker-{index}.err"
        command = [sys.executable, "-m", "hyperscan", "worker", "--study", study]
        command += ["--storage", url, "--threads", "1", *extra]
        env = {k: v for k, v in os.environ.items() if k != STORAGE_ENV} | WORKER_ENV | env
        with self.out.open("w") as out, self.err.open("w") as err:
            self.process = subprocess.Popen(command, stdout=out, stderr=err, env=env)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def id(self) -> str:
        """The user attribute `worker` its trials carry."""
        return f"{HOST}:{self.pid}"

    def logs(self) -> str:
        return f"--- stdout\n{self.out.read_text()}--- stderr\n{self.err.read_text()}"

    def wait(self, timeout: float) -> int:
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            pytest.fail(f"worker {self.pid} still running after {timeout} s:\n{self.logs()}")

    def check_alive(self) -> None:
        if self.process.poll() is not None:
            pytest.fail(
                f"worker {self.pid} exited early ({self.process.returncode}):\n{self.logs()}"
            )


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Callable[..., Worker]]:
    """Start worker processes; any still running at the end of the test is killed."""
    started: list[Worker] = []

    def start(url: str, study: str, *extra: str, **env: str) -> Worker:
        worker = Worker(tmp_path, len(started), url, study, *extra, **env)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        if worker.process.poll() is None:
            worker.process.kill()
            worker.process.wait()


@pytest.fixture(autouse=True)
def _no_storage_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(STORAGE_ENV, raising=False)


@pytest.fixture(params=["journal", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A storage nobody has used yet: a journal file path, or an empty PostgreSQL database."""
    if request.param == "journal":
        return str(tmp_path / "scan.journal")
    return request.getfixturevalue("postgres_url")


def assert_nothing_lost(trials: list[FrozenTrial], budget: int) -> None:
    """Every trial finished (complete, pruned or trashed); numbers 0..n-1; budget met."""
    assert sorted(t.number for t in trials) == list(range(len(trials)))
    unfinished = [(t.number, t.state.name) for t in trials if t.state not in FINISHED]
    assert not unfinished, unfinished
    assert len(trials) >= budget
    for trial in trials:
        if trial.state == TrialState.COMPLETE:
            assert math.isfinite(trial.value)
            assert "trashed" not in trial.user_attrs
        assert trial.user_attrs["worker"].startswith(f"{HOST}:")


# --------------------------------------------------------------------------- parallel workers


def test_four_workers_finish_every_trial(url, tmp_path, workers):
    """4 workers on one study: each trial is complete, pruned or trashed, and none is lost."""
    budget = 12
    card = scan_card(
        scan={
            "trials": budget,
            "space": {"optimizer": SGD_DIVERGING | ADAM},
            "pruner": {"name": "median", "report_every": 1, "warmup_reports": 0},
        }
    )
    create(write_card(tmp_path / "scan.yml", card), url, "four")
    pool = [workers(url, "four", **PARALLEL) for _ in range(4)]
    codes = [worker.wait(timeout=240) for worker in pool]
    assert codes == [0] * 4, "\n".join(w.logs() for w in pool)

    trials = trials_of(url, "four")
    assert_nothing_lost(trials, budget)
    assert len(by_state(trials, *FINISHED)) >= budget
    # Each trial was taken by exactly one of these workers and reported by it.
    assert {t.user_attrs["worker"] for t in trials} <= {w.id for w in pool}
    assert sum(worker_done(w.out.read_text()) for w in pool) == len(trials)
    for worker in pool:
        assert "budget reached" in worker.out.read_text()
        assert "Traceback" not in worker.err.read_text()


def test_sixteen_workers_start_at_once(tmp_path, workers):
    """16 workers started together on a freshly created study: none crashes.

    On the journal only: 16 TensorFlow start-ups cost about a minute of two cores, and the
    storage layer's own test (test_storage.py::test_sixteen_processes_at_once) already runs 16
    processes on PostgreSQL, with and without the schema created first. Run with the `url`
    fixture instead, this test passes on PostgreSQL too, in as much time again.
    """
    url = str(tmp_path / "scan.journal")
    budget = 16
    card = scan_card(scan={"trials": budget})
    create(write_card(tmp_path / "scan.yml", card), url, "crowd")
    pool = [workers(url, "crowd", **PARALLEL) for _ in range(16)]
    codes = [worker.wait(timeout=400) for worker in pool]
    crashed = [w.logs() for w, code in zip(pool, codes, strict=True) if code != 0]
    assert not crashed, f"{len(crashed)} of 16 workers failed; first:\n{crashed[0]}"
    for worker in pool:
        assert "Traceback" not in worker.err.read_text(), worker.logs()

    trials = trials_of(url, "crowd")
    assert_nothing_lost(trials, budget)
    assert by_state(trials, TrialState.COMPLETE) == trials  # adam only: nothing diverges
    assert sum(worker_done(w.out.read_text()) for w in pool) == len(trials)


# --------------------------------------------------------------------------- dead workers


def wait_running(study: optuna.Study, worker: Worker) -> FrozenTrial:
    """The trial `worker` is running (its `worker` user attribute names the process), once its
    fit is under way (it reported an intermediate value: see long_card)."""

    def running() -> FrozenTrial | None:
        worker.check_alive()
        for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            if trial.user_attrs.get("worker") == worker.id and trial.intermediate_values:
                return trial
        return None

    return wait_for(running, timeout=120, what=f"worker {worker.pid} to run a trial")


def test_killed_worker_trial_is_failed_and_retried(url, tmp_path, workers):
    """kill -9 mid-trial: the trial goes FAIL once its heartbeat is older than the grace period,
    and the next worker re-runs it (Optuna's retry callback: system attrs `failed_trial`,
    `retry_history`) to completion with the same parameters."""
    card = long_card()
    create(write_card(tmp_path / "scan.yml", card), url, "kill")
    study = load_study(open_storage(url), "kill")

    first = workers(url, "kill")
    killed = wait_running(study, first)
    os.kill(first.pid, signal.SIGKILL)
    assert first.wait(timeout=30) == -signal.SIGKILL
    killed_at = time.monotonic()
    assert study.trials[killed.number].state == TrialState.RUNNING  # nobody finished it

    # Past the grace period (plus a heartbeat) the trial is stale for the next worker's first
    # ask, so a single trial of that worker must be the retry.
    time.sleep(max(0.0, killed_at + GRACE_PERIOD + HEARTBEAT_INTERVAL + 0.5 - time.monotonic()))
    second = workers(url, "kill", "--n-trials", "1")
    assert second.wait(timeout=180) == 0, second.logs()

    trials = study.get_trials()
    assert [t.number for t in trials] == [killed.number, killed.number + 1]
    failed, retry = trials
    assert failed.state == TrialState.FAIL
    assert failed.user_attrs["worker"] == first.id
    assert retry.state == TrialState.COMPLETE, second.logs()
    assert retry.params == failed.params
    assert retry.system_attrs["failed_trial"] == failed.number
    assert retry.system_attrs["retry_history"] == [failed.number]
    assert retry.user_attrs["worker"] == second.id
    assert math.isfinite(retry.value)
    assert not by_state(trials, TrialState.RUNNING, TrialState.WAITING)
    if not url.startswith("postgresql"):
        assert list(Path(url + ".heartbeats").iterdir()) == []  # no heartbeat file left


def test_worker_survives_its_trial_failed_as_stale(tmp_path, workers):
    """A worker paused past the grace period (preempted, swapped out, starved of CPU) finds on
    waking that its trial was failed and re-queued by another worker. It must not crash: it
    drops that result and goes on, here with the re-queued trial. (Journal only: the handling
    is the worker's, not the storage's.)"""
    url = str(tmp_path / "scan.journal")
    card = long_card()
    create(write_card(tmp_path / "scan.yml", card), url, "pause")
    storage = open_storage(url, heartbeat_interval=HEARTBEAT_INTERVAL, grace_period=GRACE_PERIOD)
    study = load_study(storage, "pause")

    worker = workers(url, "pause", "--n-trials", "2")
    taken = wait_running(study, worker)
    os.kill(worker.pid, signal.SIGSTOP)
    try:
        time.sleep(GRACE_PERIOD + HEARTBEAT_INTERVAL + 0.5)
        # What the next ask of any other worker does first.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            optuna.storages.fail_stale_trials(study)
        assert study.trials[taken.number].state == TrialState.FAIL
        assert study.trials[taken.number + 1].state == TrialState.WAITING
    finally:
        os.kill(worker.pid, signal.SIGCONT)
    code = worker.wait(timeout=180)
    assert code == 0, worker.logs()

    trials = study.get_trials()
    assert [t.state for t in trials] == [TrialState.FAIL, TrialState.COMPLETE]
    assert trials[1].params == taken.params
    assert trials[1].user_attrs["worker"] == worker.id
    assert worker_done(worker.out.read_text()) == 2


def stop_with_sigterm(study: optuna.Study, worker: Worker) -> FrozenTrial:
    """SIGTERM the worker once its trial runs; it must exit 0 long before the fit would end."""
    trial = wait_running(study, worker)
    signalled = time.monotonic()
    worker.process.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=60) == 0, worker.logs()
    assert time.monotonic() - signalled < 60  # the whole fit takes minutes: it stopped mid-fit
    log = worker.out.read_text()
    assert f"worker {worker.id} on study " in log.splitlines()[0]  # its start-up line
    assert f"\ntrial {trial.number} started" in log
    assert "worker done: 1 trial (1 re-queued), stopped by signal" in log
    return trial


def test_sigterm_requeues_the_running_trial(url, tmp_path, workers):
    """SIGTERM mid-trial: the worker ends the trial at its next sync, fails it, queues an
    identical one (user attr `retry_of`) and exits 0. The next worker takes the queued trial
    with the same parameters (and is stopped the same way: the fit would last minutes)."""
    card = long_card(epochs=200_000)
    create(write_card(tmp_path / "scan.yml", card), url, "term")
    study = load_study(open_storage(url), "term")

    first = workers(url, "term")
    stopped = stop_with_sigterm(study, first)
    trials = study.get_trials()
    assert [t.number for t in trials] == [stopped.number, stopped.number + 1]
    failed, queued = trials
    assert failed.state == TrialState.FAIL
    assert queued.state == TrialState.WAITING
    assert queued.user_attrs["retry_of"] == failed.number
    assert queued.system_attrs["fixed_params"] == failed.params  # how Optuna queues params
    assert (
        trial_line(trial_record(failed)) == f"trial {failed.number}: re-queued (its worker stopped)"
    )

    status = cli("study", "status", "--study", "term", "--storage", url)
    assert status.exit_code == 0, status.output
    assert "0 complete, 0 pruned, 0 trashed, 1 fail, 0 running, 1 waiting" in status.stdout
    assert f"retried: {failed.number} → {queued.number}" in status.stdout

    second = workers(url, "term")
    taken = stop_with_sigterm(study, second)
    assert taken.number == queued.number  # the queued trial, not a new one
    assert taken.params == failed.params
    started = f"trial {taken.number} started (retry of trial {failed.number}): {taken.params}"
    assert started in second.out.read_text()
    trials = study.get_trials()
    assert [t.state for t in trials] == [TrialState.FAIL, TrialState.FAIL, TrialState.WAITING]
    assert trials[2].user_attrs["retry_of"] == queued.number
    assert trials[2].system_attrs["fixed_params"] == failed.params

    errors = [w.err.read_text() for w in (first, second)]
    assert not any("Traceback" in text for text in errors), errors


# --------------------------------------------------------------------------- diverging trials


def test_diverging_trials_are_trashed_with_their_reason(url, tmp_path, workers):
    """A diverging replica trashes its trial (PRUNED + reason); the worker goes on; export never
    picks a trashed trial; status lists them. Workers salt the sampler seed with their process
    id, so the first two trials are enqueued (one diverging, one not) to make both certain."""
    budget = 4
    card = scan_card(scan={"trials": budget, "space": {"optimizer": SGD_DIVERGING | ADAM}})
    create(write_card(tmp_path / "scan.yml", card), url, "diverge")
    study = load_study(open_storage(url), "diverge")
    study.enqueue_trial({"optimizer": "sgd", "sgd.learning_rate": 1.0e7})
    study.enqueue_trial({"optimizer": "adam", "adam.learning_rate": 1.0e-2})

    worker = workers(url, "diverge")
    assert worker.wait(timeout=180) == 0, worker.logs()
    trials = study.get_trials()
    assert_nothing_lost(trials, budget)
    assert len(trials) == budget  # one worker: exactly the budget

    trashed = [t for t in trials if "trashed" in t.user_attrs]
    assert trashed and trashed[0].number == 0
    for trial in trashed:
        assert trial.state == TrialState.PRUNED
        assert trial.params["optimizer"] == "sgd"
        reason = trial.user_attrs["trashed"]
        assert re.fullmatch(rf"\d+ diverged: {DIVERGENCE_REASON}(; {DIVERGENCE_REASON})*", reason)
        assert trial.user_attrs["fit"]["diverged"] >= 1
        assert trial.user_attrs["fit"]["redrawn_starts"] == 0  # diverged in training, not at start
    # The worker went on after trashing trial 0, and said so on the way.
    log = worker.out.read_text()
    assert "trial 0: trashed in" in log and trials[0].user_attrs["trashed"] in log
    assert {t.user_attrs["worker"] for t in trials} == {worker.id}
    assert trials[1].state == TrialState.COMPLETE
    assert trials[1].datetime_start >= trials[0].datetime_complete
    assert worker_done(log) == budget

    exported = cli("export", "--study", "diverge", "--storage", url, "-o", tmp_path / "best.yml")
    assert exported.exit_code == 0, exported.output
    number = int(re.search(r"^# trial: (\d+)$", (tmp_path / "best.yml").read_text(), re.M)[1])
    assert trials[number].state == TrialState.COMPLETE
    assert "trashed" not in trials[number].user_attrs
    assert load_fit_runcard(tmp_path / "best.yml").optimizer.name == "adam"

    # Asked for by number, a trashed trial exports too (to watch it diverge), saying so.
    chosen = tmp_path / "trashed.yml"
    exported = cli("export", "--study", "diverge", "--storage", url, "--trial", 0, "-o", chosen)
    reason = trials[0].user_attrs["trashed"]
    assert exported.stdout == f"trial 0 (trashed: {reason}) written to {chosen}\n"
    assert f"\n# value: trashed: {reason}\n" in chosen.read_text()
    assert load_fit_runcard(chosen).optimizer.name == "sgd"
    args = ("export", "--study", "diverge", "--storage", url, "-o", chosen, "--force")
    missing = assert_clean_failure(cli(*args, "--trial", budget))
    assert f"study 'diverge' has no trial {budget} (trials 0 to {budget - 1})" in missing

    status = cli("study", "status", "--study", "diverge", "--storage", url)
    assert status.exit_code == 0, status.output
    assert f"{len(trashed)} trashed" in status.stdout
    listed = status.stdout.split("\ntrashed:\n", 1)[1]
    for trial in trashed:
        assert f"  trial {trial.number}: {trial.user_attrs['trashed']}" in listed

    with warnings.catch_warnings():  # a trial asked for by hand: no heartbeat
        warnings.simplefilter("ignore", UserWarning)
        running = study.ask()  # values not drawn yet: nothing to export
    refused = assert_clean_failure(cli(*args, "--trial", running.number))
    assert f"trial {running.number} of study 'diverge' is running: only a complete" in refused


def test_export_refuses_a_trial_without_drawn_values_cleanly(tmp_path):
    """A trial ended outside a worker (by hand, or through the dashboard) before it drew its
    values has no runcard: pruned, it is refused with a message, not a traceback; a failed one
    is said to have failed."""
    url = str(tmp_path / "scan.journal")
    create(write_card(tmp_path / "scan.yml", TINY_SCAN), url, "s")
    study = load_study(open_storage(url), "s")
    with warnings.catch_warnings():  # trials asked for by hand: no heartbeat
        warnings.simplefilter("ignore", UserWarning)
        undrawn, failed = study.ask(), study.ask()
    study.tell(undrawn, state=TrialState.PRUNED)
    study.tell(failed, state=TrialState.FAIL)
    args = ("export", "--study", "s", "--storage", url, "-o", tmp_path / "t.yml", "--trial")
    refused = assert_clean_failure(cli(*args, undrawn.number))
    assert f"trial {undrawn.number} of study 's' has no fit runcard" in refused
    assert "the parameters do not match the search space" in refused
    refused = assert_clean_failure(cli(*args, failed.number))
    assert f"trial {failed.number} of study 's' failed: only a complete" in refused
    assert not (tmp_path / "t.yml").exists()


# --------------------------------------------------------------------------- bad input


def test_bad_search_space_writes_nothing(url, tmp_path):
    """A range with low > high is refused before the storage is touched."""
    bad = scan_card(
        scan={"space": {"optimizer": {"adam": {"learning_rate": {"low": 0.1, "high": 0.01}}}}}
    )
    runcard = write_card(tmp_path / "bad.yml", bad)
    message = assert_clean_failure(cli("study", "create", runcard, "--storage", url))
    assert "scan.space.optimizer.adam.learning_rate.high" in message
    assert "expected low < high" in message
    if url.startswith("postgresql"):
        assert snapshot(url) == {}  # not even the schema
    else:
        assert snapshot(url) is None
        assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yml"]


def test_a_fold_holding_out_everything_is_refused(tmp_path):
    names = ["TOY_HERA_NC_F2P", "TOY_HERA_CC_F2WP", "TOY_NUTEV_XF3WP", "TOY_GLUON"]
    card = scan_card(scan={"folds": [names[:2], names[2:]]}, data={"datasets": names[:2]})
    runcard = write_card(tmp_path / "bad.yml", card)
    url = str(tmp_path / "scan.journal")
    message = assert_clean_failure(cli("study", "create", runcard, "--storage", url))
    assert "scan.folds[1][0]: 'TOY_NUTEV_XF3WP' is not among the fitted datasets" in message
    card["scan"]["folds"] = [names[:2]]
    runcard = write_card(tmp_path / "bad.yml", card)
    message = assert_clean_failure(cli("study", "create", runcard, "--storage", url))
    assert "scan.folds[0]: holds out every fitted dataset" in message
    assert snapshot(url) is None


def test_outputs_never_replace_the_inputs(tmp_path):
    """`scan -o` always rewrites its file and `--force` replaces one: neither may take the
    scan runcard or the journal holding every study; a trailing '/' names no file."""
    url = str(tmp_path / "scan.journal")
    runcard = write_card(tmp_path / "scan.yml", TINY_SCAN)
    create(runcard, url, "s")
    before = (runcard.read_bytes(), snapshot(url))
    for args, said in (
        (["scan", runcard, "-o", runcard], "is the scan runcard"),
        (["scan", runcard, "-o", url], "is the storage's file"),
        (["export", "--study", "s", "-o", url], "is the storage's file"),  # not "use --force"
        (["report", "--study", "s", "-o", url, "--force"], "is the storage's file"),
    ):
        message = assert_clean_failure(cli(*args, "--storage", url))
        assert said in message
    database = tmp_path / "scan.db"
    message = assert_clean_failure(
        cli("export", "--study", "s", "--storage", f"sqlite:///{database}", "-o", database)
    )
    assert "is the storage's file" in message and not database.exists()
    assert (runcard.read_bytes(), snapshot(url)) == before
    folder = cli("export", "--study", "s", "--storage", url, "-o", f"{tmp_path}/new/")
    assert folder.exit_code == 2 and "ends in '/', as a folder does" in folder.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scan.journal", "scan.yml"]


@pytest.fixture
def appearing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """best.yml, which another process writes after write_atomically looked for it (as the
    result is staged) and before it publishes its own."""
    path = tmp_path / "best.yml"
    mkstemp = tempfile.mkstemp

    def stage_then_another_writes(*args: Any, **kwargs: Any) -> tuple[int, str]:
        staged = mkstemp(*args, **kwargs)
        path.write_text("another process's\n")
        return staged

    monkeypatch.setattr(tempfile, "mkstemp", stage_then_another_writes)
    return path


def test_an_output_that_appears_while_it_is_written_is_kept(appearing, tmp_path):
    with pytest.raises(ScanError, match=f"^{re.escape(str(appearing))} exists; use --force"):
        write_atomically(appearing, "exported\n")
    assert appearing.read_text() == "another process's\n"
    assert [p.name for p in tmp_path.iterdir()] == ["best.yml"]  # no staged file left
    write_atomically(appearing, "exported\n", force=True)
    assert appearing.read_text() == "exported\n"
    assert [p.name for p in tmp_path.iterdir()] == ["best.yml"]


@pytest.mark.parametrize("refusal", [errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV])
def test_an_output_is_written_where_the_file_system_has_no_hard_links(
    tmp_path, monkeypatch, refusal
):
    """Hard links publish a new output without replacing one that appeared meanwhile; where
    the file system has none, the output is renamed into place as before."""

    def no_links(*args: Any, **kwargs: Any) -> NoReturn:
        raise OSError(refusal, os.strerror(refusal))

    monkeypatch.setattr(os, "link", no_links)
    path = tmp_path / "best.yml"
    write_atomically(path, "exported\n")
    assert path.read_text() == "exported\n"
    assert [p.name for p in tmp_path.iterdir()] == ["best.yml"]
    with pytest.raises(ScanError, match="exists; use --force"):  # the check before staging
        write_atomically(path, "again\n")


def test_an_output_gets_the_mode_a_plain_open_gives(tmp_path):
    mask = os.umask(0o027)
    try:
        write_atomically(tmp_path / "best.yml", "exported\n")
    finally:
        os.umask(mask)
    assert (tmp_path / "best.yml").stat().st_mode & 0o777 == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["best.yml"]


@pytest.mark.parametrize(
    "command",
    [
        ["study", "create", "scan.yml"],
        ["study", "status", "--study", "s"],
        ["study", "list"],
        ["export", "--study", "s", "-o", "best.yml"],
        ["report", "--study", "s", "-o", "report.html"],
    ],
)
def test_ctrl_c_in_a_short_command_exits_130_as_the_long_ones_do(tmp_path, monkeypatch, command):
    """Not click's "Aborted!" and status 1, which a batch script reads as a failure."""

    def interrupted(*args: Any, **kwargs: Any) -> NoReturn:
        raise KeyboardInterrupt

    monkeypatch.chdir(tmp_path)
    write_card(tmp_path / "scan.yml", TINY_SCAN)
    monkeypatch.setattr(hyperscan.scan._api, "open_storage", interrupted)
    result = cli(*command, "--storage", tmp_path / "scan.journal")
    assert result.exit_code == 130, result.output
    assert result.stderr == "interrupted: nothing was half-written\n"
    assert "Aborted!" not in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scan.yml"]


def test_a_stopped_scan_says_so_in_its_exit_status(tmp_path):
    """SIGTERM to `hyperscan scan` (a batch system's) stops its workers as Ctrl-C does, and
    the scan exits 130 rather than report the missing best trial as the user's mistake."""
    write_card(tmp_path / "long.yml", long_card(epochs=200_000))
    url = str(tmp_path / "hyperscan.journal")
    scan = subprocess.Popen(
        [sys.executable, "-m", "hyperscan", "scan", "long.yml", "--workers", "1"],
        cwd=tmp_path,
        env=os.environ | WORKER_ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: _reported(url, "long"), timeout=180, what="the first trial's report")
        scan.send_signal(signal.SIGTERM)
        stdout, stderr = scan.communicate(timeout=120)
    finally:
        scan.kill()
    assert scan.returncode == 130, stdout + stderr
    assert "stopping: the running trials end at their next sync" in stdout
    assert stderr.startswith("interrupted: study 'long' has no complete trial yet")
    assert "the same command resumes the study" in stderr and "Traceback" not in stderr
    assert [t.state for t in trials_of(url, "long")] == [TrialState.FAIL, TrialState.WAITING]


def _reported(url: str, name: str) -> bool:
    """Whether a trial of the study has reported (the study may not exist yet)."""
    if not os.path.exists(url) or name not in study_names(open_storage(url)):
        return False
    return any(t.intermediate_values for t in trials_of(url, name))


@pytest.mark.parametrize("command", ["study create", "scan"])
def test_a_fit_runcard_given_to_a_scan_command_says_so(tmp_path, command):
    fit_card = {key: value for key, value in TINY_SCAN.items() if key != "scan"}
    runcard = write_card(tmp_path / "fit.yml", fit_card)
    url = str(tmp_path / "scan.journal")
    message = assert_clean_failure(cli(*command.split(), runcard, "--storage", url))
    assert f"{runcard} is a fit runcard (it has no 'scan:' section)" in message
    assert f"`hyperscan fit {runcard} -o OUTDIR`" in message
    assert snapshot(url) is None


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


@pytest.mark.parametrize("option", ["--from", "--to", "--as"])
def test_study_copy_refuses_an_empty_storage_or_name(tmp_path, monkeypatch, option):
    monkeypatch.chdir(tmp_path)
    values = {"--from": "a.journal", "--to": "b.journal", "--as": "t", option: ""}
    result = cli("study", "copy", "--study", "s", *[x for kv in values.items() for x in kv])
    assert result.exit_code == 2 and f"'{option}': is empty" in result.output, result.output
    assert list(tmp_path.iterdir()) == []


def test_study_create_refuses_an_empty_name(tmp_path):
    runcard = write_card(tmp_path / "scan.yml", TINY_SCAN)
    url = str(tmp_path / "scan.journal")
    result = cli("study", "create", runcard, "--storage", url, "--name", "")
    assert result.exit_code == 2 and "'--name': is empty" in result.output, result.output
    assert snapshot(url) is None


def test_a_split_leaving_members_nothing_to_train_on_is_refused(tmp_path):
    """As a fold holding out everything is: for the scan's members, folds and all."""
    names = ["TOY_HERA_NC_F2P", "TOY_HERA_CC_F2WP", "TOY_NUTEV_XF3WP", "TOY_GLUON"]
    card = scan_card(scan={"folds": [names[:2], names[2:]]}, data={"training_fraction": 0.05})
    runcard = write_card(tmp_path / "bad.yml", card)
    url = str(tmp_path / "scan.journal")
    message = assert_clean_failure(cli("study", "create", runcard, "--storage", url))
    assert "data.training_fraction: 0.05 leaves replica" in message
    assert snapshot(url) is None
    searched = {"data.training_fraction": {"low": 0.05, "high": 0.5}}
    card = scan_card(scan={"space": {"parameters": searched}})
    runcard = write_card(tmp_path / "bad.yml", card)
    message = assert_clean_failure(cli("study", "create", runcard, "--storage", url))
    assert "scan.space.parameters.data.training_fraction: 0.05 leaves replica" in message
    assert snapshot(url) is None


def test_a_validation_objective_refuses_a_training_fraction_searched_up_to_1(tmp_path):
    """Where the fraction reaches 1 a trial has no validation point, and no value."""
    for searched in ({"choices": [0.75, 1.0]}, {"low": 0.5, "high": 1.0}):
        card = scan_card(scan={"space": {"parameters": {"data.training_fraction": searched}}})
        runcard = write_card(tmp_path / "bad.yml", card)
        url = str(tmp_path / "scan.journal")
        message = assert_clean_failure(cli("study", "create", runcard, "--storage", url))
        assert "scan.space.parameters.data.training_fraction: reaches 1, where the validation" in (
            message
        )
        assert snapshot(url) is None


def test_unknown_study_lists_existing_ones(url, tmp_path):
    create(write_card(tmp_path / "scan.yml", TINY_SCAN), url, "alpha")
    create(write_card(tmp_path / "scan.yml", TINY_SCAN), url, "beta")
    before = snapshot(url)
    output = tmp_path / "best.yml"
    # a worker given --threads (as batch scripts do) also checks the study first
    for command in (
        ["worker"],
        ["worker", "--threads", "1"],
        ["study", "status"],
        ["export", "-o", output],
    ):
        result = cli(*command, "--study", "gamma", "--storage", url)
        message = assert_clean_failure(result)
        assert "no study named 'gamma'" in message, command
        assert "existing: alpha, beta" in message, command
    assert snapshot(url) == before
    assert not output.exists()
    too_many = cli("worker", "--study", "alpha", "--storage", url, "--threads", "5000")
    assert "--threads 5000: at most 1024" in assert_clean_failure(too_many)


@pytest.mark.parametrize("command", ["export", "report"])
def test_an_output_under_a_file_is_refused_first(command, tmp_path):
    """Checked before the storage is opened: no study is needed to see the path is wrong."""
    (tmp_path / "a-file").write_text("")
    target = tmp_path / "a-file" / "out"
    result = cli(command, "--study", "s", "--storage", tmp_path / "none.journal", "-o", target)
    assert "a-file is a file, not a folder" in assert_clean_failure(result)


COMMANDS = {
    "study create": ["study", "create", "{runcard}"],
    "worker": ["worker", "--study", "s"],
    "study status": ["study", "status", "--study", "s"],
    "study list": ["study", "list"],
    "export": ["export", "--study", "s", "-o", "{output}"],
    "scan": ["scan", "{runcard}", "--workers", "1", "-o", "{output}"],
}


def command_line(name: str, runcard: Path, output: Path, storage: str) -> list[str]:
    args = [a.format(runcard=runcard, output=output) for a in COMMANDS[name]]
    return [*args, "--storage", storage]


@pytest.mark.parametrize("command", list(COMMANDS))
def test_wrong_storage_url(command, tmp_path, monkeypatch):
    """Unknown scheme; a closed port fails fast with `connection refused`; a password in the
    URL is never printed; nothing is written anywhere."""
    monkeypatch.chdir(tmp_path)
    runcard = write_card(tmp_path / "s.yml", TINY_SCAN)
    output = tmp_path / "best.yml"
    from hyperscan.cli._tensorflow import configure_tensorflow

    configure_tensorflow()  # TensorFlow's start-up is not what is timed below

    message = assert_clean_failure(cli(*command_line(command, runcard, output, "mysql://u@h/db")))
    assert "unsupported storage URL scheme 'mysql'" in message
    assert "postgresql://" in message and "journal://" in message  # what would work

    for storage in (
        "postgresql://postgres@127.0.0.1:1/test",
        "postgresql://postgres:s3cret@127.0.0.1:1/x",
    ):
        start = time.monotonic()
        result = cli(*command_line(command, runcard, output, storage))
        took = time.monotonic() - start
        message = assert_clean_failure(result)
        assert "connection refused by 127.0.0.1:1" in message
        assert took < 5, f"{took:.1f} s to report a closed port"
        assert "s3cret" not in result.output
    assert "postgres:***@127.0.0.1:1/x" in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yml"]


def test_password_never_printed_by_a_real_server(postgres_server, tmp_path):
    """The server answers (no such database); the message names it, never the password."""
    storage = sqlalchemy.engine.make_url(postgres_server).set(
        password="s3cret", database="hyperscan_no_such_database"
    )
    storage = storage.render_as_string(hide_password=False)
    runcard = write_card(tmp_path / "s.yml", TINY_SCAN)
    for command in COMMANDS:
        result = cli(*command_line(command, runcard, tmp_path / "best.yml", storage))
        message = assert_clean_failure(result)
        assert "database 'hyperscan_no_such_database' does not exist" in message, command
        assert "s3cret" not in result.output, command
        assert ":***@" in message


def _connection_dropped(*args: Any, **kwargs: Any) -> NoReturn:
    """A read as the database goes away under it, as Optuna reports it."""
    try:
        raise sqlalchemy.exc.OperationalError(
            "SELECT", {}, Exception("server closed the connection unexpectedly")
        )
    except sqlalchemy.exc.OperationalError as cause:
        raise StorageInternalError("invalid data in the commit") from cause


# The storage methods behind a study's trials and its user attributes (the runcard): on
# PostgreSQL Optuna's cache reads the trials through _get_trials.
READS = {
    "trials": {"journal": "get_all_trials", "postgresql": "_get_trials"},
    "runcard": {"journal": "get_study_user_attrs", "postgresql": "get_study_user_attrs"},
}


@pytest.mark.parametrize("read", list(READS))
@pytest.mark.parametrize("command", ["study status", "study list", "export", "report"])
def test_a_connection_dropped_after_the_storage_opened_is_a_message(
    url, tmp_path, monkeypatch, command, read
):
    """The storage opens, then the database goes away while the command reads the study:
    the cause in a line naming the storage (never its password), exit 2, not a traceback."""
    backend = "postgresql" if url.startswith("postgresql") else "journal"
    if backend == "postgresql":  # trust authentication: the server ignores the password
        url = sqlalchemy.engine.make_url(url).set(password="s3cret")
        url = url.render_as_string(hide_password=False)
    runcard = write_card(tmp_path / "s.yml", TINY_SCAN)
    create(runcard, url, "s")
    # a finished trial: else `report` refuses the study before it reads its runcard
    load_study(open_storage(url), "s").add_trial(optuna.trial.create_trial(value=1.0))
    monkeypatch.setattr(type(open_storage(url)), READS[read][backend], _connection_dropped)
    output = tmp_path / "best.yml"
    if command == "report":
        result = cli("report", "--study", "s", "--storage", url, "-o", output)
    else:
        result = cli(*command_line(command, runcard, output, url))
    message = assert_clean_failure(result)
    where = redact(resolve_url(url))
    assert message.endswith(f": server closed the connection unexpectedly (storage: {where})\n")
    assert message.count("\n") == 1 and "invalid data in the commit" not in message
    assert "s3cret" not in result.output
    assert not output.exists()


def test_different_runcard_under_existing_name_is_refused(url, tmp_path):
    create(write_card(tmp_path / "scan.yml", TINY_SCAN), url, "s")
    before = snapshot(url)
    other = write_card(tmp_path / "other.yml", scan_card(scan={"trials": 5}, epochs=200))
    result = cli("study", "create", other, "--storage", url, "--name", "s")
    message = assert_clean_failure(result)
    assert "study 's'" in message and "exists with a different runcard" in message
    assert "(epochs: 100 → 200; scan.trials: 4 → 5)" in message  # what changed
    assert "only scan.trials, the budget, may change" in message
    assert snapshot(url) == before  # stored runcard unchanged, no new study
    assert study_names(open_storage(url)) == ["s"]
    stored = load_study(open_storage(url), "s").user_attrs["hyperscan:runcard"]
    assert yaml.safe_load(stored)["scan"]["trials"] == TINY_SCAN["scan"]["trials"]


@pytest.mark.parametrize("replicas", [10, 1])
def test_a_top_level_replica_count_in_a_scan_runcard_is_refused(tmp_path, replicas):
    """A scan fits scan.replicas per trial: a top-level `replicas` would be ignored silently
    (even 1, the default, when scan.replicas is not), so it is refused, before any storage is
    made."""
    card = write_card(tmp_path / "scan.yml", scan_card(replicas=replicas, scan={"replicas": 2}))
    url = tmp_path / "scan.journal"
    message = assert_clean_failure(cli("study", "create", card, "--storage", url))
    assert "scan.yml: replicas: a scan fits 'scan.replicas' replicas per trial (2 here)" in message
    assert not url.exists()


def test_a_study_stored_with_a_top_level_replica_count_still_resumes(url, tmp_path):
    """Only a new study refuses a top-level `replicas`: a study stored with one before the
    refusal is created again as a no-op and takes a new budget, as other studies do."""
    create(write_card(tmp_path / "scan.yml", TINY_SCAN), url, "s")
    study = load_study(open_storage(url), "s")
    stored = study.user_attrs["hyperscan:runcard"]
    assert "\nreplicas: 1\n" in stored
    study.set_user_attr("hyperscan:runcard", stored.replace("\nreplicas: 1\n", "\nreplicas: 3\n"))
    old = write_card(tmp_path / "old.yml", scan_card(replicas=3))
    again = cli("study", "create", old, "--storage", url, "--name", "s")
    assert again.exit_code == 0, again.output
    assert "study 's' exists with this runcard" in again.stdout
    more = write_card(tmp_path / "more.yml", scan_card(replicas=3, scan={"trials": 9}))
    raised = cli("study", "create", more, "--storage", url, "--name", "s")
    assert raised.exit_code == 0, raised.output
    assert "budget changed from 4 to 9 trials" in raised.stdout
    new = cli("study", "create", old, "--storage", url, "--name", "new")
    assert "replicas: a scan fits 'scan.replicas'" in assert_clean_failure(new)
    assert study_names(open_storage(url)) == ["s"]


def test_study_list_gives_each_study_of_the_storage_in_a_line(url, tmp_path):
    """A cluster's database holds many studies: `study list` names each, with its trials by
    state, how much of its budget is spent and its best value (a study another program made
    has no budget, and its direction may not be hyperscan's, so no best either)."""
    where = redact(resolve_url(url))
    create(write_card(tmp_path / "gone.yml", TINY_SCAN), url, "gone")
    optuna.delete_study(study_name="gone", storage=open_storage(url))
    assert cli("study", "list", "--storage", url).stdout == f"no studies in {where}\n"

    create(write_card(tmp_path / "a.yml", TINY_SCAN), url, "a")
    create(write_card(tmp_path / "b.yml", scan_card(scan={"trials": 9})), url, "b")
    study = load_study(open_storage(url), "a")
    study.add_trial(optuna.trial.create_trial(value=2.5))
    study.add_trial(optuna.trial.create_trial(value=1.25))
    trashed = optuna.trial.create_trial(state=TrialState.PRUNED, user_attrs={"trashed": "why"})
    study.add_trial(trashed)
    other = optuna.create_study(storage=open_storage(url), study_name="o", direction="maximize")
    other.add_trial(optuna.trial.create_trial(value=7.0))

    listed = cli("study", "list", "--storage", url)
    assert listed.exit_code == 0, listed.output
    assert listed.stdout == (
        f"studies in {where}:\n"
        "  a: 2 complete, 1 trashed (3 of 4 finished), best 1.25\n"
        "  b: no trials (0 of 9 finished)\n"
        "  o: 1 complete (no hyperscan runcard)\n"
    )


def test_a_runcard_that_changes_only_the_budget_changes_the_study_s(url, tmp_path):
    """A study that spent its budget takes more trials of the same kind: the runcard with a
    larger scan.trials changes the budget, and workers read it from the study."""
    create(write_card(tmp_path / "scan.yml", TINY_SCAN), url, "s")
    more = write_card(tmp_path / "more.yml", scan_card(scan={"trials": 9}))
    result = cli("study", "create", more, "--storage", url, "--name", "s")
    assert result.exit_code == 0, result.output
    where = redact(resolve_url(url))
    assert result.stdout == (
        f"study 's' in {where}: budget changed from 4 to 9 trials (running workers take it "
        "after their trial)\n"
    )
    status = cli("study", "status", "--study", "s", "--storage", url)
    assert "(budget 9 finished)" in status.stdout, status.output
    again = cli("study", "create", more, "--storage", url, "--name", "s")
    assert f"study 's' exists with this runcard in {where}" in again.stdout

    # Lowered to what has finished: said to leave no trial for any worker.
    study = load_study(open_storage(url), "s")
    study.add_trial(optuna.trial.create_trial(value=1.0))
    fewer = write_card(tmp_path / "fewer.yml", scan_card(scan={"trials": 1}))
    lowered = cli("study", "create", fewer, "--storage", url, "--name", "s")
    assert "budget changed from 9 to 1 trial (running" in lowered.stdout
    assert lowered.stdout.endswith("; 1 trial has finished, so no worker takes another\n")


def test_same_runcard_again_is_a_no_op(url, tmp_path):
    runcard = write_card(tmp_path / "scan.yml", TINY_SCAN)
    create(runcard, url, "s")
    before = snapshot(url)
    again = cli("study", "create", runcard, "--storage", url, "--name", "s")
    assert again.exit_code == 0, again.output
    # where: a study made somewhere unexpected shows at once
    assert f"study 's' exists with this runcard in {redact(resolve_url(url))}" in again.stdout
    assert snapshot(url) == before


@pytest.mark.parametrize(
    ("interruption", "raised"),
    [
        (OSError(errno.ENOSPC, "No space left on device"), StorageError),
        (KeyboardInterrupt(), KeyboardInterrupt),
    ],
)
def test_a_study_whose_creation_is_cut_short_is_not_left_behind(url, interruption, raised):
    """A study created but not given its runcard (a failed write, Ctrl-C) is removed: left,
    it would hold its name with a study no command opens or creates again."""
    storage = open_storage(url, create=True)
    write = storage.set_study_user_attr
    calls = []

    def cut_short(study_id, key, value):
        calls.append(key)
        if len(calls) == 2:  # the runcard written, the fingerprint not
            raise interruption
        return write(study_id, key, value)

    runcard = scan_runcard_from_dict(TINY_SCAN)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(storage, "set_study_user_attr", cut_short)
        with pytest.raises(raised):
            create_study(runcard, storage, "s")
    assert "s" not in study_names(storage)
    assert create_study(runcard, storage, "s")[1].created


def test_a_study_another_process_is_creating_is_said_so(url):
    """Two `study create` at once: the one that loses the race may find the study before the
    winner stored its runcard. It says so, rather than call the runcard different or missing;
    run again, it compares the runcards."""
    storage = open_storage(url, create=True)
    runcard = scan_runcard_from_dict(TINY_SCAN)
    real_create = optuna.create_study

    def won_by_another(**kwargs: Any) -> NoReturn:
        real_create(**kwargs)  # the other process's study, its runcard not written yet
        raise optuna.exceptions.DuplicatedStudyError(kwargs["study_name"])

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(optuna, "create_study", won_by_another)
        with pytest.raises(ScanError, match="being created by another process at this moment"):
            create_study(runcard, storage, "s")
    assert "s" in study_names(storage)  # the winner's: not the loser's to remove


def test_a_study_of_an_earlier_version_is_the_same_study(url, tmp_path):
    """A study's runcard stored before a key existed (here: the top-level `folds`) is the
    same runcard: its settings are compared, not its text."""
    runcard = write_card(tmp_path / "scan.yml", TINY_SCAN)
    create(runcard, url, "s")
    study = load_study(open_storage(url), "s")
    stored = study.user_attrs["hyperscan:runcard"]
    assert "\nfolds: []\n" in stored
    study.set_user_attr("hyperscan:runcard", stored.replace("\nfolds: []\n", "\n"))
    before = snapshot(url)
    again = cli("study", "create", runcard, "--storage", url, "--name", "s")
    assert again.exit_code == 0, again.output
    assert "study 's' exists with this runcard" in again.stdout
    assert snapshot(url) == before


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


# --------------------------------------------------------------------------- export → fit


def scan_and_export(
    url: str, name: str, card: dict[str, Any], tmp_path: Path, workers: Callable[..., Worker]
) -> tuple[Path, Result]:
    """Study `name` created from `card`, run by one worker to its budget, its best exported."""
    create(write_card(tmp_path / "scan.yml", card), url, name)
    worker = workers(url, name)
    assert worker.wait(timeout=180) == 0, worker.logs()
    best = tmp_path / "best.yml"
    exported = cli("export", "--study", name, "--storage", url, "-o", best)
    assert exported.exit_code == 0, exported.output
    return best, exported


def refit(runcard: Path, outdir: Path) -> list[dict[str, Any]]:
    """`hyperscan fit RUNCARD` as a user runs it, on the workers' CPU settings: its members."""
    fitted = subprocess.run(
        [sys.executable, "-m", "hyperscan", "fit", runcard, "-o", outdir, "--no-progress"],
        env=os.environ | WORKER_ENV,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert fitted.returncode == 0, fitted.stdout + fitted.stderr
    return json.loads((outdir / "results.json").read_text())["members"]


def test_export_then_fit_reproduces_the_trial_value(url, tmp_path, workers):
    """`hyperscan fit` of the exported runcard gives back the trial's value: the mean over
    replicas of the validation chi2 per point. Same seeds, the same thread count (pinned in the
    export) and the same machine: equal to a relative 1e-6 (in practice bit for bit)."""
    card = scan_card(scan={"trials": 2, "replicas": 2}, architecture={"nodes": [6]})
    best, exported = scan_and_export(url, "repro", card, tmp_path, workers)
    study = load_study(open_storage(url), "repro")
    trial = study.best_trial
    assert f"trial {trial.number} (value {trial.value:.6g}) written to {best}" in exported.stdout

    text = best.read_text()
    header = dict(re.findall(r"^# (\w+): (.*)$", text, flags=re.MULTILINE))
    assert header["study"] == "repro"
    assert int(header["trial"]) == trial.number
    assert float(header["value"]) == trial.value
    assert header["objective"] == "mean of validation chi2 per point over 2 replicas"
    runcard = load_fit_runcard(best)
    assert runcard.training.threads == 1  # the worker's --threads
    assert runcard.replica_ids == (1, 2)

    members = refit(best, tmp_path / "out")
    assert [m["replica"] for m in members] == [1, 2]
    validation = [m["chi2_per_point"]["validation"] for m in members]
    assert sum(validation) / len(validation) == pytest.approx(trial.value, rel=1e-6, abs=0)

    # Any complete trial, not only the best, asked for by number.
    (other,) = [t for t in study.trials if t.number != trial.number]
    assert other.state == TrialState.COMPLETE
    chosen = tmp_path / "other.yml"
    args = ("export", "--study", "repro", "--storage", url, "--trial", other.number, "-o", chosen)
    assert f"trial {other.number} (value {other.value:.6g})" in cli(*args).stdout
    validation = [m["chi2_per_point"]["validation"] for m in refit(chosen, tmp_path / "other")]
    assert sum(validation) / len(validation) == pytest.approx(other.value, rel=1e-6, abs=0)


def test_export_then_fit_reproduces_a_k_fold_trial(tmp_path, workers):
    """A k-fold trial's value is the mean over folds of the mean over replicas of the held-out
    chi2 per point. Its exported runcard carries the folds, so `hyperscan fit` refits the same
    folds × replicas members and gives the value back (1e-6 relative, as above), here with
    the loop compiled by XLA, as studies run it by default."""
    url = str(tmp_path / "scan.journal")
    folds = [["TOY_HERA_NC_F2P", "TOY_NUTEV_XF3WP"], ["TOY_HERA_CC_F2WP", "TOY_GLUON"]]
    card = scan_card(
        scan={"trials": 2, "replicas": 2, "folds": folds, "objective": {"chi2": "held_out"}},
        training={"jit": True},
    )
    best, _ = scan_and_export(url, "kfold", card, tmp_path, workers)
    trial = load_study(open_storage(url), "kfold").best_trial
    runcard = load_fit_runcard(best)
    assert runcard.training.jit
    assert [list(fold) for fold in runcard.folds] == folds
    assert "# folds: the trial's k-fold ensemble" in best.read_text()

    members = refit(best, tmp_path / "out")
    assert [(m["fold"], m["replica"]) for m in members] == [(0, 1), (0, 2), (1, 1), (1, 2)]
    per_fold = [
        sum(m["chi2_per_point"]["held_out"] for m in members if m["fold"] == k) / 2
        for k in range(2)
    ]
    assert sum(per_fold) / 2 == pytest.approx(trial.value, rel=1e-6, abs=0)


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


def test_a_seeded_scan_with_one_worker_draws_the_same_trials_again(tmp_path, monkeypatch):
    """The sampler's seed is salted by worker number, not process id: run again, one worker
    proposes the same parameters and, the fits being seeded, gets the same values."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    card = scan_card(scan={"trials": 3, "sampler": {"name": "tpe", "seed": 5}})
    runs = []
    for run in ("first", "second"):
        folder = tmp_path / run
        folder.mkdir()
        monkeypatch.chdir(folder)
        write_card(folder / "seeded.yml", card)
        result = cli("scan", "seeded.yml", "--workers", "1")
        assert result.exit_code == 0, result.output
        runs.append(
            [(t.params, t.value) for t in trials_of(str(folder / "hyperscan.journal"), "seeded")]
        )
    assert runs[0] == runs[1] and len({repr(p) for p, _ in runs[0]}) == 3


def test_local_scan_exports_a_fit_runcard(tmp_path, monkeypatch):
    """`hyperscan scan RUNCARD --workers 2` in an empty folder: the embedded journal there,
    two workers, and a best runcard that loads as a fit runcard."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")  # for its workers (default heartbeats)
    write_card(tmp_path / "quick.yml", scan_card(scan={"trials": 4}))
    result = cli("scan", "quick.yml", "--workers", "2")
    assert result.exit_code == 0, result.output
    assert "study 'quick' created" in result.stdout
    best = re.search(r"^best: trial (\d+), value .* → quick-best\.yml$", result.stdout, re.M)
    assert best, result.stdout

    runcard = load_fit_runcard(tmp_path / "quick-best.yml")
    assert isinstance(runcard, FitRuncard) and runcard.optimizer.name == "adam"
    study = load_study(open_storage(str(tmp_path / "hyperscan.journal")), "quick")
    trials = study.get_trials()
    assert_nothing_lost(trials, 4)
    assert len({t.user_attrs["worker"] for t in trials}) <= 2
    assert int(best[1]) == study.best_trial.number
    text = (tmp_path / "quick-best.yml").read_text()
    assert "# study: quick" in text and f"# trial: {best[1]}" in text

    # Again, budget spent, more workers than cores: none starts (each would import TensorFlow
    # for nothing), the best is exported again.
    again = cli("scan", "quick.yml", "--workers", "1000")
    assert again.exit_code == 0, again.output
    assert f"starting {len(os.sched_getaffinity(0))}, more would compete" in again.stderr
    assert "0 workers (budget already spent)" in again.stdout
    assert len(
        load_study(open_storage(str(tmp_path / "hyperscan.journal")), "quick").trials
    ) == len(trials)

    # The runcard with a budget of one trial more than the study holds (two workers may have
    # finished one beyond the budget of 4): the same study takes that one trial.
    budget = len(trials) + 1
    write_card(tmp_path / "quick.yml", scan_card(scan={"trials": budget}))
    more = cli("scan", "quick.yml", "--workers", "1")
    assert more.exit_code == 0, more.output
    resumed = f"study 'quick' resumed: budget {budget} trials (was 4) of 1×1 members, 1 worker"
    assert resumed in more.stdout
    listed = re.findall(r"^trial (\d+):", more.stdout, re.M)
    assert listed == [str(len(trials))], more.stdout  # this run's trial, not the earlier again
    study = load_study(open_storage(str(tmp_path / "hyperscan.journal")), "quick")
    assert_nothing_lost(study.get_trials(), budget)
    assert len(study.trials) == budget
