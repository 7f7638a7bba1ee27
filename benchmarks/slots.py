# SPDX-License-Identifier: GPL-3.0-or-later
"""Trials per hour of a scan worker holding P trial slots (issue #40), in one run.

    python benchmarks/slots.py [--slots 1 4 16 auto] [--trials 32] [--trials-one 8]
                               [--n3fit-trials 4] [--seeds 0 1 2] [--peer DIR]

Two scans, each a fresh study on a journal file, each worker a fresh process with an empty
compilation cache (``hyperscan study create`` then ``hyperscan worker --slots P``, timed as a
user runs them):

* peer: the n3fit peer kit's hyperopt card as a hyperscan scan (benchmarks/vs_n3fit.py: 2 DIS
  datasets, 317 points, 2 folds, 1 replica, 1 thread), against ``n3fit --hyperopt`` of the same
  card (``vp-setupfit`` + ``n3fit``);
* k-fold DIS: studies/dis-nlo-scan.yml's space on the 7 real DIS datasets, 4 folds, 1 replica.

Printed: trials per hour for each P, and the ratios to P = 1 (a model per trial, as before
slots) and to n3fit. ``--seeds``: the best value after ``--trials`` trials of the peer scan with
P = 1 and with the largest P, for each sampler seed: packing changes the order in which the
sampler learns (it proposes P trials before it sees any of their values).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml
from vs_n3fit import (
    HYPERSCAN,
    KIT,
    ROOT,
    Measured,
    cold_cache,
    ensure_peer,
    hyperscan_scan_card,
    machine,
    measure,
    peer_card,
    run_peer,
)

DIS_SCAN = ROOT / "studies" / "dis-nlo-scan.yml"
PEER = "peer card (2 folds × 1 replica)"
#: The k-fold DIS scan's folds, as n3fit's practice: each mixes processes or beams, and every
#: dataset a fold holds out has a twin the fold still fits.
DIS_FOLDS = [
    ["HERA_NC_318GEV_EM-SIGMARED", "NMC_NC_NOTFIXED_P_EM-F2-HEPDATA"],
    ["HERA_NC_225GEV_EP-SIGMARED", "BCDMS_NC_NOTFIXED_P_EM-F2-HEPDATA"],
    ["HERA_NC_251GEV_EP-SIGMARED", "HERA_CC_318GEV_EP-SIGMARED"],
    ["HERA_CC_318GEV_EM-SIGMARED"],
]


def dis_kfold_card(work: Path, trials: int, epochs: int) -> Path:
    card = yaml.safe_load(DIS_SCAN.read_text())
    card["epochs"] = epochs
    card["training"]["threads"] = 1
    card["scan"].update(
        trials=trials,
        replicas=1,
        folds=DIS_FOLDS,
        objective={"chi2": "held_out", "statistic": "mean", "fold_statistic": "mean"},
        pruner={"name": "none"},
    )
    path = work / "dis_kfold_scan.yml"
    path.write_text(yaml.safe_dump(card, sort_keys=False))
    return path


def with_budget(card: Path, trials: int, seed: int, work: Path, name: str) -> Path:
    data = yaml.safe_load(card.read_text())
    data["scan"]["trials"] = trials
    data["scan"]["sampler"] = {**data["scan"].get("sampler", {}), "seed": seed}
    path = work / f"{name}.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def work_study(
    card: Path, options: list[str], work: Path, name: str
) -> tuple[float, Measured, Path]:
    """A study of `card` created and worked by one `hyperscan worker OPTIONS` with an empty
    compilation cache: the wall time of both (as a user runs them), the worker's measure, and
    the worker's log."""
    journal = work / f"{name}.journal"
    create = [str(HYPERSCAN), "study", "create", str(card), "--storage", str(journal)]
    env = cold_cache(work)
    made = measure([*create, "--name", name], work / f"{name}.create.log", env)
    worker = [str(HYPERSCAN), "worker", "--study", name, "--storage", str(journal)]
    log = work / f"{name}.worker.log"
    ran = measure([*worker, *options], log, env)
    return made.wall + ran.wall, ran, log


