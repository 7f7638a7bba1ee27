# SPDX-License-Identifier: GPL-3.0-or-later
"""Where studies live: an embedded journal file (one machine) or PostgreSQL (a cluster).

Why not SQLite by default: at 32 parallel workers SQLite lost 1-6 of 256 trials, Optuna's
journal file none. Optuna only implements heartbeats for RDB storages, so the journal gets its
own (one small sidecar file per running trial, not journal writes), and a killed worker's trial
is failed and re-queued exactly as with PostgreSQL. On PostgreSQL the schema is created once
(``hyperscan study create``): 31 of 32 workers racing to create it on a fresh server crashed.

Opening a storage, listing its studies and loading a study fail with a :class:`StorageError`
that names the root cause and shows the URL without its password. Reads and writes through
what they return (a study's trials, its attributes, :func:`fail_stale_trials`) raise Optuna's
exceptions: callers read inside :func:`explained_storage_errors`, which turns a lost
connection into a StorageError.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import shlex
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import optuna
import sqlalchemy
from optuna.exceptions import ExperimentalWarning
from optuna.storages import (
    BaseStorage,
    JournalStorage,
    RDBStorage,
    RetryHeartbeatStaleTrialCallback,
)
from optuna.storages._heartbeat import BaseHeartbeat, is_heartbeat_enabled
from optuna.storages.journal import JournalFileBackend, JournalFileSymlinkLock
from optuna.trial import FrozenTrial, TrialState

from hyperscan.scan._trial_attrs import WORKER_ATTR

__all__ = [
    "CONNECT_TIMEOUT_S",
    "DEFAULT_STORAGE",
    "STORAGE_ENV",
    "HeartbeatJournalStorage",
    "StorageError",
    "describe_error",
    "load_study",
    "open_storage",
    "redact",
    "resolve_url",
    "storage_url",
    "study_names",
]

DEFAULT_STORAGE = "hyperscan.journal"
"""The embedded storage file, in the current directory, used when no URL is given."""
STORAGE_ENV = "HYPERSCAN_STORAGE"
"""Environment variable with the storage URL, so that workers need no ``--storage``."""
CONNECT_TIMEOUT_S = 5
"""A wrong PostgreSQL host must fail in seconds, not after the OS's TCP timeout (minutes)."""

JOURNAL_PREFIX = "journal://"
HEARTBEAT_SUFFIX = ".heartbeats"
_PG_PREFIX = "postgresql+psycopg2://"
# Any constant works; it only has to be the same for every hyperscan process.
_SCHEMA_LOCK_KEY = 0x68797065  # "hype"
_SCHEMA_HINT = "run `hyperscan study create` first"
_SCHEMES = ("journal", "postgresql", "postgres", "postgresql+psycopg2", "sqlite")
_ACCEPTED = (
    "a file path or journal:///abs/path.journal (embedded journal, the default is "
    f"./{DEFAULT_STORAGE}), postgresql://user@host:port/database (PostgreSQL), "
    "sqlite:///path.db (SQLite, not for many parallel workers)"
)

_UNREACHABLE = ("timeout expired", "timed out", "no route to host", "network is unreachable")

_logger = logging.getLogger(__name__)
StaleTrialCallback = Callable[[optuna.Study, FrozenTrial], None]


class StorageError(Exception):
    """A storage problem in plain words, with the URL redacted (never the password)."""

    def __init__(self, cause: str, url: str | None = None) -> None:
        self.cause = _scrub(cause, url)
        self.url = redact(url) if url is not None else None
        message = self.cause if self.url is None else f"{self.cause} (storage: {self.url})"
        super().__init__(message)


