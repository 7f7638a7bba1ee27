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


def test_the_readme_s_scan_and_export_commands_are_valid():
    """The main job and the tour's scans and exports parse as the CLI reads them (options
    renamed or dropped would break the two commands a newcomer runs first)."""
    commands = []
    for line in README.read_text(encoding="utf-8").splitlines():
        _, found, command = line.partition(".venv/bin/hyperscan ")  # the main job
        if line.startswith("hyperscan "):  # the tour
            found, command = True, line.removeprefix("hyperscan ")
        words = shlex.split(command.partition("#")[0]) if found else []
        if words and words[0] in ("scan", "export"):
            commands.append(words)
    assert ["scan", "studies/quickstart-scan.yml", "--workers", "2", "--slots", "4",
            "--confirm", "3"] in commands  # fmt: skip
    assert any("--confirm" in words for words in commands if words[0] == "export")
    for words in commands:
        main.commands[words[0]].make_context(words[0], words[1:])
