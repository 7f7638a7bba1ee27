# SPDX-License-Identifier: GPL-3.0-or-later
"""Peak memory and trials per hour of a one-slot worker that restarts itself once it grew
(`hyperscan worker --max-growth MIB`), against one that never does, in one run.

    python benchmarks/worker_memory.py [--trials 48] [--max-growth 256] [--rounds 1]

TensorFlow keeps every loop XLA compiled until its process ends, and a one-slot worker whose
trials draw new architectures compiles one per trial. Each run: a fresh study of the k-fold DIS
scan (benchmarks/slots.py's: the 7 real DIS datasets, 4 folds, 1 replica) on a journal file,
worked by one ``hyperscan worker --slots 1`` with an empty compilation cache; ``--max-growth 0``
(never restart) and ``--max-growth MIB`` alternate, ``--rounds`` times. Printed for each: the
peak RSS of the worker over its whole life (its restarts are the same process), its restarts,
trials per hour (``study create`` + worker), and the ratios of the restarting worker to the
other.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from slots import dis_kfold_card, per_hour, with_budget, work_study
from vs_n3fit import machine


def run(card: Path, growth: int, work: Path, name: str) -> tuple[float, float, int]:
    """A study of ``card`` worked by one worker: wall seconds, peak RSS in MiB, restarts."""
    seconds, ran, log = work_study(card, ["--quiet", "--max-growth", str(growth)], work, name)
    return seconds, ran.rss_mib, log.read_text().count("worker restarting:")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=48)
    parser.add_argument("--max-growth", type=int, default=256, help="MiB, the restarting run's")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--dis-epochs", type=int, default=1000)
    parser.add_argument("--keep", type=Path, help="keep the run folders here")
    args = parser.parse_args()
    work = Path(args.keep or tempfile.mkdtemp(prefix="memory-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    print(machine(), flush=True)
    card = dis_kfold_card(work, args.trials, args.dis_epochs)
    print(f"k-fold DIS (4 folds × 1 replica), {args.trials} trials, one slot")
    print(f"  {'--max-growth':>13}{'restarts':>10}{'peak MiB':>10}{'wall s':>9}{'trials/hour':>13}")
    peaks: dict[int, list[float]] = {0: [], args.max_growth: []}
    rates: dict[int, list[float]] = {0: [], args.max_growth: []}
    for round_ in range(args.rounds):
        for growth in peaks:
            name = f"dis-g{growth}-r{round_}"
            budgeted = with_budget(card, args.trials, 0, work, name)
            seconds, peak, restarts = run(budgeted, growth, work, name)
            rate = per_hour(args.trials, seconds)
            peaks[growth].append(peak)
            rates[growth].append(rate)
            print(f"  {growth:>13}{restarts:>10}{peak:>10.0f}{seconds:>9.1f}{rate:>13.0f}")
            sys.stdout.flush()
    peak_ratio = statistics.median(peaks[args.max_growth]) / statistics.median(peaks[0])
    rate_ratio = statistics.median(rates[args.max_growth]) / statistics.median(rates[0])
    print(
        f"--max-growth {args.max_growth} against 0 (medians): peak RSS {peak_ratio:.2f}×, "
        f"trials per hour {rate_ratio:.2f}×"
    )
    if args.keep is None:
        print(f"run folders: {work}")


if __name__ == "__main__":
    main()
