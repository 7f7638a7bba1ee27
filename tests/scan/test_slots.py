# SPDX-License-Identifier: GPL-3.0-or-later
"""Workers that fit several trials at once (``--slots P``, issue 40): every trial keeps what it
promises alone (its value, attributes, pruning, trash), a study ends with exactly its budget,
and a signal or a kill -9 loses none of the trials in flight."""

from __future__ import annotations

import logging
import math
import os
import re
import signal
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import optuna
import pytest
from _service import (
    ADAM,
    DIVERGENCE_REASON,
    GRACE_PERIOD,
    HEARTBEAT_INTERVAL,
    PARALLEL,
    SGD_DIVERGING,
    Worker,
    assert_clean_failure,
    by_state,
    cli,
    create,
    dropped_connection,
    fail_first_result,
    long_card,
    scan_card,
    worker_done,
    write_card,
)
from _waiting import wait_for
from optuna.trial import FrozenTrial, TrialState

from hyperscan.runcard import scan_runcard_from_dict
from hyperscan.scan import _limits, open_storage
from hyperscan.scan._study import create_study
from hyperscan.scan._worker import run_worker
from hyperscan.scan.storage import fail_stale_trials, load_study

SLOTS = 3
SLOTS_ARGS = ("--slots", str(SLOTS))
# Attributes that say where and how fast a trial ran, not what it found.
WHERE = ("seconds", "host", "threads", "batch_layout")


def test_slotted_workers_finish_exactly_the_budget(url, tmp_path, workers):
    """Two workers of 3 slots each on a budget of 7: the budget's gate counts the trials in
    flight, so no slot takes an eighth; the first log line says the slots."""
    budget = 7
    card = scan_card(scan={"trials": budget})
    create(write_card(tmp_path / "scan.yml", card), url, "packed")
    pool = [workers(url, "packed", *SLOTS_ARGS, **PARALLEL) for _ in range(2)]
    codes = [worker.wait(timeout=240) for worker in pool]
    assert codes == [0, 0], "\n".join(w.logs() for w in pool)

    trials = load_study(open_storage(url), "packed").get_trials()
    assert len(trials) == budget
    assert by_state(trials, TrialState.COMPLETE) == trials  # adam only: nothing diverges
    assert {t.user_attrs["worker"] for t in trials} <= {w.id for w in pool}
    assert sum(worker_done(w.out.read_text()) for w in pool) == budget
    for worker in pool:
        log = worker.out.read_text()
        assert log.splitlines()[0].endswith(f", {SLOTS} trial slots"), log
        assert "budget reached" in log
        assert "Traceback" not in worker.err.read_text()
    if not url.startswith("postgresql"):
        assert list(Path(url + ".heartbeats").iterdir()) == []  # every beat ended with its trial


def _tell_alike(storage: Any, names: list[str], params: list[dict]) -> None:
    for name in names:
        study = load_study(storage, name)
        for values in params:
            study.enqueue_trial(values)


def _approx(value: Any, rel: float = 1e-6) -> Any:
    """``value`` with every float compared to ``rel``, or to the last digit of the χ²
    summaries, which are stored rounded to 5 decimals (a digit may round the other way);
    None and the rest as they are."""
    if isinstance(value, dict):
        return {key: _approx(item, rel) for key, item in value.items()}
    if isinstance(value, list):
        return [_approx(item, rel) for item in value]
    if isinstance(value, float) and math.isfinite(value):
        return pytest.approx(value, rel=rel, abs=1e-5)
    return value


def _found(trial: FrozenTrial) -> dict:
    """What a trial found: its attributes but where and how fast it ran, and who ran it."""
    attrs = {key: value for key, value in trial.user_attrs.items() if key != "worker"}
    attrs["fit"] = {k: v for k, v in attrs["fit"].items() if k not in WHERE}
    return attrs


