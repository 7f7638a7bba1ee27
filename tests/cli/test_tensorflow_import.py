# SPDX-License-Identifier: GPL-3.0-or-later
"""The CLI's TensorFlow import: no Keras or JAX at start-up, both still there on demand, and
no TensorFlow at all in the commands that do not fit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPORT_HELPERS = Path(__file__).resolve().parents[1] / "report"

CHECK = """
import sys
from hyperscan.cli import configure_tensorflow

configure_tensorflow("cpu")
assert "tensorflow" in sys.modules
for package in ("keras", "jax"):
    assert not [name for name in sys.modules if name.split(".")[0] == package], package
import tensorflow as tf

assert tf.keras.optimizers.Adam(learning_rate=0.5).learning_rate.numpy() == 0.5
import jax.numpy as jnp

assert float(jnp.ones(2).sum()) == 2.0
print("ok")
"""


def test_workers_start_without_keras_or_jax_and_both_still_import():
    """Every worker process saves the Keras import (about a second of CPU), and the JAX
    import where JAX is installed (the test extra installs it); a user's code that wants
    either in the same process still gets it."""
    done = subprocess.run(
        [sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


COMMANDS = """
import sys

sys.path.insert(0, {helpers!r})
from _studies import QUICKSTART, build_study, mixed_states
from optuna.trial import TrialState

import hyperscan.scan
from hyperscan.cli import main

served = []  # the dashboard's application is built (optuna-dashboard imported), not served
hyperscan.scan.serve_dashboard = lambda app, host, port: served.append(port)
states = [state for state in mixed_states() if state != TrialState.RUNNING]  # copy refuses those
storage = build_study({journal!r}, "synthetic", states)
for args in (
    ["study", "create", str(QUICKSTART), "--storage", storage, "--name", "synthetic"],
    ["study", "status", "--study", "synthetic", "--storage", storage],
    ["study", "list", "--storage", storage],
    ["study", "copy", "--from", storage, "--to", {copy!r}, "--study", "synthetic"],
    ["export", "--study", "synthetic", "--storage", storage, "-o", {best!r}],
    ["report", "--study", "synthetic", "--storage", storage, "-o", {html!r}],
    ["dashboard", "--storage", storage, "--port", "8999"],
):
    main(args, standalone_mode=False)
assert served == [8999], served
heavy = sorted(name for name in sys.modules if name.split(".")[0] in ("tensorflow", "keras"))
assert not heavy, heavy[:5]
print("ok")
"""


def test_commands_that_do_not_fit_never_import_tensorflow(tmp_path):
    """Status, export, copies, reports and the dashboard start in a fraction of the time and
    take no GPU memory on a node where workers run; only `worker` (and `fit`) import it."""
    script = COMMANDS.format(
        helpers=str(REPORT_HELPERS),
        journal=str(tmp_path / "hyperscan.journal"),
        copy=str(tmp_path / "copy.journal"),
        best=str(tmp_path / "best.yml"),
        html=str(tmp_path / "report.html"),
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("ok"), done.stdout
    assert "synthetic" in (tmp_path / "best.yml").read_text()
    assert (tmp_path / "report.html").stat().st_size > 0
