# SPDX-License-Identifier: GPL-3.0-or-later
"""How long a journal writer waits after the process holding the journal's lock is killed.

    python benchmarks/journal_lock.py [--folder DIR]

A process takes the lock and is killed with SIGKILL; another process, already waiting for the
lock, then takes it. Printed: the time from the kill to that second acquisition, for
hyperscan's lock (an OS flock, released by the kernel) and for Optuna's default lock file
(``JournalFileSymlinkLock``, broken after its 30 s grace period), and their ratio. Takes about
35 s, most of it Optuna's grace period.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LOCKS = {
    "hyperscan flock": "from hyperscan.scan.storage._lock import JournalFlock as Lock",
    "optuna symlink lock": "from optuna.storages.journal import JournalFileSymlinkLock as Lock",
}
HOLD = """
import sys, time
{lock}
Lock(sys.argv[1]).acquire()
print("held", flush=True)
time.sleep(600)
"""
WAIT = """
import sys, time
{lock}
lock = Lock(sys.argv[1])
print("ready", flush=True)
lock.acquire()
print(time.time(), flush=True)
"""


def line(process: subprocess.Popen) -> str:
    return process.stdout.readline().strip()


def recovery_s(lock: str, journal: Path) -> float:
    """Seconds from the holder's SIGKILL to the waiter's acquisition."""
    journal.write_text("")
    for leftover in journal.parent.glob(journal.name + ".*"):
        leftover.unlink()
    start = {"stdout": subprocess.PIPE, "text": True, "stderr": subprocess.DEVNULL}
    holder = subprocess.Popen([sys.executable, "-c", HOLD.format(lock=lock), journal], **start)
    assert line(holder) == "held"
    waiter = subprocess.Popen([sys.executable, "-c", WAIT.format(lock=lock), journal], **start)
    assert line(waiter) == "ready"
    time.sleep(1.0)  # the waiter is inside acquire()
    killed = time.time()
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    acquired = float(line(waiter))
    waiter.wait(timeout=10)
    return acquired - killed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, help="where the journal goes (default: a tmp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        journal = (args.folder or Path(scratch)) / "lock-benchmark.journal"
        times = {name: recovery_s(lock, journal) for name, lock in LOCKS.items()}
    for name, seconds in times.items():
        print(f"{name:20s} writer goes on {seconds:6.2f} s after the holder's SIGKILL")
    ours, theirs = times["hyperscan flock"], times["optuna symlink lock"]
    print(f"ratio optuna/hyperscan: {theirs / max(ours, 1e-3):.0f}x")


if __name__ == "__main__":
    main()
