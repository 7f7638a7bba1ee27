# SPDX-License-Identifier: GPL-3.0-or-later
"""The Optuna message texts hyperscan reads (hyperscan/scan/storage/_optuna_messages.py), on
Optuna's own errors and warnings: a release that rewords them fails here, not in a worker."""

from __future__ import annotations

import warnings

import optuna
import pytest
from optuna.trial import TrialState

from hyperscan.scan.storage import asking_outside_optimize, overtaken
from hyperscan.scan.storage._optuna_messages import OPTUNA_TEXTS_OF


def test_the_texts_are_those_of_the_installed_optuna():
    assert optuna.__version__.startswith(OPTUNA_TEXTS_OF + "."), (
        f"Optuna {optuna.__version__}: check the texts of _optuna_messages.py against it, "
        "then update OPTUNA_TEXTS_OF"
    )


def test_a_tell_of_a_trial_failed_elsewhere_is_overtaken():
    study = optuna.create_study()
    trial = study.ask()
    study.tell(trial, state=TrialState.FAIL)  # as another worker fails a stale trial
    with pytest.raises(Exception) as told:
        study.tell(trial, 1.0)
    assert overtaken(told.value)
    assert not overtaken(ValueError("Cannot compute the loss"))


def test_asking_outside_optimize_silences_only_the_heartbeat_warning(tmp_path):
    storage = optuna.storages.RDBStorage(
        f"sqlite:///{tmp_path / 'h.db'}", heartbeat_interval=60, grace_period=120
    )
    study = optuna.create_study(storage=storage)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        study.ask()
    assert any("Heartbeat of storage" in str(w.message) for w in seen), [str(w) for w in seen]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with asking_outside_optimize():
            study.ask()
            warnings.warn("another warning", UserWarning, stacklevel=1)
    assert [str(w.message) for w in seen] == ["another warning"]