def test_each_packed_trial_equals_it_fitted_alone(tmp_path):
    """The same drawn values told to two studies, fitted one at a time and 3 at once (float64):
    each trial's state, value, reports and stored attributes are the same, a trashed one's
    reason too. Trials of different lengths end at different syncs, so slots are refilled
    while others train. The fits are short: over 200 epochs training amplifies the padded
    batch's rounding past 1e-6 on some CPUs (trial 0 at 1e-7 in its value, 4e-6 in its
    experimental χ² on an AMD EPYC VM), over 100 it stays at 1e-14."""
    space = {"optimizer": SGD_DIVERGING | ADAM, "parameters": {"epochs": {"choices": [50, 100]}}}
    card = scan_card(
        scan={
            "trials": 5,
            "replicas": 2,  # a trial's members: not the fit part's one replica
            "space": space,
            "pruner": {"name": "none", "report_every": 1},
        },
        training={"precision": "float64", "jit": False, "steps_per_call": 25},
    )
    storage = open_storage(str(tmp_path / "s.journal"), create=True)
    runcard = scan_runcard_from_dict(card)
    for name in ("alone", "packed"):
        create_study(runcard, storage, name)
    params = [
        {"optimizer": "adam", "adam.learning_rate": 1e-2, "epochs": 100},
        {"optimizer": "adam", "adam.learning_rate": 3e-3, "epochs": 50},
        {"optimizer": "sgd", "sgd.learning_rate": 1e7, "epochs": 100},
        {"optimizer": "adam", "adam.learning_rate": 2e-2, "epochs": 50},
        {"optimizer": "adam", "adam.learning_rate": 5e-3, "epochs": 100},
    ]
    _tell_alike(storage, ["alone", "packed"], params)
    alone = run_worker("alone", storage)
    packed = run_worker("packed", storage, slots=SLOTS)
    assert alone.trials == packed.trials == len(params) and packed.budget_reached

    one, many = (load_study(storage, name).get_trials() for name in ("alone", "packed"))
    assert [t.params for t in many] == [t.params for t in one] == params
    assert "trashed" in many[2].user_attrs and many[2].state == TrialState.PRUNED
    # The packed worker took the fourth trial before the first three all ended.
    assert many[3].datetime_start < max(t.datetime_complete for t in many[:3])
    for a, b in zip(one, many, strict=True):
        assert b.state == a.state, b.number
        # A trial fitted in a slot records its batch, for `export` then `fit` to repeat it.
        assert "batch_layout" not in a.user_attrs["fit"]
        assert b.user_attrs["fit"]["batch_layout"]["slots"] == SLOTS, b.number
        assert b.values == _approx(a.values), b.number
        assert b.intermediate_values == _approx(a.intermediate_values), b.number
        assert a.intermediate_values or a.number == 2  # a report per sync, but a trashed one's
        found, alone = _found(b), _found(a)
        # The ensemble's spread (φ², variance, bias) differences nearby predictions of its
        # replicas, which turns the padded batch's rounding (~1e-8 of a value) into ~1e-6.
        for spread in ("ensemble", "closure"):
            assert found.pop(spread) == _approx(alone.pop(spread), 1e-5), (b.number, spread)
        assert found == _approx(alone), b.number


def test_pruning_and_trash_are_per_trial(tmp_path):
    """In a study whose 5 earlier trials reported χ² far below anything a new trial reaches,
    the median pruner prunes each packed trial at its first report, and a diverging one is
    trashed with its reason, while its neighbours go on."""
    card = scan_card(
        scan={
            "trials": 9,
            "space": {"optimizer": SGD_DIVERGING | ADAM},
            "pruner": {"name": "median", "report_every": 1, "warmup_reports": 0},
        },
        epochs=300,
    )
    storage = open_storage(str(tmp_path / "s.journal"), create=True)
    study, _ = create_study(scan_runcard_from_dict(card), storage, "prune")
    for _ in range(5):  # the median pruner's startup trials
        reports = {step: 1e-6 for step in range(50, 301, 50)}
        study.add_trial(optuna.trial.create_trial(value=1e-6, intermediate_values=reports))
    diverging = {"optimizer": "sgd", "sgd.learning_rate": 1e7}
    learning = [{"optimizer": "adam", "adam.learning_rate": lr} for lr in (1e-2, 3e-3, 2e-2)]
    for values in (learning[0], diverging, *learning[1:]):
        study.enqueue_trial(values)
    report = run_worker("prune", storage, slots=SLOTS)
    assert report.trials == 4 and report.budget_reached

    trials = load_study(storage, "prune").get_trials()[5:]
    assert [t.state for t in trials] == [TrialState.PRUNED] * 4
    trashed = trials[1]
    assert re.fullmatch(rf"\d+ diverged: {DIVERGENCE_REASON}", trashed.user_attrs["trashed"])
    for trial in (trials[0], *trials[2:]):
        assert "trashed" not in trial.user_attrs
        assert list(trial.intermediate_values) == [50]  # pruned at its first report
        assert trial.user_attrs["fit"]["steps"] == 50
        assert math.isfinite(trial.value)  # the last report, as Optuna tells a pruned trial