# --------------------------------------------------------------------------- URLs


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
        return _journal_url(url)
    scheme = scheme.lower()
    if scheme == "journal":
        if not rest:
            raise StorageError(f"the journal URL names no file; use {_ACCEPTED}", url)
        return _journal_url(rest)
    if scheme in ("postgresql", "postgres", "postgresql+psycopg2"):
        if rest.partition("?")[0].count("@") > 1:
            # The URL parser ends the password at its first '@' and takes the rest for the
            # host, which the server's "unknown host" message would then show.
            raise StorageError(
                "the URL has more than one '@': write an '@' of the user name or password as %40",
                url,
            )
        return _PG_PREFIX + rest
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
        return Path(_journal_path(url))
    if url.startswith(_SQLITE_PREFIX):
        return Path(url[len(_SQLITE_PREFIX) :])
    return None


_SQLITE_PREFIX = "sqlite:///"


def _journal_url(path: str) -> str:
    return JOURNAL_PREFIX + os.path.abspath(os.path.expanduser(path))


def _journal_path(url: str) -> str:
    return url[len(JOURNAL_PREFIX) :]


def _split_userinfo(url: str) -> tuple[str, str, str, str | None]:
    """``(scheme://, user, rest after '@', password)``; password None when the URL has none.

    The userinfo ends at the *last* '@' before the query, so that a password with an
    unescaped '@' or '/' is still hidden completely.
    """
    match = _SCHEME_PREFIX.match(url)
    if match is None:
        return "", "", url, None
    prefix, rest = match.group(0), url[match.end() :]
    query_at = rest.find("?")
    at = rest.rfind("@", 0, query_at if query_at >= 0 else len(rest))
    if at < 0:
        return prefix, "", rest, None
    user, colon, password = rest[:at].partition(":")
    return prefix, user, rest[at + 1 :], password if colon else None


# A scheme and its slashes, any number of them: a URL mistyped with one slash ("postgresql:/")
# is quoted in the message that refuses it, and must not show its password either.
_SCHEME_PREFIX = re.compile(r"[A-Za-z][\w+.-]*:/*")


_QUERY_PASSWORD = re.compile(r"(?i)([?&]password=)[^&]*")


def redact(url: str) -> str:
    """The URL with any password (in the userinfo or a ``password=`` parameter) as '***'."""
    prefix, user, rest, password = _split_userinfo(url)
    if password is not None:
        url = f"{prefix}{user}:***@{rest}"
    return _QUERY_PASSWORD.sub(r"\1***", url)


def _passwords(url: str | None) -> list[str]:
    if not url:
        return []
    found = [m.group(1) for m in re.finditer(r"(?i)[?&]password=([^&]*)", url)]
    password = _split_userinfo(url)[3]
    if password:
        found.append(password)
    found += [unquote(p) for p in found]
    return [p for p in found if p]


_SCRUB_ANYWHERE = 6  # characters: a longer password hardly occurs in a message by chance


def _scrub(text: str, url: str | None) -> str:
    """Belt and braces: no password reaches a message even if a driver echoed it. A short
    one only where a URL or DSN holds it: replaced everywhere, it would garble the message
    ("conn***ction r***fus***d") and, by the gaps, tell the password."""
    for password in sorted(_passwords(url), key=len, reverse=True):
        escaped = re.escape(password)
        if len(password) >= _SCRUB_ANYWHERE:
            text = text.replace(password, "***")
        text = re.sub(rf":{escaped}@", ":***@", text)
        text = re.sub(rf"(?i)(password\s*=\s*['\"]?){escaped}", r"\1***", text)
    return text


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


# --------------------------------------------------------------------------- errors


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
    return any(isinstance(e, transient) for e in _chain(exc))


@contextmanager
def explained_storage_errors(storage: BaseStorage) -> Iterator[None]:
    """A dropped connection outside a trial (a worker re-queues the trial it cut short itself)
    ends the caller with its cause as a :class:`StorageError`, not with Optuna's traceback."""
    try:
        yield
    except StorageError:
        raise
    except Exception as error:
        if not transient_error(error):
            raise
        raise describe_error(error, storage_url(storage)) from error


