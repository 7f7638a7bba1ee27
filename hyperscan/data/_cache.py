# SPDX-License-Identifier: GPL-3.0-or-later
"""Entries of the data layer's on-disk caches (parsed commondata, converted FK tables)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np


def store_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write a cache entry atomically (a reader never sees half a file); a read-only cache is
    skipped, as the cache only saves time."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
        os.replace(tmp, path)
        tmp = None
    except OSError:
        pass
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