def test_a_trial_trashed_before_its_fit_takes_no_slot(tmp_path):
    """Drawn values that break the runcard together trash their trial as it is taken; the
    worker fills the slot with the next trial."""
    ranges = {
        "positivity.initial": {"low": 500, "high": 1.0e5},
        "positivity.max": {"low": 1000, "high": 1.0e6},
    }
    card = scan_card(scan={"trials": 4, "space": {"parameters": ranges}})
    storage = open_storage(str(tmp_path / "s.journal"), create=True)
    study, _ = create_study(scan_runcard_from_dict(card), storage, "combo")
    for initial, most in ((1000, 1e5), (5e4, 2000), (2000, 1e5), (3000, 1e5)):
        study.enqueue_trial({"positivity.initial": initial, "positivity.max": most})
    report = run_worker("combo", storage, slots=SLOTS)
    assert report.trials == 4 and report.budget_reached
    trials = load_study(storage, "combo").get_trials()
    assert [t.state for t in trials] == [TrialState.COMPLETE, TrialState.PRUNED] + [
        TrialState.COMPLETE
    ] * 2
    reason = trials[1].user_attrs["trashed"]
    assert reason.startswith("the drawn values make no valid fit runcard: ")
    assert "fit" not in trials[1].user_attrs  # never fitted
    # the three valid trials were fitted together: none started after another ended
    starts = [trials[k].datetime_start for k in (0, 2, 3)]
    assert max(starts) < min(trials[k].datetime_complete for k in (0, 2, 3))


def test_a_trial_that_cannot_share_the_batch_is_fitted_alone(tmp_path, caplog):
    """A searched setting that one model's members share (here the training fraction): a
    trial whose value differs from the base runcard's is fitted alone, as with one slot, and
    the worker says so; the others share the batch."""
    space = {"parameters": {"data.training_fraction": {"choices": [0.75, 0.5]}}}
    card = scan_card(scan={"trials": 3, "space": space}, training={"precision": "float64"})
    storage = open_storage(str(tmp_path / "s.journal"), create=True)
    runcard = scan_runcard_from_dict(card)
    for name in ("alone", "packed"):
        create_study(runcard, storage, name)
    fractions = [{"data.training_fraction": f} for f in (0.75, 0.5, 0.75)]
    _tell_alike(storage, ["alone", "packed"], fractions)
    run_worker("alone", storage)
    with caplog.at_level(logging.WARNING):
        report = run_worker("packed", storage, slots=SLOTS)
    assert report.trials == 3 and report.budget_reached
    assert "trial 1 fitted alone: " in caplog.text and "'data' differs" in caplog.text
    one, many = (load_study(storage, name).get_trials() for name in ("alone", "packed"))
    assert [t.state for t in many] == [TrialState.COMPLETE] * 3
    assert [t.value for t in many] == _approx([t.value for t in one])


def test_a_broken_trial_batch_fails_the_worker_instead_of_fitting_alone(tmp_path, monkeypatch):
    """Only a trial that cannot share the batch is fitted alone: any other error of placing it
    (a covariance not positive definite, a broken row invariant) is a fault, raised."""
    from hyperscan.fit import TrialBatch

    def broken(self, key, card, on_sync=None):
        raise ValueError("covariance block of ['X'] is not positive definite")

    monkeypatch.setattr(TrialBatch, "place", broken)
    storage = open_storage(str(tmp_path / "s.journal"), create=True)
    create_study(scan_runcard_from_dict(scan_card(scan={"trials": 2})), storage, "broken")
    with pytest.raises(ValueError, match="not positive definite"):
        run_worker("broken", storage, slots=SLOTS)


