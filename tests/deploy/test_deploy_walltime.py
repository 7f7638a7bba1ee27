# SPDX-License-Identifier: GPL-3.0-or-later
"""`hyperscan worker --stop-after S`: in a batch job, take no trial that would outlast it."""

from __future__ import annotations

import datetime
import statistics
import time
from types import SimpleNamespace

import optuna
import pytest
from click.testing import CliRunner
from optuna.distributions import FloatDistribution
from optuna.trial import FrozenTrial, TrialState

import hyperscan.scan._limits as limits_module
import hyperscan.scan._scheduler as scheduler_module
import hyperscan.scan._worker as worker_module
from hyperscan.cli import main
from hyperscan.runcard import load_scan_runcard
from hyperscan.scan import open_storage
from hyperscan.scan._lifecycle import Ending
from hyperscan.scan._limits import expected_trial_seconds, trial_fits, trial_seconds
from hyperscan.scan._study import create_study
from hyperscan.scan._worker import run_worker

optuna.logging.set_verbosity(optuna.logging.ERROR)
PARAM = "optimizer.learning_rate"


def finished(seconds: float, state: TrialState = TrialState.COMPLETE) -> FrozenTrial:
    end = datetime.datetime.now()
    return FrozenTrial(
        number=0,
        state=state,
        value=1.0 if state == TrialState.COMPLETE else None,
        datetime_start=end - datetime.timedelta(seconds=seconds),
        datetime_complete=end,
        params={PARAM: 0.005},
        distributions={PARAM: FloatDistribution(1e-3, 1e-2, log=True)},
        user_attrs={},
        system_attrs={},
        intermediate_values={},
        trial_id=0,
    )


def test_a_trial_is_expected_to_last_the_median_complete_trial():
    trials = [finished(10), finished(30), finished(1000), finished(5, TrialState.PRUNED)]
    assert trial_seconds(trials) == pytest.approx([10, 30, 1000], abs=1e-3)
    assert expected_trial_seconds([], []) is None
    assert expected_trial_seconds([], [10, 30, 1000]) == 30
    # this worker's own trials first: it may run on other hardware than the rest
    assert expected_trial_seconds([5, 7], [100, 200]) == 6
    assert trial_fits(10, None) and not trial_fits(0, None)
    assert trial_fits(30, 30) and not trial_fits(29.9, 30)


@pytest.fixture
def journal_study(tmp_path, tiny_runcard):
    tiny_runcard.write_text(tiny_runcard.read_text().replace("trials: 4", "trials: 100"))
    journal = tmp_path / "walltime.journal"
    study, _ = create_study(
        load_scan_runcard(tiny_runcard), open_storage(str(journal), create=True), "w"
    )
    return journal, study


def test_worker_takes_no_trial_that_would_outlast_the_walltime(journal_study):
    journal, study = journal_study
    for seconds in (3600, 3000):
        study.add_trial(finished(seconds))
    study.add_trial(finished(10, TrialState.PRUNED))  # pruned trials end early: not counted
    args = ["worker", "--study", "w", "--storage", str(journal), "--stop-after", "1800"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "worker done: 0 trials, walltime: a trial (~3300 s) would not end in the" in (
        result.output
    )
    assert len(study.get_trials()) == 3


def test_worker_stops_when_its_own_trials_no_longer_fit(journal_study, monkeypatch):
    """No complete trial in the study: the worker takes one, then goes by its own durations,
    and its trials end before the walltime, without leaving much of it unused.

    The walltime is read off a clock that only the trials advance, so that the worker's own
    start-up, slow on a loaded machine, cannot eat the budget this test is about."""
    journal, study = journal_study
    seconds, stop_after = 0.3, 1.5
    clock = SimpleNamespace(now=0.0)
    monkeypatch.setattr(limits_module, "time", SimpleNamespace(monotonic=lambda: clock.now))

    class Sleepy:
        """A trial that draws its value and takes `seconds` to fit."""

        def __init__(self, runcard, problem, stop, on_start):
            self.stop = stop

        def start(self, trial: optuna.Trial) -> tuple[dict, None]:
            return {PARAM: trial.suggest_float(PARAM, 1e-3, 1e-2, log=True)}, None

        def finish(self, trial, params, result, monitor, trash_reason) -> tuple[Ending, list]:
            return Ending.COMPLETE, [1.0]

    def sleepy_fit(card, **kwargs) -> object:
        time.sleep(seconds)  # the duration the study records, in real time
        clock.now += seconds
        return object()

    monkeypatch.setattr(worker_module, "Objective", Sleepy)
    monkeypatch.setattr(scheduler_module, "run_fit", sleepy_fit)
    report = run_worker("w", open_storage(str(journal)), stop_after=stop_after)
    assert report.walltime_reached and not report.budget_reached
    assert report.trials >= 2
    complete = study.get_trials(states=(TrialState.COMPLETE,))
    assert len(complete) == report.trials
    # Its own trials' recorded durations (real time: `seconds` and the load's overhead on top,
    # so compared with the record, not with a wall-clock tolerance), not the fake clock's.
    recorded = [(t.datetime_complete - t.datetime_start).total_seconds() for t in complete]
    assert report.expected_trial_s == pytest.approx(statistics.median(recorded), abs=1e-6)
    assert report.expected_trial_s >= seconds
    assert report.seconds_left == pytest.approx(stop_after - report.trials * seconds)
    # the next trial would not have ended in time, and the one before it would have
    assert report.seconds_left < report.expected_trial_s <= report.seconds_left + seconds