def _host(url: str) -> str:
    try:
        parsed = sqlalchemy.engine.make_url(url)
    except Exception:
        return "the server"
    if not parsed.host:
        return "the local server socket"
    return f"{parsed.host}:{parsed.port or 5432}"


def _os_cause(exc: OSError) -> str | None:
    where = exc.filename or "the storage file"
    causes = {
        errno.EACCES: f"no permission to create or write {where}",
        errno.EPERM: f"no permission to create or write {where}",
        errno.EROFS: f"{where} is on a read-only file system",
        errno.ENOENT: f"{where} does not exist",
        errno.ENOTDIR: f"a part of the path {where} is a file, not a folder",
        errno.EEXIST: f"{where} is a file, where the storage's folder should be",
        errno.EISDIR: f"{where} is a folder, not a journal file",
        errno.ENOSPC: f"no space left on the device holding {where}",
        errno.EDQUOT: f"disk quota exceeded while writing {where}",
    }
    return causes.get(exc.errno) if exc.errno is not None else None


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


def describe_error(exc: BaseException, url: str) -> StorageError:
    """Turn a storage failure into a :class:`StorageError` naming what really happened.

    Optuna re-raises every SQLAlchemy error as "invalid data in the commit, e.g. exceeding max
    length", which is almost never the cause: walk the wrapped exceptions to the driver's.
    """
    if isinstance(exc, StorageError):
        return exc
    chain = _chain(exc)
    for item in chain:
        if isinstance(item, OSError) and not type(item).__module__.startswith("psycopg2"):
            cause = _os_cause(item)
            if cause is not None:
                return StorageError(cause, url)
    text = "\n".join(str(item) for item in chain)
    low = text.lower()
    host = _host(url)

    if "database is locked" in low:
        cause = (
            "the SQLite database is locked by another process: SQLite does not cope with many "
            "parallel workers, use the journal file (the default) or PostgreSQL"
        )
    elif "too many clients" in low or "remaining connection slots are reserved" in low:
        cause = (
            f"the PostgreSQL server at {host} has no free connection slots (max_connections "
            "reached): each worker holds about 2 connections; raise max_connections, run fewer "
            "workers, or put PgBouncer in front"
        )
    elif match := re.search(r'too many connections for (role|database) "([^"]+)"', text):
        cause = (
            f"PostgreSQL refuses more connections for {match.group(1)} {match.group(2)!r} "
            "(its CONNECTION LIMIT is reached): raise the limit or run fewer workers"
        )
    elif match := re.search(r'password authentication failed for user "([^"]*)"', text):
        cause = f"password authentication failed for user {match.group(1)!r} at {host}"
    elif "password authentication failed" in low or "no password supplied" in low:
        cause = f"password authentication failed at {host}"
    elif match := re.search(r'database "([^"]+)" does not exist', text):
        cause = (
            f"database {match.group(1)!r} does not exist on {host}: create it "
            f"(createdb {match.group(1)}) or fix the URL"
        )
    elif match := re.search(r'role "([^"]+)" does not exist', text):
        cause = f"user (role) {match.group(1)!r} does not exist on {host}"
    elif "no pg_hba.conf entry" in low:
        cause = f"{host} does not accept this user/database from this machine (pg_hba.conf)"
    elif "connection refused" in low:
        cause = (
            f"connection refused by {host}: no database server listens there "
            "(is PostgreSQL running? is the port right?)"
        )
    elif (
        "could not translate host name" in low
        or "name or service not known" in low
        or "temporary failure in name resolution" in low
    ):
        cause = f"unknown host in {host}: the name does not resolve"
    elif any(s in low for s in _UNREACHABLE):
        cause = f"{host} is unreachable (no answer within {CONNECT_TIMEOUT_S} s)"
    elif (
        re.search(r'relation "[^"]+" does not exist', text)
        or "no such table" in low
        or getattr(_root(chain), "pgcode", None) == "42P01"
    ):
        cause = f"no hyperscan/Optuna schema in this database; {_SCHEMA_HINT}"
    elif match := re.search(r"permission denied for [^\n]*", text, flags=re.IGNORECASE):
        cause = f"the database user lacks a privilege: {match.group(0)}"
    elif "unable to open database file" in low:
        cause = "cannot open the SQLite file (its folder is missing or not writable)"
    elif "invalid log format" in low or any(
        type(item).__name__ == "JSONDecodeError" for item in chain
    ):
        cause = "the journal file is damaged or is not an Optuna journal (a line is not JSON)"
    elif "no longer compatible with the table schema" in low:
        cause = _first_line(next(i for i in chain if "compatible" in str(i)))
    elif match := re.search(r"invalid literal for int\(\) with base 10: '([^']*)'", text):
        cause = f"the port {match.group(1)!r} is not a number"
    else:
        root = _root(chain)
        cause = f"{type(root).__name__}: {_first_line(root)}"
    return StorageError(cause, url)