def _running(study: optuna.Study, worker: Worker, count: int) -> list[FrozenTrial]:
    """``count`` trials of ``worker`` running, each once its fit is under way (it reported)."""

    def running() -> list[FrozenTrial] | None:
        worker.check_alive()
        mine = [
            t
            for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
            if t.user_attrs.get("worker") == worker.id and t.intermediate_values
        ]
        return mine if len(mine) == count else None

    return wait_for(running, timeout=120, what=f"worker {worker.pid} to run {count} trials")


def test_sigterm_requeues_every_trial_in_flight(url, tmp_path, workers):
    """Past the grace period, every trial in flight still beats: another worker's check fails
    none. Then SIGTERM: each ends at its next sync, is failed and queued again with its values
    (`retry_of`), and the worker exits 0: none lost, none RUNNING."""
    card = long_card(epochs=200_000)
    card["scan"]["trials"] = SLOTS
    create(write_card(tmp_path / "scan.yml", card), url, "term")
    storage = open_storage(url, heartbeat_interval=HEARTBEAT_INTERVAL, grace_period=GRACE_PERIOD)
    study = load_study(storage, "term")

    worker = workers(url, "term", *SLOTS_ARGS)
    in_flight = _running(study, worker, SLOTS)
    time.sleep(GRACE_PERIOD + HEARTBEAT_INTERVAL + 0.5)
    fail_stale_trials(study, requeue=True)  # what another worker does before it asks
    running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    assert sorted(t.number for t in running) == sorted(t.number for t in in_flight)
    signalled = time.monotonic()
    worker.process.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=60) == 0, worker.logs()
    assert time.monotonic() - signalled < 60
    log = worker.out.read_text()
    assert f"worker done: {SLOTS} trials ({SLOTS} re-queued), stopped by signal" in log

    trials = study.get_trials()
    assert not by_state(trials, TrialState.RUNNING)
    failed = {t.number: t for t in by_state(trials, TrialState.FAIL)}
    assert sorted(failed) == sorted(t.number for t in in_flight)
    queued = by_state(trials, TrialState.WAITING)
    assert sorted(t.user_attrs["retry_of"] for t in queued) == sorted(failed)
    for trial in queued:
        assert trial.system_attrs["fixed_params"] == failed[trial.user_attrs["retry_of"]].params
    assert all(t.user_attrs["requeued"] for t in failed.values())
    assert "Traceback" not in worker.err.read_text()


def test_killed_slotted_worker_trials_are_all_failed_and_retried(url, tmp_path, workers):
    """kill -9 with 3 trials in flight: once their heartbeats are older than the grace period,
    the next worker fails all three as stale and fits each again, with its values, to the
    end of the budget."""
    card = long_card()
    card["scan"]["trials"] = SLOTS
    create(write_card(tmp_path / "scan.yml", card), url, "kill")
    study = load_study(open_storage(url), "kill")

    first = workers(url, "kill", *SLOTS_ARGS)
    killed = _running(study, first, SLOTS)
    os.kill(first.pid, signal.SIGKILL)
    assert first.wait(timeout=30) == -signal.SIGKILL
    killed_at = time.monotonic()
    time.sleep(max(0.0, killed_at + GRACE_PERIOD + HEARTBEAT_INTERVAL + 0.5 - time.monotonic()))
    second = workers(url, "kill", *SLOTS_ARGS)
    assert second.wait(timeout=240) == 0, second.logs()

    trials = study.get_trials()
    failed, retries = trials[:SLOTS], trials[SLOTS:]
    assert sorted(t.number for t in failed) == sorted(t.number for t in killed)
    assert [t.state for t in failed] == [TrialState.FAIL] * SLOTS
    assert {t.user_attrs["worker"] for t in failed} == {first.id}
    assert [t.state for t in retries] == [TrialState.COMPLETE] * SLOTS, second.logs()
    by_number = {t.number: t for t in failed}
    for retry in retries:
        (repeated,) = retry.system_attrs["retry_history"]
        assert retry.params == by_number[repeated].params
        assert retry.user_attrs["worker"] == second.id
    assert sorted(r.system_attrs["failed_trial"] for r in retries) == sorted(by_number)
    assert worker_done(second.out.read_text()) == SLOTS
    if not url.startswith("postgresql"):
        assert list(Path(url + ".heartbeats").iterdir()) == []


