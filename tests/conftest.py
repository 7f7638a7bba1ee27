# SPDX-License-Identifier: GPL-3.0-or-later
"""Fixtures shared by the whole test suite."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from typing import NoReturn

import pytest

POSTGRES_ENV = "HYPERSCAN_TEST_POSTGRES"
"""A maintenance database on a server where the user may CREATE DATABASE (trust auth)."""
DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"


def _psycopg2_dsn(url: str) -> str:
    """libpq understands postgresql:// URIs, not SQLAlchemy's driver suffix."""
    return url.replace("postgresql+psycopg2://", "postgresql://", 1)


@pytest.fixture(scope="session", autouse=True)
def private_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Caches (parsed commondata, compiled XLA loops) go to a temporary folder, not ~/.cache."""
    previous = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if previous is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = previous


@pytest.fixture(scope="session")
def skip_or_fail_on_ci() -> Callable[..., NoReturn]:
    """``skip_or_fail_on_ci(message, on_ci=message)``: skip a test whose server, tool or data
    are missing here, but fail it under CI=true, where .ci/run provides them all: a skip there
    would pass a check nobody ran."""

    def skip_or_fail(message: str, on_ci: str | None = None) -> NoReturn:
        __tracebackhide__ = True  # reported at the caller's line
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(on_ci or message)
        pytest.skip(message)

    return skip_or_fail


@pytest.fixture(scope="session")
def postgres_server(skip_or_fail_on_ci: Callable[..., NoReturn]) -> str:
    """URL of the test server's maintenance database; skip (fail on CI) when it is down."""
    import psycopg2

    url = os.environ.get(POSTGRES_ENV, DEFAULT_POSTGRES)
    try:
        psycopg2.connect(_psycopg2_dsn(url), connect_timeout=3).close()
    except psycopg2.OperationalError as exc:
        skip_or_fail_on_ci(
            f"PostgreSQL at {url} is unreachable ({str(exc).strip()}); set {POSTGRES_ENV}"
        )
    return url


@pytest.fixture
def postgres_url(postgres_server: str) -> Iterator[str]:
    """A fresh, empty database for one test (SQLAlchemy URL), dropped afterwards."""
    import psycopg2
    import sqlalchemy
    from psycopg2 import sql

    name = f"hyperscan_test_{uuid.uuid4().hex[:12]}"

    def admin(statement: sql.Composable) -> None:
        connection = psycopg2.connect(_psycopg2_dsn(postgres_server), connect_timeout=3)
        try:
            connection.autocommit = True  # CREATE/DROP DATABASE refuse transactions
            with connection.cursor() as cursor:
                cursor.execute(statement)
        finally:
            connection.close()

    admin(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = sqlalchemy.engine.make_url(postgres_server).set(
        drivername="postgresql+psycopg2", database=name
    )
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        # FORCE ends connections a killed worker or a leaked pool left behind.
        admin(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture(scope="session")
def chromium(skip_or_fail_on_ci: Callable[..., NoReturn]) -> str:
    """Debian's chromium (driven by tests/_chromium.py); skipped where it is missing, except
    under CI=true (a failure)."""
    from _chromium import find_chromium

    path = find_chromium()
    if path is None:
        skip_or_fail_on_ci("chromium is not installed (apt-get install -y chromium)")
    return path
