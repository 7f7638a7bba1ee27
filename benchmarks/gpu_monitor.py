# SPDX-License-Identifier: GPL-3.0-or-later
"""What the GPU benchmarks share: the H200 target, GPU utilisation over a run from
``nvidia-smi`` sampled in the background, and their command lines' counts.

Standard library and numpy only: gpu_fit.py (TensorFlow) and xla_bundle.py (no TensorFlow)
both use it.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess

import numpy as np

TARGET_SECONDS = 5.0  # issue #4: 100 replicas x 1000 epochs on an H200


def positive(text: str) -> int:
    """An argparse type for replicas, epochs and steps per call: 0 steps per call would loop
    for ever, 0 epochs divide by zero, on a GPU node lent for minutes."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not positive")
    return value


class GpuSampler:
    """Samples utilisation and memory every `interval_ms` from creation to `summary()`."""

    def __init__(self, interval_ms: int = 100) -> None:
        self._process = None
        if shutil.which("nvidia-smi") is not None:
            self._process = subprocess.Popen(
                [
                    "nvidia-smi",
                    "--query-gpu=utilization.gpu,memory.used",
                    "--format=csv,noheader,nounits",
                    "-lms",
                    str(interval_ms),
                ],
                stdout=subprocess.PIPE,
                text=True,
            )

    def summary(self) -> str:
        """Stops sampling; one line: mean, median and peak utilisation, peak memory."""
        if self._process is None:
            return "no nvidia-smi: no utilisation figures"
        self._process.terminate()
        rows = [line.split(", ") for line in self._process.communicate()[0].splitlines()]
        samples = np.array(
            [[float(r[0]), float(r[1])] for r in rows if len(r) == 2 and r[0].strip().isdigit()]
        )
        if samples.size == 0:
            return "nvidia-smi gave no samples"
        utilisation, memory = samples[:, 0], samples[:, 1]
        return (
            f"GPU utilisation (nvidia-smi, {utilisation.size} samples): mean "
            f"{utilisation.mean():.0f}%, median {np.median(utilisation):.0f}%, max "
            f"{utilisation.max():.0f}%; memory used up to {memory.max():.0f} MiB"
        )
