# SPDX-License-Identifier: GPL-3.0-or-later
"""Members leave the batch (issue #39, item 3): what a step costs as members stop, and what a
real fit gains.

    python benchmarks/compaction.py [--members 32] [--replicas 100] [--epochs N] [--skip-dis]

1. Step cost against the number of running members, with and without compaction: an ensemble
   of `--members` members of the `small` closure problem (2-25-20-8 tanh, Nadam, float32,
   patience 1.0 so that nobody stops while timed) with all but r members marked stopped; the
   time per step of the full batch (stopped members frozen by `tf.where` but still computed)
   and of the batch `Trainer.compact` leaves (r running members in the next power of two),
   each as a share of the step with every member running. The fastest of `--repeats` samples
   of 3 calls of K = 100 steps, after a warm-up call, the two ways timed in alternation: the
   machines these sessions share are loaded by others, which only ever adds time.
2. The real DIS runcard (studies/dis-nlo.yml) at `--replicas` replicas (default 100; at most
   `--epochs` epochs, default the runcard's 5000), fitted with `training.compact` off and on,
   `--pairs` times in alternation: wall time of each fit (start-up, compilation and retracing
   included; a compaction compiles its loop anew unless XLA's disk cache holds its shape, as
   it does from the second pair on), the batch sizes it went through, against the ratio
   Σ epochs run / (R × the longest), which compaction into batches of exactly the running
   members, at no cost, would reach (a fit would cost the member-steps its members ran).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import time
from pathlib import Path

import numpy as np

from hyperscan.cli import configure_tensorflow
from hyperscan.runcard import FitRuncard, load_fit_runcard

DIS_RUNCARD = Path(__file__).resolve().parents[1] / "studies" / "dis-nlo.yml"
STEPS_PER_CALL = 100
CALLS_PER_SAMPLE = 3
TARGET_ONE_RUNNING = 0.10  # share of a full step, 1 of 32 members running


def step_costs(members: int, repeats: int) -> None:
    """Section 1: time per step against the members running, full and compacted batch."""
    import tensorflow as tf

    from hyperscan.fit import RUNNING, STOPPED, Trainer, build_ensemble, trainer_settings

    card = FitRuncard.model_validate(
        {
            "data": {"closure": {"size": "small"}},
            "replicas": members,
            "architecture": {"nodes": [25, 20]},
            "epochs": 10**8,  # λ barely grows and patience (1.0 × epochs) never runs out
            "stopping": {"patience": 1.0},
            "training": {"precision": "float32", "steps_per_call": STEPS_PER_CALL},
        }
    )
    model, specs, params = build_ensemble(card)
    settings = trainer_settings(card, len(specs))

    def with_running(trainer: Trainer, running: int) -> Trainer:
        status = np.where(np.arange(members) < running, RUNNING, STOPPED)
        trainer.variables["status"].assign(tf.constant(status, tf.int64))
        return trainer

    def per_step(trainer: Trainer) -> float:
        trainer.advance(STEPS_PER_CALL)  # warm-up: compilation, caches
        started = time.perf_counter()
        for _ in range(CALLS_PER_SAMPLE):
            trainer.advance(STEPS_PER_CALL)
        return (time.perf_counter() - started) / (CALLS_PER_SAMPLE * STEPS_PER_CALL)

    full = Trainer(model, settings, params)
    counts = sorted({members, *(2**k for k in range(members.bit_length()) if 2**k < members)})
    counts += [3] if members > 4 else []
    compacted = {}
    for running in sorted(set(counts), reverse=True):
        trainer = with_running(Trainer(model, settings, params), running)
        trainer.compact()
        compacted[running] = trainer
    times: dict[str, dict[int, list[float]]] = {"full": {}, "compacted": {}}
    for _ in range(repeats):
        for running in compacted:
            times["full"].setdefault(running, []).append(per_step(with_running(full, running)))
            times["compacted"].setdefault(running, []).append(per_step(compacted[running]))
    reference = float(np.min(times["full"][members]))
    print(f"\n## Step cost against running members ({members} members, small closure, float32)")
    print(f"\nfull step, all {members} running: {reference * 1e6:.0f} µs\n")
    print("| running | batch after compaction | without compaction | with compaction |")
    print("|---|---|---|---|")
    for running, trainer in compacted.items():
        without = float(np.min(times["full"][running])) / reference
        with_ = float(np.min(times["compacted"][running])) / reference
        print(f"| {running} | {trainer.members.size} | {without:.1%} | {with_:.1%} |")
    one = float(np.min(times["compacted"][1])) / reference
    verdict = "met" if one <= TARGET_ONE_RUNNING else "NOT met"
    print(f"\n1 of {members} running: {one:.1%} of a full step (target ≤ 10%: {verdict})")


def dis_fits(replicas: int, epochs: int | None, pairs: int) -> None:
    """Section 2: the real DIS fit with compaction off and on, in alternation."""
    from hyperscan.data import load_problem
    from hyperscan.fit import run_fit

    card = load_fit_runcard(DIS_RUNCARD)
    update: dict = {"replicas": replicas}
    if epochs is not None:
        update["epochs"] = epochs
    problem = load_problem(card)
    print(f"\n## The real DIS fit ({DIS_RUNCARD.name}), {replicas} replicas, {pairs} pairs")
    print("\n| pair | training.compact | wall time | training loop | batches | ideal ratio |")
    print("|---|---|---|---|---|---|")
    walls: dict[bool, list[float]] = {False: [], True: []}
    results = {}
    for pair in range(1, pairs + 1):
        for compact in (False, True):
            training = card.training.model_copy(update={"compact": compact})
            variant = card.model_copy(update={**update, "training": training})
            variant = FitRuncard.model_validate(variant.model_dump())
            started = time.perf_counter()
            result = run_fit(variant, problem=problem)
            wall = time.perf_counter() - started
            walls[compact].append(wall)
            results[compact] = result
            ran = np.where(result.stop_epoch >= 0, result.stop_epoch + 1, result.steps)
            ratio = ran.sum() / (ran.size * ran.max())
            batches = " → ".join(str(b) for b in dict.fromkeys(r.batch for r in result.history))
            print(
                f"| {pair} | {compact} | {wall:.1f} s | {result.training_seconds:.1f} s "
                f"| {batches} | {ratio:.3f} |"
            )
    off, on = results[False], results[True]
    same = (
        off.status == on.status
        and np.array_equal(off.stop_epoch, on.stop_epoch)
        and np.array_equal(off.best_epoch, on.best_epoch)
    )
    print(
        "\nwall time with ÷ without compaction, per pair: "
        + ", ".join(f"{a / b:.3f}" for a, b in zip(walls[True], walls[False], strict=True))
        + f"; ideal (Σ epochs run / (R × the longest)): {ratio:.3f}; power-of-two batches"
        + f" from every sync on, at no cost: {_bucket_bound(off):.3f}"
        + f"\nstatuses, stop and best epochs identical with and without: {same}"
    )
    if not same:  # float32: training amplifies the smaller batch's other rounding
        moved = np.flatnonzero(
            (off.stop_epoch != on.stop_epoch) | (off.best_epoch != on.best_epoch)
        )
        shift = np.abs(off.best_epoch[moved] - on.best_epoch[moved])
        print(
            f"members whose best or stop epoch moved: {moved.size} of {len(off.status)}, best "
            f"epochs by {np.median(shift):.0f} (median) to {shift.max()} epochs"
        )
    for name in ("validation", "experimental"):
        spread = [
            (np.nanmean(r.chi2_per_point[name]), np.nanstd(r.chi2_per_point[name]))
            for r in (off, on)
        ]
        print(
            f"χ²/point {name}, mean ± std over the members, off against on: "
            + " against ".join(f"{mean:.4f} ± {std:.4f}" for mean, std in spread)
        )


def _bucket_bound(result) -> float:
    """The member-steps of a fit, as a share of R × its steps, had it moved into the
    power-of-two batch of its running members at every sync, at no cost: the most that
    compaction into `batch_size` buckets can save."""
    from hyperscan.fit._rows import batch_size

    batch = members = len(result.status)
    previous = total = 0
    for report in result.history:
        total += batch * (report.step - previous)
        previous = report.step
        batch = min(batch, batch_size(report.n_running))
    return total / (members * previous)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--replicas", type=int, default=100)
    parser.add_argument("--epochs", type=int, default=None, help="default: the runcard's")
    parser.add_argument("--pairs", type=int, default=2, help="DIS fits off and on, alternated")
    parser.add_argument("--skip-dis", action="store_true", help="section 1 only")
    args = parser.parse_args()
    device = configure_tensorflow()
    print(f"# compaction benchmark, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC")
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {device}")
    step_costs(args.members, args.repeats)
    if not args.skip_dis:
        dis_fits(args.replicas, args.epochs, args.pairs)


if __name__ == "__main__":
    main()
