from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest  # noqa: E402
from _cards import tiny_card  # noqa: E402


@pytest.fixture(scope="session")
def make_card():
    return tiny_card
