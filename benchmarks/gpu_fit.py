# SPDX-License-Identifier: GPL-3.0-or-later
"""One NNPDF4.0-shaped fit on a GPU: wall time and device utilisation (run by gpu.sh).

    python benchmarks/gpu_fit.py [--replicas 100] [--epochs 1000] [--device gpu:0]

The closure problem ``nnpdf40`` (4618 points in 82 datasets, 2-25-20-8 tanh, Nadam, float32,
positivity on) with patience 1.0, so every replica runs every epoch. ``nvidia-smi`` samples the
GPU every 100 ms in the background; the utilisation printed is over the training loop only.
The same script runs on a CPU (``--device cpu``) for a like-for-like figure.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from gpu_monitor import TARGET_SECONDS, GpuSampler, positive

from hyperscan.cli import configure_tensorflow

if TYPE_CHECKING:
    from hyperscan.runcard import FitRuncard


def benchmark_card(
    replicas: int, epochs: int, steps_per_call: int, size: str = "nnpdf40", data: dict | None = None
) -> FitRuncard:
    """The fit timed: a closure problem (or the runcard `data` section given), float32,
    patience 1.0 so that every replica runs every epoch."""
    from hyperscan.runcard import FitRuncard

    return FitRuncard.model_validate(
        {
            "data": data or {"closure": {"size": size, "level": 1}},
            "replicas": replicas,
            "epochs": epochs,
            "stopping": {"patience": 1.0},
            "training": {"precision": "float32", "steps_per_call": steps_per_call},
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=positive, default=100)
    parser.add_argument("--epochs", type=positive, default=1000)
    parser.add_argument("--steps-per-call", type=positive, default=250)
    parser.add_argument("--device", default="gpu:0", help="gpu:N or cpu")
    args = parser.parse_args()
    try:
        configure_tensorflow(args.device)
    except ValueError as error:
        sys.exit(f"gpu_fit: {error} (is the CUDA build of TensorFlow installed?)")
    import tensorflow as tf

    from hyperscan.fit import run_fit

    card = benchmark_card(args.replicas, args.epochs, args.steps_per_call)
    devices = tf.config.list_logical_devices("GPU")
    print(f"TensorFlow {tf.__version__}, devices: {[d.name for d in devices] or ['CPU only']}")
    gpu = GpuSampler()
    syncs: list[tuple[float, int]] = []  # (time, step) at each sync

    def on_sync(report) -> None:
        syncs.append((time.time(), report.step))

    started = time.time()
    result = run_fit(card, on_sync=on_sync)
    wall = time.time() - started
    utilisation = gpu.summary()
    done = result.count("ok") + result.count("pos-veto")
    print(
        f"nnpdf40 closure, {args.replicas} replicas x {result.steps} epochs: {done} finished, "
        f"{result.count('diverged')} diverged"
    )
    print(f"  whole fit (build, compile, train, outputs): {wall:.2f} s")
    print(f"  training loop (incl. XLA compilation):      {result.training_seconds:.2f} s")
    if len(syncs) < 2:
        print("  one sync only: no rate after compilation (give more epochs than --steps-per-call)")
    else:
        (first, first_step), (last, last_step) = syncs[0], syncs[-1]
        steady = (last - first) / (last_step - first_step)
        print(
            f"  after the first sync: {steady * 1e3:.3f} ms per epoch, "
            f"{steady / args.replicas * 1e6:.2f} µs per replica-epoch; "
            f"{args.epochs} epochs at that rate: {steady * args.epochs:.2f} s"
        )
    print(f"  target: {args.replicas} x {args.epochs} in ≤ {TARGET_SECONDS:.0f} s on an H200")
    print(f"  over the whole fit, {utilisation}")


if __name__ == "__main__":
    main()
