# SPDX-License-Identifier: GPL-3.0-or-later
"""The journal's write lock: an OS file lock, released by the kernel when its holder dies.

Optuna's journal locks (``JournalFileSymlinkLock``, ``JournalFileOpenLock``) are files that a
killed writer leaves behind; every other worker then waits Optuna's 30 s grace period before
breaking them, with the warning hidden at hyperscan's log level (kill -9 of a writer stalled all
workers ~30 s). An ``flock`` is released by the kernel as soon as
the holding process exits, however it exits, so the next writer goes on at once. The lock is
taken on the journal file itself (locks are advisory: readers and Optuna's appends ignore
them), so nothing is left next to the journal.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import time
from typing import Any

from optuna.storages.journal import JournalFileBackend

# Private in Optuna 5, but the type JournalFileBackend(lock_obj=...) documents.
from optuna.storages.journal._file import BaseJournalFileLock

from hyperscan.scan.storage._exceptions import StorageError

WAIT_LOG_S = 2.0
"""Waits this long are normal (another worker appends a record); longer ones are logged."""

_logger = logging.getLogger(__name__)


class JournalFlock(BaseJournalFileLock):
    """An exclusive ``flock`` on the journal file, for Optuna's ``JournalFileBackend``.

    Each acquisition opens the file anew, so two threads of one process exclude each other
    too (a flock belongs to an open file description). Writers that lock the journal another
    way (plain Optuna, older hyperscan) are not excluded: stop them first.
    """

    def __init__(self, journal: str) -> None:
        self.path = journal
        self._fd: int | None = None

    def acquire(self) -> bool:
        """Block until this process holds the lock; one log line if that takes a while."""
        fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            if not self._try(fd):
                self._wait(fd)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return True

    def release(self) -> None:
        """Unlock (closing the file is what frees a flock)."""
        fd, self._fd = self._fd, None
        if fd is None:
            raise RuntimeError(f"{self.path} is not locked by this process")
        os.close(fd)

    @staticmethod
    def _try(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def _wait(self, fd: int) -> None:
        deadline = time.monotonic() + WAIT_LOG_S
        pause = 0.001
        while time.monotonic() < deadline:
            time.sleep(pause)
            if self._try(fd):
                return
            pause = min(pause * 2, 0.05)
        _logger.warning(
            "waiting for the lock on %s: another process is writing it (the lock is freed "
            "when that process finishes or dies)",
            self.path,
        )
        fcntl.flock(fd, fcntl.LOCK_EX)


class RollbackJournalBackend(JournalFileBackend):
    """Optuna's journal file under a :class:`JournalFlock`, whose appends are all or nothing.

    A write that fails halfway (a full disk) is cut off again before the lock is freed: the
    journal never ends in half a record, which every later reader refuses until someone
    truncates it by hand. The failure is a :class:`StorageError` in one line.
    """

    def __init__(self, journal: str) -> None:
        self._flock = JournalFlock(journal)
        super().__init__(journal, lock_obj=self._flock)

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        data = "".join(json.dumps(log, separators=(",", ":")) + "\n" for log in logs).encode()
        self._flock.acquire()
        try:
            fd = os.open(self._flock.path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
            try:
                end = os.lseek(fd, 0, os.SEEK_END)
                try:
                    written = 0
                    while written < len(data):
                        written += os.write(fd, data[written:])
                    os.fsync(fd)
                except OSError as error:
                    os.ftruncate(fd, end)  # frees what it wrote: works on a full disk too
                    raise StorageError(
                        f"cannot write the journal {self._flock.path}: "
                        f"{error.strerror or error}; its last record was rolled back, and the "
                        "journal is intact (free space on its disk, then start again)"
                    ) from None
            finally:
                os.close(fd)
        finally:
            self._flock.release()
