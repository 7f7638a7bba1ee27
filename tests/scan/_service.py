# SPDX-License-Identifier: GPL-3.0-or-later
"""What the tests of the scan service share. They run it as users do: real worker processes
on one study, on the embedded journal file and on PostgreSQL; kills, signals, diverging
trials, bad input, export → fit.

Every worker is a separate ``python -m hyperscan worker`` process (each imports TensorFlow, a few
seconds), with a 1 s heartbeat and a 3 s grace period so that a dead worker's trial is retried
within seconds. The runcards are tiny (tiny closure data, one small layer, 100 epochs, no XLA)
except where a trial must last long enough to be interrupted.
"""

from __future__ import annotations

import copy
import math
import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import optuna
import pytest
import sqlalchemy
import yaml
from click.testing import CliRunner, Result
from optuna.exceptions import StorageInternalError
from optuna.trial import FrozenTrial, TrialState

from hyperscan.cli import main
from hyperscan.scan import open_storage
from hyperscan.scan.storage import STORAGE_ENV, load_study

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


def dropped_connection(statement: str = "SELECT trials") -> Exception:
    """What Optuna raises when the database goes away under `statement`."""
    try:
        raise sqlalchemy.exc.OperationalError(
            statement, {}, Exception("server closed the connection unexpectedly")
        )
    except sqlalchemy.exc.OperationalError as cause:
        try:
            raise StorageInternalError("An exception is raised during the commit.") from cause
        except StorageInternalError as error:
            return error


def fail_first_result(storage: Any, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The first COMPLETE written to `storage` raises a dropped connection instead; the list
    it returns gets that trial's id."""
    write = storage.set_trial_state_values
    outages: list[int] = []

    def fails_once(trial_id, state, values=None):
        if state == TrialState.COMPLETE and not outages:
            outages.append(trial_id)
            raise dropped_connection("UPDATE trials")
        return write(trial_id, state, values)

    monkeypatch.setattr(storage, "set_trial_state_values", fails_once)
    return outages


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


def finished_scan(folder: Path, trials: int, **fit: Any) -> str:
    """Study "s" of a tiny float64 scan of ``trials`` trials of 2 replicas (300 epochs; ``fit``
    sections changed), run to its budget by `hyperscan scan` on a journal in ``folder``; its
    storage URL."""
    card = scan_card(
        scan={"trials": trials, "replicas": 2},
        epochs=300,
        stopping={"patience": 0.3, "threshold_chi2": 50.0},
        training={"precision": "float64", "steps_per_call": 50},
        **fit,
    )
    url = str(folder / "scan.journal")
    create(write_card(folder / "scan.yml", card), url, "s")
    done = cli("scan", folder / "scan.yml", "--storage", url, "--name", "s", "--workers", "1")
    assert done.exit_code == 0, done.output
    return url
