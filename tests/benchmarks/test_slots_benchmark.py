"""benchmarks/slots.py's k-fold scan of the real DIS data: a study hyperscan accepts, whose
folds hold out datasets the problem has, each at most once."""

from __future__ import annotations

from _scripts import load_benchmark

from hyperscan.data import load_problem
from hyperscan.runcard import load_scan_runcard
from hyperscan.scan._study import check_new_study


def test_the_k_fold_dis_scan_holds_out_each_real_dataset_at_most_once(tmp_path):
    bench = load_benchmark("slots")
    runcard = load_scan_runcard(bench.dis_kfold_card(tmp_path, trials=5, epochs=300))
    check_new_study(runcard)
    names = load_problem(runcard.fit).names
    held_out = [name for fold in runcard.scan.folds for name in fold]
    assert set(held_out) <= set(names) and len(held_out) == len(set(held_out))
    assert len(runcard.scan.folds) == 4 and runcard.scan.replicas == 1
    assert (runcard.scan.trials, runcard.fit.epochs) == (5, 300)
