# SPDX-License-Identifier: GPL-3.0-or-later
"""Trials of a study run in the test's own process, through the worker's own loop and its
one-slot runner (scan/_scheduler.py), with no limit but their number."""

from __future__ import annotations

import sys

import optuna

from hyperscan.scan._limits import WorkerLimits
from hyperscan.scan._objective import Objective
from hyperscan.scan._scheduler import OneTrial, run_trials


def run_in_process(study: optuna.Study, objective: Objective, n_trials: int = 1) -> None:
    limits = WorkerLimits(study, sys.maxsize, objective.stop, n_trials=n_trials)
    run_trials(study, objective, OneTrial(objective.problem), limits)
