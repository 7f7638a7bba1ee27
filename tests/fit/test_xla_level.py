# SPDX-License-Identifier: GPL-3.0-or-later
"""What the suite's XLA setting (tests/conftest.py: LLVM's optimisation off, a third of the CPU
of compiling) rests on: the level changes how the machine code is made, not what a fit
computes; users run the default level."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
from _cards import tiny_card

from hyperscan.fit import run_fit

TESTS = Path(__file__).resolve().parents[1]
EPOCHS = 200
PRECISIONS = ("float64", "float32")

FIT = """
import sys

import numpy as np

sys.path.insert(0, {tests!r})
from _cards import tiny_card

from hyperscan.fit import run_fit

for precision in {precisions!r}:
    card = tiny_card(epochs={epochs}, training={{"steps_per_call": 50, "precision": precision}})
    np.save(f"{{sys.argv[1]}}/{{precision}}.npy", run_fit(card).predictions)
"""


def test_a_fit_at_the_default_xla_level_is_bit_for_bit_the_suite_s(tmp_path):
    """A float64 and a float32 fit of 200 epochs, compiled (jit) in a process at the default
    level and in this one at the suite's: the same predictions, bit for bit."""
    flags = os.environ.get("XLA_FLAGS", "")
    level = re.compile(r"--xla_backend_optimization_level=\d+")
    assert level.search(flags), f"XLA_FLAGS={flags!r}: the suite sets no optimisation level"
    # A cache folder of its own: none of the suite's executables is loaded, nor its own here.
    default = {
        **os.environ,
        "XLA_FLAGS": " ".join(level.sub("", flags).split()),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    script = FIT.format(tests=str(TESTS), precisions=PRECISIONS, epochs=EPOCHS)
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        env=default,
    )
    assert done.returncode == 0, done.stderr
    for precision in PRECISIONS:
        card = tiny_card(epochs=EPOCHS, training={"steps_per_call": 50, "precision": precision})
        assert card.training.jit
        suite = run_fit(card).predictions
        np.testing.assert_array_equal(np.load(tmp_path / f"{precision}.npy"), suite, precision)
