"""`hyperscan postfit` and each replica's fit information against n3fit 4.1.5's, in the peer
kit's venv (../shared/peer/setup.sh, ``$HYPERSCAN_N3FIT_PEER``, default /tmp/n3fit-peer):
skipped here without it, failed under CI=true, where .ci/run installs it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from _cards import tiny_card
from _ekos import made_eko
from _peer import peer_installed, run_in_peer

from hyperscan.data import FIT_BASIS, export_xgrid, fit_to_fk_rotation, fk_to_lha_rotation
from hyperscan.fit import (
    INTEGRABILITY_X,
    arc_length_xgrid,
    arc_lengths,
    integrability_numbers,
    run_fit,
    write_fit,
)
from hyperscan.pdfset import evolve_fit, nnpdf_theory, postfit, read_fit

SCRIPT = Path(__file__).with_name("_postfit_vs_n3fit.py")


@pytest.fixture(scope="module")
def peer(skip_or_fail_on_ci):
    if not peer_installed():
        skip_or_fail_on_ci("the n3fit peer venv is not installed (../shared/peer/setup.sh)")


def _smooth_pdfs(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """(4, x, FIT_BASIS): a·x^α (1 − x)^β per replica and flavour, α down to −0.2 so that
    x·f grows at small x (integrability numbers well above zero)."""
    a = rng.normal(size=(4, 1, len(FIT_BASIS)))
    alpha = rng.uniform(-0.2, 1.5, size=(4, 1, len(FIT_BASIS)))
    beta = rng.uniform(1.0, 5.0, size=(4, 1, len(FIT_BASIS)))
    return a * x[None, :, None] ** alpha * (1 - x[None, :, None]) ** beta


def test_arc_lengths_and_integrability_numbers_are_n3fit_s(peer, tmp_path):
    """The same smooth PDFs, given to n3fit's own functions on validphys's grids: the same
    numbers. hyperscan computes them in its fitted basis, n3fit from the flavour basis."""
    rng = np.random.default_rng(7)
    to_lha = fk_to_lha_rotation(4) @ fit_to_fk_rotation()
    x_arc = arc_length_xgrid()
    xf_arc, xf_int = _smooth_pdfs(x_arc, rng), _smooth_pdfs(INTEGRABILITY_X, rng)
    np.savez(
        tmp_path / "pdfs.npz",
        x_arc=x_arc,
        xf_arc=xf_arc @ to_lha.T,
        x_int=INTEGRABILITY_X,
        xf_int=xf_int @ to_lha.T,
        arc_lengths=arc_lengths(xf_arc),
        integrability=integrability_numbers(xf_int),
    )
    assert integrability_numbers(xf_int).max() > 0.5  # some would fail postfit
    run_in_peer(SCRIPT, "definitions", tmp_path / "pdfs.npz")


def test_postfit_selects_as_n3fit_s_postfit_on_the_same_fit(peer, tmp_path):
    """A 30-replica fit, some of whose replicas end without passing positivity; three more
    are made to fail the χ², an arc length and an integrability number (a replica can fail
    4σ only among 18 or more: N − 1 over √N is the largest distance from the mean in σ).
    n3fit's postfit, on the same fit evolved by n3fit's evolven3fit with the same EKO, makes the
    same choice and the same final set."""
    card = tiny_card(replicas=list(range(1, 31)), epochs=60, training={"steps_per_call": 30})
    fit = tmp_path / "n3fit" / "tiny"
    write_fit(run_fit(card), "epochs: 60\n", fit, runcard=card)

    def change(replica: int, key: str, value) -> None:
        path = fit / f"nnfit/replica_{replica}/tiny.json"
        info = json.loads(path.read_text())
        if isinstance(info[key], list):
            info[key][1] = value
        else:
            info[key] = value
        path.write_text(json.dumps(info))

    change(5, "chi2", 1e3)
    change(7, "arc_lengths", 1e3)
    change(9, "integrability", 0.7)
    ours = tmp_path / "hyperscan" / "tiny"
    shutil.copytree(fit, ours)
    eko = tmp_path / "identity.tar"
    made_eko(eko, nnpdf_theory(read_fit(fit).theory.card), export_xgrid(), seed=None)
    evolve_fit(ours, eko=eko)
    result = postfit(ours)
    assert {5, 7, 9} <= set(result.failures())
    run_in_peer(SCRIPT, "postfit", fit, eko, ours / "postfit")
