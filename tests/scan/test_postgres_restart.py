# SPDX-License-Identifier: GPL-3.0-or-later
"""A real PostgreSQL restart under workers that fit several trials at once: every trial in
flight comes through it, completed if its fit finished, re-queued if not, and the study ends
with exactly its budget, none stranded RUNNING.

Operators saw 2 workers of 2 slots leave 2 trials RUNNING (no heartbeat) after `pg_ctlcluster
stop -m fast; sleep 8; start` mid-fit, and stop with "budget reached" at 6 of 8 trials, the
stranded ones counted. A proxy cut (test_database_outages.py) is not a restart: a fast stop
ends every session from the server's side, refuses connections while it shuts down and starts
up, and forgets every advisory lock. The server here is the test's own (``own_postgres``),
so the shared one never restarts under other tests.
"""

from __future__ import annotations

from contextlib import closing, suppress
from typing import Any

import psycopg2
from _own_postgres import OwnPostgres
from _service import (
    FINISHED,
    PARALLEL,
    by_state,
    create,
    scan_card,
    trials_of,
    worker_done,
    write_card,
)
from _waiting import wait_for
from optuna.trial import TrialState

from hyperscan.scan._trial_attrs import RETRY_OF_ATTR, WORKER_ATTR, repeated

BUDGET = 6
SLOTS = ("--slots", "2")
DOWN_S = 8  # as the operators did: past the first wait of the retry schedule (5 s)
# Deadlines, not timings: alone, each wait takes seconds, but in the suite other tests' worker
# processes share the two cores (CI once gave up after 90 s waiting for the first result).
DEADLINE_S = 300
# Attributes a trial carries before its result is recorded.
UNRECORDED = (WORKER_ATTR, RETRY_OF_ATTR, "requeued")
# The rows read straight from the server name their state.
FINISHED_NAMES = {state.name for state in FINISHED}


def _card() -> dict[str, Any]:
    """Trials of several seconds (3000 epochs) that report at every sync, so a restart finds
    them mid-fit and cuts them short at their next report (the median pruner prunes nothing in
    a study's first 5 trials, and at most a copy after them)."""
    return scan_card(
        scan={"trials": BUDGET, "pruner": {"name": "median", "report_every": 1}},
        epochs=3000,
        stopping={"patience": 1.0},  # all the epochs
    )


class _Watch:
    """What the study's rows say, read straight from the server (no Optuna storage per poll),
    on a connection made again after a restart."""

    def __init__(self, server: OwnPostgres, study: str) -> None:
        self.server = server
        self.study = study
        self._connection: Any = None

    def trials(self) -> list[tuple[int, str, bool, bool]]:
        """Each trial's number, state, whether it reported an intermediate value (its fit is
        under way) and whether its result is being recorded (a recorded attribute)."""
        query = """
            SELECT t.number, t.state,
                EXISTS (SELECT 1 FROM trial_intermediate_values v WHERE v.trial_id = t.trial_id),
                EXISTS (SELECT 1 FROM trial_user_attributes a
                        WHERE a.trial_id = t.trial_id AND a.key NOT IN %s)
            FROM trials t JOIN studies s ON s.study_id = t.study_id
            WHERE s.study_name = %s ORDER BY t.number
        """
        try:
            if self._connection is None:
                self._connection = psycopg2.connect(
                    host="127.0.0.1", port=self.server.port, user="postgres",
                    dbname="hyperscan", connect_timeout=5,
                )  # fmt: skip
                self._connection.autocommit = True
            with self._connection.cursor() as cursor:
                cursor.execute(query, (UNRECORDED, self.study))
                return cursor.fetchall()
        except psycopg2.OperationalError:
            self.close()
            return []

    def close(self) -> None:
        if self._connection is not None:
            with suppress(Exception):
                self._connection.close()
            self._connection = None


def test_slotted_workers_come_through_postgres_restarts(own_postgres, tmp_path, workers):
    """Two workers of 2 slots on a budget of 6; the server is stopped (fast: every session
    ended), kept down for 8 s and started again twice: once with the trials mid-fit, once as
    the first result is recorded (a trial writing its attributes, or just told). The workers
    exit 0 at the budget; nothing is left RUNNING or queued; exactly the budget's trials
    finished; every failed trial was cut short and has a re-queued copy that finished."""
    url = own_postgres.url
    create(write_card(tmp_path / "scan.yml", _card()), url, "restart")
    pool = [workers(url, "restart", *SLOTS, **PARALLEL) for _ in range(2)]
    watch = _Watch(own_postgres, "restart")
    with closing(watch):

        def seen() -> str:
            logs = "\n".join(worker.logs() for worker in pool)
            return f"trials (number, state, reported, recorded): {watch.trials()}\n{logs}"

        def fitting() -> bool:
            for worker in pool:
                worker.check_alive()
            rows = watch.trials()
            return sum(state == "RUNNING" and reported for _, state, reported, _ in rows) >= 3

        wait_for(fitting, timeout=DEADLINE_S, what="3 trials reporting mid-fit", context=seen)
        watch.close()
        own_postgres.restart(DOWN_S)

        def recording() -> bool:
            # A worker may end as it records its last trial: then its log says so.
            return any(
                state in FINISHED_NAMES or (state == "RUNNING" and recorded)
                for _, state, _, recorded in watch.trials()
            )

        wait_for(
            recording, timeout=DEADLINE_S, what="a trial's result being recorded", context=seen
        )
        watch.close()
        own_postgres.restart(DOWN_S)

    codes = [worker.wait(timeout=DEADLINE_S) for worker in pool]
    logs = "\n".join(worker.logs() for worker in pool)
    assert codes == [0, 0], logs
    for worker in pool:
        assert "budget reached" in worker.out.read_text(), logs
        assert "Traceback" not in worker.err.read_text(), logs
        worker_done(worker.out.read_text())
    assert "trying again in" in logs  # the outage was waited out, not missed

    trials = trials_of(url, "restart")
    # The trials' states, then the workers' logs: what a failure in CI needs to be read.
    states = f"{[(t.number, t.state.name) for t in trials]}\n{logs}"
    assert not by_state(trials, TrialState.RUNNING, TrialState.WAITING), states
    assert len(by_state(trials, *FINISHED)) == BUDGET, states
    failed = by_state(trials, TrialState.FAIL)
    assert failed, f"no trial was cut short: {states}"  # the restart found fits under way
    copies = {}
    for trial in trials:
        origin = repeated(trial.user_attrs, trial.system_attrs)
        if origin is not None:
            assert origin[0] not in copies, f"trial {origin[0]} re-queued twice: {states}"
            copies[origin[0]] = trial
    for trial in failed:
        copy = trial
        while copy.state == TrialState.FAIL:  # a copy cut short in its turn has its own
            assert copy.number in copies, f"trial {copy.number} failed, not re-queued: {states}"
            copy = copies[copy.number]
            assert copy.params == trial.params
        assert copy.state in FINISHED, states
