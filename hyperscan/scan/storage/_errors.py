# SPDX-License-Identifier: GPL-3.0-or-later
"""Storage failures in plain words.

Optuna re-raises every SQLAlchemy error as "invalid data in the commit, e.g. exceeding max
length", which is almost never the cause: :func:`describe_error` walks the wrapped exceptions
and names the first cause that :data:`CAUSES` recognises in them.
"""

from __future__ import annotations

import errno
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import sqlalchemy
from optuna.storages import BaseStorage

from hyperscan.scan.storage._constants import CONNECT_TIMEOUT_S, NO_SCHEMA
from hyperscan.scan.storage._exceptions import NoSchemaError, StorageError
from hyperscan.scan.storage._url import storage_url


@dataclass(frozen=True)
class Cause:
    """A cause recognised by ``pattern`` (searched, ignoring case, in the text of every wrapped
    exception, then their ``<TypeName>``s and the driver's ``<SQLSTATE code>``), told as
    ``message`` formatted with the pattern's named groups and ``host`` (the server)."""

    pattern: str
    message: str
    error: type[StorageError] = StorageError
    #: False for a mistake in the settings, which waiting does not mend (a wrong password or
    #: host name): a worker starting up waits out the others, not these.
    passes: bool = True
    #: Whether the cause applies to this match, if only sometimes (None: always).
    when: Callable[[re.Match[str]], bool] | None = None


#: Host names this process has reached a database at (:func:`note_reached`).
_REACHED: set[str] = set()


def note_reached(url: str) -> None:
    """Remember that ``url``'s host name resolved and its server answered: if it stops
    resolving later, its server or service is away (a container restarting: Docker's DNS
    forgets a stopped container's name), not misspelt."""
    host = sqlalchemy.engine.make_url(url).host
    if host:
        _REACHED.add(host.lower())


#: SQLAlchemy's refusal to use again a connection lost inside a transaction.
_LOST_IN_TRANSACTION = "can't reconnect until invalid transaction is rolled back"