@contextmanager
def _errors_described(url: str) -> Iterator[None]:
    try:
        yield
    except StorageError:
        raise
    except Exception as exc:
        raise describe_error(exc, url) from exc


# --------------------------------------------------------------------------- journal


class _NamedHeartbeats:
    """Heartbeat warnings that name the trial by the number `study status` shows for it.

    Trial ids are shared by all studies of a database and mean nothing to users; the number is
    looked up once per trial, while the storage answers, for the warning written when it does
    not.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._trial_numbers: dict[int, int] = {}
        super().__init__(*args, **kwargs)

    def _heartbeat_recorded(self, trial_id: int) -> None:
        if trial_id not in self._trial_numbers:
            with suppress(Exception):
                number = self.get_trial_number_from_id(trial_id)  # type: ignore[attr-defined]
                self._trial_numbers[trial_id] = number

    def _heartbeat_failed(self, trial_id: int, error: str) -> None:
        number = self._trial_numbers.get(trial_id)
        trial = f"trial {number}" if number is not None else f"the trial of id {trial_id}"
        _logger.warning("could not record the heartbeat of %s: %s", trial, error)


class HeartbeatJournalStorage(_NamedHeartbeats, JournalStorage, BaseHeartbeat):
    """Optuna's journal file storage with the heartbeat Optuna only gives RDB storages.

    A heartbeat is the mtime of ``<journal>.heartbeats/<trial_id>``, refreshed by the thread
    ``study.optimize`` runs next to each trial: the journal itself gets no extra writes. A RUNNING
    trial is stale when its heartbeat is older than ``grace_period``, or, with no heartbeat file,
    when it started longer ago than that (a worker killed before its first beat, or an ask/tell
    client, which has no heartbeat at all). Mtimes and start times use the clocks of the machine
    and file system holding the journal: keep the journal on a local disk.
    """

    def __init__(
        self,
        path: str,
        *,
        heartbeat_interval: int,
        grace_period: int,
        heartbeat_stale_trial_callback: StaleTrialCallback | None = None,
    ) -> None:
        _check_heartbeat(heartbeat_interval, grace_period)
        self._path = os.path.abspath(path)
        self._heartbeat_dir = self._path + HEARTBEAT_SUFFIX
        self._heartbeat_interval = heartbeat_interval
        self._grace_period = grace_period
        self._stale_callback = heartbeat_stale_trial_callback
        self._hyperscan_url = _journal_url(self._path)
        # The heartbeat folder appears with the first beat (record_heartbeat), so readers such
        # as `study status` leave nothing next to the journal.
        super().__init__(JournalFileBackend(self._path))

    @property
    def path(self) -> str:
        """The journal file."""
        return self._path

    @property
    def heartbeat_dir(self) -> str:
        """The sidecar folder holding one heartbeat file per running trial."""
        return self._heartbeat_dir

    def _heartbeat_file(self, trial_id: int) -> str:
        return os.path.join(self._heartbeat_dir, str(trial_id))

    def record_heartbeat(self, trial_id: int) -> None:
        """Touch the trial's heartbeat file (one atomic utime, or create it)."""
        path = self._heartbeat_file(trial_id)
        try:
            try:
                os.utime(path)
            except FileNotFoundError:
                # exist_ok: the folder may appear concurrently (16 workers at once).
                os.makedirs(self._heartbeat_dir, exist_ok=True)
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o644))
        except OSError as exc:
            # Keep the heartbeat thread alive through a transient file-system error: if it died,
            # the trial would be failed as stale although its worker is still training.
            self._heartbeat_failed(trial_id, str(exc))
        else:
            self._heartbeat_recorded(trial_id)

    def _get_stale_trial_ids(self, study_id: int) -> list[int]:
        now = time.time()
        stale = []
        running = self.get_all_trials(study_id, deepcopy=False, states=(TrialState.RUNNING,))
        for trial in running:
            try:
                beat = os.stat(self._heartbeat_file(trial._trial_id)).st_mtime
            except FileNotFoundError:
                if trial.datetime_start is None:
                    continue
                beat = trial.datetime_start.timestamp()  # naive local time, as the journal keeps
            if now - beat > self._grace_period:
                stale.append(trial._trial_id)
        return stale

    def get_heartbeat_interval(self) -> int:
        return self._heartbeat_interval

    def get_heartbeat_stale_trial_callback(self) -> StaleTrialCallback | None:
        return self._stale_callback

    def set_trial_state_values(
        self, trial_id: int, state: TrialState, values: Sequence[float] | None = None
    ) -> bool:
        """As Optuna's, and a finished trial's heartbeat file is removed."""
        updated = super().set_trial_state_values(trial_id, state, values)
        if state.is_finished():
            # It may never have beaten, or another process removed it already.
            with suppress(OSError):
                os.unlink(self._heartbeat_file(trial_id))
        return updated


