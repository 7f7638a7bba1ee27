"""Optuna's INFO lines ("A new study created ...", "Skipped telling trial ...") left out of
hyperscan's own calls, as the command line leaves them out: the calls return what happened,
and a worker logs its trials itself."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import optuna


@contextmanager
def quiet_optuna() -> Iterator[None]:
    """Optuna's log at WARNING (or quieter, as the caller set it) for the duration; its level
    as it was afterwards, for the caller's own studies."""
    before = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(max(before, optuna.logging.WARNING))
    try:
        yield
    finally:
        optuna.logging.set_verbosity(before)
