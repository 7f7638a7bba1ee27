"""Each replica's fit information, n3fit's ``<fit>.json``, which postfit judges it on (the peer
test, tests/pdfset/test_postfit_vs_n3fit.py, checks the definitions against validphys's)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tensorflow as tf

from hyperscan.data import FIT_BASIS
from hyperscan.fit import (
    INTEGRABILITY_X,
    POS_PASS,
    POS_VETO,
    arc_length_xgrid,
    arc_lengths,
    build_ensemble,
    integrability_numbers,
    run_fit,
    write_fit,
)
from hyperscan.fit._fitinfo import ARC_LENGTH_FLAVOURS, _simpson

N3FIT_KEYS = {"best_epoch", "stop_epoch", "erf_tr", "erf_vl", "chi2", "pos_state"}
N3FIT_KEYS |= {"arc_lengths", "integrability", "preprocessing", "timing"}


@pytest.fixture(scope="module")
def fitted(make_card, tmp_path_factory):
    card = make_card(replicas=[1, 2, 3], epochs=120, training={"precision": "float64"})
    result = run_fit(card)
    outdir = tmp_path_factory.mktemp("fits") / "info-fit"
    write_fit(result, "epochs: 120\n", outdir, runcard=card)
    return card, result, outdir


def test_a_flat_pdf_has_the_arc_length_of_a_straight_line():
    """x·f = c everywhere: x·(x·f) is a line of slope c, so each segment's length is the span
    of its integration nodes (the grid's second to last point) times √(1 + c²)."""
    slopes = np.array([0.0, 0.5, 1.0, 2.0, 3.0, -1.0, 0.0, 0.0])
    xf = np.broadcast_to(slopes, (2, arc_length_xgrid().size, len(FIT_BASIS)))
    spans = sum((b - a) * 197 / 199 for a, b in ((1e-6, 1e-4), (1e-4, 1e-2), (1e-2, 1.0)))
    expected = spans * np.sqrt(1 + slopes[[FIT_BASIS.index(f) for f in ARC_LENGTH_FLAVOURS]] ** 2)
    np.testing.assert_allclose(arc_lengths(xf), np.stack([expected, expected]), rtol=1e-12)


def test_simpson_s_rule_is_scipy_s_on_an_odd_number_of_intervals():
    from scipy.integrate import simpson

    x = np.linspace(0.1, 2.0, 198)
    y = np.stack([np.sin(3 * x) + x**3, np.exp(-x)])
    for n in (198, 197):
        np.testing.assert_allclose(_simpson(y[:, :n], x[:n]), simpson(y[:, :n], x=x[:n]))


def test_integrability_numbers_sum_the_absolute_values_per_flavour():
    xf = np.zeros((1, INTEGRABILITY_X.size, len(FIT_BASIS)))
    xf[0, :, FIT_BASIS.index("V")] = [0.1, -0.2, 0.3]
    xf[0, :, FIT_BASIS.index("Sigma")] = 5.0  # not one of the five
    assert integrability_numbers(xf)[0].tolist() == pytest.approx([0.6, 0, 0, 0, 0])


def test_each_replica_gets_n3fit_s_fit_information_beside_its_exportgrid(fitted):
    card, result, outdir = fitted
    for m, replica in enumerate(result.replicas):
        folder = outdir / "nnfit" / f"replica_{replica}"
        info = json.loads((folder / "info-fit.json").read_text())
        assert set(info) >= N3FIT_KEYS
        assert info["chi2"] == result.chi2_per_point["experimental"][m]
        assert info["erf_tr"] == result.chi2_per_point["training"][m]
        assert info["erf_vl"] == result.chi2_per_point["validation"][m]
        assert info["best_epoch"] == result.best_epoch[m]
        assert info["pos_state"] == (POS_PASS if result.status[m] == "ok" else POS_VETO)
        assert (
            info["integrability"]
            == integrability_numbers(result.small_x_pdf[m : m + 1, :3])[0].tolist()
        )
        log = json.loads((folder / "chi2exps.log").read_text())
        assert list(log) == [str(report.step) for report in result.history]
        last = result.history[-1].chi2_per_point[m]
        assert log[str(result.history[-1].step)]["training_loss"] == last[0]
    model, _, _ = build_ensemble(card)
    xf = model.pdf([tf.constant(p) for p in result.params], arc_length_xgrid())
    written = [
        json.loads((outdir / f"nnfit/replica_{r}/info-fit.json").read_text())["arc_lengths"]
        for r in result.replicas
    ]
    np.testing.assert_allclose(written, arc_lengths(xf), rtol=1e-12)