def _check_journal(path: str, url: str) -> None:
    """Refuse a file that is not a journal before anything is appended to it."""
    if not os.path.isfile(path):
        return  # a folder or a missing file: the open below says what is wrong
    with open(path, "rb") as file:
        first = file.readline(1 << 20)
    if not first:
        return  # empty: a journal nobody has written yet
    if first.startswith(b"SQLite format 3\x00"):
        raise StorageError(f"{path} is an SQLite database: give it as sqlite:///{path}", url)
    try:
        record = json.loads(first)
    except ValueError:
        record = None
    if not isinstance(record, dict) or "op_code" not in record:
        raise StorageError(
            f"{path} is not a journal file (its first line is not a journal record); give the "
            "study's journal, or a new path",
            url,
        )
    _check_journal_tail(path, url)


def _ends_in_newline(path: str) -> bool:
    with open(path, "rb") as file:
        file.seek(-1, os.SEEK_END)
        return file.read(1) == b"\n"


def _last_line_end(path: str, block: int = 1 << 16) -> int:
    """The offset just past the file's last newline (0 if none), read backwards by blocks."""
    with open(path, "rb") as file:
        end = file.seek(0, os.SEEK_END)
        while end > 0:
            start = max(0, end - block)
            file.seek(start)
            found = file.read(end - start).rfind(b"\n")
            if found >= 0:
                return start + found + 1
            end = start
    return 0


