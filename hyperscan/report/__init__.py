# SPDX-License-Identifier: GPL-3.0-or-later
"""Reports for people: an HTML page per study, PNG plots per fit (matplotlib, no network).

Above ``scan`` and ``fit`` (it reads studies and fit folders), below ``cli``. The fit plots need
only numpy and ``hyperscan.data``; the study report imports Optuna and ``hyperscan.scan``
lazily, so that ``hyperscan plot`` does not pay for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hyperscan.report._fit_plots import FitOutput, FitPlotError, load_fit, plot_fit

if TYPE_CHECKING:
    from hyperscan.report._study import ReportError, study_report

__all__ = ["FitOutput", "FitPlotError", "ReportError", "load_fit", "plot_fit", "study_report"]


def __getattr__(name: str) -> Any:
    if name in ("ReportError", "study_report"):
        from hyperscan.report import _study

        return getattr(_study, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
