"""benchmarks/closure_vs_n3fit.py: n3fit's closure card, its level-1 data, the scoring."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from _exportgrids import N3FIT_LABELS, N3FIT_X, toy_exportgrid

from hyperscan.data import real_problem

ROOT = Path(__file__).resolve().parents[2]
KIT = ROOT.parent / "shared" / "peer"


def _benchmark():
    path = ROOT / "benchmarks" / "closure_vs_n3fit.py"
    spec = importlib.util.spec_from_file_location("closure_vs_n3fit", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def kit(skip_or_fail_on_ci) -> Path:
    if not (KIT / "runcards" / "multi.yml").exists():
        skip_or_fail_on_ci(
            f"no n3fit peer kit at {KIT}", on_ci=f"the n3fit peer kit is missing at {KIT}"
        )
    return KIT


def test_the_n3fit_card_is_a_level1_closure_test_of_the_study(kit):
    bench = _benchmark()
    card = bench.n3fit_closure_card(kit, filterseed=7, epochs=1234)
    assert card["closuretest"] == {
        "filterseed": 7,
        "fakedata": True,
        "fakepdf": "HyperscanToyLH",
        "fakenoise": True,
    }
    assert card["parameters"]["epochs"] == 1234
    assert card["datacuts"]["t0pdfset"] == "HyperscanToyLH"  # t0 = truth, as in hyperscan
    study = yaml.safe_load(bench.STUDY.read_text())
    assert bench.card_mismatches(card, study) == []
    # ... and a setting that drifted apart is named
    card["parameters"]["optimizer"]["learning_rate"] = 2e-3
    card["dataset_inputs"] = card["dataset_inputs"][1:]
    found = bench.card_mismatches(card, study)
    assert [line.split(":")[0] for line in found] == ["datasets", "learning rate"]


def test_n3fit_level1_data_come_back_after_cuts_in_the_problem_order(tmp_path):
    # validphys writes each dataset's fake central values for all points (cut ones too) and
    # the kept indices (FKMASK); here the kept points are every other one.
    bench = _benchmark()
    problem = real_problem(closure_level=1, closure_seed=3)
    for d in problem.datasets:
        folder = tmp_path / "filter" / d.name
        folder.mkdir(parents=True)
        full = np.full(2 * d.central.size + 1, -1.0)
        mask = np.arange(d.central.size) * 2 + 1
        full[mask] = d.central
        text = yaml.safe_dump({"data_central": full.tolist()})
        (folder / f"filtered_data_{d.name}.yaml").write_text(text)
        np.savetxt(folder / f"FKMASK_{d.name}.dat", mask, fmt="%d")
    data = bench.level1_data(tmp_path, problem)
    np.testing.assert_array_equal(data, np.asarray(problem.central))


def test_an_ensemble_of_scaled_toy_pdfs_has_the_estimators_of_its_scale_factors():
    # Replica r = toy PDF × (1 + a_r), written as n3fit's exportgrids: the FK tables are
    # linear, so T_r = (1 + a_r) T_true, bias = mean(a)² t and variance = var(a) t with
    # t = T_trueᵀ C⁻¹ T_true / N, and R_bv = |mean(a)| / std(a).
    bench = _benchmark()
    x, exportgrid = N3FIT_X, toy_exportgrid()
    scales = np.array([0.010, 0.030, -0.005, 0.025])
    replicas = [{"x": x, "xf": (1 + a) * exportgrid, "labels": N3FIT_LABELS} for a in scales]

    problem = real_problem(closure_level=0)
    predictions = bench.n3fit_predictions(problem, replicas)
    np.testing.assert_allclose(predictions, (1 + scales)[:, None] * problem.truth, rtol=1e-5)

    covmat = np.asarray(problem.covmat)
    found = bench.closure_real.closure_estimators(predictions, problem.truth, covmat)
    t = problem.truth @ np.linalg.solve(covmat, problem.truth) / problem.n_data
    assert found["bias"] == pytest.approx(scales.mean() ** 2 * t, rel=1e-3)
    assert found["variance"] == pytest.approx(scales.var() * t, rel=1e-3)
    assert found["R_bv"] == pytest.approx(abs(scales.mean()) / scales.std(), rel=1e-3)
