# SPDX-License-Identifier: GPL-3.0-or-later
"""A limit on every wait for PostgreSQL, so that a hung server or route becomes the usual
retry-with-message path (without it, a 150 s freeze blocked a worker with no line and no
limit).

Three layers, because each misses a case: the server's ``statement_timeout`` (a statement
stuck in the server, e.g. on a lock), TCP keepalives and ``tcp_user_timeout`` (a peer gone
without closing: unacknowledged data or silence), and a client-side deadline on each wait for
an answer (a peer that acknowledges but never answers: a hung proxy, a frozen server process).
The last is psycopg2's wait callback, which runs libpq asynchronously and polls the socket
with a timeout; a connection that reaches it is closed (psycopg2 closes a connection whose
wait failed) and the pool opens a new one.
"""

from __future__ import annotations

import os
import select
import time
from typing import Any

from hyperscan.scan.storage._constants import CONNECT_TIMEOUT_S
from hyperscan.scan.storage._exceptions import StorageError

TIMEOUT_ENV = "HYPERSCAN_DB_TIMEOUT"
"""Environment variable: seconds a worker waits for one answer of the database (default 60)."""
DEFAULT_TIMEOUT_S = 60
APPLICATION_NAME = "hyperscan"
"""libpq's application_name of hyperscan's connections: the ones the limit applies to."""


def database_timeout() -> float:
    """``$HYPERSCAN_DB_TIMEOUT`` in seconds (default 60); StorageError if not a positive
    number."""
    text = os.environ.get(TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_TIMEOUT_S
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not seconds > 0:
        raise StorageError(f"${TIMEOUT_ENV} = {text!r}: give a positive number of seconds")
    return seconds


def timeout_connect_args(seconds: float) -> dict[str, object]:
    """libpq's settings for a limit of ``seconds`` per answer (see the module's docstring)."""
    milliseconds = max(1, round(seconds * 1000))
    return {
        "options": f"-c statement_timeout={milliseconds}",
        "keepalives": 1,
        "keepalives_idle": max(1, round(seconds / 2)),
        "keepalives_interval": max(1, round(seconds / 6)),
        "keepalives_count": 3,
        "tcp_user_timeout": milliseconds,
    }


def pg_connect_args() -> dict[str, object]:
    """libpq's settings of hyperscan's connections to PostgreSQL: a connection that fails in
    seconds, named (:data:`APPLICATION_NAME`), with the limit of ``$HYPERSCAN_DB_TIMEOUT``."""
    return {
        "connect_timeout": CONNECT_TIMEOUT_S,
        "application_name": APPLICATION_NAME,
        # A server or link that hangs ends a wait on it after $HYPERSCAN_DB_TIMEOUT instead
        # of leaving the worker blocked for hours.
        **timeout_connect_args(database_timeout()),
    }


def limit_waits(seconds: float) -> None:
    """Give hyperscan's psycopg2 connections (:data:`APPLICATION_NAME`) a deadline of
    ``seconds`` per answer (``CONNECT_TIMEOUT_S`` while connecting, as libpq's
    connect_timeout, which asynchronous connections ignore). The callback is process-wide,
    other connections wait as before; the last call sets the limit."""
    import psycopg2.extensions  # only a process that opens PostgreSQL pays its import

    global _limit_s
    _limit_s = seconds
    psycopg2.extensions.set_wait_callback(_wait_with_deadline)


_limit_s: float = DEFAULT_TIMEOUT_S


def _wait_with_deadline(connection: Any) -> None:
    """psycopg2's wait for ``connection`` (a psycopg2 connection): within the limit for
    hyperscan's connections, unlimited for any other of the process."""
    import psycopg2.extensions

    connecting = connection.status == psycopg2.extensions.STATUS_SETUP
    limit = min(CONNECT_TIMEOUT_S, _limit_s) if connecting else _limit_s
    ours = f"application_name={APPLICATION_NAME}" in connection.dsn
    deadline = time.monotonic() + limit if ours else float("inf")
    while True:
        state = connection.poll()
        if state == psycopg2.extensions.POLL_OK:
            return
        left = deadline - time.monotonic()
        if left <= 0:
            what = "connecting" if connecting else "to a statement"
            raise psycopg2.OperationalError(
                f"no answer within {limit:g} s ({what}): a hung server or network"
            )
        wait = None if left == float("inf") else left
        if state == psycopg2.extensions.POLL_READ:
            select.select([connection.fileno()], [], [], wait)
        elif state == psycopg2.extensions.POLL_WRITE:
            select.select([], [connection.fileno()], [], wait)
        else:
            raise psycopg2.OperationalError(f"unexpected state from the connection: {state}")
