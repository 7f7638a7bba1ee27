"""The progress bar: honest about the compilation in a terminal, plain lines in a batch log."""

from __future__ import annotations

import io

import numpy as np

from hyperscan.fit import ProgressBar
from hyperscan.fit._loop import RUNNING, STOPPED, SyncReport


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _report(step: int, status: tuple[int, ...] = (RUNNING, STOPPED, RUNNING)) -> SyncReport:
    chi2 = np.array([[2.0, 2.5, np.nan], [3.0, 9.0, np.nan], [3.0, 4.0, np.nan]])
    return SyncReport(step, chi2 * 100, chi2, np.array(status))


def test_a_terminal_bar_says_it_compiles_and_starts_its_clock_at_the_first_sync():
    terminal = Terminal()
    bar = ProgressBar(1000, 3, stream=terminal)
    assert "compiling the training loop" in terminal.getvalue()
    bar(_report(100))
    # The first sync's 100 steps are not timed (they include the compilation): no rate yet.
    assert bar._bar.n == 100 and bar._bar.format_dict["rate"] is None
    bar(_report(200))
    assert bar._bar.n == 200
    bar.close()
    assert "active 2/3, their val chi2: median 3.250 worst 4.000" in terminal.getvalue()


def test_a_batch_log_gets_plain_lines_not_carriage_returns():
    log = io.StringIO()
    bar = ProgressBar(1000, 3, stream=log)
    for step in (100, 200, 300):
        bar(_report(step))
    bar.close()
    assert (
        log.getvalue() == "epoch 100/1000: active 2/3, their val chi2: median 3.250 worst 4.000\n"
    )


def test_stopped_members_are_left_out_of_the_live_chi2():
    """A stopped member's frozen weights (its χ² 9.0 above) are not what it keeps; with none
    running, the line gives only the count."""
    log = io.StringIO()
    bar = ProgressBar(1000, 3, stream=log)
    bar(_report(100, status=(STOPPED, STOPPED, STOPPED)))
    bar.close()
    assert log.getvalue() == "epoch 100/1000: active 0/3\n"


def test_no_progress_writes_nothing():
    terminal = Terminal()
    bar = ProgressBar(1000, 3, enabled=False, stream=terminal)
    bar(_report(100))
    bar.close()
    assert terminal.getvalue() == ""
