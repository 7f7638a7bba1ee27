"""The `hyperscan` command line (thin: parsing, messages, exit codes)."""

from hyperscan.cli._main import main
from hyperscan.cli._tensorflow import configure_tensorflow

__all__ = ["configure_tensorflow", "main"]
