"""A progress bar fed by the trainer's host syncs (every K steps, never per step)."""

from __future__ import annotations

import numpy as np
from tqdm import tqdm

from hyperscan.fit._trainer import RUNNING, SyncReport
from hyperscan.model import VALIDATION


class ProgressBar:
    """Epoch, members still running, median and worst validation χ² per point of the current
    weights (a stopped member's kept best weights may be worse: results.json has those)."""

    def __init__(self, epochs: int, members: int, enabled: bool = True) -> None:
        self._bar = tqdm(total=epochs, unit="epoch", disable=not enabled, dynamic_ncols=True)
        self._members = members

    def __call__(self, report: SyncReport) -> None:
        self._bar.update(report.step - self._bar.n)
        running = report.status == RUNNING
        validation = report.chi2_per_point[:, VALIDATION]
        finite = validation[np.isfinite(validation)]
        self._bar.set_postfix_str(
            f"active {int(running.sum())}/{self._members}"
            + (
                f", val chi2 now: median {np.median(finite):.3f} worst {finite.max():.3f}"
                if finite.size
                else ""
            ),
            refresh=False,
        )

    def close(self) -> None:
        self._bar.close()
