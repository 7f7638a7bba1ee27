# SPDX-License-Identifier: GPL-3.0-or-later
"""The self-consistency of the shipped DIS theory (tools/self_consistency.py): each dataset's
PineAPPL grid ⊗ a real LHAPDF set at the data's Q² against FK ⊗ x·f(Q0), with the shipped
grids and reference set (no yadism, no EKO computed here); and that wrong inputs fail it."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from hyperscan.data import DIS_DATASETS, HADRONIC_DATASETS
from hyperscan.pdfset import log_bicubic

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "self_consistency.py"


def _load_module():
    spec = importlib.util.spec_from_file_location("self_consistency", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


sc = _load_module()


@pytest.fixture(scope="module")
def reference():
    return sc.load_reference()


@pytest.fixture(scope="module")
def member(reference):
    return sc.SetMember(reference.blocks)


# --- the interpolation ---------------------------------------------------------------------------


def _block(function, n_x: int = 30, n_q: int = 12) -> object:
    x, q = np.geomspace(1e-6, 1.0, n_x), np.geomspace(1.0, 1e3, n_q)
    xf = function(x[:, None], q[None, :] ** 2)[:, :, None]
    return sc.Block(x, q, np.array([21]), xf, np.full(n_q, 0.2))


def _interpolated(block, x, q2):
    """hyperscan.pdfset's LHAPDF interpolation of the block's one flavour, as the tool uses it."""
    return log_bicubic(block.x, block.q, block.xf[:, :, 0], x, q2)


def test_log_bicubic_is_exact_at_the_knots_and_for_linear_functions_of_the_logs():
    linear = _block(lambda x, q2: 2.0 * np.log(x) - 0.7 * np.log(q2) + 3.0)
    xs = np.array([1e-6, 3.3e-6, 2e-3, 0.31, 0.999, 1.0])
    for q2 in (1.0, 7.3, 1e6):
        want = 2.0 * np.log(xs) - 0.7 * np.log(q2) + 3.0
        np.testing.assert_allclose(_interpolated(linear, xs, q2), want, rtol=0, atol=1e-12)
    smooth = _block(lambda x, q2: x**0.3 * (1 - x) ** 3 * np.log(q2 + 2.0))
    knots_x, q2 = smooth.x, smooth.q[5] ** 2
    np.testing.assert_allclose(
        _interpolated(smooth, knots_x, q2), smooth.xf[:, 5, 0], rtol=1e-14, atol=1e-300
    )


def test_log_bicubic_agrees_with_parton_between_the_knots():
    """Two different cubic interpolations of a smooth function on as many x nodes as the set
    has (196): each within 3e-4 of it (of its largest value), and not equal."""
    block = _block(lambda x, q2: x**0.3 * (1 - x) ** 3 * np.log(q2 + 2.0), n_x=196, n_q=30)
    ours, spline = sc.SetMember([block]), sc.SetMember([block], spline=True)
    xs = np.geomspace(2e-6, 0.9, 37)
    for q2 in (2.1, 50.0, 3e5):
        exact = xs**0.3 * (1 - xs) ** 3 * np.log(q2 + 2.0)
        a, b = ours.values(21, xs, q2), spline.values(21, xs, q2)
        assert np.abs(a - exact).max() / exact.max() < 3e-4
        assert np.abs(b - exact).max() / exact.max() < 3e-4
        assert not np.array_equal(a, b)


def test_outside_the_set_is_nan_not_an_extrapolation(member, reference):
    q_min = reference.blocks[0].q[0]
    assert np.isnan(member.xfxq2(2, 0.1, 0.5 * q_min**2))
    assert np.isnan(member.alphas(0.5 * q_min**2))
    assert np.isnan(_interpolated(reference.blocks[-1], np.array([1e-12]), 100.0)).all()


# --- the shipped inputs --------------------------------------------------------------------------


def test_a_grid_for_every_shipped_dis_dataset_at_its_kinematics():
    import pineappl

    assert sc.datasets_with_grids() == sorted(DIS_DATASETS)
    for dataset in DIS_DATASETS:
        grid = pineappl.grid.Grid.read(str(sc.GRIDS / f"{dataset}{sc.GRID_SUFFIX}"))
        with np.load(ROOT / "hyperscan" / "data" / "dis" / f"{dataset}.npz") as z:
            kinematics = z["kinematics"]
        (points,) = json.loads(grid.metadata["runcard"])["observables"].values()
        assert np.array_equal([[p["x"], p["Q2"]] for p in points], kinematics[:, :2])
        assert json.loads(grid.metadata["theory"])["ID"] == 99000001


def test_the_reference_is_a_real_evolved_set(reference):
    """Member 0 of a set with n3fit's layout (196 x, three flavour blocks from 1 GeV), αs
    running, and the fit's x·f(Q0) on the FK nodes: not a stand-in."""
    assert [len(b.x) for b in reference.blocks] == [196] * len(reference.blocks) == [196] * 3
    assert reference.blocks[0].q[0] == 1.0 and reference.q0 == pytest.approx(1.65)
    for block in reference.blocks:
        assert np.all(np.diff(block.alphas) < 0)  # αs falls with Q within a block
    assert 0.3 < reference.blocks[0].alphas[0] < 0.6 and reference.blocks[-1].alphas[-1] < 0.08
    assert reference.q0_xf.shape == (14, len(reference.q0_x))
    assert reference.about["members"] >= 2


