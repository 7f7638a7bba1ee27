# SPDX-License-Identifier: GPL-3.0-or-later
"""Fixtures of the scan service's tests: worker processes, and a fresh storage of each kind."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
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
