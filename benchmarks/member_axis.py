# SPDX-License-Identifier: GPL-3.0-or-later
"""The member axis (issue #39) in one run: heterogeneous members and members leaving the batch.

    python benchmarks/member_axis.py [--quick] [--members 100] [--seed 0] [--skip-dis]

1. Padding waste of `--members` members drawn from studies/dis-nlo-scan.yml's space (Optuna's
   RandomSampler, `--seed`): the waste of one padded model and the shape classes the fit
   chooses at the default ``training.max_padding_waste``.
2. The step (loss and gradient, compiled with XLA, float32, real DIS data) of those members in
   hyperscan's padded model against the same members as n3fit builds them: one dense
   sub-network per member, stacked in one graph (written here with hyperscan's math, the same
   FK tables and χ²: only the network differs), and the same members split into the shape
   classes the fit would choose (each class's step, summed).
3. benchmarks/compaction.py's step cost against running members and its DIS fit with and
   without compaction (`--quick`: 16 members, 2 repeats, 10 replicas × 300 epochs, one pair).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import compaction  # noqa: E402
import numpy as np  # noqa: E402

from hyperscan.cli import configure_tensorflow  # noqa: E402
from hyperscan.runcard import FitRuncard, load_scan_runcard  # noqa: E402

SCAN_RUNCARD = Path(__file__).resolve().parents[1] / "studies" / "dis-nlo-scan.yml"
REPEATS = 5
STEPS = 20


def drawn_members(n: int, seed: int) -> tuple[FitRuncard, list[FitRuncard]]:
    """The base runcard (replicas 1..n) and n member runcards drawn from the scan's space."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    scan = load_scan_runcard(SCAN_RUNCARD)
    base = scan.fit.model_copy(update={"replicas": tuple(range(1, n + 1))})
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    cards = []
    for replica in range(1, n + 1):
        params = scan.scan.space.suggest(study.ask())
        card = scan.trial_runcard(params).model_copy(update={"replicas": (replica,)})
        cards.append(FitRuncard.model_validate(card.model_dump()))
    return base, cards


def padding(base: FitRuncard, cards: list[FitRuncard]) -> None:
    from hyperscan.fit._members import architecture_shape
    from hyperscan.model import padded_widths, padding_waste, shape_classes

    shapes = [architecture_shape(card) for card in cards]
    limit = base.training.max_padding_waste
    print(f"\n## Padding waste, {len(cards)} members drawn from {SCAN_RUNCARD.name}'s space")
    depths = np.bincount([len(s.nodes) for s in shapes])[1:]
    print(f"\ndepths 1..{depths.size}: {depths.tolist()} members; widths {padded_widths(shapes)}")
    print(f"one padded model: waste {padding_waste(shapes):.1%}")
    for waste in sorted({limit, 0.3, 0.5, 0.7}):
        classes = shape_classes(shapes, waste)
        sizes = [c.size for c in classes]
        wastes = [padding_waste([shapes[m] for m in c]) for c in classes]
        mark = " (the default)" if waste == limit else ""
        print(
            f"max_padding_waste {waste}{mark}: {len(classes)} classes of {sizes} members, "
            f"waste {', '.join(f'{w:.0%}' for w in wastes)}"
        )


def step_times(base: FitRuncard, cards: list[FitRuncard]) -> None:
    import tensorflow as tf

    from hyperscan.fit import build_ensemble
    from hyperscan.fit._members import architecture_shape
    from hyperscan.model import _ensemble, _network, shape_classes, unembed

    def timed_model(members: np.ndarray) -> float:
        """The step of `members` in one padded model, as the fit builds it."""
        class_base = base.model_copy(update={"replicas": tuple(int(m) + 1 for m in members)})
        chosen = [cards[m] for m in members]
        built, _, weights = build_ensemble(class_base, member_runcards=chosen)
        return timed(built, [tf.constant(w, built.dtype) for w in weights])

    model, _, params = build_ensemble(base, member_runcards=cards)
    widths = model.shapes.widths
    padded = [tf.constant(p, model.dtype) for p in params]
    own = [
        [
            tf.constant(w, model.dtype)
            for w in unembed([p[m] for p in params], c.architecture.nodes, widths)
        ]
        for m, c in enumerate(cards)
    ]

    def stacked_forward(weights, features, activations, shapes):
        """n3fit's form: every member its own dense network on the shared input, stacked."""
        outputs = []
        for member, card in zip(weights, cards, strict=True):
            hidden = features
            for layer, activation in enumerate(card.architecture.activations):
                kernel, bias = member[2 * layer], member[2 * layer + 1]
                hidden = _network.ACTIVATIONS[activation](hidden @ kernel + bias)
            outputs.append(hidden @ member[-2] + member[-1])
        return tf.stack(outputs)

    def timed(model, weights) -> float:
        @tf.function(jit_compile=True, autograph=False)
        def step(weights):
            with tf.GradientTape() as tape:
                tape.watch(weights)
                loss = tf.reduce_sum(model.observables(weights).loss)
            return loss, tape.gradient(loss, weights)

        step(weights)  # compile
        best = np.inf
        for _ in range(REPEATS):
            started = time.perf_counter()
            for _ in range(STEPS):
                loss, _ = step(weights)
            loss.numpy()
            best = min(best, (time.perf_counter() - started) / STEPS)
        return best

    times = {}
    forward = _ensemble.forward
    times["hyperscan, one padded model"] = timed(model, padded)
    _ensemble.forward = stacked_forward
    try:
        times["n3fit's form (sub-networks stacked)"] = timed(model, own)
    finally:
        _ensemble.forward = forward
    limit = base.training.max_padding_waste
    classes = shape_classes([architecture_shape(c) for c in cards], limit)
    name = f"hyperscan, {len(classes)} shape classes at max_padding_waste {limit}, Σ of steps"
    times[name] = sum(timed_model(members) for members in classes)
    print(
        f"\n## Step (loss + gradient, XLA, float32): {len(cards)} heterogeneous members, real DIS"
    )
    unused = 1 - model.shapes.gradient_mask.mean()
    print(f"\npadded widths {widths}, {unused:.1%} of the parameters padding\n")
    stacked = times["n3fit's form (sub-networks stacked)"]
    print("| form | step | ÷ n3fit's form |\n|---|---|---|")
    for name, seconds in times.items():
        print(f"| {name} | {seconds * 1e3:.2f} ms | {seconds / stacked:.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="smaller compaction sections")
    parser.add_argument("--skip-dis", action="store_true", help="no DIS fits (section 3)")
    args = parser.parse_args()
    device = configure_tensorflow()
    print(f"# member-axis benchmark, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC")
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {device}")
    base, cards = drawn_members(args.members, args.seed)
    padding(base, cards)
    step_times(base, cards)
    compaction.step_costs(16 if args.quick else 32, 2 if args.quick else 7)
    if not args.skip_dis:
        if args.quick:
            compaction.dis_fits(10, 300, 1)
        else:
            compaction.dis_fits(100, None, 2)


if __name__ == "__main__":
    main()