# --- the check -----------------------------------------------------------------------------------


def test_the_set_reproduces_the_fit_at_q0(reference, member):
    """The evolution's error before any scale: the EKO's x interpolation (docs/outputs.md)."""
    assert sc.set_at_q0(reference, member) < 2e-3


@pytest.mark.parametrize("dataset", sorted(DIS_DATASETS))
def test_the_sets_error_at_q0_through_the_fk_table(dataset, reference, member):
    """A part of the check's difference, with no evolution in it: about 10⁻³ (HERA NC at small
    x), not 0 (the set is not the fit) and not above the 50-point EKO's interpolation error."""
    assert 1e-5 < sc.through_fk_at_q0(dataset, reference, member) < 2e-3


@pytest.mark.parametrize("dataset", sorted(DIS_DATASETS))
def test_grid_times_set_gives_the_fits_predictions(dataset, reference, member):
    out = sc.check_dataset(dataset, reference, member)
    assert out.n_data == len(np.load(sc.ROOT / "hyperscan/data/dis" / f"{dataset}.npz")["central"])
    assert len(out.from_fk) >= out.n_data - 3  # NMC: 3 points below the set's 1 GeV
    assert np.all(np.isfinite(out.from_grid)) and np.all(out.from_fk > 0)
    assert out.worst <= sc.TOLERANCE, f"{dataset}: {out.worst:.2e}"


def _frozen(reference):
    """The set without evolution: every scale holds the set's x·f at Q0."""
    blocks = []
    for block in reference.blocks:
        at_q0 = np.argmin(np.abs(reference.blocks[1].q - reference.q0))
        xf = np.repeat(reference.blocks[1].xf[:, at_q0 : at_q0 + 1], len(block.q), axis=1)
        blocks.append(dataclasses.replace(block, xf=xf))
    return dataclasses.replace(reference, blocks=tuple(blocks))


@pytest.mark.parametrize("dataset", sorted(DIS_DATASETS))
def test_a_set_not_evolved_fails(dataset, reference, member):
    frozen = _frozen(reference)
    assert frozen.blocks[1].q[np.argmin(np.abs(frozen.blocks[1].q - 1.65))] == pytest.approx(1.65)
    out = sc.check_dataset(dataset, frozen, sc.SetMember(frozen.blocks))
    assert out.worst > 10 * sc.TOLERANCE


@pytest.mark.parametrize("dataset", sorted(DIS_DATASETS))
def test_up_and_down_swapped_fail(dataset, reference, member):
    swap = {1: 2, 2: 1, -1: -2, -2: -1}
    out = sc.check_dataset(
        dataset, reference, member, xfx=lambda pid, x, q2: member.xfxq2(swap.get(pid, pid), x, q2)
    )
    assert out.worst > 10 * sc.TOLERANCE


def test_the_pdf_at_twice_the_scale_fails(reference, member):
    """A scale off by a factor 2 (as a grid filled at μ² = 2Q² would be): 6 % or more."""
    worst = [
        sc.check_dataset(
            dataset, reference, member, xfx=lambda pid, x, q2: member.xfxq2(pid, x, 2 * q2)
        ).worst
        for dataset in sorted(DIS_DATASETS)
    ]
    assert min(worst) > 10 * sc.TOLERANCE


@pytest.mark.parametrize(
    "dataset, other",
    [
        ("HERA_NC_225GEV_EP-SIGMARED", "HERA_NC_251GEV_EP-SIGMARED"),  # same observable
        ("HERA_CC_318GEV_EP-SIGMARED", "HERA_CC_318GEV_EM-SIGMARED"),  # other charge, points
    ],
)
def test_another_datasets_grid_is_refused(dataset, other, reference, member):
    grid = sc.GRIDS / f"{other}{sc.GRID_SUFFIX}"
    with pytest.raises(ValueError, match="not at the data's"):
        sc.check_dataset(dataset, reference, member, grid=grid)


