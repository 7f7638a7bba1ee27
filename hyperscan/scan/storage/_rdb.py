# SPDX-License-Identifier: GPL-3.0-or-later
"""PostgreSQL (and SQLite) through Optuna's RDBStorage: connections that fail fast and notice
a vanished server, a heartbeat that survives a dropped connection, and the schema created
once, under a lock (31 of 32 workers racing to create it on a fresh server crashed)."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy
from optuna.storages import RDBStorage
from optuna.trial import FrozenTrial

from hyperscan.scan.storage._constants import NO_SCHEMA, PG_PREFIX, SCHEMA_HINT
from hyperscan.scan.storage._errors import describe_error
from hyperscan.scan.storage._exceptions import NoSchemaError, StorageError
from hyperscan.scan.storage._heartbeat import NamedHeartbeats, check_heartbeat
from hyperscan.scan.storage._retry import RecordingRetries
from hyperscan.scan.storage._take import Counted, GatedTakes, marked_new_trial
from hyperscan.scan.storage._timeout import database_timeout, limit_waits, pg_connect_args

# Any constants work; they only have to be the same for every hyperscan process.
_SCHEMA_LOCK_KEY = 0x68797065  # "hype"
_TAKE_LOCK_KEY = 0x74616B65  # "take", with the study's id as the second key
# The budget lock's tries: held about 4 ms uncontended (docs/deployment.md).
_FIRST_TRY_S, _LAST_TRY_S = 0.002, 0.05


# The budget's lock not had within $HYPERSCAN_DB_TIMEOUT, told as the statement timeout that a
# blocking wait for it met before: a transient error, waited out.
_LOCK_TIMEOUT = "canceling statement due to statement timeout (waiting for the budget's lock)"


class _RDBStorage(RecordingRetries, GatedTakes, NamedHeartbeats, RDBStorage):
    """RDBStorage whose heartbeat thread survives a transient database error, whose finished
    trials wait out an outage (:class:`RecordingRetries`), and whose takes keep the budget
    (:class:`GatedTakes`).

    Optuna's thread dies on the first failed heartbeat write (a server restart, a dropped
    connection), after which the live trial is failed as stale by the other workers.
    """

    _hyperscan_url: str

    @contextmanager
    def _counted(self, study_id: int) -> Iterator[Counted]:
        """On PostgreSQL, a transaction-level advisory lock per study, held while the trials
        are counted and one is created or queued (its commit comes first, on another
        connection); it goes with the transaction if the worker dies.

        The lock is tried, not waited for: a transaction waiting for it holds its connection,
        and behind PgBouncer's transaction pooling the takers waiting took every server
        connection while the holder waited for one to create its trial (6 simulated workers
        of 2 slots behind a pool of 3 stalled until their 60-s timeout; waits of 250 ms at a
        time, in the server's queue, cut their rate to a quarter). Tries back off from 2 to
        50 ms, for at most ``$HYPERSCAN_DB_TIMEOUT``."""
        count = sqlalchemy.text(
            "SELECT state, count(*) FROM trials WHERE study_id = :study GROUP BY state"
        )
        lock = sqlalchemy.text("SELECT pg_try_advisory_xact_lock(:key, :study)")
        deadline = time.monotonic() + database_timeout()
        delay = _FIRST_TRY_S
        with self.engine.connect() as connection:
            postgres = connection.dialect.name == "postgresql"
            while True:
                with connection.begin():
                    if (
                        not postgres
                        or connection.execute(
                            lock, {"key": _TAKE_LOCK_KEY, "study": study_id}
                        ).scalar_one()
                    ):
                        yield Counted.of(dict(connection.execute(count, {"study": study_id}).all()))
                        return
                if time.monotonic() > deadline:
                    raise sqlalchemy.exc.OperationalError(
                        "SELECT pg_try_advisory_xact_lock", {}, Exception(_LOCK_TIMEOUT)
                    )
                time.sleep(delay * random.uniform(0.5, 1.5))  # takers out of step
                delay = min(2 * delay, _LAST_TRY_S)

    def _create_new_trial(
        self, study_id: int, template_trial: FrozenTrial | None = None
    ) -> FrozenTrial:
        # Optuna's ask creates a trial without a template; enqueue_trial (a retry) with one.
        create = super()._create_new_trial
        if template_trial is not None:
            return create(study_id, template_trial)
        # Marked with the ask's token: if the database goes down as it commits, the worker
        # finds the trial it may have created, to give it back.
        return self._created(
            lambda token: self._take(
                study_id,
                lambda: create(study_id, None if token is None else marked_new_trial(token)),
                new=True,
            )
        )

    def _get_stale_trial_ids(self, study_id: int) -> list[int]:
        """As Optuna's, and, as the journal does, a RUNNING trial that never beat and started
        more than the grace period ago: its worker died between its ask and its first beat,
        or lost the ask's answer (Optuna leaves such a trial RUNNING for ever)."""
        stale = super()._get_stale_trial_ids(study_id)
        never_beat = sqlalchemy.text(
            "SELECT t.trial_id FROM trials t"
            " LEFT JOIN trial_heartbeats h ON h.trial_id = t.trial_id"
            " WHERE t.study_id = :study AND t.state = 'RUNNING' AND h.trial_id IS NULL"
            " AND t.datetime_start < :started"
        )
        # Optuna writes datetime_start in the worker's local time, naive.
        started = datetime.now() - timedelta(seconds=self.grace_period)
        with self.engine.connect() as connection:
            rows = connection.execute(never_beat, {"study": study_id, "started": started})
            return stale + [row[0] for row in rows if row[0] not in stale]

    def record_heartbeat(self, trial_id: int) -> None:
        try:
            super().record_heartbeat(trial_id)
        except Exception as exc:
            self._heartbeat_failed(trial_id, describe_error(exc, self._hyperscan_url))
        else:
            self._heartbeat_recorded(trial_id)


def _engine_kwargs(url: str) -> dict[str, Any]:
    if url.startswith(PG_PREFIX):
        return {
            "pool_pre_ping": True,
            # A worker uses one connection for the trial loop and one for the heartbeat thread.
            "pool_size": 2,
            "max_overflow": 2,
            "connect_args": pg_connect_args(),
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
            raise StorageError(f"no SQLite file {parsed.database}; {SCHEMA_HINT}", url)
    engine = sqlalchemy.create_engine(
        url, poolclass=sqlalchemy.pool.NullPool, connect_args=connect_args
    )
    try:
        if not create:
            with engine.connect() as connection:
                if not sqlalchemy.inspect(connection).has_table("studies"):
                    raise NoSchemaError(NO_SCHEMA)
            # Closed before the storage opens its own: behind PgBouncer's transaction pooling,
            # a check left open held a server connection per starting worker (6 workers
            # behind a pool of 3 each held one and waited for another, until their timeout).
            yield
            return
        with engine.connect() as connection:
            locked = connection.dialect.name == "postgresql"
            if locked:
                connection.execute(
                    sqlalchemy.text("SELECT pg_advisory_lock(:key)"), {"key": _SCHEMA_LOCK_KEY}
                )
                connection.commit()
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


def _check_schema_version(storage: RDBStorage) -> None:
    """Optuna's check that the schema is its version's, without its one flaw: it holds a
    transaction open while it opens another connection, so that behind PgBouncer's
    transaction pooling each starting worker held a server connection and waited for a second
    (6 workers behind a pool of 3 stalled until their timeout). On a mismatch, Optuna's own
    check says what to do."""
    manager = storage._version_manager
    if manager.get_current_version() != manager.get_head_version():
        manager.check_table_schema_compatibility()


def open_rdb(
    url: str, *, create: bool, heartbeat_interval: int, grace_period: int, callback: Any
) -> _RDBStorage:
    """The database of a canonical SQLAlchemy URL (see :func:`open_storage`)."""
    check_heartbeat(heartbeat_interval, grace_period)
    engine_kwargs = _engine_kwargs(url)
    if url.startswith(PG_PREFIX):
        limit_waits(database_timeout())
    try:
        with _schema_guard(url, engine_kwargs.get("connect_args", {}), create):
            storage = _RDBStorage(
                url,
                engine_kwargs=engine_kwargs,
                heartbeat_interval=heartbeat_interval,
                grace_period=grace_period,
                heartbeat_stale_trial_callback=callback,
                skip_table_creation=not create,
                skip_compatibility_check=True,  # checked below, one connection at a time
            )
            _check_schema_version(storage)
    except StorageError as exc:
        if exc.url is None:
            raise type(exc)(exc.cause, url) from exc
        raise
    storage._hyperscan_url = url
    return storage
