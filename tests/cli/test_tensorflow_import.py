# SPDX-License-Identifier: GPL-3.0-or-later
"""The CLI's TensorFlow import: no Keras at start-up, Keras still there on demand."""

from __future__ import annotations

import subprocess
import sys

CHECK = """
import sys
from hyperscan.cli._tensorflow import configure_tensorflow

configure_tensorflow("cpu")
assert "tensorflow" in sys.modules
assert not [name for name in sys.modules if name.split(".")[0] == "keras"], "Keras preloaded"
import tensorflow as tf

assert tf.keras.optimizers.Adam(learning_rate=0.5).learning_rate.numpy() == 0.5
print("ok")
"""


def test_workers_start_without_keras_and_keras_still_imports():
    """Every worker process saves the Keras import (about a second of CPU); a user's code
    that wants Keras in the same process still gets it."""
    done = subprocess.run(
        [sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
