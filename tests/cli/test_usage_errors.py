# SPDX-License-Identifier: GPL-3.0-or-later
"""A bad or missing option, or an unknown command: the README's one `error:` line and exit
code 2, with nothing written, not click's usage block."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from hyperscan.cli import main


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["worker", "--study", "s", "--slots", "0"], "'--slots': 0: a worker fits at least 1"),
        (["worker", "--study", "s", "--slots", "abc"], "'--slots': 'abc' is neither a whole"),
        (["scan", "scan.yml", "--slots", "0"], "'--slots': 0"),
        (["export", "--study", "s", "-o", "t.yml", "--sample", "0"], "'--sample': 0 is not in"),
        (["worker", "--study", "s", "--timeout", "nan"], "'nan' is not a number of seconds"),
        (["export", "--study", "s"], "Missing option '-o' / '--output'"),
        (["study", "status", "--bogus"], "No such option"),
        (["sacn"], "No such command 'sacn'"),
        (["--bogus"], "No such option '--bogus'"),
    ],
)
def test_a_usage_mistake_is_one_error_line(tmp_path: Path, monkeypatch, args, said):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HYPERSCAN_STORAGE", raising=False)
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: ") and said in line, line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args", [[], ["study"]])
def test_a_group_called_alone_still_shows_its_help(args):
    result = CliRunner().invoke(main, args)
    assert "Usage:" in result.output and "Commands:" in result.output
    assert "error:" not in result.output
