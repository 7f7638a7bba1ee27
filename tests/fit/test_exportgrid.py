"""Exportgrids: each replica's PDF at Q0 on n3fit's export grid, in n3fit's flavour basis and
layout (the peer test, tests/benchmarks/test_exportgrids_vs_n3fit.py, evolves them with n3fit's
own evolven3fit)."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from hyperscan.data import (
    FIT_BASIS,
    FK_BASIS,
    LHA_BASIS,
    export_xgrid,
    fit_to_fk_rotation,
    fk_to_lha_rotation,
)
from hyperscan.fit import run_fit, write_fit
from hyperscan.fit._exportgrid import exported_members

QUARKS = ("U", "D", "S", "C", "B", "T")


def _evolution_basis(lha: dict[str, float]) -> np.ndarray:
    """FK_BASIS values of physical flavours, from the basis's definitions written out."""
    plus = {q: lha[q] + lha[q + "BAR"] for q in QUARKS}
    minus = {q: lha[q] - lha[q + "BAR"] for q in QUARKS}
    values = {"photon": lha["PHT"], "g": lha["GLUON"]}
    values["Sigma"], values["V"] = sum(plus.values()), sum(minus.values())
    for k, size in enumerate((3, 8, 15, 24, 35), start=2):  # T3 = u+ - d+, T8 = u+ + d+ - 2 s+, …
        for name, combined in (("T", plus), ("V", minus)):
            lighter = sum(combined[q] for q in QUARKS[: k - 1])
            values[f"{name}{size}"] = lighter - (k - 1) * combined[QUARKS[k - 1]]
    return np.array([values[name] for name in FK_BASIS])


def test_the_lha_rotation_gives_back_the_physical_flavours():
    rng = np.random.default_rng(0)
    for _ in range(5):
        lha = dict(zip(LHA_BASIS, rng.normal(size=14), strict=True))
        back = fk_to_lha_rotation(6) @ _evolution_basis(lha)
        np.testing.assert_allclose(back, [lha[name] for name in LHA_BASIS], atol=1e-14)


def test_quarks_heavier_than_charm_are_written_as_zero():
    """At Q0 the fitted basis holds no b or t: their rows are zero, not rounding noise, and the
    other flavours are those of the full inverse."""
    rotation = fk_to_lha_rotation(4)
    heavy = [LHA_BASIS.index(name) for name in ("B", "BBAR", "T", "TBAR")]
    assert not rotation[heavy].any()
    xf_fit = np.random.default_rng(1).normal(size=(20, len(FIT_BASIS)))
    full = xf_fit @ (fk_to_lha_rotation(6) @ fit_to_fk_rotation()).T
    assert np.abs(full[:, heavy]).max() < 1e-14
    light = [i for i in range(14) if i not in heavy]
    np.testing.assert_allclose(
        (xf_fit @ (rotation @ fit_to_fk_rotation()).T)[:, light], full[:, light], atol=1e-14
    )


@pytest.fixture(scope="module")
def fitted(make_card, tmp_path_factory):
    card = make_card(replicas=[2, 5], epochs=100)
    result = run_fit(card)
    outdir = tmp_path_factory.mktemp("fits") / "tiny-fit"
    write_fit(result, "epochs: 100\n", outdir, runcard=card)
    return result, outdir


def test_a_fit_writes_an_exportgrid_and_fit_information_per_replica_as_n3fit_lays_them_out(fitted):
    result, outdir = fitted
    files = sorted(
        p.relative_to(outdir / "nnfit").as_posix() for p in (outdir / "nnfit").rglob("*")
    )
    assert files == [
        "replica_2",
        "replica_2/chi2exps.log",
        "replica_2/tiny-fit.exportgrid",
        "replica_2/tiny-fit.json",
        "replica_5",
        "replica_5/chi2exps.log",
        "replica_5/tiny-fit.exportgrid",
        "replica_5/tiny-fit.json",
    ]
    for member, replica in enumerate((2, 5)):
        grid = yaml.safe_load((outdir / f"nnfit/replica_{replica}/tiny-fit.exportgrid").read_text())
        assert list(grid) == ["replica", "q20", "xgrid", "labels", "pdfgrid"]
        assert grid["replica"] == replica
        assert grid["q20"] == 1.65**2  # the shipped tables' theory, 99000001
        assert grid["xgrid"] == export_xgrid().tolist()  # bit for bit
        assert grid["labels"] == list(LHA_BASIS)
        expected = result.export_pdf[member] @ (fk_to_lha_rotation(4) @ fit_to_fk_rotation()).T
        assert np.array_equal(np.array(grid["pdfgrid"]), expected)


def test_the_exportgrids_keep_the_fit_s_sum_rules(fitted):
    """Valence numbers and the momentum fraction, integrated on the exportgrid's own nodes:
    a wrong flavour in the rotation would break them."""
    _, outdir = fitted
    grid = yaml.safe_load((outdir / "nnfit/replica_2/tiny-fit.exportgrid").read_text())
    x, xf = (
        np.array(grid["xgrid"]),
        dict(zip(grid["labels"], np.array(grid["pdfgrid"]).T, strict=True)),
    )

    def integral(values: np.ndarray) -> float:
        return float(np.sum((values[1:] + values[:-1]) * np.diff(x)) / 2)

    def number(q: str) -> float:
        return integral((xf[q] - xf[q + "BAR"]) / x)

    assert number("U") == pytest.approx(2.0, abs=5e-3)
    assert number("D") == pytest.approx(1.0, abs=5e-3)
    assert number("S") == pytest.approx(0.0, abs=5e-3)
    assert number("C") == pytest.approx(0.0, abs=1e-12)  # c = cbar at Q0
    assert integral(sum(xf[name] for name in LHA_BASIS)) == pytest.approx(1.0, abs=5e-3)


def test_a_k_fold_fit_and_a_diverged_member_write_no_exportgrid(fitted, make_card):
    """A k-fold fit's members each miss a fold: not a PDF set. A diverged member's PDF is not
    finite: nothing to evolve."""
    result, _ = fitted
    assert exported_members(result) == [0, 1]
    folded = run_fit(make_card(replicas=[1], epochs=50, folds=[["TOY_HERA_NC_F2P"], ["TOY_GLUON"]]))
    assert (folded.folds >= 0).all() and exported_members(folded) == []
    diverged = result.export_pdf.copy()
    diverged[0, 3, 2] = np.nan
    result.export_pdf = diverged
    try:
        assert exported_members(result) == [1]
    finally:
        result.export_pdf = np.where(np.isnan(diverged), 0.0, diverged)
