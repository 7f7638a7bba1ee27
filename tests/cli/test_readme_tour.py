# SPDX-License-Identifier: GPL-3.0-or-later
"""The README's tour runs on the reader's machine, whatever it has."""

from __future__ import annotations

import shlex
from pathlib import Path

from hyperscan.cli import main

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_tour_starts_workers_on_any_machine():
    """`--device gpu:0` exits 2 where there is no GPU; `auto` takes one when there is."""
    lines = [
        line.partition("#")[0]
        for line in README.read_text(encoding="utf-8").splitlines()
        if line.startswith("hyperscan worker ")
    ]
    assert lines
    for line in lines:
        context = main.commands["worker"].make_context("worker", shlex.split(line)[2:])
        assert context.params["device"] in ("auto", "cpu"), line
