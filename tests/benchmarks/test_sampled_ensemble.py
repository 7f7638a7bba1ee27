"""benchmarks/sampled_ensemble.py's scan: a study hyperscan accepts, in which no trial is pruned,
so that every trial is eligible for ``export --sample``."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from hyperscan.runcard import load_scan_runcard
from hyperscan.scan._study import check_new_study

ROOT = Path(__file__).resolve().parents[2]


def _benchmark():
    sys.path.insert(0, str(ROOT / "benchmarks"))  # it imports vs_n3fit's helpers
    try:
        path = ROOT / "benchmarks" / "sampled_ensemble.py"
        spec = importlib.util.spec_from_file_location("sampled_ensemble", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def test_the_scan_prunes_nothing_and_fits_one_replica_a_trial(tmp_path):
    runcard = load_scan_runcard(_benchmark().scan_card(tmp_path, trials=14, precision="float64"))
    check_new_study(runcard)
    assert runcard.scan.pruner.name == "none"
    assert (runcard.scan.trials, runcard.scan.replicas) == (14, 1)
    assert runcard.fit.training.precision == "float64"
    assert runcard.fit.data.real is not None  # the real DIS data, as dis-nlo-scan.yml
