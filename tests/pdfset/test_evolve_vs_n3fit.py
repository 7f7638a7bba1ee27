"""`hyperscan evolve` against n3fit 4.1.5's evolven3fit, in the peer kit's venv
(../shared/peer/setup.sh, ``$HYPERSCAN_N3FIT_PEER``, default /tmp/n3fit-peer): skipped here
without it, failed under CI=true, where .ci/run installs it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from _ekos import made_eko
from _peer import peer_installed, run_in_peer

from hyperscan.data import export_xgrid
from hyperscan.pdfset import eko_cards, eko_xgrid, evolve_fit, nnpdf_theory, read_fit, read_set

SCRIPT = Path(__file__).with_name("_vs_evolven3fit.py")
#: Four scales in each of two flavour blocks (pdfflow interpolates bicubically in each).
SCALES = [(1.65, 4), (2.0, 4), (3.0, 4), (4.5, 4), (10.0, 5), (30.0, 5), (100.0, 5), (1e3, 5)]


@pytest.fixture(scope="module")
def peer(skip_or_fail_on_ci):
    if not peer_installed():
        skip_or_fail_on_ci("the n3fit peer venv is not installed (../shared/peer/setup.sh)")


def test_the_set_is_evolven3fit_s_and_validphys_reads_it(peer, fit_folder, tmp_path):
    """The same EKO cards as evolven3fit makes for the theory; with the same EKO (random
    operators on 40 of the export grid's nodes, so that both interpolate it onto all 196), the
    same numbers as `evolven3fit evolve`; validphys's pure-Python LHAPDF reads the set, and
    between Q nodes gives what hyperscan's reader (the plots at 100 GeV) gives."""
    fit = tmp_path / "tiny"
    shutil.copytree(fit_folder, fit)  # evolven3fit writes into the fit folder
    theory = nnpdf_theory(read_fit(fit).theory.card)
    xgrid = eko_xgrid(export_xgrid(), 50)
    theory_card, operator_card = eko_cards(theory, xgrid)
    cards = {"xgrid": xgrid.tolist(), "theory": theory_card.raw, "operator": operator_card.raw}
    (tmp_path / "cards.json").write_text(json.dumps(cards, default=float))
    eko = tmp_path / "random.tar"
    made_eko(eko, theory, eko_xgrid(export_xgrid(), 40), seed=3, scales=SCALES)
    lhapdf_set = evolve_fit(fit, tmp_path / "sets", name="HyperscanTiny", eko=eko)
    pdf_set = read_set(lhapdf_set)
    np.savez(tmp_path / "between.npz", q=50.0, pids=pdf_set.pids, xf=pdf_set.at(50.0)[1])
    run_in_peer(SCRIPT, tmp_path / "cards.json", fit, eko, lhapdf_set, tmp_path / "between.npz")
    assert len(list(fit.glob("nnfit/replica_*/tiny.dat"))) == 3  # evolven3fit did evolve
