# SPDX-License-Identifier: GPL-3.0-or-later
"""A trial's endings, row by row: what its worker saw, how it ended, and what the study is
told (scan/_lifecycle.py; docs/architecture.md, "A trial's life")."""

from __future__ import annotations

import pytest
from optuna.trial import TrialState

from hyperscan.scan._lifecycle import ENDINGS, Ending, ending_of

ROWS = [
    # (what the worker saw, ending, state told, fitted again elsewhere)
    ({}, Ending.COMPLETE, TrialState.COMPLETE, False),
    ({"pruned": True}, Ending.PRUNED, TrialState.PRUNED, False),
    ({"trashed": True}, Ending.TRASHED, TrialState.PRUNED, False),
    ({"trashed": True, "pruned": True}, Ending.TRASHED, TrialState.PRUNED, False),
    ({"stopped": True}, Ending.STOPPED, TrialState.FAIL, True),
    # a stop that cut the fit short is re-queued, whatever its partial fit would score
    ({"stopped": True, "trashed": True, "pruned": True}, Ending.STOPPED, TrialState.FAIL, True),
    ({"cut_short": True}, Ending.CUT_SHORT, TrialState.FAIL, True),
    ({"cut_short": True, "stopped": True}, Ending.CUT_SHORT, TrialState.FAIL, True),
    # another worker failed it and queued its copy: nothing is told
    ({"overtaken": True}, Ending.OVERTAKEN, None, True),
    ({"overtaken": True, "cut_short": True}, Ending.OVERTAKEN, None, True),
]


@pytest.mark.parametrize(("seen", "ending", "state", "requeued"), ROWS)
def test_each_way_a_trial_ends_decides_its_state(seen, ending, state, requeued) -> None:
    assert ending_of(**seen) is ending
    assert ENDINGS[ending].state == state
    assert ENDINGS[ending].requeued is requeued


def test_every_ending_has_a_row_and_a_transition() -> None:
    assert {ending for _, ending, _, _ in ROWS} == set(Ending) == set(ENDINGS)


def test_only_a_scored_trial_stores_its_fit() -> None:
    """A trial cut short stores nothing of its partial fit: its copy is fitted whole."""
    recorded = {ending for ending, transition in ENDINGS.items() if transition.recorded}
    assert recorded == {Ending.COMPLETE, Ending.PRUNED, Ending.TRASHED}
