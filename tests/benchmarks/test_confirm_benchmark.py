# SPDX-License-Identifier: GPL-3.0-or-later
"""benchmarks/confirm.py's scans: each run's study, hyperscan accepts it, seeded per run."""

from __future__ import annotations

from _scripts import load_benchmark

from hyperscan.runcard import load_scan_runcard
from hyperscan.scan._study import check_new_study


def test_each_run_scans_the_study_with_its_own_sampler_seed(tmp_path):
    study_card = load_benchmark("confirm").study_card
    for seed in (0, 3):
        runcard = load_scan_runcard(study_card(tmp_path, "kfold-scan", seed, 4, 200))
        check_new_study(runcard)
        assert runcard.scan.sampler.seed == seed
        assert (runcard.scan.trials, runcard.fit.epochs) == (4, 200)
    as_shipped = load_scan_runcard(study_card(tmp_path, "quickstart-scan", 1, None, None))
    assert as_shipped.scan.trials == 8 and as_shipped.fit.epochs == 1000
