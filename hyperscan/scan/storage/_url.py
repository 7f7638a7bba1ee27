# SPDX-License-Identifier: GPL-3.0-or-later
"""Storage URLs: what a user may write, the one canonical form every process sees, the file
a URL names, and the URL a storage was opened from."""

from __future__ import annotations

import os
from pathlib import Path

import sqlalchemy
from optuna.storages import BaseStorage, RDBStorage

from hyperscan.scan.storage._constants import (
    DEFAULT_STORAGE,
    JOURNAL_PREFIX,
    PG_PREFIX,
    SQLITE_PREFIX,
    STORAGE_ENV,
)
from hyperscan.scan.storage._exceptions import StorageError
from hyperscan.scan.storage._redact import redact

_SCHEMES = ("journal", "postgresql", "postgres", "postgresql+psycopg2", "sqlite")
_ACCEPTED = (
    "a file path or journal:///abs/path.journal (embedded journal, the default is "
    f"./{DEFAULT_STORAGE}), postgresql://user@host:port/database (PostgreSQL), "
    "sqlite:///path.db (SQLite, not for many parallel workers)"
)


def resolve_url(url: str | None) -> str:
    """Canonical storage URL: explicit argument, else ``$HYPERSCAN_STORAGE``, else the default.

    Journal files come back as ``journal:///absolute/path`` so that messages and other processes
    see one unambiguous file; PostgreSQL URLs get the psycopg2 driver spelled out.
    """
    if url is None or not url.strip():
        url = os.environ.get(STORAGE_ENV, "").strip() or DEFAULT_STORAGE
    url = url.strip()
    scheme, sep, rest = url.partition("://")
    if not sep:
        head, colon, _ = url.partition(":")
        if colon and head.lower() in _SCHEMES:
            # "postgresql:/user@host/db" would otherwise become a local journal file
            raise StorageError(f"'{head}:' must be followed by //; accepted: {_ACCEPTED}", url)
        head = url.partition("//")[0]
        if head != url and head.lower() in _SCHEMES:
            # and "postgresql//user:password@host/db" a journal in folders named after them
            raise StorageError(f"'{head}//' lacks its ':' ({head}://); accepted: {_ACCEPTED}")
        return journal_url(url)
    scheme = scheme.lower()
    if scheme == "journal":
        if not rest:
            raise StorageError(f"the journal URL names no file; use {_ACCEPTED}", url)
        return journal_url(rest)
    if scheme in ("postgresql", "postgres", "postgresql+psycopg2"):
        if rest.partition("?")[0].count("@") > 1:
            # The URL parser ends the password at its first '@' and takes the rest for the
            # host, which the server's "unknown host" message would then show.
            raise StorageError(
                "the URL has more than one '@': write an '@' of the user name or password as %40",
                url,
            )
        return PG_PREFIX + rest
    if scheme.startswith("postgresql+"):
        raise StorageError(
            f"unsupported PostgreSQL driver {scheme!r}: hyperscan talks to PostgreSQL through "
            "psycopg2, write postgresql://...",
            url,
        )
    if scheme == "sqlite":
        if _in_memory(url):
            raise StorageError(
                "an in-memory SQLite database keeps nothing and no other process sees it; "
                "give a file, sqlite:///path.db",
                url,
            )
        return url
    raise StorageError(f"unsupported storage URL scheme {scheme!r}; use {_ACCEPTED}", url)


def _in_memory(url: str) -> bool:
    """Whether an SQLite URL names a database that lives in its process (SQLite's own forms)."""
    try:
        parsed = sqlalchemy.engine.make_url(url)
    except sqlalchemy.exc.ArgumentError:
        return False  # a malformed URL: sqlalchemy says what is wrong with it when opening
    database = parsed.database or ""
    return (
        database in ("", ":memory:")
        or database.startswith("file::memory:")
        or parsed.query.get("mode") == "memory"
        or "mode=memory" in database
    )


def storage_file(url: str | None) -> Path | None:
    """The file a storage argument names (a journal, an SQLite database); None for a
    server's database or a URL that `open_storage` will refuse anyway."""
    try:
        url = resolve_url(url)
    except StorageError:
        return None
    if url.startswith(JOURNAL_PREFIX):
        return Path(journal_path(url))
    if url.startswith(SQLITE_PREFIX):
        return Path(url[len(SQLITE_PREFIX) :])
    return None


def journal_url(path: str) -> str:
    """The canonical URL of a journal file."""
    return JOURNAL_PREFIX + os.path.abspath(os.path.expanduser(path))


def journal_path(url: str) -> str:
    """The file a canonical journal URL names."""
    return url[len(JOURNAL_PREFIX) :]


def storage_url(storage: BaseStorage) -> str:
    """The redacted URL a storage was opened from (for messages)."""
    inner = getattr(storage, "_backend", None)
    for candidate in (storage, inner):
        url = getattr(candidate, "_hyperscan_url", None)
        if isinstance(url, str):
            return redact(url)
    for candidate in (storage, inner):
        if isinstance(candidate, RDBStorage):
            return redact(candidate.url)
    return f"<{type(storage).__name__}>"