CAUSES = (
    Cause(
        "database is locked",
        "the SQLite database is locked by another process: SQLite does not cope with many "
        "parallel workers, use the journal file (the default) or PostgreSQL",
    ),
    Cause(
        "too many clients|remaining connection slots are reserved",
        "the PostgreSQL server at {host} has no free connection slots (max_connections "
        "reached): each worker holds 2 to 3 connections; raise max_connections, run fewer "
        "workers, or put PgBouncer in front",
    ),
    Cause(
        r'too many connections for (?P<kind>role|database) "(?P<name>[^"]+)"',
        "PostgreSQL refuses more connections for {kind} {name!r} "
        "(its CONNECTION LIMIT is reached): raise the limit or run fewer workers",
    ),
    Cause(
        r'password authentication failed for user "(?P<user>[^"]*)"',
        "password authentication failed for user {user!r} at {host}",
        passes=False,
    ),
    Cause(
        # PgBouncer says SASL for a wrong password.
        "password authentication failed|SASL authentication failed|no password supplied",
        "password authentication failed at {host}",
        passes=False,
    ),
    Cause(
        r'database "(?P<database>[^"]+)" does not exist',
        "database {database!r} does not exist on {host}: create it "
        "(createdb {database}) or fix the URL",
        passes=False,
    ),
    Cause(
        r'role "(?P<role>[^"]+)" does not exist',
        "user (role) {role!r} does not exist on {host}",
        passes=False,
    ),
    Cause(
        "no pg_hba.conf entry",
        "{host} does not accept this user/database from this machine (pg_hba.conf)",
        passes=False,
    ),
    Cause(
        "connection refused",
        "connection refused by {host}: no database server listens there "
        "(is PostgreSQL running? is the port right?)",
    ),
    Cause(
        r'could not translate host name "(?P<name>[^"]+)"',
        "{host} does not resolve now, though it did when the worker started: its server or "
        "service is away (a container restarting?)",
        when=lambda match: match["name"].lower() in _REACHED,
    ),
    Cause(
        "could not translate host name|name or service not known"
        "|temporary failure in name resolution",
        "unknown host in {host}: the name does not resolve",
        passes=False,
    ),
    Cause(
        r"no answer within (?P<seconds>[\d.]+) s \((?P<what>[^)]*)\)",
        "{host} gave no answer within {seconds} s ({what}: a hung server or network; the "
        "limit is $HYPERSCAN_DB_TIMEOUT)",
    ),
    Cause(
        # Optuna retries a trial's creation on the budget lock's connection, lost mid-take.
        _LOST_IN_TRANSACTION,
        "the connection to {host} was lost inside a transaction (a restart, a dropped connection)",
    ),
    Cause(
        "canceling statement due to lock timeout",
        "{host} did not give a worker the budget's lock within $HYPERSCAN_DB_TIMEOUT: an "
        "overloaded or locked server",
    ),
    Cause(
        "canceling statement due to statement timeout",
        "{host} did not finish a statement within $HYPERSCAN_DB_TIMEOUT (its "
        "statement_timeout): an overloaded or locked server",
    ),
    Cause(
        "timeout expired|timed out|no route to host|network is unreachable",
        f"{{host}} is unreachable (no answer within {CONNECT_TIMEOUT_S} s)",
    ),
    Cause(
        r'relation "[^"]+" does not exist|no such table|<SQLSTATE 42P01>',
        NO_SCHEMA,
        NoSchemaError,
    ),
    Cause(
        r"(?P<privilege>permission denied for [^\n]*)",
        "the database user lacks a privilege: {privilege}",
        passes=False,
    ),
    Cause(
        "unable to open database file",
        "cannot open the SQLite file (its folder is missing or not writable)",
    ),
    Cause(
        "invalid log format|<JSONDecodeError>|<UnicodeDecodeError>",
        "the journal file is damaged or is not an Optuna journal (a line is not a journal "
        "record); `hyperscan study copy --salvage` copies its readable records to a new storage",
    ),
    Cause(
        r"(?P<line>[^\n]*no longer compatible with the table schema[^\n]*)",
        "{line}",
    ),
    Cause(
        r"invalid literal for int\(\) with base 10: '(?P<port>[^']*)'",
        "the port {port!r} is not a number",
    ),
)
"""The causes :func:`describe_error` recognises, the first that matches wins."""

OS_CAUSES = {
    errno.EACCES: "no permission to create or write {where}",
    errno.EPERM: "no permission to create or write {where}",
    errno.EROFS: "{where} is on a read-only file system",
    errno.ENOENT: "{where} does not exist",
    errno.ENOTDIR: "a part of the path {where} is a file, not a folder",
    errno.EEXIST: "{where} is a file, where the storage's folder should be",
    errno.EISDIR: "{where} is a folder, not a journal file",
    errno.ENOSPC: "no space left on the device holding {where}",
    errno.EDQUOT: "disk quota exceeded while writing {where}",
}
"""A file system's refusals, by errno, told with the file (``where``) they concern."""


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception, the ones it wraps (``.orig``, ``__cause__``, ``__context__``), in order."""
    out: list[BaseException] = []
    seen: set[int] = set()
    queue: list[Any] = [exc]
    while queue:
        current = queue.pop(0)
        if not isinstance(current, BaseException) or id(current) in seen:
            continue
        seen.add(id(current))
        out.append(current)
        queue += [getattr(current, "orig", None), current.__cause__, current.__context__]
    return out


def transient_error(exc: BaseException) -> bool:
    """Whether ``exc`` comes from the database or its connection going away (a restart, a
    dropped connection): worth waiting and trying again, unlike a mistake in what was sent."""
    transient = (sqlalchemy.exc.OperationalError, sqlalchemy.exc.InterfaceError)
    chain = _chain(exc)
    if not any(isinstance(e, transient) or _lost_in_transaction(e) for e in chain):
        return False
    cause = _cause(_evidence(chain))
    return cause is None or cause[0].passes


def _lost_in_transaction(exc: BaseException) -> bool:
    """SQLAlchemy's refusal to use again a connection lost inside a transaction: the outage's
    only trace once the error that lost it was caught (Optuna's own retries of a trial's
    creation, inside the budget lock's transaction: a PgBouncer killed mid-take ended a
    worker with it)."""
    return isinstance(exc, sqlalchemy.exc.PendingRollbackError) and (
        _LOST_IN_TRANSACTION in str(exc).lower()
    )


def _cause(evidence: str) -> tuple[Cause, re.Match[str]] | None:
    """The first of :data:`CAUSES` found in ``evidence``, with its match."""
    for cause in CAUSES:
        match = re.search(cause.pattern, evidence, flags=re.IGNORECASE)
        if match is not None and (cause.when is None or cause.when(match)):
            return cause, match
    return None


@contextmanager
def explained_storage_errors(storage: BaseStorage) -> Iterator[None]:
    """A dropped connection outside a trial (a worker re-queues the trial it cut short itself),
    or a refusal of the database that :data:`CAUSES` names (a password changed, a privilege
    revoked mid-scan), ends the caller with its cause as a :class:`StorageError`, not with
    Optuna's traceback; an error the table does not know keeps its traceback (a bug)."""
    try:
        yield
    except StorageError:
        raise
    except Exception as error:
        if not (transient_error(error) or _named_refusal(error)):
            raise
        raise describe_error(error, storage_url(storage)) from error


