"""hyperscan's version, in a module of its own: every layer reads it, and none should import
the top package (which loads the API of the layers above it)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("hyperscan")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+unknown"
