# SPDX-License-Identifier: GPL-3.0-or-later
"""The journal's write lock is released by the OS when its holder dies (issue 42, finding 3).

With Optuna's lock file, a writer killed while holding it stalled every other worker for the
30 s grace period, silently. Here a real process holds hyperscan's lock and is killed with
SIGKILL; a second process, waiting to write a study into the journal, says once that it waits
and then goes on at once, long before Optuna's grace period would have run out.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import optuna
from _waiting import wait_for

from hyperscan.scan.storage import open_storage, study_names

OPTUNA_GRACE_S = 30
HOLD = """
import sys, time
from hyperscan.scan.storage._lock import JournalFlock
JournalFlock(sys.argv[1]).acquire()
print("held", flush=True)
time.sleep(600)
"""
WRITE = """
import sys, optuna
from hyperscan.scan.storage import open_storage
optuna.create_study(study_name="after-the-kill", storage=open_storage(sys.argv[1]))
print("written", flush=True)
"""


def python(script: str, journal: Path, log: Path) -> subprocess.Popen:
    with open(log, "wb") as sink:
        return subprocess.Popen(
            [sys.executable, "-c", script, str(journal)],
            stdout=sink,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )


def test_a_killed_lock_holder_stalls_no_writer(tmp_path: Path) -> None:
    journal = tmp_path / "scans.journal"
    optuna.create_study(study_name="before", storage=open_storage(str(journal), create=True))
    holder = python(HOLD, journal, tmp_path / "holder.log")
    writer = None
    try:
        wait_for(lambda: "held" in (tmp_path / "holder.log").read_text(), 60, "the lock holder")
        writer = python(WRITE, journal, tmp_path / "writer.log")
        wait_for(
            lambda: "waiting for the lock on" in (tmp_path / "writer.log").read_text(),
            60,
            "the writer's line saying it waits",
        )
        assert writer.poll() is None, "the writer wrote past a held lock"
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=10)
        # Well inside the grace period after which Optuna would break its own lock file.
        assert writer.wait(timeout=OPTUNA_GRACE_S / 3) == 0, (tmp_path / "writer.log").read_text()
    finally:
        for process in (holder, writer):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
    log = (tmp_path / "writer.log").read_text()
    assert log.count("waiting for the lock on") == 1, log
    assert "written" in log
    assert study_names(open_storage(str(journal))) == ["before", "after-the-kill"]
