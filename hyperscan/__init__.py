"""hyperscan: hyperparameter scans of batched neural-network PDF fits.

The Python API (docs/api.md) is here, loaded on first use so that ``import hyperscan`` stays
light (no TensorFlow, no Optuna): :func:`create_study`, :func:`open_study`,
:func:`list_studies` and :func:`run_scan` from :mod:`hyperscan.scan`, :func:`fit_runcard` from
:mod:`hyperscan.fit`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hyperscan._version import __version__
    from hyperscan.fit import fit_runcard
    from hyperscan.scan import create_study, list_studies, open_study, run_scan

#: The API's names and the package each comes from.
_API = {
    "__version__": "hyperscan._version",
    "create_study": "hyperscan.scan",
    "open_study": "hyperscan.scan",
    "list_studies": "hyperscan.scan",
    "run_scan": "hyperscan.scan",
    "fit_runcard": "hyperscan.fit",
}

__all__ = [
    "__version__",
    "create_study",
    "fit_runcard",
    "list_studies",
    "open_study",
    "run_scan",
]


def __getattr__(name: str) -> Any:
    if name in _API:
        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})
