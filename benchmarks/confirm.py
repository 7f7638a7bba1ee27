# SPDX-License-Identifier: GPL-3.0-or-later
"""Issue #54, part 3: how far a scan's best value is luck, measured by `export --confirm`.

    python benchmarks/confirm.py [--studies quickstart-scan kfold-scan] [--runs 4]
                                 [--confirm 3] [--replicas R] [--trials T] [--epochs E]

As a user runs it, in a fresh folder per run: `hyperscan scan STUDY --workers 2 --slots 4`
with the sampler seeded 0, 1, ... (one scan per run), then `hyperscan export --confirm K`:
the K best trials refitted at once with replicas no trial was fitted with. Printed per run:
the scan's winner, the confirmed winner, and the scan winner's value in the scan and
confirmed; then per study how often the confirmed winner differs from the scan's, and by how
much the scan's best value understated the winner's confirmed one (the winner's curse; the
values are losses, lower is better).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import yaml
from vs_n3fit import HYPERSCAN, ROOT, machine

CONFIRMED = re.compile(r"^trial (\d+): scan (\S+), confirmed (\S+)$", re.MULTILINE)
BEST = re.compile(r"^best: trial (\d+), value (\S+)", re.MULTILINE)
CHOSEN = re.compile(r"^trial (\d+) \(the best confirmed value\) written", re.MULTILINE)


def hyperscan(*args: object, cwd: Path) -> str:
    """One `hyperscan` command as a user types it: its output, or exit with it on failure."""
    command = [str(HYPERSCAN), *map(str, args)]
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"confirm: {' '.join(command[1:3])} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


def study_card(work: Path, study: str, seed: int, trials: int | None, epochs: int | None) -> Path:
    """The study's runcard with its sampler seeded ``seed`` (and fewer trials or epochs)."""
    card = yaml.safe_load((ROOT / "studies" / f"{study}.yml").read_text())
    card["scan"]["sampler"]["seed"] = seed
    if trials is not None:
        card["scan"]["trials"] = trials
    if epochs is not None:
        card["epochs"] = epochs
    path = work / f"{study}.yml"
    path.write_text(yaml.safe_dump(card, sort_keys=False))
    return path


def one_run(study: str, seed: int, args: argparse.Namespace) -> tuple[int, int, float, float]:
    """A scan and its confirmation: the scan's winner, the confirmed winner, and the scan
    winner's scan and confirmed values."""
    with tempfile.TemporaryDirectory(prefix="confirm-") as folder:
        work = Path(folder)
        card = study_card(work, study, seed, args.trials, args.epochs)
        scanned = hyperscan("scan", card, "--workers", 2, "--slots", 4, cwd=work)
        (best,) = BEST.findall(scanned)
        extra = () if args.replicas is None else ("--replicas", args.replicas)
        out = hyperscan(
            "export", "--study", study, "--confirm", args.confirm, *extra, "-o", "c.yml", cwd=work
        )
    confirmed = {int(n): (float(s), float(c)) for n, s, c in CONFIRMED.findall(out)}
    winner = int(best[0])
    (chosen,) = CHOSEN.findall(out)
    scan_value, confirmed_value = confirmed[winner]
    return winner, int(chosen), scan_value, confirmed_value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--studies", nargs="+", default=["quickstart-scan", "kfold-scan"])
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--confirm", type=int, default=3)
    parser.add_argument("--replicas", type=int)
    parser.add_argument("--trials", type=int, help="the studies' budget instead of theirs")
    parser.add_argument("--epochs", type=int, help="the studies' epochs instead of theirs")
    args = parser.parse_args()
    replicas = args.replicas or "as many as a trial's"
    print(f"# {machine()}; --confirm {args.confirm}, --replicas {replicas}")
    for study in args.studies:
        print(f"\n{study}: run, scan winner, confirmed winner, winner's scan → confirmed value")
        changed, overstated = 0, []
        for seed in range(args.runs):
            winner, chosen, scan_value, confirmed_value = one_run(study, seed, args)
            changed += winner != chosen
            overstated.append(confirmed_value / scan_value - 1)
            print(
                f"  {seed}: trial {winner}, trial {chosen}, {scan_value:.5g} → "
                f"{confirmed_value:.5g} ({overstated[-1]:+.1%})"
            )
        print(
            f"  confirmed winner differs in {changed} of {args.runs} runs; the winner's "
            f"confirmed value is {np.mean(overstated):+.1%} from its scan value on average "
            f"(range {min(overstated):+.1%} to {max(overstated):+.1%})"
        )


if __name__ == "__main__":
    main()