def test_the_command_passes_on_the_shipped_data_and_fails_on_a_frozen_set(tmp_path, capsys):
    assert sc.main(["check"]) == 0
    shown = capsys.readouterr().out
    assert all(dataset in shown for dataset in DIS_DATASETS) and "largest" in shown
    frozen = tmp_path / "frozen.npz"
    sc.save_reference(_frozen(sc.load_reference()), frozen)
    assert sc.main(["check", "--reference", str(frozen)]) == 1


# --- the hadronic tables: grid ⊗ the toy evolved on its nodes against the shipped FK tables ------


@pytest.fixture(scope="module")
def toy():
    return sc.load_evolved_toy()


def test_the_evolved_toy_covers_every_hadronic_grid_at_its_nodes_and_scales(toy):
    import pineappl

    assert toy.pids == (-5, -4, -3, -2, -1, 21, 1, 2, 3, 4, 5)
    grids = sorted(p.name.removesuffix(".pineappl.lz4") for p in sc.HADRONIC_GRIDS.glob("*.lz4"))
    assert sorted(toy.tables) == grids
    for name, (x, mu2, xf) in toy.tables.items():
        grid = pineappl.grid.Grid.read(str(sc.HADRONIC_GRIDS / f"{name}.pineappl.lz4"))
        info = grid.evolve_info(np.array([True]))
        np.testing.assert_array_equal(x, info.x1)
        np.testing.assert_allclose(mu2, np.sort(info.fac1), rtol=1e-12)
        assert xf.shape == (mu2.size, len(toy.pids), x.size) and np.all(np.isfinite(xf))
        # evolved: the bottom, which the toy lacks at Q0, is radiated above m_b = 4.92 GeV only
        bottom = xf[:, toy.pids.index(5)].max(axis=1)
        assert np.array_equal(bottom > 1e-4, mu2 > 4.92**2) and np.all(bottom[mu2 < 4.92**2] == 0)


@pytest.mark.parametrize("dataset", sorted(HADRONIC_DATASETS))
def test_hadronic_grid_times_evolved_toy_gives_the_fk_tables_predictions(dataset, toy):
    out = sc.check_hadronic(dataset, toy)
    shipped = 88 if dataset == "DYE866_Z0_800GEV_PXSEC" else out.n_data  # the rest: never fitted
    assert len(out.from_fk) == shipped and out.passes_cuts.all()
    assert np.all(np.isfinite(out.from_grid)) and np.all(out.from_fk != 0)  # ASY: both signs
    assert out.worst <= sc.HADRONIC_TOLERANCE, f"{dataset}: {out.worst:.2e}"


def _not_evolved(toy):
    """The grids convolved with the toy at Q0, whatever their scale."""
    return lambda table: sc.toy_xfx_at_q0


def _swapped(toy):
    swap = {1: 2, 2: 1, -1: -2, -2: -1}
    return lambda table: lambda pid, x, q2: toy.xfx(table)(swap.get(pid, pid), x, q2)


@pytest.mark.parametrize("wrong", [_not_evolved, _swapped], ids=["not evolved", "u and d swapped"])
@pytest.mark.parametrize("dataset", sorted(HADRONIC_DATASETS))
def test_a_wrong_pdf_fails_the_hadronic_check(dataset, wrong, toy):
    """Each fails the check; the least by 1.6 times its tolerance: E866's pd/pp ratio of a toy
    not evolved, where the evolution of the two cross sections largely cancels."""
    out = sc.check_hadronic(dataset, toy, xfx=wrong(toy))
    assert out.worst > 1.5 * sc.HADRONIC_TOLERANCE, f"{dataset}: {out.worst:.2e}"


def test_w_plus_and_w_minus_swapped_fail(toy, tmp_path):
    """The asymmetry's operands exchanged: the sign of the W asymmetry flips."""
    for path in sc.HADRONIC_GRIDS.glob("*.lz4"):
        name = path.name.replace("Wplus", "W+").replace("Wminus", "Wplus").replace("W+", "Wminus")
        (tmp_path / name).symlink_to(path)
    out = sc.check_hadronic("D0_WPWM_1P96TEV_ASY", toy, grids=tmp_path)
    assert out.worst > 1.5


def test_the_command_checks_the_hadronic_tables_against_their_own_tolerance(capsys):
    assert sc.main(["check"]) == 0
    shown = capsys.readouterr().out
    assert all(dataset in shown for dataset in HADRONIC_DATASETS)
    assert "hadronic: largest" in shown and "DIS: largest" in shown
    assert sc.main(["check", "--hadronic-tolerance", "1e-9"]) == 1
