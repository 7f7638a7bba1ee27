# SPDX-License-Identifier: GPL-3.0-or-later
"""`export --confirm K` (issue 54, part 3): the K best trials refitted at once with replicas no
trial was fitted with, the one confirmed best written, both values recorded on the study, and
`hyperscan fit` of the runcard giving the confirmed value back bit for bit."""

from __future__ import annotations

import html
import re
from pathlib import Path

import numpy as np
import pytest
from _service import assert_clean_failure, cli, create, finished_scan, write_card
from optuna.trial import TrialState
from test_export import refit
from test_multiobjective import multi_card

from hyperscan.runcard import load_fit_runcard
from hyperscan.scan import open_storage
from hyperscan.scan._study import CONFIRMED_ATTR
from hyperscan.scan.storage import load_study

CONFIRMED_LINE = re.compile(r"^trial (\d+): scan (\S+), confirmed (\S+)$", re.MULTILINE)


@pytest.fixture(scope="module")
def scanned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A finished tiny scan of 5 trials of 2 replicas (journal), by `hyperscan scan`."""
    folder = tmp_path_factory.mktemp("confirm")
    return folder, finished_scan(folder, 5, architecture={"nodes": [6], "activations": ["tanh"]})


def test_the_k_best_are_refitted_with_fresh_replicas_and_the_confirmed_best_is_written(scanned):
    folder, url = scanned
    out = folder / "confirmed.yml"
    args = ("export", "--study", "s", "--storage", url, "--confirm", 3, "--replicas", 3)
    done = cli(*args, "-o", out)
    assert done.exit_code == 0, done.output

    study = load_study(open_storage(url), "s")
    complete = study.get_trials(states=(TrialState.COMPLETE,))
    best3 = sorted(complete, key=lambda t: t.value)[:3]
    lines = {int(n): (float(scan), float(confirmed)) for n, scan, confirmed in
             CONFIRMED_LINE.findall(done.stdout)}  # fmt: skip
    assert sorted(lines) == sorted(t.number for t in best3)
    record = study.user_attrs[CONFIRMED_ATTR]
    for trial in best3:
        kept = record[str(trial.number)]
        assert kept["scan_values"] == [trial.value]
        assert kept["replicas"] == [3, 5]  # a trial's are 1 and 2
        assert lines[trial.number] == (
            pytest.approx(trial.value, rel=1e-5),
            pytest.approx(kept["values"][0], rel=1e-5),
        )
        # fresh replicas: another value than the scan's
        assert kept["values"][0] != trial.value
    status = cli("study", "status", "--study", "s", "--storage", url)
    assert "confirmed with fresh replicas (export --confirm):" in status.stdout
    for trial in best3:
        confirmed = record[str(trial.number)]["values"][0]
        line = f"  trial {trial.number}: scan {trial.value:.6g}, confirmed {confirmed:.6g}"
        assert line + " (replicas 3-5)" in status.stdout
    reported = cli("report", "--study", "s", "--storage", url, "-o", folder / "report.html")
    assert reported.exit_code == 0, reported.output
    row = html.unescape((folder / "report.html").read_text()).split("confirmed (export --confirm)")
    for trial in best3:
        confirmed = record[str(trial.number)]["values"][0]
        assert f"trial {trial.number}: scan {trial.value:.6g} → {confirmed:.6g}" in row[1]
    winner = min(best3, key=lambda t: record[str(t.number)]["values"][0])
    assert f"trial {winner.number} (the best confirmed value) written to {out}" in done.stdout

    runcard = load_fit_runcard(out)
    assert runcard.replica_ids == (3, 4, 5)
    assert runcard.training.batch_layout is not None  # the 3 refits shared a batch
    assert runcard.training.batch_layout.slots == 3
    header = out.read_text()
    assert f"# trial: {winner.number}\n" in header
    assert "# confirmed value " in header and "# scan value " in header

    members = refit(out, folder / "fit")
    assert [m["replica"] for m in members] == [3, 4, 5]
    value = float(np.mean([m["chi2_per_point"]["validation"] for m in members]))
    assert value == record[str(winner.number)]["values"][0]


def test_one_trial_confirmed_is_refitted_alone(scanned):
    folder, url = scanned
    out = folder / "one.yml"
    done = cli("export", "--study", "s", "--storage", url, "--confirm", 1, "-o", out)
    assert done.exit_code == 0, done.output
    runcard = load_fit_runcard(out)
    assert runcard.replica_ids == (3, 4)  # as many as a trial's, by default
    assert runcard.training.batch_layout is None
    best = load_study(open_storage(url), "s").best_trial
    assert f"trial {best.number} (the best confirmed value)" in done.stdout


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--replicas", "3"), "--replicas only applies with --confirm K"),
        (("--confirm", "2", "--trial", "0"), "give either --confirm K or --trial N, not both"),
        (("--confirm", "2", "--sample", "2"), "give either --confirm K or --sample N, not both"),
        (("--confirm", "0"), "--confirm"),
        (("--confirm", "2", "--rule", "min value"), "--rule chooses from the Pareto front"),
    ],
)
def test_a_bad_confirm_is_one_line_and_writes_nothing(scanned, extra, message):
    folder, url = scanned
    out = folder / "bad.yml"
    refused = assert_clean_failure(
        cli("export", "--study", "s", "--storage", url, *extra, "-o", out)
    )
    assert message in refused
    assert len(refused.strip().splitlines()) == 1
    assert not out.exists()


def test_a_multi_objective_study_confirms_its_front_and_applies_the_rule(tmp_path):
    url = str(tmp_path / "scan.journal")
    create(write_card(tmp_path / "multi.yml", multi_card()), url, "m")
    done = cli("scan", tmp_path / "multi.yml", "--storage", url, "--name", "m", "--workers", "1")
    assert done.exit_code == 0, done.output
    out = tmp_path / "front.yml"
    args = ("export", "--study", "m", "--storage", url, "--confirm", 2, "-o", out)
    refused = assert_clean_failure(cli(*args))
    assert "--rule chooses among the confirmed values" in refused
    done = cli(*args, "--rule", "min best")
    assert done.exit_code == 0, done.output
    confirmed = re.findall(
        r"^trial (\d+): scan best \S+, worst \S+, confirmed best (\S+),", done.stdout, re.MULTILINE
    )
    assert 1 <= len(confirmed) <= 2
    chosen = min(confirmed, key=lambda c: (float(c[1]), int(c[0])))[0]
    assert f"trial {chosen} (min best, by the confirmed values) written" in done.stdout
