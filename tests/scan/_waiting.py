"""Polling for conditions that other processes make true."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest


def wait_for(
    predicate: Callable[[], Any],
    timeout: float,
    what: str,
    context: Callable[[], str] | None = None,
) -> Any:
    """The predicate's first truthy result; the test fails after `timeout` seconds, with what
    `context` then says (the workers' logs, say), since a timeout alone explains nothing."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(0.05)
    seen = f"\n{context()}" if context else ""
    pytest.fail(f"timed out after {timeout} s waiting for {what}{seen}")
