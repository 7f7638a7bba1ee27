"""A progress bar fed by the trainer's host syncs (every K steps, never per step)."""

from __future__ import annotations

import sys
import time
from typing import TextIO

import numpy as np
from tqdm import tqdm

from hyperscan.fit._format import RUNNING
from hyperscan.fit._loop import SyncReport
from hyperscan.model import VALIDATION

#: In a batch log (the stream is not a terminal) a bar would pile its redraws onto one line of
#: carriage returns: a plain line at the first sync and then at most this often instead.
LOG_LINE_SECONDS = 60.0


class ProgressBar:
    """Epoch, members still running, and their median and worst validation χ² per point.
    Stopped members are left out: their frozen last weights are not the best ones they keep
    (results.json has those), and would read as a live member gone bad.

    The first device call compiles the loop (seconds): the bar says so, and its clock starts
    at the first sync, so that its rate and time left are the training's."""

    def __init__(
        self, epochs: int, members: int, enabled: bool = True, stream: TextIO | None = None
    ) -> None:
        self._stream = stream if stream is not None else sys.stderr
        self._log = enabled and not self._stream.isatty()
        self._bar = tqdm(
            total=epochs,
            unit="epoch",
            disable=not enabled or self._log,
            dynamic_ncols=True,
            file=self._stream,
        )
        self._bar.set_postfix_str("compiling the training loop")
        self._epochs = epochs
        self._members = members
        self._synced = False
        self._next_line = 0.0

    def __call__(self, report: SyncReport) -> None:
        text = self._state(report)
        if self._log:
            now = time.monotonic()
            if now >= self._next_line:
                print(f"epoch {report.step}/{self._epochs}: {text}", file=self._stream, flush=True)
                self._next_line = now + LOG_LINE_SECONDS
            return
        if not self._synced:  # restart the clock after the compilation, at this sync's step
            self._synced = True
            self._bar.reset()
            self._bar.n = self._bar.last_print_n = report.step
        else:
            self._bar.update(report.step - self._bar.n)
        self._bar.set_postfix_str(text)

    def _state(self, report: SyncReport) -> str:
        running = report.status == RUNNING
        validation = report.chi2_per_point[running, VALIDATION]
        finite = validation[np.isfinite(validation)]
        return f"active {int(running.sum())}/{self._members}" + (
            f", their val chi2: median {np.median(finite):.3f} worst {finite.max():.3f}"
            if finite.size
            else ""
        )

    def close(self) -> None:
        self._bar.close()
