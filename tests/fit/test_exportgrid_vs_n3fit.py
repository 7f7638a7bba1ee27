"""hyperscan's exportgrids read by n3fit 4.1.5's own tools in the peer kit's venv
(../shared/peer/setup.sh, ``$HYPERSCAN_N3FIT_PEER``, default /tmp/n3fit-peer): skipped here
without it, failed under CI=true, where .ci/run installs it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from _peer import peer_installed, run_in_peer

from hyperscan.data import fit_to_fk_rotation
from hyperscan.fit import run_fit, write_fit

SCRIPT = Path(__file__).with_name("_evolven3fit.py")


@pytest.fixture(scope="module")
def peer(skip_or_fail_on_ci):
    if not peer_installed():
        skip_or_fail_on_ci("the n3fit peer venv is not installed (../shared/peer/setup.sh)")


def test_evolven3fit_takes_a_fit_folder_as_hyperscan_writes_it(peer, make_card, tmp_path):
    """n3fit's grid and flavour rotation give the exportgrids' values, and evolven3fit, with an
    EKO that changes nothing, evolves the folder unchanged into LHAPDF grids of those values."""
    card = make_card(replicas=[1, 3], epochs=50)
    result = run_fit(card)
    fit = tmp_path / "hyperscan-fit"
    write_fit(result, "epochs: 50\n", fit, runcard=card)
    np.savez(
        tmp_path / "fk.npz",
        xf=result.export_pdf @ fit_to_fk_rotation().T,
        replicas=result.replicas,
    )
    run_in_peer(SCRIPT, fit, tmp_path / "fk.npz")
    assert sorted(p.name for p in fit.glob("nnfit/replica_*/*.dat")) == ["hyperscan-fit.dat"] * 2
