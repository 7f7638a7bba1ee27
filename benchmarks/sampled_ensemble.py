# SPDX-License-Identifier: GPL-3.0-or-later
"""Issue #39 end to end on the real DIS data: an ensemble exported with ``--sample`` fits in one
model as each of its members alone.

    python benchmarks/sampled_ensemble.py [--trials 14] [--sample 10] [--replicas 10]
                                          [--epochs 50 1500] [--precision float32]

As a user runs it, in a fresh folder: a short scan of studies/dis-nlo-scan.yml's space
(``hyperscan scan --slots 4``, one replica a trial, no pruner, so that every trial is
eligible), then for each epoch count E ``hyperscan export --sample N --override replicas=R
--override epochs=E`` and ``hyperscan fit`` of that runcard, in one model. Each member's own
runcard (its trial's methodology, for its replica) is then fitted alone in this process.

Printed per member, for the sampled ensemble and then a control: its trial, its network's
nodes, stop epoch and validation χ²/pt in the batch and alone, and their relative difference;
then the largest difference for each E. Why two epoch counts: the batch blocks a member's
products otherwise than its fit alone does (the batch's size, and for a sampled ensemble the
widest network drawn), and training amplifies that rounding. After few epochs the members
agree to the precision's rounding; over a long fit some move apart by per cents, coupled or not
(docs/numerical-promises.md). The control says how far: the best trial's runcard at the same
replicas, one methodology batched alike, compared the same way, so that the sampled ensemble's
differences can be read against those of a batch without padding.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import yaml
from vs_n3fit import HYPERSCAN, ROOT, machine

DIS_SCAN = ROOT / "studies" / "dis-nlo-scan.yml"


def scan_card(work: Path, trials: int, precision: str) -> Path:
    """The DIS scan's space at one replica a trial, 300 epochs, without a pruner."""
    card = yaml.safe_load(DIS_SCAN.read_text())
    card["epochs"] = 300
    card["training"]["precision"] = precision
    card["scan"].update(trials=trials, replicas=1, pruner={"name": "none"})
    path = work / "dis.yml"
    path.write_text(yaml.safe_dump(card, sort_keys=False))
    return path


def hyperscan(*args: object, cwd: Path) -> None:
    """One `hyperscan` command as a user types it; its output shown on failure."""
    command = [str(HYPERSCAN), *map(str, args)]
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"sampled_ensemble: {' '.join(command[1:3])} failed:\n{done.stdout}{done.stderr}")


def compare(work: Path, label: str, sample: int | None, epochs: int, replicas: int) -> float:
    """Exports an ensemble runcard (``sample`` trials, or the best trial's), fits it in one
    model, refits each member alone; prints the table and returns the largest relative
    difference in validation χ²/pt."""
    from hyperscan.fit import run_fit
    from hyperscan.runcard import load_fit_runcard

    name = f"{label.split()[0]}-{epochs}"
    runcard_path = work / f"{name}.yml"
    if sample is None:  # the best trial's runcard, edited as a user would
        hyperscan("export", "--study", "dis", "--storage", "scan.journal", "-o", runcard_path,
                  cwd=work)  # fmt: skip
        card = yaml.safe_load(runcard_path.read_text())
        runcard_path.write_text(yaml.safe_dump({**card, "replicas": replicas, "epochs": epochs}))
    else:
        hyperscan(
            "export", "--study", "dis", "--storage", "scan.journal", "--sample", sample,
            "--override", f"replicas={replicas}", "--override", f"epochs={epochs}",
            "-o", runcard_path, cwd=work,
        )  # fmt: skip
    hyperscan("fit", runcard_path, "-o", name, "--no-progress", cwd=work)
    members = json.loads((work / name / "results.json").read_text())["members"]
    runcard = load_fit_runcard(runcard_path)
    print(f"\n== {label}, {epochs} epochs: {len(members)} members in one model, then each alone")
    print(
        "  replica  trial     nodes  stop (batch / alone)  valid. χ²/pt: batch, alone, rel. diff."
    )
    differences = []
    for member in members:
        own_card = runcard.member_runcard(member["replica"])
        alone = run_fit(own_card)
        batched = member["chi2_per_point"]["validation"]
        own = float(alone.chi2_per_point["validation"][0])
        differences.append(abs(batched - own) / own)
        nodes = "-".join(map(str, own_card.architecture.nodes))
        trial = "best" if member["trial"] is None else str(member["trial"])
        print(
            f"  {member['replica']:7d}  {trial:>5s}  {nodes:>8s}"
            f"  {member['stop_epoch']:9d} / {int(alone.stop_epoch[0]):<9d}"
            f"  {batched:24.6f}  {own:9.6f}  {differences[-1]:9.1e}"
        )
    largest = float(np.max(differences))
    print(f"  largest relative difference: {largest:.1e}; median {np.median(differences):.1e}")
    return largest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=14)
    parser.add_argument("--sample", type=int, default=10)
    parser.add_argument("--replicas", type=int, default=10)
    parser.add_argument("--epochs", type=int, nargs="+", default=[50, 1500])
    parser.add_argument("--precision", choices=("float32", "float64"), default="float32")
    args = parser.parse_args()
    if args.sample > args.trials:
        parser.error("--sample must not exceed --trials: every trial is eligible, no more")
    print(machine())
    from hyperscan.cli import configure_tensorflow

    configure_tensorflow("cpu")  # for the fits alone, in this process
    with tempfile.TemporaryDirectory(prefix="sampled-ensemble-") as folder:
        work = Path(folder)
        card = scan_card(work, args.trials, args.precision)
        hyperscan("scan", card, "--storage", "scan.journal", "--workers", 1, "--slots", 4,
                  cwd=work)  # fmt: skip
        print(f"scan: {args.trials} trials of dis-nlo-scan.yml's space, {args.precision}")
        for epochs in args.epochs:
            mixed = compare(work, "sampled ensemble", args.sample, epochs, args.replicas)
            alike = compare(work, "best trial (control)", None, epochs, args.replicas)
            print(
                f"\n{epochs} epochs: largest difference {mixed:.1e} for the sampled ensemble, "
                f"{alike:.1e} for the best trial's replicas batched alike"
            )


if __name__ == "__main__":
    main()
