# SPDX-License-Identifier: GPL-3.0-or-later
"""`hyperscan study noise` (issue 54, part 2): a trial's value refitted in other batch layouts
and with other seeds gives two spreads, recorded on the study; `study status` and `export`
show them and name the trials tied with the best within the replicas' spread."""

from __future__ import annotations

import html
import math
import re
from pathlib import Path

import pytest
from _service import assert_clean_failure, cli, create, finished_scan, write_card
from optuna.trial import TrialState
from test_multiobjective import multi_card

from hyperscan.scan import open_storage
from hyperscan.scan._noise_floor import NoiseFloor
from hyperscan.scan._study import NOISE_ATTR
from hyperscan.scan.storage import load_study

TRIAL_LINE = re.compile(
    r"^trial (\d+): value (\S+); other layouts (.+); fresh replicas (.+)$", re.MULTILINE
)


def test_the_floor_is_the_mean_relative_spread_and_ties_are_within_the_replicas_spread():
    measured = [(1.0, [1.1, 0.9], [1.2, 0.8, 1.0]), (2.0, [2.0, 2.0], [2.4, 1.6, None])]
    floor = NoiseFloor.of(measured, (4, 7))
    # trial 4: std(1, 1.1, 0.9) = 0.1 of 1; trial 7: 0 of 2 → 0.05. Replicas: 0.2 and 0.283.
    assert floor.rounding == pytest.approx(0.05)
    assert floor.replicas == pytest.approx((0.2 + math.sqrt(0.32) / 2) / 2)

    class Trial:
        def __init__(self, number, value, state=TrialState.COMPLETE):
            self.number, self.value, self.state = number, value, state

    trials = [Trial(0, 1.3), Trial(1, 1.0), Trial(2, 1.2), Trial(3, 0.5, TrialState.PRUNED)]
    assert floor.ties(trials, minimize=True) == [1, 2]  # within 0.241 × 1.0 of 1.0
    assert floor.ties(trials, minimize=False) == [0, 2, 1]  # within 0.241 × 1.3 of 1.3
    assert NoiseFloor.of([(1.0, [], [1.0])], (0,)).ties(trials, True) == []  # nothing measured


@pytest.fixture(scope="module")
def scanned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A finished tiny scan (float64, 300 epochs) of 4 trials of 2 replicas."""
    folder = tmp_path_factory.mktemp("noise")
    return folder, finished_scan(folder, 4)


def test_study_noise_measures_records_and_shows_the_floor(scanned):
    folder, url = scanned
    args = ("study", "noise", "--study", "s", "--storage", url)
    done = cli(*args, "--trials", 2, "--repeats", 2)
    assert done.exit_code == 0, done.output
    study = load_study(open_storage(url), "s")
    complete = sorted(study.get_trials(states=(TrialState.COMPLETE,)), key=lambda t: t.value)
    lines = TRIAL_LINE.findall(done.stdout)
    assert [int(n) for n, *_ in lines] == [t.number for t in complete[:2]]
    record = study.user_attrs[NOISE_ATTR]
    assert record["repeats"] == 2
    for trial in complete[:2]:
        kept = record["trials"][str(trial.number)]
        assert kept["value"] == trial.value
        assert len(kept["rounding"]) == 2  # alone, and in a batch padded one unit wider
        assert len(kept["replicas"]) == 2  # two other draws of pseudodata and starts
        assert len(set(kept["replicas"])) == 2  # draws of their own, not one twice
    floor = NoiseFloor.stored(study.user_attrs)
    assert floor.trials == tuple(t.number for t in complete[:2])
    # float64 over 300 epochs: rounding moves a value far less than another draw of replicas
    assert 0 <= floor.rounding < floor.replicas
    assert f"noise floor: {floor.text()}" in done.stdout

    status = cli("study", "status", "--study", "s", "--storage", url)
    assert f"noise floor: {floor.text()}" in status.stdout
    ties = floor.ties(study.get_trials(), minimize=True)
    tied = "tied with the best within the replicas' spread: trials " + ", ".join(map(str, ties))
    assert (tied in status.stdout) == (len(ties) > 1)

    exported = cli("export", "--study", "s", "--storage", url, "-o", folder / "best.yml")
    assert exported.exit_code == 0, exported.output
    header = (folder / "best.yml").read_text()
    assert f"# noise floor: {floor.text()}" in header
    assert ("# tied with the best: " in header) == (len(ties) > 1)

    reported = cli("report", "--study", "s", "--storage", url, "-o", folder / "report.html")
    assert reported.exit_code == 0, reported.output
    page = html.unescape((folder / "report.html").read_text())
    assert f"<th>noise floor</th><td>{floor.text()}" in page


def test_bad_noise_requests_are_one_line(scanned, tmp_path):
    folder, url = scanned
    refused = assert_clean_failure(
        cli("study", "noise", "--study", "s", "--storage", url, "--repeats", 1)
    )
    assert "--repeats" in refused
    multi = str(tmp_path / "multi.journal")
    create(write_card(tmp_path / "multi.yml", multi_card()), multi, "m")
    refused = assert_clean_failure(cli("study", "noise", "--study", "m", "--storage", multi))
    assert "the noise floor is measured on a single objective's value" in refused
    refused = assert_clean_failure(cli("study", "noise", "--study", "s", "--storage", multi))
    assert "'s'" in refused
