"""benchmarks/load_sim.py at a tiny scale against the test PostgreSQL: simulated workers
through the real trial loop, budget gate and heartbeats take exactly the budget, with no
error and no trial left behind."""

from __future__ import annotations

from functools import partial

import pytest
from _scripts import load_benchmark


@pytest.mark.parametrize("processes", [0, 2], ids=["threads", "processes"])
def test_simulated_workers_take_exactly_the_budget_on_postgres(postgres_url, processes):
    """As threads of one process, or forked into two (each worker process with its own GIL,
    as on a cluster): what every worker measured comes back."""
    sim = load_benchmark("load_sim")
    result = sim.simulate(
        postgres_url,
        workers=4,
        slots=2,
        trials=20,
        duration_limit=20,
        trial_seconds=0.2,
        processes=processes,
    )
    assert result["processes"] == max(1, processes)
    assert result["errors"] == 0, result["error_samples"]
    assert result["trials_finished"] == 20 and result["exact"]
    assert set(result["states"]) == {"COMPLETE"}  # none RUNNING, WAITING or FAIL
    assert result["workers_still_running_at_hard_end"] == 0
    assert result["ask"]["n"] >= 20 and result["tell"]["n"] == 20
    assert result["first_ask_per_worker"]["n"] == 4
    assert result["later_asks"]["n"] == result["ask"]["n"] - 4
    assert result["gate"]["n"] >= 20  # every take went through the budget's gate


def test_a_prefilled_study_counts_its_trials_in_the_budget(postgres_url):
    """30 finished trials first, a budget of 36: the workers take exactly 6 more."""
    sim = load_benchmark("load_sim")
    result = sim.simulate(
        postgres_url,
        workers=2,
        slots=2,
        trials=36,
        duration_limit=20,
        trial_seconds=0.2,
        prefilled=30,
    )
    assert result["errors"] == 0, result["error_samples"]
    assert result["trials_prefilled"] == 30
    assert result["study_read"]["trials"] == 30  # the study itself, read afresh
    assert result["trials_finished"] == 36 and result["exact"]
    assert result["tell"]["n"] == 6
    assert set(result["states"]) == {"COMPLETE"}


@pytest.fixture
def through_pgbouncer(postgres_url, skip_or_fail_on_ci):
    """``simulate`` with the workers behind PgBouncer (transaction pooling, 3 server
    connections), in front of the test server."""
    sim = load_benchmark("load_sim")
    if sim.pgbouncer_binary() is None:
        skip_or_fail_on_ci("pgbouncer is not installed (apt-get install -y pgbouncer)")
    return partial(sim.simulate, postgres_url, storage="pgbouncer", pool_size=3)


def test_workers_behind_pgbouncer_keep_the_budget_on_a_few_server_connections(through_pgbouncer):
    """6 workers of 2 slots through PgBouncer's 3 server connections: exactly the budget, no
    error, and the database sees the pool's connections, not the workers'. The budget's trial
    is created in the lock's own transaction: created on a second connection, takers waiting
    for the lock held every server connection while its holder waited for one, and the
    workers stalled until their 60-s timeout."""
    result = through_pgbouncer(workers=6, slots=2, trials=24, duration_limit=30, trial_seconds=0.2)
    assert result["errors"] == 0, result["error_samples"]
    assert result["trials_finished"] == 24 and result["exact"]
    assert set(result["states"]) == {"COMPLETE"}
    assert result["workers_still_running_at_hard_end"] == 0
    # PgBouncer's 3, and the connections of the storage that created the study (2 at most)
    assert result["peak_connections"] <= 5, result["peak_connections"]


def test_workers_behind_pgbouncer_finish_the_budget_across_its_crash(through_pgbouncer):
    """PgBouncer killed mid-scan, once 10 of the 40 trials are told (every connection cut:
    asks, tells, heartbeats and the budget's lock), and started again 2 s later: the workers
    wait it out, and the scan ends with exactly the budget, none left RUNNING or queued, each
    trial cut short failed and queued again (its copy finished), no error. A restart at a
    fixed time came before the first trial was told on a loaded machine."""
    result = through_pgbouncer(
        workers=4,
        slots=2,
        trials=40,
        duration_limit=60,
        trial_seconds=0.3,
        restart_proxy_at=10,
        proxy_down=2.0,
    )
    assert result["proxy_restarts"] == 1
    assert 10 <= result["told_at_restart"] < 40, "the crash did not come mid-scan"
    assert result["errors"] == 0, result["error_samples"]
    assert result["trials_finished"] == 40 and result["exact"]
    assert set(result["states"]) <= {"COMPLETE", "FAIL"}, result["states"]
    assert result["failed_without_copy"] == 0
    assert result["workers_still_running_at_hard_end"] == 0
    assert result["warnings"] > 0, "no worker saw the outage"