@pytest.mark.parametrize("value", ["0", "-2", "many", "1.5"])
@pytest.mark.parametrize("command", ["worker", "scan"])
def test_a_slot_count_that_is_not_one_or_more_is_refused(tmp_path, command, value):
    args = ["--study", "s"] if command == "worker" else [write_card(tmp_path / "s.yml", {})]
    result = cli(command, *args, "--storage", tmp_path / "s.journal", "--slots", value)
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--slots'" in result.stderr
    assert "at least 1" in result.stderr or "neither a whole number" in result.stderr
    assert not (tmp_path / "s.journal").exists()


def test_auto_slots_are_said_and_too_many_refused(tmp_path):
    """`--slots auto` chooses a count for the study's data on this device, and says it in the
    first line; a count the device's memory cannot hold is a message and exit code 2."""
    path = tmp_path / "s.journal"
    create(write_card(tmp_path / "s.yml", scan_card(scan={"trials": 1})), path, "auto")
    load_study(open_storage(str(path)), "auto").add_trial(optuna.trial.create_trial(value=1.0))
    result = cli("worker", "--study", "auto", "--storage", path, "--slots", "auto")
    assert result.exit_code == 0, result.output
    first, *rest = result.stdout.splitlines()
    assert re.search(r", [1-9]\d* trial slots? \(auto\)$", first), first
    assert rest == ["worker done: 0 trials, budget reached"]

    too_many = 10**15
    refused = assert_clean_failure(
        cli("worker", "--study", "auto", "--storage", path, "--slots", too_many)
    )
    assert f"{too_many} trial slots would not fit in this device's memory: it holds " in refused


def _short_storage(path: Path, **options: Any) -> Any:
    return open_storage(
        str(path), heartbeat_interval=HEARTBEAT_INTERVAL, grace_period=GRACE_PERIOD, **options
    )


def test_a_storage_outage_costs_a_packed_worker_one_trial(tmp_path, monkeypatch, caplog):
    """The storage goes away as a packed trial is told: the worker waits, fails and re-queues
    that trial at once, its neighbours go on, and the budget is met."""
    create_study(
        scan_runcard_from_dict(scan_card()), _short_storage(tmp_path / "s.j", create=True), "o"
    )
    storage = _short_storage(tmp_path / "s.j")
    outages = fail_first_result(storage, monkeypatch)
    monkeypatch.setattr(_limits, "STORAGE_RETRY_WAITS", (1,))  # < the grace period
    with caplog.at_level(logging.WARNING):
        report = run_worker("o", storage, slots=SLOTS)
    assert report.budget_reached and outages
    trials = load_study(storage, "o").get_trials()
    assert len(by_state(trials, TrialState.COMPLETE)) == 4
    (cut,) = by_state(trials, TrialState.FAIL)
    (retry,) = [t for t in trials if t.system_attrs.get("retry_history") == [cut.number]]
    assert retry.params == cut.params and retry.state == TrialState.COMPLETE
    assert not by_state(trials, TrialState.RUNNING, TrialState.WAITING)
    assert "server closed the connection unexpectedly" in caplog.text
    assert "was cut short by a storage error: failed, re-queued" in caplog.text
    assert "sent no heartbeat" not in caplog.text