def _check_journal_tail(path: str, url: str) -> None:
    """Refuse a journal whose last record was cut short (a full disk, a crash mid-write).

    Optuna skips such a line when reading, but the next record appended to it would merge
    with it into one line that no reader can parse, and the whole study would be lost. Optuna
    writes whole lines under its lock, so a tail seen without a newline is checked again under
    that lock: only then is it not another process's write in flight.
    """
    if _ends_in_newline(path):
        return
    lock = JournalFileSymlinkLock(path)
    lock.acquire()
    try:
        if _ends_in_newline(path):
            return
        size, whole = os.path.getsize(path), _last_line_end(path)
    finally:
        lock.release()
    raise StorageError(
        f"{path} ends in an incomplete record ({size - whole} bytes after its last "
        "full line: a write cut short by a full disk or a crash). Appending to it would make "
        f"the journal unreadable. Keep a copy, then cut the incomplete record off with "
        f"`truncate -s {whole} {shlex.quote(path)}`: the records before it are intact",
        url,
    )


def _open_journal(
    url: str, *, create: bool, heartbeat_interval: int, grace_period: int, callback: Any
) -> HeartbeatJournalStorage:
    path = _journal_path(url)
    if create:
        os.makedirs(os.path.dirname(path), exist_ok=True)
    elif not os.path.exists(path):
        raise StorageError(
            f"no journal file {path}; {_SCHEMA_HINT}, or pass the right --storage / ${STORAGE_ENV}",
            url,
        )
    if os.path.exists(path) and not (os.path.isfile(path) or os.path.isdir(path)):
        # a device or a pipe: appending to a FIFO would wait for a reader forever
        raise StorageError(f"{path} is not a regular file, as a journal must be", url)
    _check_journal(path, url)
    # Append mode creates nothing but a missing file and tells early whether we may write.
    with open(path, "ab"):
        pass
    return HeartbeatJournalStorage(
        path,
        heartbeat_interval=heartbeat_interval,
        grace_period=grace_period,
        heartbeat_stale_trial_callback=callback,
    )


# --------------------------------------------------------------------------- RDB


class _RDBStorage(_NamedHeartbeats, RDBStorage):
    """RDBStorage whose heartbeat thread survives a transient database error.

    Optuna's thread dies on the first failed heartbeat write (a server restart, a dropped
    connection), after which the live trial is failed as stale by the other workers.
    """

    _hyperscan_url: str

    def record_heartbeat(self, trial_id: int) -> None:
        try:
            super().record_heartbeat(trial_id)
        except Exception as exc:
            self._heartbeat_failed(trial_id, describe_error(exc, self._hyperscan_url))
        else:
            self._heartbeat_recorded(trial_id)


def _engine_kwargs(url: str) -> dict[str, Any]:
    if url.startswith(_PG_PREFIX):
        return {
            "pool_pre_ping": True,
            # A worker uses one connection for the trial loop and one for the heartbeat thread.
            "pool_size": 2,
            "max_overflow": 2,
            "connect_args": {
                "connect_timeout": CONNECT_TIMEOUT_S,
                "application_name": "hyperscan",
                # A server or link that vanishes without closing the connection ends a wait
                # on it after ~1 min instead of leaving the worker blocked for hours.
                "keepalives": 1,
                "keepalives_idle": 30,
                "keepalives_interval": 10,
                "keepalives_count": 3,
                "tcp_user_timeout": 60_000,
            },
        }
    return {"pool_pre_ping": True}


