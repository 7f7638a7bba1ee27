# SPDX-License-Identifier: GPL-3.0-or-later
"""n3fit 4.1.5 runs the runcard `hyperscan export --format n3fit` writes: the peer kit's run.sh
(vp-setupfit, then n3fit with the card's `# n3fit-args:`) on a trial of 1 replica and 30
epochs, about a minute. n3fit cuts the data as hyperscan does. Needs the peer venv
(../shared/peer/setup.sh into ``$HYPERSCAN_N3FIT_PEER``, default /tmp/n3fit-peer) and kit:
skipped here without them, failed under CI=true, where .ci/run installs them.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from _peer import PEER, peer_installed
from _told_study import REAL_SCAN, export, told_study

from hyperscan.data import load_problem
from hyperscan.runcard import load_scan_runcard, read_n3fit_card

KIT = Path(__file__).resolve().parents[3] / "shared" / "peer"
EPOCHS = 30


def test_n3fit_runs_an_exported_trial(tmp_path, skip_or_fail_on_ci):
    if not peer_installed() or not (KIT / "run.sh").exists():
        skip_or_fail_on_ci(
            f"no n3fit peer venv at {PEER} or kit at {KIT} (../shared/peer/setup.sh {PEER})",
            on_ci=f"the n3fit peer venv ({PEER}) or kit ({KIT}) is missing",
        )
    scan = {**REAL_SCAN["scan"], "replicas": 1, "folds": []}
    url = told_study(tmp_path, {**REAL_SCAN, "epochs": EPOCHS, "scan": scan})
    card = tmp_path / "exported.yml"
    assert export(url, card, "--format", "n3fit").exit_code == 0
    n3fit, args = read_n3fit_card(card.read_text())
    assert args == "1" and n3fit["parameters"]["epochs"] == EPOCHS

    runs = tmp_path / "runs"
    run = subprocess.run(
        ["bash", str(KIT / "run.sh"), str(card), str(PEER), "300"],
        capture_output=True,
        text=True,
        timeout=700,
        cwd=tmp_path,
        env={**os.environ, "WORKDIR": str(runs), "CUDA_VISIBLE_DEVICES": ""},
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    fit = runs / "exported"
    (result,) = (fit / "nnfit" / "replica_1").glob("exported.json")
    replica = json.loads(result.read_text())
    assert 1 <= replica["stop_epoch"] <= EPOCHS and replica["chi2"] > 0
    # n3fit kept the points hyperscan fits: the same datasets and cuts.
    kept = sum(len(mask.read_text().split()) for mask in (fit / "filter").glob("*/FKMASK_*.dat"))
    problem = load_problem(load_scan_runcard(tmp_path / "scan.yml").fit)
    assert kept == problem.n_data == 317
