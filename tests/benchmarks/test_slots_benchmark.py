"""benchmarks/slots.py's k-fold scan of the real DIS data: a study hyperscan accepts, whose
folds hold out datasets the problem has, each at most once."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from hyperscan.data import load_problem
from hyperscan.runcard import load_scan_runcard
from hyperscan.scan._study import check_new_study

ROOT = Path(__file__).resolve().parents[2]


def _benchmark():
    sys.path.insert(0, str(ROOT / "benchmarks"))  # it imports vs_n3fit's helpers
    try:
        spec = importlib.util.spec_from_file_location("slots", ROOT / "benchmarks" / "slots.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def test_the_k_fold_dis_scan_holds_out_each_real_dataset_at_most_once(tmp_path):
    bench = _benchmark()
    runcard = load_scan_runcard(bench.dis_kfold_card(tmp_path, trials=5, epochs=300))
    check_new_study(runcard)
    names = load_problem(runcard.fit).names
    held_out = [name for fold in runcard.scan.folds for name in fold]
    assert set(held_out) <= set(names) and len(held_out) == len(set(held_out))
    assert len(runcard.scan.folds) == 4 and runcard.scan.replicas == 1
    assert (runcard.scan.trials, runcard.fit.epochs) == (5, 300)
