# SPDX-License-Identifier: GPL-3.0-or-later
"""A full disk under the journal, for real: a small tmpfs holds it, and fills up as a fit ends.

The worker ends with one line (not a traceback), the finished fit is kept on the worker's own
disk, the journal is left without half a record, and the next worker goes on by itself."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _service import assert_clean_failure, cli, create, scan_card, write_card
from optuna.trial import TrialState

from hyperscan.cli import _scan as _scan_cli
from hyperscan.scan import _scheduler, open_storage
from hyperscan.scan.storage import load_study


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs (mounting needs root: this machine's and CI's tests run as root)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        message = f"cannot mount a tmpfs: {mounted.stderr.strip()}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def fill(disk: Path) -> Path:
    """Fill the disk up to its last byte."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as stream:
        block = b"\0" * 4096
        while True:
            try:
                stream.write(block)
            except OSError as error:
                assert error.errno == errno.ENOSPC
                break
        for size in (1024, 64, 1):
            try:
                while True:
                    stream.write(b"\0" * size)
            except OSError:
                pass
    return filler


def test_a_full_disk_under_the_journal_keeps_the_fit_and_the_journal(
    tmp_path, small_disk, monkeypatch
):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the worker's own disk
    journal = small_disk / "scan.journal"
    card = scan_card(scan={"trials": 2})
    create(write_card(tmp_path / "scan.yml", card), str(journal), "s")
    real_fit = _scheduler.run_fit
    fits: list[object] = []

    def fit_then_disk_full(*args, **kwargs):
        result = real_fit(*args, **kwargs)
        fits.append(result)
        fill(small_disk)
        return result

    monkeypatch.setattr(_scheduler, "run_fit", fit_then_disk_full)
    monkeypatch.setattr(_scan_cli, "configure_or_fail", lambda device, threads: "CPU")
    args = ("worker", "--study", "s", "--storage", journal)
    message = assert_clean_failure(cli(*args, "--heartbeat-interval", "1", "--grace-period", "2"))
    assert f"cannot write the journal {journal}: No space left on device" in message
    assert "rolled back" in message
    assert len(fits) == 1
    # The fit is kept: its values and statistics, as the database would have had them.
    (kept,) = (tmp_path / "cache" / "hyperscan" / "results").glob("*-trial-0.json")
    record = json.loads(kept.read_text())
    assert record["number"] == 0 and record["user_attrs"]["statistics"]
    # No half record: the journal ends in a whole line, and opens without a word.
    assert journal.read_bytes().endswith(b"\n")

    # Space freed, the next worker goes on: the trial left RUNNING is failed as stale once its
    # grace period is over, and fitted again.
    (small_disk / "filler").unlink()
    monkeypatch.setattr(_scheduler, "run_fit", real_fit)
    time.sleep(3)
    result = cli(*args, "--heartbeat-interval", "1", "--grace-period", "2")
    assert result.exit_code == 0, result.output
    trials = load_study(open_storage(str(journal)), "s").get_trials()
    states = [trial.state for trial in trials]
    assert TrialState.RUNNING not in states
    assert states.count(TrialState.COMPLETE) == 2
    assert states[0] == TrialState.FAIL
