# SPDX-License-Identifier: GPL-3.0-or-later
"""Members with different optimisers in one batch (issue #39, item 1): what kinds cost.

    python benchmarks/optimizer_kinds.py [--members 32] [--repeats 15] [--threads N]

An ensemble of `--members` members of the `small` closure problem (2-25-20-8 tanh, float32,
patience 1.0 so that nobody stops while timed), its members' optimisers one kind, two kinds
or three kinds (nadam, adam, rmsprop), interleaved as members drawn from a scan's trials
would be. Members of several kinds are updated by selection (every kind's update for all
members, each member's picked by tf.where; hyperscan/fit/_loop.py): prints the time per
step of each mix against one kind, the fastest of `--repeats` samples of 3 calls of K = 100
steps after a warm-up call, the mixes timed in alternation (the machines these sessions share
are loaded by others, which only ever adds time).

Selection was chosen against grouping (each kind's update for its own members, gathered and
put back in order) with this script at commit b685bff, which timed both: the figures and the
decision are in docs/architecture.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import platform
import time

import numpy as np

from hyperscan.cli import configure_tensorflow
from hyperscan.runcard import FitRuncard

STEPS_PER_CALL = 100
CALLS_PER_SAMPLE = 3
MIXES = {
    "1 kind": ("nadam",),
    "2 kinds": ("nadam", "adam"),
    "3 kinds": ("nadam", "adam", "rmsprop"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--threads", type=int, default=None, help="TensorFlow's CPU threads")
    args = parser.parse_args()
    where = configure_tensorflow(threads=args.threads)
    from hyperscan.fit import Trainer, build_ensemble, trainer_settings

    card = FitRuncard.model_validate(
        {
            "data": {"closure": {"size": "small"}},
            "replicas": args.members,
            "architecture": {"nodes": [25, 20]},
            "epochs": 10**8,
            "stopping": {"patience": 1.0},
            "training": {"precision": "float32", "steps_per_call": STEPS_PER_CALL},
        }
    )
    model, specs, params = build_ensemble(card)
    settings = trainer_settings(card, len(specs))

    def trainer(kinds: tuple[str, ...]) -> Trainer:
        optimizer = np.array([kinds[m % len(kinds)] for m in range(args.members)])
        return Trainer(model, dataclasses.replace(settings, optimizer=optimizer), params)

    def per_step(trained: Trainer) -> float:
        started = time.perf_counter()
        for _ in range(CALLS_PER_SAMPLE):
            trained.advance(STEPS_PER_CALL)
        return (time.perf_counter() - started) / (CALLS_PER_SAMPLE * STEPS_PER_CALL)

    print(f"# Optimiser kinds per member ({platform.node()}, {where})")
    print(f"\n{args.members} members, small closure, float32, fastest of {args.repeats} samples")
    print(f"of {CALLS_PER_SAMPLE} × {STEPS_PER_CALL} steps\n")
    trainers = {name: trainer(kinds) for name, kinds in MIXES.items()}
    for trained in trainers.values():
        trained.advance(STEPS_PER_CALL)  # warm-up: compilation, caches
    times: dict[str, list[float]] = {name: [] for name in trainers}
    for _ in range(args.repeats):
        for name, trained in trainers.items():
            times[name].append(per_step(trained))
    best = {name: float(np.min(samples)) for name, samples in times.items()}
    one = best["1 kind"]
    print("| optimisers | µs/step | against one kind |")
    print("|---|---|---|")
    for name, seconds in best.items():
        print(f"| {name} | {seconds * 1e6:.0f} | {seconds / one:.2f} |")


if __name__ == "__main__":
    main()
