"""File modes for outputs written beside their place and renamed into it; where caches live."""

from __future__ import annotations

import os
from pathlib import Path


def umask() -> int:
    """The process's umask: temporary files are created private (0600, 0700), and outputs
    get the modes a plain ``open`` would have given them. Reading it means setting it."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/hyperscan`` (default ``~/.cache/hyperscan``). A relative
    XDG_CACHE_HOME is ignored, as XDG says: it would put a cache in each working folder."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".cache"
    return root / "hyperscan"
