# SPDX-License-Identifier: GPL-3.0-or-later
"""`hyperscan study status` of a large study stays a screenful."""

from __future__ import annotations

import optuna
from optuna.trial import TrialState, create_trial

from hyperscan.cli._render import status_text
from hyperscan.runcard import parse_scan_runcard
from hyperscan.scan._status import LISTED, study_status
from hyperscan.scan._study import StudySetup

CARD = "scan: {trials: 100, space: {activation: [tanh, sigmoid]}}"


def _status_text(study: optuna.Study) -> str:
    return status_text(study_status(StudySetup(study, parse_scan_runcard(CARD), "journal:///s")))


def test_long_lists_of_trashed_and_retried_trials_show_the_latest():
    study = optuna.create_study()
    for number in range(30):  # trashed, and each failed one retried by the next
        study.add_trial(
            create_trial(state=TrialState.PRUNED, user_attrs={"trashed": f"why {number}"})
        )
    for number in range(30, 60, 2):
        study.add_trial(create_trial(state=TrialState.FAIL, user_attrs={"requeued": True}))
        study.add_trial(create_trial(value=1.0, user_attrs={"retry_of": number}))
    text = _status_text(study)

    assert f"\ntrashed: (the last {LISTED} of 30)\n" in text
    listed = [line for line in text.splitlines() if line.startswith("  trial ")]
    assert listed == [f"  trial {n}: why {n}" for n in range(30 - LISTED, 30)]
    (retried,) = [line for line in text.splitlines() if line.startswith("retried:")]
    latest = ", ".join(f"{n} → {n + 1}" for n in range(60 - 2 * LISTED, 60, 2))
    assert retried == f"retried: (the last {LISTED} of 15) {latest}"


def test_short_lists_are_whole():
    study = optuna.create_study()
    study.add_trial(create_trial(state=TrialState.PRUNED, user_attrs={"trashed": "diverged"}))
    text = _status_text(study)
    assert "\ntrashed:\n  trial 0: diverged" in text
