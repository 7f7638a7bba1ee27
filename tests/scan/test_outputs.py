# SPDX-License-Identifier: GPL-3.0-or-later
"""Files the commands write: never over their inputs, never over a file that appeared
meanwhile, on file systems without hard links, with the mode a plain open gives.
"""

from __future__ import annotations

import errno
import os
import re
import tempfile
from pathlib import Path
from typing import Any, NoReturn

import pytest
from _service import TINY_SCAN, assert_clean_failure, cli, create, snapshot, write_card

from hyperscan.scan import ScanError, write_atomically


def test_outputs_never_replace_the_inputs(tmp_path):
    """`scan -o` always rewrites its file and `--force` replaces one: neither may take the
    scan runcard or the journal holding every study; a trailing '/' names no file."""
    url = str(tmp_path / "scan.journal")
    runcard = write_card(tmp_path / "scan.yml", TINY_SCAN)
    create(runcard, url, "s")
    before = (runcard.read_bytes(), snapshot(url))
    for args, said in (
        (["scan", runcard, "-o", runcard], "is the scan runcard"),
        (["scan", runcard, "-o", url], "is the storage's file"),
        (["export", "--study", "s", "-o", url], "is the storage's file"),  # not "use --force"
        (["report", "--study", "s", "-o", url, "--force"], "is the storage's file"),
    ):
        message = assert_clean_failure(cli(*args, "--storage", url))
        assert said in message
    database = tmp_path / "scan.db"
    message = assert_clean_failure(
        cli("export", "--study", "s", "--storage", f"sqlite:///{database}", "-o", database)
    )
    assert "is the storage's file" in message and not database.exists()
    assert (runcard.read_bytes(), snapshot(url)) == before
    folder = cli("export", "--study", "s", "--storage", url, "-o", f"{tmp_path}/new/")
    assert folder.exit_code == 2 and "ends in '/', as a folder does" in folder.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scan.journal", "scan.yml"]


@pytest.fixture
def appearing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """best.yml, which another process writes after write_atomically looked for it (as the
    result is staged) and before it publishes its own."""
    path = tmp_path / "best.yml"
    mkstemp = tempfile.mkstemp

    def stage_then_another_writes(*args: Any, **kwargs: Any) -> tuple[int, str]:
        staged = mkstemp(*args, **kwargs)
        path.write_text("another process's\n")
        return staged

    monkeypatch.setattr(tempfile, "mkstemp", stage_then_another_writes)
    return path


def test_an_output_that_appears_while_it_is_written_is_kept(appearing, tmp_path):
    with pytest.raises(ScanError, match=f"^{re.escape(str(appearing))} exists; use --force"):
        write_atomically(appearing, "exported\n")
    assert appearing.read_text() == "another process's\n"
    assert [p.name for p in tmp_path.iterdir()] == ["best.yml"]  # no staged file left
    write_atomically(appearing, "exported\n", force=True)
    assert appearing.read_text() == "exported\n"
    assert [p.name for p in tmp_path.iterdir()] == ["best.yml"]


@pytest.mark.parametrize("refusal", [errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV])
def test_an_output_is_written_where_the_file_system_has_no_hard_links(
    tmp_path, monkeypatch, refusal
):
    """Hard links publish a new output without replacing one that appeared meanwhile; where
    the file system has none, the output is renamed into place as before."""

    def no_links(*args: Any, **kwargs: Any) -> NoReturn:
        raise OSError(refusal, os.strerror(refusal))

    monkeypatch.setattr(os, "link", no_links)
    path = tmp_path / "best.yml"
    write_atomically(path, "exported\n")
    assert path.read_text() == "exported\n"
    assert [p.name for p in tmp_path.iterdir()] == ["best.yml"]
    with pytest.raises(ScanError, match="exists; use --force"):  # the check before staging
        write_atomically(path, "again\n")


def test_an_output_gets_the_mode_a_plain_open_gives(tmp_path):
    mask = os.umask(0o027)
    try:
        write_atomically(tmp_path / "best.yml", "exported\n")
    finally:
        os.umask(mask)
    assert (tmp_path / "best.yml").stat().st_mode & 0o777 == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["best.yml"]


@pytest.mark.parametrize("command", ["export", "report"])
def test_an_output_under_a_file_is_refused_first(command, tmp_path):
    """Checked before the storage is opened: no study is needed to see the path is wrong."""
    (tmp_path / "a-file").write_text("")
    target = tmp_path / "a-file" / "out"
    result = cli(command, "--study", "s", "--storage", tmp_path / "none.journal", "-o", target)
    assert "a-file is a file, not a folder" in assert_clean_failure(result)
