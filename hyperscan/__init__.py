"""hyperscan: hyperparameter scans of batched neural-network PDF fits."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("hyperscan")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+unknown"
