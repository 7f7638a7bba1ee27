# SPDX-License-Identifier: GPL-3.0-or-later
"""Database outages on the real storage (issue 42): PostgreSQL behind a loopback proxy that the
test cuts or freezes. (Budgets kept exactly by parallel workers: test_workers.py.)"""

from __future__ import annotations

import json
import logging
import time

import pytest
from _proxy import proxy_to
from _service import create, scan_card, trials_of, write_card
from optuna.trial import TrialState

from hyperscan.runcard import scan_runcard_from_dict
from hyperscan.scan import _limits, _scheduler, open_storage
from hyperscan.scan._study import create_study
from hyperscan.scan._worker import run_worker
from hyperscan.scan.storage import _retry, database_probe, results_folder, wait_for_storage
from hyperscan.scan.storage._timeout import TIMEOUT_ENV
from hyperscan.score import _score


def _one_trial_with_a_fault(
    monkeypatch, postgres_url, fault, *, before_ask: bool = False, **worker_env: str
) -> tuple[list, list]:
    """Run a worker (with ``worker_env`` set) on a one-trial study through a proxy;
    ``fault(proxy)`` is called as the fit returns, before its first write (``before_ask``: as
    the worker first looks for stale trials, before it asks for its trial). Returns the fits'
    values and the study's trials."""
    values: list[float] = []
    value_of = _score.trial_value
    fits, looks = [], []
    fit, look = _scheduler.run_fit, _scheduler.fail_stale_trials

    def fit_then_fault(*args, **kwargs):
        result = fit(*args, **kwargs)
        fits.append(result)
        if not before_ask:
            fault(proxy)
        return result

    def fault_then_look(*args, **kwargs):
        looks.append(args)
        if before_ask and len(looks) == 1:
            fault(proxy)
        return look(*args, **kwargs)

    def noted(*args, **kwargs):
        value = value_of(*args, **kwargs)
        if fits:  # the trial's value, not a report during its fit
            values.append(value)
        return value

    monkeypatch.setattr(_scheduler, "run_fit", fit_then_fault)
    monkeypatch.setattr(_scheduler, "fail_stale_trials", fault_then_look)
    monkeypatch.setattr(_score, "trial_value", noted)
    with proxy_to(postgres_url) as proxy:
        url = proxy.url(postgres_url)
        card = scan_runcard_from_dict(scan_card(scan={"trials": 1}))
        create_study(card, open_storage(url, create=True), "outage")
        for name, value in worker_env.items():
            monkeypatch.setenv(name, value)
        report = run_worker("outage", open_storage(url, heartbeat_interval=1, grace_period=600))
    assert report.trials == 1 and report.budget_reached
    assert len(fits) == 1, "the trial was fitted again"
    return values, trials_of(postgres_url, "outage")


@pytest.mark.parametrize(
    ("seconds", "scale"), [(10, 1), (90, 0.1)], ids=["10 s", "90 s on a tenth of the schedule"]
)
def test_a_finished_fit_survives_a_database_outage_at_its_first_write(
    postgres_url, tmp_path, monkeypatch, caplog, seconds, scale
):
    """The connection is cut as the fit ends, for 10 s and for 90 s: the result waits on disk
    and its writes are retried; the trial ends COMPLETE with the fit's value, fitted once.

    The 90 s outage outlasts the first four waits of the schedule (75 s), so it is waited out
    by several retries, the last cut short by a probe. It runs with the schedule, the probes
    and the outage all scaled to a tenth (9 s): the same retries, in a tenth of the time."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    if scale != 1:
        waits = tuple(wait * scale for wait in _retry.STORAGE_RETRY_WAITS)
        monkeypatch.setattr(_limits, "STORAGE_RETRY_WAITS", waits)
        monkeypatch.setattr(_retry, "STORAGE_RETRY_WAITS", waits)
        monkeypatch.setattr(_retry, "PROBE_EVERY_S", _retry.PROBE_EVERY_S * scale)
    kept = _KeptResults()
    logging.getLogger(_retry.__name__).addHandler(kept)
    try:
        with caplog.at_level(logging.WARNING):
            values, trials = _one_trial_with_a_fault(
                monkeypatch, postgres_url, lambda proxy: proxy.cut(seconds * scale)
            )
    finally:
        logging.getLogger(_retry.__name__).removeHandler(kept)
    [trial] = trials
    assert trial.state == TrialState.COMPLETE and trial.value == values[-1]
    assert trial.user_attrs["fit"]["steps"] > 0
    retries = [m for m in caplog.messages if m.startswith("recording trial 0 (")]
    assert retries and all("trying again in" in m for m in retries), caplog.messages
    assert sum(float(m.rsplit(" ", 2)[-2]) for m in retries) >= seconds * scale
    # While the database was away the result was on disk, with the fit's value.
    assert kept.files and all(len(files) == 1 for files in kept.files)
    saved = json.loads(kept.files[0][0])
    assert saved["value"] == values[-1] and saved["user_attrs"]["fit"] == trial.user_attrs["fit"]
    assert not list(results_folder().glob("*")), "the result stayed on disk once recorded"


class _KeptResults(logging.Handler):
    """The results kept on disk as each retry is told."""

    def __init__(self) -> None:
        super().__init__()
        self.files: list[list[str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.files.append([path.read_text() for path in results_folder().glob("*.json")])


@pytest.mark.parametrize("before_ask", [True, False], ids=["before its trial", "after its fit"])
def test_a_worker_goes_on_once_the_database_answers_not_at_its_next_retry(
    postgres_url, tmp_path, monkeypatch, caplog, before_ask
):
    """The connection is cut for 2 s, before the worker asks for its trial or as its fit
    ends, and the next retry is 30 s away: the worker asks the database every few seconds
    whether it answers, and goes on within seconds of its return, not half a minute later."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(_limits, "STORAGE_RETRY_WAITS", (30,))
    monkeypatch.setattr(_retry, "STORAGE_RETRY_WAITS", (30,))
    cut_at, resumed_at = [], []
    fit = _scheduler.run_fit

    def cut(proxy):
        cut_at.append(time.monotonic())
        proxy.cut(2)

    def timed_fit(*args, **kwargs):
        resumed_at.append(time.monotonic())  # before its trial: the worker asked again
        return fit(*args, **kwargs)

    monkeypatch.setattr(_scheduler, "run_fit", timed_fit)
    with caplog.at_level(logging.WARNING):
        _, trials = _one_trial_with_a_fault(monkeypatch, postgres_url, cut, before_ask=before_ask)
    ended_at = time.monotonic()  # after its fit: the trial was recorded
    assert [t.state for t in trials] == [TrialState.COMPLETE]
    assert any(m.endswith("trying again in 30 s") for m in caplog.messages), caplog.messages
    waited = (resumed_at[0] if before_ask else ended_at) - cut_at[0]
    assert waited < 12, f"the worker went on {waited:.1f} s after the cut, the database back at 2 s"


