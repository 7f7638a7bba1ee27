"""Ending a fit at its next sync on SIGINT or SIGTERM, so that what it learnt is kept."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def stop_on_signals(
    stop: threading.Event,
    second_aborts: bool = False,
    announce: Callable[[], None] | None = None,
) -> Iterator[Callable[[], None]]:
    """SIGTERM/SIGINT set `stop`, which the fit's sync callback returns: the fit ends at its next
    sync (at most `training.steps_per_call` steps later) instead of dying mid-step.

    second_aborts: a second signal acts as it would have without this, so a user at a terminal
    can still abort at once. Not for workers: Ctrl-C on `hyperscan scan` reaches them twice,
    as the terminal's SIGINT and the supervisor's SIGTERM.

    announce: called on the first signal, to tell the user it was heard (Python runs the
    handler once the device call in progress returns: at once, or after an XLA compilation).

    Yields `hold`: once called, every signal only sets `stop`, even a second one, for work that
    must not be cut short (writing the results the signal asked to keep).
    """
    handled = (signal.SIGTERM, signal.SIGINT)
    previous = {sig: signal.getsignal(sig) for sig in handled}
    aborts = second_aborts

    def request_stop(signum, frame):
        if announce is not None and not stop.is_set():
            announce()
        stop.set()
        if aborts:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def hold() -> None:
        nonlocal aborts
        aborts = False
        for sig in handled:
            signal.signal(sig, request_stop)

    for sig in handled:
        signal.signal(sig, request_stop)
    try:
        yield hold
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