def _named_refusal(exc: BaseException) -> bool:
    """Whether the database refused something for a cause :data:`CAUSES` names."""
    chain = _chain(exc)
    from_database = any(isinstance(item, sqlalchemy.exc.DBAPIError) for item in chain)
    return from_database and _cause(_evidence(chain)) is not None


@contextmanager
def errors_described(url: str) -> Iterator[None]:
    """Any failure inside ends the caller as a :class:`StorageError` naming its cause."""
    try:
        yield
    except StorageError:
        raise
    except Exception as exc:
        raise describe_error(exc, url) from exc


def _host(url: str) -> str:
    try:
        parsed = sqlalchemy.engine.make_url(url)
    except Exception:
        return "the server"
    if not parsed.host:
        return "the local server socket"
    return f"{parsed.host}:{parsed.port or 5432}"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    for line in text.splitlines():
        line = re.sub(r"^.*?failed: (FATAL:\s*)?", "", line.strip())
        if line:
            return line
    return type(exc).__name__


def _root(chain: list[BaseException]) -> BaseException:
    """The most specific exception: a driver error, else the innermost one."""
    for exc in chain:
        module = type(exc).__module__
        if module.startswith(("psycopg2", "sqlite3")):
            return exc
    return chain[-1]


def _evidence(chain: list[BaseException]) -> str:
    """What :data:`CAUSES` are searched in: the messages, the type names, the SQLSTATE."""
    lines = [str(item) for item in chain] + [f"<{type(item).__name__}>" for item in chain]
    code = getattr(_root(chain), "pgcode", None)
    if code is not None:
        lines.append(f"<SQLSTATE {code}>")
    return "\n".join(lines)


def describe_error(exc: BaseException, url: str) -> StorageError:
    """Turn a storage failure into a :class:`StorageError` naming what really happened."""
    if isinstance(exc, StorageError):
        return exc
    chain = _chain(exc)
    for item in chain:
        if isinstance(item, OSError) and not type(item).__module__.startswith("psycopg2"):
            message = OS_CAUSES.get(item.errno) if item.errno is not None else None
            if message is not None:
                return StorageError(message.format(where=item.filename or "the storage file"), url)
    found = _cause(_evidence(chain))
    if found is not None:
        cause, match = found
        return cause.error(cause.message.format(host=_host(url), **match.groupdict()), url)
    root = _root(chain)
    return StorageError(f"{type(root).__name__}: {_first_line(root)}", url)