def test_a_worker_at_its_budget_takes_the_copy_of_its_trial_cut_short(tmp_path, monkeypatch):
    """The budget's 2 trials fill 2 of the worker's 3 slots (its gate refused a third), and an
    outage cuts one short as it is told: the worker takes the re-queued copy itself. Before,
    the refused ask ended its asking for good: it stopped "budget reached" with the copy
    queued and the budget one trial short (seen in CI, after a PostgreSQL restart)."""
    card = scan_card(scan={"trials": 2})
    create_study(scan_runcard_from_dict(card), _short_storage(tmp_path / "s.j", create=True), "b")
    storage = _short_storage(tmp_path / "s.j")
    outages = fail_first_result(storage, monkeypatch)
    monkeypatch.setattr(_limits, "STORAGE_RETRY_WAITS", (1,))
    report = run_worker("b", storage, slots=SLOTS)
    trials = load_study(storage, "b").get_trials()
    states = [(t.number, t.state.name) for t in trials]
    assert report.budget_reached and outages, states
    assert not by_state(trials, TrialState.RUNNING, TrialState.WAITING), states
    assert len(by_state(trials, TrialState.COMPLETE)) == 2, states
    (cut,) = by_state(trials, TrialState.FAIL)
    (copy,) = [t for t in trials if t.system_attrs.get("retry_history") == [cut.number]]
    assert copy.state == TrialState.COMPLETE and copy.params == cut.params


def test_an_outage_longer_than_one_wait_strands_no_packed_trial(tmp_path, monkeypatch, caplog):
    """The storage is still away when the worker tries to re-queue the trial the outage cut
    short, and after its first wait: it tries again on the retry schedule until the re-queue
    goes through, so no trial is left RUNNING (to fill the budget until the grace period
    ends)."""
    create_study(
        scan_runcard_from_dict(scan_card()), _short_storage(tmp_path / "s.j", create=True), "l"
    )
    storage = _short_storage(tmp_path / "s.j")
    outages = fail_first_result(storage, monkeypatch)
    read = storage.get_trial
    still_away = [2]  # the re-queue's first two reads of the cut trial fail too

    def away_a_while(trial_id):
        if outages and trial_id == outages[0] and still_away[0]:
            still_away[0] -= 1
            raise dropped_connection("SELECT trials")
        return read(trial_id)

    monkeypatch.setattr(storage, "get_trial", away_a_while)
    monkeypatch.setattr(_limits, "STORAGE_RETRY_WAITS", (0.1, 0.1, 0.1, 0.1))
    with caplog.at_level(logging.WARNING):
        report = run_worker("l", storage, slots=SLOTS)
    assert report.budget_reached and outages and still_away == [0]
    trials = load_study(storage, "l").get_trials()
    assert not by_state(trials, TrialState.RUNNING, TrialState.WAITING)
    (cut,) = by_state(trials, TrialState.FAIL)
    assert read(outages[0]).number == cut.number
    assert len(by_state(trials, TrialState.COMPLETE)) == 4
    # The re-queue, tried as the tell failed, then after each of two waits
    assert caplog.text.count("trying again in") == 2
    assert "sent no heartbeat" not in caplog.text


def test_each_outage_cutting_every_packed_trial_short_is_waited_out_once(
    tmp_path, monkeypatch, caplog
):
    """Twice, the storage goes away at a sync of 3 packed trials and comes back while the
    worker waits: every trial in flight is cut short and re-queued as soon as the storage
    answers, the outage waited out once, not once more per trial, and each outage starts the
    retry schedule afresh. A schedule of one wait covers both (before, the second of three
    trials cut short by one outage found the schedule spent, and the worker stopped)."""
    card = scan_card(scan={"trials": SLOTS, "pruner": {"name": "none", "report_every": 1}})
    create_study(scan_runcard_from_dict(card), _short_storage(tmp_path / "s.j", create=True), "w")
    storage = _short_storage(tmp_path / "s.j")
    away = [False]
    reports: dict[int, int] = {}  # trial id → its reports written
    outages: list[list[int]] = []  # the trials each outage cut short

    def away_a_while(write):
        def written(trial_id, *args):
            if away[0]:
                outages[-1].append(trial_id)
                raise dropped_connection("INSERT INTO trial_intermediate_values")
            reports[trial_id] = reports.get(trial_id, 0) + 1
            if len(outages) < 2 and reports[trial_id] == 2:  # at a second sync
                away[0] = True
                outages.append([trial_id])
                raise dropped_connection("INSERT INTO trial_intermediate_values")
            return write(trial_id, *args)

        return written

    read = storage.get_trial

    def read_unless_away(trial_id):
        if away[0]:
            raise dropped_connection("SELECT trials")
        return read(trial_id)

    wait_out = _limits.WorkerLimits.wait_out

    def back_while_waiting(limits, error):
        wait_out(limits, error)
        away[0] = False

    write = storage.set_trial_intermediate_value
    monkeypatch.setattr(storage, "set_trial_intermediate_value", away_a_while(write))
    monkeypatch.setattr(storage, "get_trial", read_unless_away)
    monkeypatch.setattr(_limits.WorkerLimits, "wait_out", back_while_waiting)
    monkeypatch.setattr(_limits, "STORAGE_RETRY_WAITS", (0.1,))
    with caplog.at_level(logging.WARNING):
        report = run_worker("w", storage, slots=SLOTS)
    assert report.budget_reached
    assert [len(set(cut)) for cut in outages] == [SLOTS, SLOTS]
    assert caplog.text.count("trying again in") == 2  # one wait per outage
    trials = load_study(storage, "w").get_trials()
    assert [t.state for t in trials] == [TrialState.FAIL] * 2 * SLOTS + [
        TrialState.COMPLETE
    ] * SLOTS
    assert caplog.text.count("was cut short by a storage error: failed, re-queued") == 2 * SLOTS


