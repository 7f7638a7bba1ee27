# SPDX-License-Identifier: GPL-3.0-or-later
"""PostgreSQL (and SQLite) through Optuna's RDBStorage: connections that fail fast and notice
a vanished server, a heartbeat that survives a dropped connection, and the schema created
once, under a lock (31 of 32 workers racing to create it on a fresh server crashed)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy
import sqlalchemy.orm
from optuna.storages import RDBStorage
from optuna.trial import FrozenTrial

from hyperscan.scan.storage._constants import NO_SCHEMA, PG_PREFIX, SCHEMA_HINT
from hyperscan.scan.storage._errors import describe_error, note_reached
from hyperscan.scan.storage._exceptions import NoSchemaError, StorageError
from hyperscan.scan.storage._heartbeat import NamedHeartbeats, check_heartbeat
from hyperscan.scan.storage._retry import RecordingRetries
from hyperscan.scan.storage._take import Counted, GatedTakes, marked_new_trial
from hyperscan.scan.storage._timeout import database_timeout, limit_waits, pg_connect_args

# Any constants work; they only have to be the same for every hyperscan process.
_SCHEMA_LOCK_KEY = 0x68797065  # "hype"
_TAKE_LOCK_KEY = 0x74616B65  # "take", with the study's id as the second key
# The share of $HYPERSCAN_DB_TIMEOUT a take waits for the budget's lock.
_LOCK_WAIT_SHARE = 0.9


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
        are counted and one is created or queued, all in the lock's own transaction: the
        thread's Optuna sessions join it (as savepoints) until it commits, and the lock goes
        with it if the worker dies.

        One connection per take, and the lock waited for in the server's queue, in order:
        when the trial was created on a second connection, the takers waiting for the lock
        behind PgBouncer's transaction pooling took every server connection while the holder
        waited for one (6 simulated workers of 2 slots behind a pool of 3 stalled until their
        60-s timeout), and tried with backoff instead, the lock went to newer takers (the p95
        of 50 contended workers' asks tripled, docs/performance.md). The wait is limited by
        ``lock_timeout``, which PgBouncer passes on, unlike the connection's
        ``statement_timeout``."""
        count = sqlalchemy.text(
            "SELECT state, count(*) FROM trials WHERE study_id = :study GROUP BY state"
        )
        with self.engine.connect() as connection, connection.begin():
            if connection.dialect.name != "postgresql":
                yield Counted.of(dict(connection.execute(count, {"study": study_id}).all()))
                return
            # Below the client's own deadline for the statement, so that the server's answer,
            # which names the lock, comes first.
            wait_ms = max(1, round(_LOCK_WAIT_SHARE * database_timeout() * 1000))
            connection.execute(sqlalchemy.text(f"SET LOCAL lock_timeout = {wait_ms}"))
            connection.execute(
                sqlalchemy.text("SELECT pg_advisory_xact_lock(:key, :study)"),
                {"key": _TAKE_LOCK_KEY, "study": study_id},
            )
            counted = Counted.of(dict(connection.execute(count, {"study": study_id}).all()))
            with self._sessions_joining(connection):
                yield counted

    @contextmanager
    def _sessions_joining(self, connection: sqlalchemy.Connection) -> Iterator[None]:
        """This thread's Optuna sessions on ``connection``, each commit a savepoint of its
        transaction; the thread's own session back afterwards."""
        registry = self.scoped_session.registry
        own = registry() if registry.has() else None
        registry.set(
            sqlalchemy.orm.Session(bind=connection, join_transaction_mode="create_savepoint")
        )
        try:
            yield
        finally:
            registry().close()
            if own is None:
                registry.clear()
            else:
                registry.set(own)

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
    note_reached(url)  # the schema checked or created: its host resolved
    return storage
