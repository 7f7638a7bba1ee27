"""benchmarks/sampled_ensemble.py's scan: a study hyperscan accepts, in which no trial is pruned,
so that every trial is eligible for ``export --sample``."""

from __future__ import annotations

from _scripts import load_benchmark

from hyperscan.runcard import load_scan_runcard
from hyperscan.scan._study import check_new_study


def test_the_scan_prunes_nothing_and_fits_one_replica_a_trial(tmp_path):
    runcard = load_scan_runcard(
        load_benchmark("sampled_ensemble").scan_card(tmp_path, trials=14, precision="float64")
    )
    check_new_study(runcard)
    assert runcard.scan.pruner.name == "none"
    assert (runcard.scan.trials, runcard.scan.replicas) == (14, 1)
    assert runcard.fit.training.precision == "float64"
    assert runcard.fit.data.real is not None  # the real DIS data, as dis-nlo-scan.yml