@contextmanager
def _schema_guard(url: str, connect_args: dict[str, Any], create: bool) -> Iterator[None]:
    """Check the schema exists (workers), or hold a lock while creating it (``study create``).

    On PostgreSQL a session advisory lock serialises creators, so even concurrent creators do
    not race in CREATE TABLE / the version stamp (the crash seen with 32 racing workers).
    """
    parsed = sqlalchemy.engine.make_url(url)
    # resolve_url refused in-memory SQLite: a database here names a file.
    if parsed.get_backend_name() == "sqlite":
        if create:  # its folders, as for a journal file
            os.makedirs(os.path.dirname(os.path.abspath(parsed.database)), exist_ok=True)
        elif not os.path.exists(parsed.database):
            raise StorageError(f"no SQLite file {parsed.database}; {_SCHEMA_HINT}", url)
    engine = sqlalchemy.create_engine(
        url, poolclass=sqlalchemy.pool.NullPool, connect_args=connect_args
    )
    try:
        with engine.connect() as connection:
            locked = create and connection.dialect.name == "postgresql"
            if locked:
                connection.execute(
                    sqlalchemy.text("SELECT pg_advisory_lock(:key)"), {"key": _SCHEMA_LOCK_KEY}
                )
                connection.commit()
            elif not create and not sqlalchemy.inspect(connection).has_table("studies"):
                raise StorageError(f"no hyperscan/Optuna schema in this database; {_SCHEMA_HINT}")
            try:
                yield
            finally:
                if locked:
                    connection.execute(
                        sqlalchemy.text("SELECT pg_advisory_unlock(:key)"),
                        {"key": _SCHEMA_LOCK_KEY},
                    )
                    connection.commit()
    finally:
        engine.dispose()


def _open_rdb(
    url: str, *, create: bool, heartbeat_interval: int, grace_period: int, callback: Any
) -> _RDBStorage:
    _check_heartbeat(heartbeat_interval, grace_period)
    engine_kwargs = _engine_kwargs(url)
    try:
        with _schema_guard(url, engine_kwargs.get("connect_args", {}), create):
            storage = _RDBStorage(
                url,
                engine_kwargs=engine_kwargs,
                heartbeat_interval=heartbeat_interval,
                grace_period=grace_period,
                heartbeat_stale_trial_callback=callback,
                skip_table_creation=not create,
            )
    except StorageError as exc:
        if exc.url is None:
            raise StorageError(exc.cause, url) from exc
        raise
    storage._hyperscan_url = url
    return storage


# --------------------------------------------------------------------------- public API


class _RequeueStaleTrials(RetryHeartbeatStaleTrialCallback):
    """Optuna's re-queue of a trial whose heartbeat stopped, said in the log of the worker
    that does it: otherwise the trial just turns FAIL and its copy runs, unexplained."""

    def __call__(
        self,
        study: optuna.Study,
        trial: FrozenTrial,
        why: str = "sent no heartbeat for the grace period",
    ) -> None:
        super().__call__(study, trial)
        retries = len(trial.system_attrs.get("retry_history", [])) + 1
        requeued = self._max_retry is None or retries <= self._max_retry
        _logger.warning(
            "trial %d (worker %s) %s: failed, %s",
            trial.number,
            trial.user_attrs.get(WORKER_ATTR, "?"),
            why,
            "re-queued" if requeued else f"not re-queued (retried {retries - 1} times already)",
        )


def _check_heartbeat(heartbeat_interval: int, grace_period: int) -> None:
    """Options, not the storage: a StorageError without a URL, so the message names neither."""
    if heartbeat_interval <= 0 or grace_period <= 0:
        raise StorageError("heartbeat_interval and grace_period must be positive (seconds)")
    if grace_period <= heartbeat_interval:
        raise StorageError(
            f"grace_period ({grace_period} s) must exceed heartbeat_interval "
            f"({heartbeat_interval} s), or live trials would be failed as stale"
        )


def open_storage(
    url: str | None = None,
    *,
    create: bool = False,
    heartbeat_interval: int = 60,
    grace_period: int = 600,
    max_retry: int = 3,
) -> BaseStorage:
    """Open the storage at ``url`` (see :func:`resolve_url`) with heartbeats and retries.

    ``create=False`` (workers, readers) never creates a journal file or database tables and
    says so when they are missing; ``create=True`` is for ``hyperscan study create``. A trial
    whose heartbeat stops for ``grace_period`` seconds is failed and re-queued with the same
    parameters, at most ``max_retry`` times, by the next worker that asks for a trial.
    """
    resolved = resolve_url(url)
    with warnings.catch_warnings():
        # Heartbeats and the retry callback are "experimental" in Optuna 5; we rely on them.
        warnings.simplefilter("ignore", ExperimentalWarning)
        callback = _RequeueStaleTrials(max_retry=max_retry)
        options = {
            "create": create,
            "heartbeat_interval": heartbeat_interval,
            "grace_period": grace_period,
            "callback": callback,
        }
        with _errors_described(resolved):
            if resolved.startswith(JOURNAL_PREFIX):
                return _open_journal(resolved, **options)
            return _open_rdb(resolved, **options)


