# SPDX-License-Identifier: GPL-3.0-or-later
"""Fixtures of the report tests: a synthetic study."""

from __future__ import annotations

import pytest
from _studies import build_study, mixed_states


@pytest.fixture(scope="session")
def scan_storage(tmp_path_factory) -> str:
    """A study named 'synthetic' with 30 trials of every state."""
    path = tmp_path_factory.mktemp("study") / "hyperscan.journal"
    return build_study(path, "synthetic", mixed_states())