def test_a_packed_trial_failed_as_stale_elsewhere_is_dropped(tmp_path, monkeypatch, caplog):
    """Another worker fails a packed trial as stale mid-fit (its heartbeat came late) and
    re-queues it: this worker drops that trial at its next report, goes on with the others,
    and takes the re-queued copy."""
    card = scan_card(scan={"pruner": {"name": "none", "report_every": 1}})  # a report per sync
    create_study(scan_runcard_from_dict(card), _short_storage(tmp_path / "s.j", create=True), "s")
    storage = _short_storage(tmp_path / "s.j")
    report = optuna.Trial.report
    overtaken = []

    def report_after_another_worker_failed_it(trial, value, step):
        if not overtaken:
            overtaken.append(trial.number)
            storage.set_trial_state_values(trial._trial_id, TrialState.FAIL)
            requeue = storage.get_heartbeat_stale_trial_callback()
            requeue(trial.study, storage.get_trial(trial._trial_id))
        return report(trial, value, step)

    monkeypatch.setattr(optuna.Trial, "report", report_after_another_worker_failed_it)
    with caplog.at_level(logging.WARNING):
        result = run_worker("s", storage, slots=SLOTS)
    assert result.budget_reached and result.trials == 5  # 4 told, 1 dropped
    trials = load_study(storage, "s").get_trials()
    (failed,) = by_state(trials, TrialState.FAIL)
    assert failed.number == overtaken[0]
    assert len(by_state(trials, TrialState.COMPLETE)) == 4
    assert "trial result dropped: another worker failed the trial as stale" in caplog.text


def test_a_packed_worker_takes_no_trial_past_its_walltime(tmp_path, monkeypatch):
    """``stop_after`` with slots: a trial is taken only while one is expected to end in the time
    left; once the walltime is reached the worker takes no more, ends the trials in flight and
    leaves none running. The walltime is read off a clock that each told trial moves on by an
    hour, so that the machine's speed cannot decide what the worker takes."""
    hour, walltime = 3600.0, 3 * 3600.0 - 1
    clock = SimpleNamespace(now=0.0)
    monkeypatch.setattr(_limits, "time", SimpleNamespace(monotonic=lambda: clock.now))
    storage = open_storage(str(tmp_path / "s.journal"), create=True)
    create_study(scan_runcard_from_dict(scan_card(scan={"trials": 20})), storage, "wall")
    taken_at: list[float] = []

    def told(trial: FrozenTrial) -> None:
        clock.now += hour

    report = run_worker(
        "wall",
        storage,
        slots=SLOTS,
        stop_after=walltime,
        on_start=lambda trial, params: taken_at.append(clock.now),
        on_trial=told,
    )
    assert report.walltime_reached and not report.budget_reached
    # Three hours of trials end the walltime; the slots refilled before then end too.
    assert 3 <= report.trials <= 3 + SLOTS - 1
    assert len(taken_at) == report.trials
    assert max(taken_at) < walltime  # none taken once the time was up
    trials = load_study(storage, "wall").get_trials()
    assert len(by_state(trials, TrialState.COMPLETE)) == report.trials == len(trials)
