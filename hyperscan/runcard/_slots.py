"""A worker's trial slots: a setting of the worker, not of the study's runcard, checked once
where it comes in (the command line, the API) and trusted past it."""

from __future__ import annotations

from typing import Literal

#: Trials a worker fits at once in one model: a whole number ≥ 1, or "auto" (as many as the
#: device holds).
Slots = int | Literal["auto"]


def checked_slots(value: object) -> Slots:
    """``value`` as slots (an int, a numeric string, or "auto"); ValueError, said for a user,
    if it is none of these."""
    if value == "auto":
        return "auto"
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is neither a whole number of slots nor 'auto'")
    try:
        count = value if isinstance(value, int) else int(str(value))
    except ValueError:
        raise ValueError(f"{value!r} is neither a whole number of slots nor 'auto'") from None
    if count < 1:
        raise ValueError(f"{count}: a worker fits at least 1 trial at a time (or 'auto')")
    return count
