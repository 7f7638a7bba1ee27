# SPDX-License-Identifier: GPL-3.0-or-later
"""Fixtures of the report tests: a synthetic study, Debian's chromium."""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn

import pytest
from _studies import build_study, mixed_states


@pytest.fixture(scope="session")
def scan_storage(tmp_path_factory) -> str:
    """A study named 'synthetic' with 30 trials of every state."""
    path = tmp_path_factory.mktemp("study") / "hyperscan.journal"
    return build_study(path, "synthetic", mixed_states())


@pytest.fixture(scope="session")
def chromium(skip_or_fail_on_ci: Callable[..., NoReturn]) -> str:
    """Debian's chromium; skipped where it is missing, except under CI=true (a failure)."""
    from _chromium import find_chromium

    path = find_chromium()
    if path is None:
        skip_or_fail_on_ci("chromium is not installed (apt-get install -y chromium)")
    return path