def stale_trial_ids(study: optuna.Study) -> list[int]:
    """The RUNNING trials whose heartbeat stopped for the grace period: their worker is lost."""
    storage = study._storage
    if not isinstance(storage, BaseHeartbeat) or not is_heartbeat_enabled(storage):
        return []
    return list(storage._get_stale_trial_ids(study._study_id))


def fail_stale_trials(
    study: optuna.Study, *, requeue: bool, why_not: str = "the budget is spent"
) -> None:
    """Fail the RUNNING trials whose heartbeat stopped (their worker died); re-queue them only
    if the budget still needs them, else a queued copy would wait for a worker that never comes.

    Optuna does this only when a worker asks for a trial: once the budget is spent nobody asks,
    and the trial would stay RUNNING for ever (and `study copy` refuse the study). ``why_not``
    tells the log why a failed trial is not re-queued.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        if requeue:
            optuna.storages.fail_stale_trials(study)
            return
    storage = study._storage
    for trial_id in stale_trial_ids(study):
        with suppress(optuna.exceptions.UpdateFinishedTrialError):  # another process did it
            if storage.set_trial_state_values(trial_id, state=TrialState.FAIL):
                trial = storage.get_trial(trial_id)
                _logger.warning(
                    "trial %d (worker %s) sent no heartbeat for the grace period: failed, "
                    "not re-queued (%s)",
                    trial.number,
                    trial.user_attrs.get(WORKER_ATTR, "?"),
                    why_not,
                )


def requeue_cut_short(study: optuna.Study, trial_id: int) -> None:
    """Re-queue at once a trial a storage outage cut short: its worker knows it is lost, so it
    need not wait for the grace period. Still RUNNING (its result could not be written), it is
    failed first; FAIL already (Optuna failed it on the error), it is queued unless a copy is."""
    storage = study._storage
    trial = storage.get_trial(trial_id)
    if trial.state == TrialState.RUNNING:
        try:
            if not storage.set_trial_state_values(trial_id, state=TrialState.FAIL):
                return
        except optuna.exceptions.UpdateFinishedTrialError:
            return  # it ended after all, or another worker failed it as stale
        trial = storage.get_trial(trial_id)
    elif trial.state != TrialState.FAIL or any(
        t.system_attrs.get("retry_history", [])[-1:] == [trial.number]
        for t in study.get_trials(deepcopy=False)
    ):
        return
    callback = storage.get_heartbeat_stale_trial_callback()
    if isinstance(callback, _RequeueStaleTrials):
        callback(study, trial, why="was cut short by a storage error")


def study_names(storage: BaseStorage) -> list[str]:
    """Names of the studies in ``storage``, in creation order."""
    with _errors_described(storage_url(storage)):
        return [study.study_name for study in storage.get_all_studies()]


def load_study(
    storage: BaseStorage,
    name: str,
    *,
    sampler: optuna.samplers.BaseSampler | None = None,
    pruner: optuna.pruners.BasePruner | None = None,
) -> optuna.Study:
    """Load study ``name``; an unknown name lists the studies that do exist."""
    url = storage_url(storage)
    with _errors_described(url):
        try:
            return optuna.load_study(
                study_name=name, storage=storage, sampler=sampler, pruner=pruner
            )
        except KeyError:
            existing = ", ".join(study_names(storage)) or "(none)"
            raise StorageError(f"no study named {name!r} in {url}; existing: {existing}") from None
