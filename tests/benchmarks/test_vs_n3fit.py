"""benchmarks/vs_n3fit.py's yardstick and its translation of the peer's hyperopt card."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from _exportgrids import N3FIT_LABELS, N3FIT_X, toy_exportgrid

from hyperscan.data import REAL_DATASETS, experimental_chi2, grid_predictions, real_problem
from hyperscan.runcard import load_runcard, load_scan_runcard
from hyperscan.runcard.real_datasets import PRESETS
from hyperscan.scan._study import check_new_study

ROOT = Path(__file__).resolve().parents[2]
KIT = ROOT.parent / "shared" / "peer"


def _benchmark():
    spec = importlib.util.spec_from_file_location("vs_n3fit", ROOT / "benchmarks" / "vs_n3fit.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while defined
    spec.loader.exec_module(module)
    return module


def test_an_exportgrid_of_the_toy_pdf_gives_the_toy_predictions():
    # The toy PDF written as n3fit writes PDFs (x·f per flavour on its 196 log nodes) must
    # come back, through the benchmark's conversion and hyperscan's FK tables, as the toy
    # predictions of the real datasets: flavour labels, rotation and interpolation at once.
    bench = _benchmark()
    # n3fit's exportgrid: 196 nodes, logarithmic below x = 0.1 and linear above.
    x, exportgrid = N3FIT_X, toy_exportgrid()

    problem = real_problem(closure_level=0)  # central values = truth = toy predictions
    grid = np.unique(np.concatenate([d.xgrid for d in problem.datasets]))
    xf14 = bench.exportgrid_on(grid, x, exportgrid, N3FIT_LABELS)[None]
    predicted = grid_predictions(problem, grid, xf14)[0]
    np.testing.assert_allclose(predicted, problem.truth, rtol=1e-5)
    assert experimental_chi2(problem, predicted[None])[0][0] < 1e-6


def test_the_peer_hyperopt_card_becomes_a_valid_scan_runcard(tmp_path, skip_or_fail_on_ci):
    if not (KIT / "runcards" / "hyperopt.yml").exists():
        skip_or_fail_on_ci(
            f"no n3fit peer kit at {KIT}", on_ci=f"the n3fit peer kit is missing at {KIT}"
        )
    card = load_scan_runcard(_benchmark().hyperscan_scan_card(tmp_path, KIT, trials=3))
    check_new_study(card)  # `hyperscan scan` takes it for a new study
    assert card.scan.trials == 3
    assert [list(f) for f in card.scan.folds] == [
        ["HERA_NC_225GEV_EP-SIGMARED"],
        ["NMC_NC_NOTFIXED_P_EM-F2-HEPDATA"],
    ]
    assert card.fit.training.threads == 1
    assert set(card.scan.space.optimizer) == {"nadam"}


def test_a_failed_comparison_keeps_the_run_folder_its_message_points_to(
    tmp_path, monkeypatch, capsys
):
    bench = _benchmark()
    kit, peer, runs = tmp_path / "kit", tmp_path / "peer", tmp_path / "runs"
    for folder in (kit, peer / "bin", runs):
        folder.mkdir(parents=True)
    (kit / "run.sh").touch()
    (peer / "bin" / "n3fit").touch()  # installed: nothing to set up

    def failing(args, work):
        (work / "hs.log").write_text("what went wrong\n")
        sys.exit(f"hyperscan fit ... failed (rc=1), see {work / 'hs.log'}")

    monkeypatch.setattr(bench, "compare_fits", failing)
    monkeypatch.setattr(bench.tempfile, "tempdir", str(runs))
    monkeypatch.setattr(sys, "argv", ["vs_n3fit.py", "--kit", str(kit), "--peer", str(peer)])
    with pytest.raises(SystemExit, match="see "):
        bench.main()
    (work,) = runs.iterdir()
    assert (work / "hs.log").read_text() == "what went wrong\n"
    assert f"the run folder {work} is kept" in capsys.readouterr().err


def test_both_cards_of_the_hadronic_comparison_name_the_same_datasets(tmp_path, skip_or_fail_on_ci):
    """n3fit's card gets the hadronic sets in their shipped variants beside the kit's DIS sets;
    hyperscan's card takes the preset: the same 12 datasets, n3fit's at the kit's fraction."""
    if not (KIT / "runcards" / "multi.yml").exists():
        skip_or_fail_on_ci(
            f"no n3fit peer kit at {KIT}", on_ci=f"the n3fit peer kit is missing at {KIT}"
        )
    bench = _benchmark()
    hadronic = tuple(n for n in PRESETS["dis+hadronic"] if n not in PRESETS["dis"])
    n3fit = yaml.safe_load(bench.peer_card(KIT, "multi", tmp_path, 300, more=hadronic).read_text())
    assert n3fit["parameters"]["epochs"] == 300
    inputs = {d["dataset"]: d for d in n3fit["dataset_inputs"]}
    assert set(inputs) == set(REAL_DATASETS)
    for name in hadronic:
        assert inputs[name] == {"dataset": name, "variant": REAL_DATASETS[name], "frac": 0.75}
    card = load_runcard(bench.hyperscan_fit_card(tmp_path, 16, 2000, "dis+hadronic"))
    assert {d.dataset: d.variant for d in card.data.real.datasets} == REAL_DATASETS
    assert (card.replicas, card.epochs) == (16, 2000)
