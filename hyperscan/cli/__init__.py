"""The `hyperscan` command line (thin: parsing, messages, exit codes)."""

from hyperscan.cli._main import main

__all__ = ["main"]