def test_a_wait_for_a_database_that_stays_away_keeps_its_schedule(postgres_url, monkeypatch):
    """While the database refuses connections, each probe says so (no error out of the wait)
    and the wait lasts as scheduled; once it answers, the next probe ends the wait."""
    monkeypatch.setattr(_retry, "PROBE_EVERY_S", 0.5)
    with proxy_to(postgres_url) as proxy:
        probe = database_probe(proxy.url(postgres_url))
        answers: list[bool] = []

        def asked() -> bool:
            answers.append(probe())
            return answers[-1]

        proxy.cut(60)
        started = time.monotonic()
        wait_for_storage(3, asked)
        assert 3 <= time.monotonic() - started < 4.5 and answers and not any(answers)
        proxy.reopen()
        started = time.monotonic()
        wait_for_storage(30, asked)
        assert time.monotonic() - started < 3 and answers[-1]


def test_a_frozen_connection_becomes_a_retry_within_the_timeout(
    postgres_url, tmp_path, monkeypatch, caplog
):
    """The proxy stops forwarding (connections open, no answer) as the fit ends: the write
    gives up after $HYPERSCAN_DB_TIMEOUT with a line, is retried, and the trial is recorded
    once the proxy forwards again.

    The retry schedule and its probes run at a fifth, and the freeze lasts 9 s (12 s on the
    real schedule): it outlasts the write, the first wait and the retry after it, as before."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    waits = tuple(wait / 5 for wait in _retry.STORAGE_RETRY_WAITS)
    monkeypatch.setattr(_limits, "STORAGE_RETRY_WAITS", waits)
    monkeypatch.setattr(_retry, "STORAGE_RETRY_WAITS", waits)
    monkeypatch.setattr(_retry, "PROBE_EVERY_S", _retry.PROBE_EVERY_S / 5)
    with caplog.at_level(logging.WARNING):
        values, trials = _one_trial_with_a_fault(
            monkeypatch, postgres_url, lambda proxy: proxy.freeze(9), **{TIMEOUT_ENV: "2"}
        )
    [trial] = trials
    assert trial.state == TrialState.COMPLETE and trial.value == values[-1]
    retries = [m for m in caplog.messages if m.startswith("recording trial 0 (")]
    assert retries and "gave no answer within 2 s" in retries[0], caplog.messages


def test_a_worker_waits_for_a_database_that_refuses_it_at_start_up(postgres_url, tmp_path, workers):
    """The database refuses connections as a worker starts (a restart, a full connection
    limit): the worker says so, tries again, and runs its trial once it is let in."""
    name = f"start-{tmp_path.name[-12:]}"
    with proxy_to(postgres_url) as proxy:
        url = proxy.url(postgres_url)
        create(write_card(tmp_path / "scan.yaml", scan_card(scan={"trials": 1})), url, name)
        proxy.cut(600)
        worker = workers(url, name)
        deadline = time.monotonic() + 60
        while "worker start-up: " not in worker.err.read_text():
            worker.check_alive()
            assert time.monotonic() < deadline, worker.logs()
            time.sleep(0.2)
        proxy.reopen()
        assert worker.wait(timeout=180) == 0, worker.logs()
    assert "trying again in 5 s" in worker.err.read_text()
    assert [t.state for t in trials_of(postgres_url, name)] == [TrialState.COMPLETE]
