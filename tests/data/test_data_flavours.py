# SPDX-License-Identifier: GPL-3.0-or-later
"""Flavour bases, rotation, observable rows, the toy PDF and its agreement with the real kit."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from hyperscan.data import (
    FIT_BASIS,
    FK_BASIS,
    STANDARD_XGRID,
    fit_to_fk_rotation,
    flavour_combination,
    toy_pdf,
)
from hyperscan.data._flavours import _toy_normalisations

FK = {name: i for i, name in enumerate(FK_BASIS)}
FIT = {name: i for i, name in enumerate(FIT_BASIS)}


def test_bases_and_rotation_shape():
    assert len(FK_BASIS) == 14 and len(FIT_BASIS) == 8
    r = fit_to_fk_rotation()
    assert r.shape == (14, 8) and r.dtype == np.float64
    assert set(np.unique(r)) <= {0.0, 1.0}
    assert np.all(r[FK["photon"]] == 0.0)


def test_rotated_toy_has_nf4_identities():
    x = np.geomspace(1e-6, 0.95, 37)
    xf = fit_to_fk_rotation() @ toy_pdf(x).T  # (14, n_x)
    for name in FIT_BASIS:
        np.testing.assert_array_equal(xf[FK[name]], toy_pdf(x)[:, FIT[name]])
    for name in ("V15", "V24", "V35"):
        np.testing.assert_array_equal(xf[FK[name]], xf[FK["V"]])
    for name in ("T24", "T35"):
        np.testing.assert_array_equal(xf[FK[name]], xf[FK["Sigma"]])
    np.testing.assert_array_equal(xf[FK["photon"]], 0.0)
    # toy has c = 0, so T15 = Sigma too
    np.testing.assert_allclose(xf[FK["T15"]], xf[FK["Sigma"]], rtol=1e-15)


def test_flavour_combination_rows():
    e_u, e_d = 4 / 9, 1 / 9
    f2p = flavour_combination(
        {"u": e_u, "ubar": e_u, "d": e_d, "dbar": e_d, "s": e_d, "sbar": e_d, "c": e_u, "cbar": e_u}
    )
    expected = np.zeros(8)
    expected[[FIT["Sigma"], FIT["T3"], FIT["T8"], FIT["T15"]]] = [5 / 18, 1 / 6, 1 / 18, -1 / 18]
    np.testing.assert_allclose(f2p, expected, atol=1e-15)
    # a row reproduces the physical combination of the toy, flavour by flavour
    x = np.geomspace(1e-5, 0.9, 11)
    from hyperscan.data._flavours import PHYSICAL_FLAVOURS, _toy_physical

    physical = _toy_physical(x)
    for i, name in enumerate(PHYSICAL_FLAVOURS):
        if name in ("c", "cbar"):
            continue  # c = cbar assumed: covered by c + cbar below
        np.testing.assert_allclose(
            toy_pdf(x) @ flavour_combination({name: 1.0}), physical[:, i], rtol=1e-12, atol=1e-15
        )
    c_plus = flavour_combination({"c": 1.0, "cbar": 1.0})
    np.testing.assert_allclose(c_plus, 0.25 * (np.eye(8)[FIT["Sigma"]] - np.eye(8)[FIT["T15"]]))
    np.testing.assert_allclose(2 * flavour_combination({"c": 1.0}), c_plus)
    with pytest.raises(ValueError, match="top"):
        flavour_combination({"top": 1.0})


def _integrate(f, n_per_interval: int = 48) -> float:
    """int_0^1 f(x) dx with x = t^5 and composite Gauss-Legendre in t (independent of the
    Beta-function integrals used inside toy_pdf); x^-0.2 and x^-0.1 become smooth in t."""
    nodes, weights = np.polynomial.legendre.leggauss(n_per_interval)
    edges = np.concatenate([[0.0], np.geomspace(1e-4, 0.5, 8), np.linspace(0.6, 1.0, 5)])
    total = 0.0
    for a, b in zip(edges[:-1], edges[1:], strict=True):
        t = 0.5 * (b - a) * nodes + 0.5 * (a + b)
        x = t**5
        total += 0.5 * (b - a) * np.sum(weights * f(x) * 5 * t**4)
    return float(total)


def test_toy_sum_rules():
    def column(name, divide_by_x):
        def f(x):
            v = toy_pdf(np.minimum(x, 1.0))[:, FIT[name]]
            return v / x if divide_by_x else v

        return f

    assert abs(_integrate(column("V", True)) - 3.0) < 1e-8
    assert abs(_integrate(column("V3", True)) - 1.0) < 1e-8
    assert abs(_integrate(column("V8", True)) - 3.0) < 1e-8
    momentum = _integrate(lambda x: toy_pdf(x)[:, FIT["Sigma"]] + toy_pdf(x)[:, FIT["g"]])
    assert abs(momentum - 1.0) < 1e-8
    # the published constants miss the momentum sum rule by ~2e-8 (what normalise fixes)
    raw = _integrate(
        lambda x: (
            toy_pdf(x, normalise=False)[:, FIT["Sigma"]] + toy_pdf(x, normalise=False)[:, FIT["g"]]
        )
    )
    assert 1e-9 < abs(raw - 1.0) < 1e-7


def test_toy_pdf_checks_input():
    with pytest.raises(ValueError):
        toy_pdf(np.array([0.0, 0.5]))
    with pytest.raises(ValueError):
        toy_pdf(np.ones((2, 2)) * 0.5)


def test_standard_xgrid_follows_its_formula():
    """Uniform in y = ln(1/x) + 5 (1 - x) between 2e-7 and 1 (to 1e-12: pineko's own bits)."""
    y = -np.log(STANDARD_XGRID) + 5 * (1 - STANDARD_XGRID)
    step = np.diff(y)
    assert STANDARD_XGRID.size == 50 and STANDARD_XGRID[-1] == 1.0
    np.testing.assert_allclose(step, step.mean(), rtol=1e-11)
    assert math.isclose(STANDARD_XGRID[0], 2e-7, rel_tol=1e-12)


def test_real_grids_are_slices_of_the_standard_grid(real_data_files):
    for path in real_data_files:
        z = np.load(path)
        grid = z["xgrid"]
        start = int(np.searchsorted(STANDARD_XGRID, grid[0]))
        np.testing.assert_array_equal(STANDARD_XGRID[start:], grid, err_msg=path.name)
        # "a few nodes below the smallest data x": 6 or 7 in the real tables (we keep 7)
        assert 6 <= np.searchsorted(grid, z["kinematics"][:, 0].min()) <= 7


def test_real_toy_prediction_agrees(real_data_files):
    """Our toy against ``toy_prediction`` of every real npz file.

    The kit convolves the Les Houches toy with its published constants, *not* renormalised:
    ``toy_pdf(normalise=False)`` reproduces it to rounding (measured 7e-16 relative). Our default
    toy rescales the gluon by A_g' / 1.7 - 1 = 6.0e-8 to enforce the momentum sum rule to 1e-8
    (the valence rescalings are ~1e-15), so it differs by exactly that factor times the gluon
    part of each prediction: asserted below, and below 1e-7 relative overall (measured 3e-8).
    """
    r = fit_to_fk_rotation()
    gluon_shift = _toy_normalisations()[2] / 1.7 - 1.0
    assert 5e-8 < gluon_shift < 7e-8
    for path in real_data_files:
        z = np.load(path)
        fk, grid, ref = z["fk"], z["xgrid"], z["toy_prediction"]
        assert list(z["flavour_basis"]) == list(FK_BASIS)
        raw = np.einsum("ifa,fa->i", fk, r @ toy_pdf(grid, normalise=False).T)
        np.testing.assert_allclose(raw, ref, rtol=1e-12, atol=0, err_msg=path.name)
        ours = np.einsum("ifa,fa->i", fk, r @ toy_pdf(grid).T)
        gluon_part = fk[:, FK["g"], :] @ toy_pdf(grid, normalise=False)[:, FIT["g"]]
        np.testing.assert_allclose(
            ours - ref, gluon_shift * gluon_part, rtol=1e-6, atol=1e-14 * np.abs(ref).max()
        )
        assert np.max(np.abs(ours / ref - 1.0)) < 1e-7
        # same zero-row pattern as our closure tables
        for name in ("photon", "V24", "V35", "T24", "T35"):
            assert np.all(fk[:, FK[name], :] == 0.0)


def test_data_package_does_not_import_tensorflow():
    code = "import sys, hyperscan.data; sys.exit('tensorflow' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
