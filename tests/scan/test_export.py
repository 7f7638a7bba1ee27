# SPDX-License-Identifier: GPL-3.0-or-later
"""`hyperscan export`: a trial's fit runcard that `hyperscan fit` turns back into the
trial's value, and trials that have none refused with a message.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _service import (
    ADAM,
    TINY_SCAN,
    WORKER_ENV,
    Worker,
    assert_clean_failure,
    cli,
    create,
    scan_card,
    write_card,
)
from click.testing import Result
from optuna.trial import TrialState

from hyperscan.runcard import load_fit_runcard
from hyperscan.scan import open_storage
from hyperscan.scan.storage import load_study

#: Two folds of the tiny closure's datasets.
KFOLDS = [["TOY_HERA_NC_F2P", "TOY_NUTEV_XF3WP"], ["TOY_HERA_CC_F2WP", "TOY_GLUON"]]


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
    folds = KFOLDS
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


#: A space whose trials differ in depth, width, activation and optimiser: the slotted batch
#: pads them all to one model, the layout a member's rounding depends on.
MIXED_SPACE = {
    "optimizer": {"adam": ADAM["adam"], "nadam": ADAM["adam"]},
    "layers": {"low": 1, "high": 2},
    "units": {"low": 4, "high": 12},
    "activation": ["tanh", "sigmoid"],
}


@pytest.mark.parametrize(
    ("storage", "precision", "folds"),
    [
        ("journal", "float32", False),
        ("postgres", "float64", False),
        ("journal", "float64", True),
    ],
)
def test_a_trial_fitted_in_a_slot_refits_bit_for_bit(
    request, tmp_path, workers, storage, precision, folds
):
    """A slotted worker (--slots 3, 5 trials: two of them refill a freed slot) fits 1000
    epochs per trial; `export` of the best trial, then `hyperscan fit`, gives the trial's value
    exactly, not within a tolerance: the export carries the batch it was fitted in, and the
    fit rebuilds it with the other slots empty. Alone, the same trial rounds otherwise, which
    1000 epochs amplify (float32: by percents), so the test would fail without the layout."""
    url = (
        str(tmp_path / "scan.journal")
        if storage == "journal"
        else request.getfixturevalue("postgres_url")
    )
    scan: dict[str, Any] = {"trials": 5, "replicas": 2, "space": MIXED_SPACE}
    if folds:
        scan |= {"folds": KFOLDS, "objective": {"chi2": "held_out"}}
    card = scan_card(
        scan=scan,
        epochs=1000,
        stopping={"patience": 0.2, "threshold_chi2": 50.0},
        training={"precision": precision, "steps_per_call": 100},
    )
    create(write_card(tmp_path / "scan.yml", card), url, "slotted")
    worker = workers(url, "slotted", "--slots", "3")
    assert worker.wait(timeout=300) == 0, worker.logs()
    trial = load_study(open_storage(url), "slotted").best_trial
    best = tmp_path / "best.yml"
    exported = cli("export", "--study", "slotted", "--storage", url, "-o", best)
    assert exported.exit_code == 0, exported.output
    layout = load_fit_runcard(best).training.batch_layout
    assert layout is not None and layout.slots == 3
    assert layout.activations == ("sigmoid", "tanh")
    assert layout.optimizers == ("adam", "nadam")

    members = refit(best, tmp_path / "fit")
    chi2 = "held_out" if folds else "validation"
    if folds:
        per_fold = [
            np.mean([m["chi2_per_point"][chi2] for m in members if m["fold"] == k])
            for k in range(len(KFOLDS))
        ]
        value = float(np.mean(per_fold))
    else:
        value = float(np.mean([m["chi2_per_point"][chi2] for m in members]))
    assert value == trial.value
