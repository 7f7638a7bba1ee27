# SPDX-License-Identifier: GPL-3.0-or-later
"""The errors of the storage package: a cause in plain words and the URL without password."""

from __future__ import annotations

from hyperscan.scan.storage._redact import redact, scrub


class StorageError(Exception):
    """A storage problem in plain words, with the URL redacted (never the password)."""

    def __init__(self, cause: str, url: str | None = None) -> None:
        self.cause = scrub(cause, url)
        self.url = redact(url) if url is not None else None
        message = self.cause if self.url is None else f"{self.cause} (storage: {self.url})"
        super().__init__(message)


class NoSchemaError(StorageError):
    """A database without hyperscan's (Optuna's) tables: nobody has created a study in it yet.

    Workers and `study status` stop on it; `study list` says the database has no studies."""
