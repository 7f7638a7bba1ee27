"""`hyperscan postfit`: n3fit's replica selection, and the final set of those that pass.

That the selection is n3fit's own on the same fit, and that the fit information is validphys's,
is checked in the peer kit (test_postfit_vs_n3fit.py).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest
from _ekos import made_eko

from hyperscan.data import export_xgrid
from hyperscan.pdfset import (
    ReplicaInfo,
    evolve_fit,
    member_blocks,
    nnpdf_theory,
    postfit,
    postfit_order,
    read_fit,
    vetoes,
)

N3FIT_KEYS = ["Convergence check", *(f"IntegNumber_{i}" for i in range(5)), "ChiSquared"]
N3FIT_KEYS += [*(f"ArcLength_{i}" for i in range(5)), "Total"]


def info(replica, chi2=1.0, arc=1.0, integrability=0.0, converged=True):
    return ReplicaInfo(replica, chi2, (arc,) * 5, (integrability,) * 5, converged)


def test_the_spread_is_recomputed_until_the_passing_count_settles():
    """Two outliers: the far one widens the spread enough to hide the near one, which fails
    only once the far one no longer counts."""
    chi2 = [1.0 + 0.01 * np.sin(k) for k in range(30)] + [2.0, 1.3]
    masks = vetoes([info(r, c) for r, c in enumerate(chi2, start=1)])
    assert list(masks) == N3FIT_KEYS
    assert np.flatnonzero(~masks["Total"]).tolist() == [30, 31]
    assert chi2[31] - np.mean(chi2) <= 4 * np.std(chi2)  # 1.3 passes against all 32


def test_only_replicas_that_passed_positivity_set_the_spread():
    """The unconverged replica's χ² of 50 neither passes nor widens the spread: the χ² of 1.5
    is judged against the others alone, and fails. A low outlier passes (n3fit's test is one
    sided), and an integrability number above 0.5 fails."""
    infos = [info(r, 1.0 + 0.01 * (r % 3)) for r in range(1, 31)]
    infos += [
        info(31, chi2=50.0, converged=False),
        info(32, chi2=1.5),
        info(33, chi2=0.8),
        info(34, integrability=0.51),
    ]
    masks = vetoes(infos)
    failed = {infos[i].replica for i in np.flatnonzero(~masks["Total"])}
    assert failed == {31, 32, 34}
    assert not masks["Convergence check"][30] and not masks["IntegNumber_3"][33]
    everyone = np.array([i.chi2 for i in infos])
    assert 1.5 - everyone.mean() <= 4 * everyone.std()  # had the 50 counted, 1.5 would pass


def test_replicas_are_taken_in_postfit_s_order_their_folders_sorted_as_text():
    assert postfit_order([3, 11, 2, 1, 10]) == [1, 10, 11, 2, 3]


@pytest.fixture
def evolved(fit_folder, tmp_path):
    """The session's 3-replica fit, evolved by an identity EKO into tiny/lhapdf/tiny."""
    fit = tmp_path / "tiny"
    shutil.copytree(fit_folder, fit)
    eko = tmp_path / "identity.tar"
    made_eko(eko, nnpdf_theory(read_fit(fit).theory.card), export_xgrid(), seed=None)
    evolve_fit(fit, eko=eko)
    return fit


def _cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "hyperscan", "postfit", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
    )


def _set_info(fit, replica, **changes):
    path = fit / f"nnfit/replica_{replica}/{fit.name}.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | changes))


def test_the_final_set_holds_the_replicas_that_pass_and_their_mean(evolved):
    _set_info(evolved, 2, pos_state="POS_VETO")
    for replica in (1, 3):
        _set_info(evolved, replica, pos_state="POS_PASS")
    run = _cli(evolved)
    assert run.returncode == 0, run.stderr
    assert "replica 2: fails positivity (not POS_PASS)" in run.stdout
    assert "2 of 3 replicas pass" in run.stdout
    final = evolved / "postfit" / "tiny"
    assert "NumMembers: 3\n" in (final / "tiny.info").read_text()
    assert sorted(p.name for p in final.glob("*.dat")) == [f"tiny_{k:04d}.dat" for k in range(3)]
    evolved_set = evolved / "lhapdf" / "tiny"
    for k, replica in ((1, 1), (2, 3)):
        assert (final / f"tiny_{k:04d}.dat").read_text() == (
            evolved_set / f"tiny_{replica:04d}.dat"
        ).read_text()
        link = evolved / "postfit" / f"replica_{k}"
        assert link.is_symlink() and link.resolve() == (evolved / f"nnfit/replica_{replica}")
    members = [member_blocks((final / f"tiny_{k:04d}.dat").read_text()) for k in range(3)]
    for b, block in enumerate(members[0]):
        mean = (members[1][b][3] + members[2][b][3]) / 2
        np.testing.assert_allclose(block[3], mean, rtol=1e-8, atol=1e-14)
    veto_count = json.loads((evolved / "postfit" / "veto_count.json").read_text())
    assert list(veto_count)[:3] == [
        "chi2_threshold",
        "arclength_threshold",
        "integrability_threshold",
    ]
    assert veto_count["Total"] == [True, False, True]


def test_replicas_takes_the_first_that_pass_and_a_new_postfit_replaces_the_last(evolved):
    for replica in (1, 2, 3):
        _set_info(evolved, replica, pos_state="POS_PASS")
    postfit(evolved)
    result = postfit(evolved, replicas=2)
    assert result.selected == (1, 2)
    assert sorted(p.name for p in (evolved / "postfit").glob("replica_*")) == [
        "replica_1",
        "replica_2",
    ]
    assert "NumMembers: 3\n" in (result.set_folder / "tiny.info").read_text()


def test_bad_input_is_one_line_exit_2_and_nothing_written(evolved, fit_folder, tmp_path):
    for replica in (1, 2, 3):
        _set_info(evolved, replica, pos_state="POS_PASS")
    unevolved = tmp_path / "unevolved"
    shutil.copytree(fit_folder, unevolved)
    not_a_fit = tmp_path / "not-a-fit"
    not_a_fit.mkdir()
    broken = tmp_path / "broken" / "tiny"
    shutil.copytree(evolved, broken)
    (broken / "nnfit/replica_2/tiny.json").write_text("{}")
    cases = [
        (not_a_fit, [], "is not a hyperscan fit folder"),
        (unevolved, [], "no LHAPDF set at"),
        (evolved, ["--replicas", 4], "3 of the 3 replicas judged pass postfit's tests, fewer"),
        (broken, [], "tiny.json: not a replica's fit information ('chi2')"),
    ]
    for folder, options, message in cases:
        run = _cli(folder, *options)
        lines = run.stderr.strip().splitlines()
        assert run.returncode == 2 and len(lines) == 1 and message in lines[0], run.stderr
        assert not (folder / "postfit").exists()
