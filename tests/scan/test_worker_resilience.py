"""A worker survives a trial that another worker declared stale while it was still running."""

from __future__ import annotations

import optuna
from optuna.exceptions import UpdateFinishedTrialError
from optuna.trial import TrialState

from hyperscan.runcard import scan_runcard_from_dict
from hyperscan.scan import _objective, create_study, load_study, open_storage, run_worker

TINY_SCAN = {
    "data": {"closure": {"size": "tiny"}},
    "architecture": {"nodes": [4], "activations": ["tanh"]},
    "epochs": 20,
    "training": {"steps_per_call": 10},
    "scan": {
        "trials": 3,
        "replicas": 1,
        "pruner": {"name": "none"},
        "space": {"parameters": {"optimizer.learning_rate": {"low": 1e-3, "high": 1e-2}}},
    },
}


def test_a_stale_declared_trial_does_not_end_the_worker(tmp_path, monkeypatch):
    storage = open_storage(str(tmp_path / "study.journal"), create=True)
    create_study(scan_runcard_from_dict(TINY_SCAN), storage, "resilient")
    real_fit = _objective.run_fit
    calls = []

    def fit_once_overtaken(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise UpdateFinishedTrialError("trial 0 was failed as stale by another worker")
        return real_fit(*args, **kwargs)

    monkeypatch.setattr(_objective, "run_fit", fit_once_overtaken)
    report = run_worker("resilient", open_storage(str(tmp_path / "study.journal")))
    assert report.budget_reached
    trials = load_study(storage, "resilient").get_trials()
    states = [t.state for t in trials]
    assert states[0] == TrialState.FAIL
    assert states.count(TrialState.COMPLETE) == 3
    assert optuna.trial.TrialState.RUNNING not in states
