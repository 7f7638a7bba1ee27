"""File modes for outputs written beside their place and renamed into it."""

from __future__ import annotations

import os


def umask() -> int:
    """The process's umask: temporary files are created private (0600, 0700), and outputs
    get the modes a plain ``open`` would have given them. Reading it means setting it."""
    mask = os.umask(0)
    os.umask(mask)
    return mask