def run_scan(card: Path, slots: str, work: Path, name: str) -> tuple[float, float | None]:
    """A study of `card` worked by one `hyperscan worker --slots`: its wall time (create +
    worker, as a user runs them) and its best value."""
    journal = work / f"{name}.journal"
    seconds, _, _ = work_study(card, ["--slots", slots], work, name)
    status = subprocess.run(
        [str(HYPERSCAN), "study", "status", "--study", name, "--storage", str(journal), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    best = json.loads(status.stdout).get("best", {}) or {}
    return seconds, best.get("value")


def per_hour(trials: int, seconds: float) -> float:
    return 3600.0 * trials / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slots", nargs="+", default=["1", "4", "16", "auto"])
    parser.add_argument("--scans", nargs="+", choices=["peer", "dis"], default=["peer", "dis"])
    parser.add_argument("--trials", type=int, default=32, help="trials of each scan with P > 1")
    parser.add_argument("--trials-one", type=int, default=8, help="trials with P = 1")
    parser.add_argument("--dis-epochs", type=int, default=1000)
    parser.add_argument("--n3fit-trials", type=int, default=4, help="0 skips n3fit")
    parser.add_argument("--seeds", type=int, nargs="*", default=[], help="best-value check")
    parser.add_argument("--peer", type=Path, default=Path("/tmp/n3fit-peer"), help="n3fit venv")
    parser.add_argument("--kit", type=Path, default=KIT, help="the n3fit peer kit")
    parser.add_argument("--keep", type=Path, help="keep the run folders here")
    args = parser.parse_args()
    work = Path(args.keep or tempfile.mkdtemp(prefix="slots-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    print(machine(), flush=True)

    scans = {}
    if "peer" in args.scans:
        scans[PEER] = hyperscan_scan_card(work, args.kit, args.trials)
    if "dis" in args.scans:
        scans["k-fold DIS (4 folds × 1 replica)"] = dis_kfold_card(
            work, args.trials, args.dis_epochs
        )
    n3fit_rate = None
    if args.n3fit_trials and PEER in scans:
        ensure_peer(args.peer, args.kit)
        n = args.n3fit_trials
        n3 = run_peer(
            peer_card(args.kit, "hyperopt", work), f"1 --hyperopt {n}", args.peer, args.kit, work
        )
        n3fit_rate = per_hour(n, n3["vp-setupfit"].wall + n3["n3fit"].wall)
        print(f"n3fit --hyperopt, peer card: {n} trials, {n3fit_rate:.0f} trials/hour", flush=True)

    for label, card in scans.items():
        print(f"\n== {label}")
        print(
            f"  {'slots':>6}{'trials':>8}{'wall s':>10}{'trials/hour':>14}{'vs P=1':>9}"
            f"{'vs n3fit':>10}"
        )
        one = None
        for slots in args.slots:
            trials = args.trials_one if slots == "1" else args.trials
            name = f"{card.stem}-p{slots}"
            budgeted = with_budget(card, trials, 0, work, name)
            seconds, _ = run_scan(budgeted, slots, work, name)
            rate = per_hour(trials, seconds)
            one = rate if slots == "1" else one
            versus_one = f"{rate / one:.1f}×" if one else ""
            versus_n3fit = f"{rate / n3fit_rate:.1f}×" if n3fit_rate and "peer" in label else ""
            print(
                f"  {slots:>6}{trials:>8}{seconds:>10.1f}{rate:>14.0f}{versus_one:>9}"
                f"{versus_n3fit:>10}",
                flush=True,
            )

    if args.seeds and PEER in scans:
        card = scans[PEER]
        packed = max(args.slots, key=lambda s: -1 if s == "auto" else int(s))
        print(f"\n== best value after {args.trials} trials of the peer scan, by sampler seed")
        print(f"  {'seed':>6}{'P = 1':>12}{f'P = {packed}':>12}")
        for seed in args.seeds:
            best = []
            for slots in ("1", packed):
                name = f"best-s{seed}-p{slots}"
                budgeted = with_budget(card, args.trials, seed, work, name)
                best.append(run_scan(budgeted, slots, work, name)[1])
            print(f"  {seed:>6}" + "".join(f"{b:>12.4f}" for b in best), flush=True)
    if args.keep is None:
        print(f"\nrun folders: {work}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
