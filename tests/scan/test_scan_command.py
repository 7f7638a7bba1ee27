# SPDX-License-Identifier: GPL-3.0-or-later
"""`hyperscan scan`: one machine, the embedded journal, N workers, the best runcard
exported; resumed with a new budget, reproducible when seeded, stopped by SIGTERM.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

from _service import (
    WORKER_ENV,
    assert_nothing_lost,
    cli,
    long_card,
    scan_card,
    trials_of,
    write_card,
)
from _waiting import wait_for
from optuna.trial import TrialState

from hyperscan.runcard import FitRuncard, load_fit_runcard
from hyperscan.scan import open_storage
from hyperscan.scan.storage import load_study, study_names


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
