"""`hyperscan evolve`: a fit's exportgrids through an EKO into an LHAPDF 6 set.

The EKOs here are eko's own files with operators the test chooses (tests/_ekos.py): what
the set holds is then known exactly. That eko computes the same EKO as n3fit's evolven3fit,
and that both tools evolve alike, is checked in the peer kit (test_evolve_vs_n3fit.py).
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest
import yaml
from _ekos import made_eko

from hyperscan.data import LHA_BASIS, export_xgrid
from hyperscan.pdfset import (
    PIDS,
    EvolveError,
    cache_key,
    cached_eko,
    eko_cards,
    eko_xgrid,
    evolution_points,
    evolve_fit,
    nnpdf_theory,
    read_fit,
)
from hyperscan.pdfset import _eko as eko_module


@pytest.fixture(scope="module")
def theory(fit_folder):
    return nnpdf_theory(read_fit(fit_folder).theory.card)


def read_dat(path):
    """An LHAPDF lhagrid1 member, read without hyperscan or eko: its blocks, each
    (x, Q, pids, x·f as (x, Q, pid))."""
    sections = path.read_text().split("---")
    header, blocks = yaml.safe_load(sections[0]), []
    for section in sections[1:]:
        lines = section.strip().splitlines()
        if not lines:
            continue
        x, q = (np.array(line.split(), dtype=float) for line in lines[:2])
        pids = [int(p) for p in lines[2].split()]
        values = np.array([line.split() for line in lines[3:]], dtype=float)
        blocks.append((x, q, pids, values.reshape(x.size, q.size, len(pids))))
    return header, blocks


def test_the_set_is_the_mean_then_each_replica_evolved_by_the_eko(fit_folder, theory, tmp_path):
    eko = tmp_path / "random.tar"
    operators = made_eko(eko, theory, export_xgrid(), seed=1)
    folder = evolve_fit(fit_folder, tmp_path / "sets", eko=eko)
    assert folder == tmp_path / "sets" / "tiny"
    fit = read_fit(fit_folder)
    assert fit.replicas == (1, 2, 3)
    names = sorted(p.name for p in folder.iterdir())
    assert names == ["tiny.info", *(f"tiny_{m:04d}.dat" for m in range(4))]
    info = yaml.safe_load((folder / "tiny.info").read_text())
    assert info["NumMembers"] == 4 and info["ErrorType"] == "replicas"
    assert info["Flavors"] == list(PIDS) and info["Format"] == "lhagrid1"
    assert (info["QMin"], info["QMax"]) == (1.65, 100.0)
    assert info["XMin"] == 1e-9 and info["XMax"] == 1.0

    # Each replica: x f(Q) = x · Σ O(Q) (f(Q0) = x·f / x), flavours in PDG order.
    order = [LHA_BASIS.index(name) for name in ("PHT", "TBAR", "BBAR", "CBAR", "SBAR", "UBAR")]
    order += [LHA_BASIS.index(n) for n in ("DBAR", "GLUON", "D", "U", "S", "C", "B", "T")]
    x = export_xgrid()
    at_q0 = fit.xf[:, :, order].transpose(0, 2, 1) / x  # (replica, pid, x)
    expected = {
        point: np.einsum("ajbk,rbk->rja", operator, at_q0) * x[:, None]
        for point, operator in operators.items()
    }
    members = [read_dat(folder / f"tiny_{m:04d}.dat") for m in range(4)]
    assert [h["PdfType"] for h, _ in members] == ["central", "replica", "replica", "replica"]
    assert [h.get("FromMCReplica") for h, _ in members[1:]] == [1, 2, 3]
    for member, (_, blocks) in enumerate(members):
        assert [tuple(q) for _, q, _, _ in blocks] == [(1.65, 3.0), (10.0, 100.0)]
        for x_nodes, q, pids, values in blocks:
            np.testing.assert_allclose(x_nodes, x, rtol=5e-7)  # printed with 7 digits
            assert pids == list(PIDS)
            for k, q_value in enumerate(q):
                ((point, evolved),) = [
                    (p, e) for p, e in expected.items() if np.isclose(np.sqrt(p[0]), q_value)
                ]
                want = evolved.mean(axis=0) if member == 0 else evolved[member - 1]
                np.testing.assert_allclose(values[:, k], want, rtol=1e-8, atol=1e-300)


def test_an_independent_reader_interpolates_the_set(fit_folder, theory, tmp_path):
    """parton (a pure-Python LHAPDF reader, not eko's, not ours) loads the set; at the grid's
    nodes its values are the set's own."""
    import parton

    eko = tmp_path / "identity.tar"
    scales = [(1.65, 4), (2.0, 4), (3.0, 4), (4.0, 4)]  # bicubic in (log x, log Q²): 4 at least
    made_eko(eko, theory, export_xgrid(), seed=None, scales=scales)
    folder = evolve_fit(fit_folder, tmp_path / "sets", name="HyperscanTiny", eko=eko)
    pdf = parton.mkPDF("HyperscanTiny", 2, pdfdir=str(folder.parent))
    _, blocks = read_dat(folder / "HyperscanTiny_0002.dat")
    x, q, pids, values = blocks[0]
    nodes = np.array([40, 120, 180])
    for pid in (21, 2, -1):
        got = pdf.xfxQ2(pid, x[nodes], np.full(3, q[1] ** 2), grid=False)
        np.testing.assert_allclose(got, values[nodes, 1, pids.index(pid)], rtol=1e-6)


def test_an_eko_on_a_coarser_grid_is_interpolated_onto_the_exportgrids(
    fit_folder, theory, tmp_path
):
    """The identity on 60 of the export grid's nodes, interpolated by eko onto all 196: the
    PDF comes back to the interpolation's accuracy."""
    eko = tmp_path / "coarse.tar"
    made_eko(eko, theory, eko_xgrid(export_xgrid(), 60), seed=None)
    folder = evolve_fit(fit_folder, tmp_path / "sets", eko=eko)
    _, blocks = read_dat(folder / "tiny_0001.dat")
    fit = read_fit(fit_folder)
    gluon = fit.xf[0, :, LHA_BASIS.index("GLUON")]
    x, _, pids, values = blocks[0]
    error = np.abs(values[:, 0, pids.index(21)] - gluon)
    assert error.max() < 2e-3 * np.abs(gluon).max()  # docs/outputs.md: 5e-4 with 60 points
    assert error.max() > 1e-7 * np.abs(gluon).max()  # an interpolation, not the identity


def test_the_eko_is_computed_once_then_read_from_the_cache(theory, tmp_path, monkeypatch):
    """The cache entry is keyed by the cards: the same theory and grid find it, another grid
    makes its own; a computation that fails leaves nothing behind."""
    solved = []

    def stand_in(theory_card, operator_card, path, progress):
        solved.append(len(operator_card.xgrid))
        path.write_bytes(b"an EKO")
        if progress is not None:
            progress(1, 1)

    monkeypatch.setattr(eko_module, "_solve", stand_in)
    progress = []
    first = cached_eko(
        theory, eko_xgrid(export_xgrid(), 20), tmp_path, lambda *a: progress.append(a)
    )
    again = cached_eko(theory, eko_xgrid(export_xgrid(), 20), tmp_path)
    other = cached_eko(theory, eko_xgrid(export_xgrid(), 30), tmp_path)
    assert first == again != other and solved == [20, 30] and progress == [(1, 1)]
    assert first.name.startswith("theory_99000001-") and first.read_bytes() == b"an EKO"
    grid = eko_xgrid(export_xgrid(), 20)  # the cores that compute it are not in the key
    assert cache_key(*eko_cards(theory, grid, cores=1)) == cache_key(*eko_cards(theory, grid, 2))
    assert cache_key(*eko_cards(theory, grid)) != cache_key(*eko_cards({**theory, "mc": 1.5}, grid))

    def failing(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(eko_module, "_solve", failing)
    with pytest.raises(KeyboardInterrupt):
        cached_eko(theory, eko_xgrid(export_xgrid(), 40), tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([first.name, other.name])


def test_the_set_s_scales_are_n3fit_s_lhapdf_grid(theory):
    """1 GeV to 100 TeV; Q0 and the c and b thresholds on it, a threshold once per flavour
    number (n3fit's own grid, bit for bit, in the peer test)."""
    points = evolution_points(theory)
    q = np.array([p[0] for p in points])
    assert len(points) == 57 and np.all(np.diff(q) >= 0)
    assert q[0] == pytest.approx(1.0) and q[-1] == pytest.approx(1e5)
    charm, bottom = theory["mc"] * theory["kcThr"], theory["mb"] * theory["kbThr"]
    for threshold, flavours in ((charm, [3, 4]), (bottom, [4, 5])):
        assert [nf for value, nf in points if np.isclose(value, threshold)] == flavours
    assert (theory["Q0"], 4) in [(round(value, 12), nf) for value, nf in points]
    assert [nf for value, nf in points if value < charm * 0.999] == [3] * 5
    assert {nf for value, nf in points if value > bottom * 1.001} == {5}


def _cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "hyperscan", "evolve", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_bad_input_is_one_line_exit_2_and_nothing_written(fit_folder, theory, tmp_path):
    eko = tmp_path / "identity.tar"
    made_eko(eko, {**theory, "Q0": 2.0}, export_xgrid(), seed=None, scales=[(2.0, 4), (3.0, 4)])
    not_a_fit = tmp_path / "not-a-fit"
    not_a_fit.mkdir()
    kfold = tmp_path / "kfold"
    shutil.copytree(fit_folder, kfold)
    shutil.rmtree(kfold / "nnfit")
    no_card = tmp_path / "no-card"
    shutil.copytree(fit_folder, no_card)
    theory_folder = tmp_path / "share" / "theory_99000001"
    (theory_folder / "fastkernel").mkdir(parents=True)
    card = yaml.safe_load((no_card / "runcard.yml").read_text())
    card["data"] = {
        "real": {"theory": str(theory_folder), "datasets": [{"dataset": "NMC_NC_NOTFIXED_P_EM-F2"}]}
    }
    (no_card / "runcard.yml").write_text(yaml.safe_dump(card))
    cases = [
        (not_a_fit, [], "is not a hyperscan fit folder"),
        (kfold, [], "holds no exportgrid"),
        (fit_folder, ["--eko", tmp_path / "missing.tar"], "does not exist"),
        (fit_folder, ["--eko", eko], "the EKO evolves from Q0² = 4.0 GeV²"),
        (no_card, [], "no theory card for theory 99000001"),
    ]
    for folder, options, message in cases:
        run = _cli(folder, "-o", tmp_path / "out", *options)
        lines = run.stderr.strip().splitlines()
        assert run.returncode == 2 and len(lines) == 1 and message in lines[0], (folder, run.stderr)
        assert not (tmp_path / "out").exists()
    taken = tmp_path / "sets" / "tiny"
    taken.mkdir(parents=True)
    run = _cli(fit_folder, "-o", tmp_path / "sets", "--eko", tmp_path / "missing.tar")
    assert run.returncode == 2 and f"{taken} exists; use --force" in run.stderr  # checked first
    assert list(taken.iterdir()) == []
    with pytest.raises(EvolveError, match="theory card .*theory_12345.yaml does not exist"):
        nnpdf_theory(tmp_path / "theory_12345.yaml")


def test_without_eko_the_command_says_what_to_install(monkeypatch, tmp_path):
    import importlib.util

    from click.testing import CliRunner

    from hyperscan.cli import main

    found = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "eko" else found(name, *a)
    )
    result = CliRunner().invoke(main, ["evolve", str(tmp_path)])
    assert result.exit_code == 2
    assert "`hyperscan evolve` needs eko: pip install 'hyperscan[evolve]'" in result.stderr


def test_a_closure_fit_s_truth_is_evolved_beside_its_set(fit_folder, theory, tmp_path):
    """The toy PDF through the same EKO: one member, the operators applied to its values."""
    from hyperscan.pdfset._evolve import toy_pdf_lha

    eko = tmp_path / "random.tar"
    operators = made_eko(eko, theory, export_xgrid(), seed=5)
    evolve_fit(fit_folder, tmp_path / "sets", eko=eko)
    truth = tmp_path / "sets" / "tiny_truth"
    assert sorted(p.name for p in truth.iterdir()) == ["tiny_truth.info", "tiny_truth_0000.dat"]
    assert "NumMembers: 1\n" in (truth / "tiny_truth.info").read_text()
    x = export_xgrid()
    lha_pids = (-6, -5, -4, -3, -2, -1, 21, 1, 2, 3, 4, 5, 6, 22)  # LHA_BASIS's, TBAR … PHT
    at_q0 = toy_pdf_lha(x)[:, [lha_pids.index(p) for p in PIDS]].T  # (pid, x)
    _, blocks = read_dat(truth / "tiny_truth_0000.dat")
    (mu2, nf), operator = next(iter(operators.items()))
    expected = np.einsum("ajbk,bk->aj", operator, at_q0 / x) * x  # (pid, x) at the first scale
    _, q, _, values = blocks[0]
    assert q[0] ** 2 == pytest.approx(mu2)
    np.testing.assert_allclose(values[:, 0, :].T, expected, rtol=1e-7, atol=1e-12)


def test_the_reader_interpolates_as_lhapdf_between_scales(fit_folder, tmp_path):
    """A set whose x·f is smooth in Q, g(ln Q²) times the fit's values at Q0: at a node the
    set's own values; between nodes LHAPDF's cubic in ln Q², exact where g is linear, and
    within 1e-3 of g (and of parton's spline, another reader) where it is curved."""
    import parton

    from hyperscan.pdfset import read_set, write_set

    fit = read_fit(fit_folder)
    q = np.geomspace(1.65, 1e3, 40)  # about as dense in ln Q² as an LHAPDF grid
    lha_pids = (-6, -5, -4, -3, -2, -1, 21, 1, 2, 3, 4, 5, 6, 22)  # LHA_BASIS's, TBAR … PHT
    at_q0 = np.moveaxis(fit.xf[:, :, [lha_pids.index(p) for p in PIDS]], 1, 2)  # (r, pid, x)
    info = {"Format": "lhagrid1", "Flavors": list(PIDS), "NumMembers": 4, "QMin": 1.65}

    def made(name, g):
        xf = g(np.log(q**2))[None, :, None, None] * at_q0[:, None]
        return read_set(write_set(fit, info, {4: (q**2, xf)}, tmp_path, name))

    linear = made("linear", lambda t: 1 + 0.1 * t)
    curved = made("curved", lambda t: 1 + 0.3 * np.sin(t))
    gluon = PIDS.index(21)
    reference = at_q0[1, gluon]  # replica 2, member 2
    assert curved.replicas == (None, 1, 2, 3)
    node = curved.blocks[0][0][4]  # Q as printed in the set, the value as written at q[4]
    expected = reference * (1 + 0.3 * np.sin(np.log(q[4] ** 2)))
    np.testing.assert_allclose(curved.at(node)[2, gluon], expected, rtol=1e-7)
    t = np.log(50.0**2)
    np.testing.assert_allclose(linear.at(50.0)[2, gluon], reference * (1 + 0.1 * t), rtol=1e-7)
    got = curved.at(50.0)[2, gluon]
    exact = reference * (1 + 0.3 * np.sin(t))
    assert np.abs(got - exact).max() < 1e-3 * np.abs(exact).max()
    theirs = parton.mkPDF("curved", 2, pdfdir=str(tmp_path)).xfxQ2(
        21, fit.xgrid, 2500.0, grid=False
    )
    assert np.abs(got - theirs).max() < 1e-3 * np.abs(exact).max()
    with pytest.raises(EvolveError, match="Q = 10000.0 GeV is outside the set's grid"):
        curved.at(1e4)
