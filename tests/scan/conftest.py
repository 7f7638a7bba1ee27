# SPDX-License-Identifier: GPL-3.0-or-later
"""Fixtures of the scan service's tests: worker processes, a fresh storage of each kind, and a
PostgreSQL server of a test's own."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NoReturn

import pytest
from _own_postgres import MissingPrerequisite, OwnPostgres
from _service import Worker

from hyperscan.scan.storage import STORAGE_ENV


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Callable[..., Worker]]:
    """Start worker processes; any still running at the end of the test is killed."""
    started: list[Worker] = []

    def start(url: str, study: str, *extra: str, **env: str) -> Worker:
        worker = Worker(tmp_path, len(started), url, study, *extra, **env)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        if worker.process.poll() is None:
            worker.process.kill()
            worker.process.wait()


@pytest.fixture(autouse=True)
def _no_storage_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(STORAGE_ENV, raising=False)


@pytest.fixture(params=["journal", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A storage nobody has used yet: a journal file path, or an empty PostgreSQL database."""
    if request.param == "journal":
        return str(tmp_path / "scan.journal")
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def own_postgres(skip_or_fail_on_ci: Callable[..., NoReturn]) -> Iterator[OwnPostgres]:
    """A PostgreSQL server of the test's own, which it may stop and start (the shared one
    never restarts under other tests); stopped and removed afterwards, whatever happened.
    Skipped where PostgreSQL is not installed, a failure under CI=true."""
    try:
        server = OwnPostgres()
    except MissingPrerequisite as missing:
        skip_or_fail_on_ci(str(missing))
    try:
        yield server
    finally:
        server.close()
