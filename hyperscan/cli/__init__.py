"""The `hyperscan` command line (thin: parsing, messages, exit codes)."""

from hyperscan._tensorflow import configure_tensorflow
from hyperscan.cli._main import main

__all__ = ["configure_tensorflow", "main"]
