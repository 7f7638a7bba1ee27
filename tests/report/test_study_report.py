# SPDX-License-Identifier: GPL-3.0-or-later
"""`hyperscan report`: a self-contained page that a real browser renders without errors."""

from __future__ import annotations

import base64
import datetime
import html
import io
import re
from html.parser import HTMLParser

import numpy as np
import optuna
import pytest
from _chromium import Chromium
from _studies import REPO, WORKERS, build_multi_study, build_study, mixed_states
from click.testing import CliRunner
from optuna.distributions import IntDistribution
from optuna.trial import TrialState
from PIL import Image

from hyperscan.cli import main
from hyperscan.report import study_report
from hyperscan.report._study.figures import history_figure, spread_figure, throughput_figure
from hyperscan.report._study.tables import real_sets
from hyperscan.report._study.trials import TrialRecord, Trials, varying_parameters
from hyperscan.runcard import parse_scan_runcard
from hyperscan.scan import open_storage
from hyperscan.scan._study import create_study
from hyperscan.scan.storage import load_study
from hyperscan.score._statistics import summary, trial_value


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def _tags(text: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Tags()
    parser.feed(text)
    return parser.tags


def _assert_not_blank(png: bytes, what: str) -> tuple[int, int]:
    """Decoded, of non-zero size, and not one colour: a plot, not an empty canvas."""
    image = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=float)
    height, width, _ = image.shape
    assert width > 50 and height > 50, f"{what}: {width}x{height}"
    assert image.std() > 5, f"{what} is blank (pixel std {image.std():.2f})"
    colours = np.unique(image.reshape(-1, 3)[::7], axis=0).shape[0]
    assert colours > 8, f"{what} has {colours} colours"
    dark = (image.sum(axis=2) < 300).mean()  # axes, text, markers
    assert dark > 0.002, f"{what}: only {dark:.4f} of the pixels are drawn"
    return width, height


class _Cells(HTMLParser):
    """The rows of every table, as cell texts."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self.cell = []

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None:
            self.rows[-1].append("".join(self.cell))
            self.cell = None


def _best_rows(text: str) -> dict[int, dict[str, str]]:
    """The best-trials table: its rows by trial number, each cell by its column's header."""
    section = text[text.index('<section id="best">') :]
    parser = _Cells()
    parser.feed(section[: section.index("</section>")])
    header, *rows = parser.rows
    return {int(row[1]): dict(zip(header, row, strict=True)) for row in rows}


def _report(storage: str, study: str, output, *extra: str):
    return CliRunner().invoke(
        main, ["report", "--study", study, "--storage", storage, "-o", str(output), *extra]
    )


@pytest.fixture(scope="module")
def report_file(scan_storage, tmp_path_factory):
    output = tmp_path_factory.mktemp("report") / "report.html"
    result = _report(scan_storage, "synthetic", output)
    assert result.exit_code == 0, result.output
    assert f"written to {output}" in result.output
    return output


def test_report_is_self_contained(report_file):
    text = report_file.read_text()
    tags = _tags(text)
    assert not [t for t, _ in tags if t in ("script", "link", "iframe", "object", "embed")]
    images = [attrs for tag, attrs in tags if tag == "img"]
    # history, 8 parameters, importances, replica spread, states, throughput
    assert len(images) == 14
    for attrs in images:
        assert attrs["src"].startswith("data:image/png;base64,"), attrs["src"][:40]
        assert attrs.get("alt")
        _assert_not_blank(base64.b64decode(attrs["src"].split(",", 1)[1]), attrs["alt"])
    links = [attrs["href"] for tag, attrs in tags if tag == "a"]
    assert links and all(href.startswith("#") for href in links)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", text)


def test_report_content(report_file):
    text = report_file.read_text()
    for section in ("history", "parameters", "importances", "spread", "best", "workers", "apart"):
        assert f'id="{section}"' in text
    alts = [attrs["alt"] for tag, attrs in _tags(text) if tag == "img"]
    for name in ("optimizer", "adam.learning_rate", "nadam.clipnorm", "layers", "units_2"):
        assert f"trial value against {name}" in alts
    assert "22 complete, 4 pruned, 2 trashed, 1 fail, 1 running, 0 waiting" in text
    assert "1 diverged: replica 2 at epoch 500: non-finite loss" in text  # trashed reason
    assert "stopped by the pruner after step 400" in text
    assert "PED-ANOVA" in text
    assert "mean over 2 replicas of the validation χ² per point" in text
    assert "node-a:4101" in text and "node-b:4202" in text
    assert "hyperscan:runcard" not in text and "space:" in text  # the runcard, shown


def test_report_renders_in_headless_chromium(report_file, chromium, tmp_path):
    with Chromium(chromium) as browser:
        page = browser.check(report_file.as_uri())
        # The harness does see errors: a page with a console error, an exception and a
        # missing image is caught.
        broken = tmp_path / "broken.html"
        broken.write_text(
            '<img src="missing.png"><script>console.error("boom"); undefinedCall()</script>'
        )
        control = browser.check(broken.as_uri())
    assert page.errors == []
    assert {url.split(":", 1)[0] for url in page.requests} <= {"file", "data"}
    assert len(page.images) == 14
    for image in page.images:
        assert image["complete"] and image["width"] > 0 and image["height"] > 0, image
    (tmp_path / "screenshot.png").write_bytes(page.screenshot)
    width, height = _assert_not_blank(page.screenshot, "screenshot")
    assert height > 3000  # the whole page, not the first screen
    assert any("boom" in e for e in control.errors)
    assert any("undefinedCall" in e for e in control.errors)
    assert any(i["width"] == 0 for i in control.images)


def test_no_complete_trial_reports_the_trials_set_apart(tmp_path, chromium):
    """Every finished trial pruned, trashed or failed: the page says up front that nothing is
    best, and shows where in the space the trials went and why they were set apart."""
    states = [TrialState.PRUNED] * 4 + [TrialState.FAIL, TrialState.RUNNING]
    storage = build_study(tmp_path / "h.journal", "stuck", states)
    output = tmp_path / "report.html"
    result = _report(storage, "stuck", output)
    assert result.exit_code == 0, result.output
    text = output.read_text()
    note = "No trial is complete yet (2 pruned, 2 trashed, 1 fail, 1 running): none is best"
    assert text.index(note) < text.index('<section id="history">')
    assert "<th>best</th><td>none: no trial is complete</td>" in text
    assert "<th>rank</th>" not in text  # no best-trials table
    assert "1 diverged: replica 2 at epoch 500: non-finite loss" in text
    assert "stopped by the pruner after step 400" in text
    assert "Importances need at least 2 complete trials; this study has 0." in text
    alts = [attrs["alt"] for tag, attrs in _tags(text) if tag == "img"]
    for alt in ("objective history", "trial value against layers", "trials by state"):
        assert alt in alts
    with Chromium(chromium) as browser:
        page = browser.check(output.as_uri())
    assert page.errors == []
    assert len(page.images) == len(alts)
    for image in page.images:
        assert image["complete"] and image["width"] > 0 and image["height"] > 0, image
    _assert_not_blank(page.screenshot, "screenshot")

    best = tmp_path / "best.yml"
    export = CliRunner().invoke(
        main, ["export", "--study", "stuck", "--storage", storage, "-o", best]
    )
    assert export.exit_code == 2 and not best.exists()
    assert "no complete trial yet (1 fail, 2 pruned, 1 running, 2 trashed)" in export.output


def test_trials_without_values_have_no_history_to_plot(tmp_path):
    storage = build_study(tmp_path / "h.journal", "trashed", [TrialState.PRUNED])  # trashed
    text = study_report(load_study(open_storage(storage), "trashed"), storage)
    assert "No trial has a value to plot" in text
    alts = [attrs.get("alt") for tag, attrs in _tags(text) if tag == "img"]
    assert "objective history" not in alts and "trial value against layers" in alts
    assert "1 diverged: replica 2 at epoch 200" in text

    storage = build_study(tmp_path / "f.journal", "failed", [TrialState.FAIL])
    text = study_report(load_study(open_storage(storage), "failed"), storage)
    assert "No trial has a value to plot" in text
    assert "No complete, pruned or trashed trial to plot." in text
    assert "failed, not re-queued" in text


def test_no_finished_trial_is_a_clear_message(tmp_path):
    output = tmp_path / "report.html"
    running = build_study(tmp_path / "r.journal", "running", [TrialState.RUNNING])
    result = _report(running, "running", output)
    assert result.exit_code == 2
    assert "error: study 'running' has no finished trial yet (1 running)" in result.output
    assert "`hyperscan study status --study running`" in result.output
    assert "Traceback" not in result.output
    empty = build_study(tmp_path / "e.journal", "empty", [])
    result = _report(empty, "empty", output)
    assert result.exit_code == 2 and "no finished trial yet (no trials)" in result.output
    assert not output.exists()


def test_one_complete_trial_reports_without_importances(tmp_path):
    storage = build_study(tmp_path / "h.journal", "first", [TrialState.COMPLETE])
    output = tmp_path / "report.html"
    result = _report(storage, "first", output)
    assert result.exit_code == 0, result.output
    text = output.read_text()
    assert "Importances need at least 2 complete trials; this study has 1." in text
    assert "None: every finished trial completed." in text


def test_user_mistakes_exit_2(scan_storage, tmp_path):
    output = tmp_path / "report.html"
    output.write_text("keep")
    refused = _report(scan_storage, "synthetic", output)
    assert refused.exit_code == 2 and "--force" in refused.output
    assert output.read_text() == "keep"
    unknown = _report(scan_storage, "nope", tmp_path / "other.html")
    assert unknown.exit_code == 2
    assert "no study named 'nope'" in unknown.output and "synthetic" in unknown.output


def test_failed_trials_say_why_and_do_not_count_as_finished(tmp_path):
    """A trial whose worker stopped is failed and queued again: the report says so, as
    `study status` does, and its throughput counts the trials the budget counts."""
    storage = build_study(
        tmp_path / "h.journal", "f", [TrialState.COMPLETE, TrialState.FAIL, TrialState.FAIL]
    )
    study = load_study(open_storage(storage), "f")
    study.enqueue_trial({}, user_attrs={"retry_of": 1})
    text = study_report(study, storage)
    assert "its worker was stopped; re-queued as trial 3" in text
    assert "failed, not re-queued (its worker stopped, died or met an error" in text
    figure = throughput_figure(Trials.of(study.get_trials()), datetime.datetime.now())
    (finished,) = [line for line in figure.axes[1].get_lines() if line.get_label() == "all workers"]
    assert list(finished.get_ydata()) == [0, 1]  # the complete trial, not the failed ones


def test_real_data_counts_the_selected_sets():
    text = (
        "data: {real: {}, datasets: [NMC_NC_NOTFIXED_P_EM-F2-HEPDATA, "
        "BCDMS_NC_NOTFIXED_P_EM-F2-HEPDATA]}\n"
        "scan: {space: {activation: [tanh]}}\n"
    )
    assert real_sets(parse_scan_runcard(text)) == 2
    assert (
        real_sets(parse_scan_runcard("data: {real: {}}\nscan: {space: {activation: [tanh]}}\n"))
        == 7
    )


def test_best_trials_show_members_not_ok(tmp_path):
    """A pos-veto member counts in the trial value, so the table says how many a trial has
    (with the diverged ones a trial may keep), next to its members."""
    storage = build_study(
        tmp_path / "h.journal",
        "veto",
        [TrialState.COMPLETE] * 3,
        fits={1: {"pos_veto": 1}, 2: {"pos_veto": 1, "diverged": 1}},
    )
    text = study_report(load_study(open_storage(storage), "veto"), storage)
    rows = _best_rows(text)
    assert [rows[n]["members"] for n in range(3)] == [
        "2",
        "2 (1 pos-veto)",
        "2 (1 diverged, 1 pos-veto)",
    ]
    assert "n3fit would discard" in text


def test_best_epoch_says_of_how_many_members(tmp_path):
    """The median best epoch is over the members that have one: when some have none
    (pos-veto), the table says of how many, so one member's epoch is not read as the trial's."""
    storage = build_study(
        tmp_path / "h.journal",
        "epochs",
        [TrialState.COMPLETE] * 3,
        fits={
            1: {"pos_veto": 1, "best_epoch": summary(np.array([812.0]))},
            2: {"pos_veto": 2, "best_epoch": summary(np.array([]))},
        },
    )
    study = load_study(open_storage(storage), "epochs")
    rows = _best_rows(study_report(study, storage))
    every = study.trials[0].user_attrs["fit"]["best_epoch"]
    assert every["n"] == 2
    assert rows[0]["best epoch (median)"] == str(round(every["q50"]))
    assert rows[1]["best epoch (median)"] == "812 (1 of 2)"
    assert rows[2]["best epoch (median)"] == "none of 2"


def test_history_reaches_the_last_trashed_trial(tmp_path):
    """Trashed trials are crosses along the top, at their numbers: one trashed after the last
    trial with a value is still inside the axis; trial numbers are whole ticks."""
    states = [TrialState.COMPLETE, TrialState.COMPLETE, TrialState.PRUNED, TrialState.PRUNED]
    storage = build_study(tmp_path / "h.journal", "late", states)  # 2 pruned, 3 trashed
    trials = Trials.of(load_study(open_storage(storage), "late").get_trials())
    assert [t.number for t in trials.trashed] == [3]
    figures = [history_figure(trials, "value"), spread_figure(trials, "validation", "value")]
    low, high = figures[0].axes[0].get_xlim()
    assert low < 0 and high > 3
    for figure in figures:
        ticks = figure.axes[0].get_xticks()
        assert len(ticks) > 1 and all(float(t).is_integer() for t in ticks), ticks


def _kfold_study(path, statistic: str = "mean") -> str:
    """studies/kfold-scan.yml (3 folds × 2 replicas) with two complete trials whose folds
    differ by orders of magnitude, as held-out folds do when one needs extrapolation."""
    text = (REPO / "studies" / "kfold-scan.yml").read_text()
    card = parse_scan_runcard(text.replace("    statistic: mean ", f"    statistic: {statistic} "))
    storage = open_storage(str(path), create=True)
    study, _ = create_study(card, storage, "kfold")
    dists = {"layers": IntDistribution(1, 2)}
    for scale in (1.0, 2.0):
        held_out = scale * np.array([[20.0, 22.0], [900.0, 2100.0], [450.0, 1500.0]])
        study.add_trial(
            optuna.trial.create_trial(
                state=TrialState.COMPLETE,
                value=trial_value(held_out.ravel(), np.repeat([0, 1, 2], 2), card.scan.objective),
                params={"layers": 1},
                distributions=dists,
                user_attrs={
                    "replicas": {"held_out": summary(held_out.ravel())},
                    "folds": {str(k): summary(fold) for k, fold in enumerate(held_out)},
                },
            )
        )
    return str(path)


@pytest.mark.parametrize("statistic", ["mean", "median", "max", "mean_plus_std"])
def test_kfold_best_trials_show_each_fold(tmp_path, statistic):
    """The replica columns pool the folds, each scored on other datasets (fold 0's replicas
    at 20, fold 1's at 2100): a column per fold gives what the trial value reduces over the
    folds, so it is recomputed from them; the page names each fold's datasets."""
    storage = _kfold_study(tmp_path / "h.journal", statistic)
    study = load_study(open_storage(storage), "kfold")
    text = study_report(study, storage)
    rows = _best_rows(text)
    for trial in study.trials:
        folds = [float(rows[trial.number][f"fold {k}"]) for k in range(3)]
        assert np.mean(folds) == pytest.approx(trial.value, rel=1e-3)
    assert "fold 1: TOY_E02_05_F2P, TOY_E02_06_F2WM, TOY_E03_08_DIMUNB" in text
    assert "fold 0" not in _best_rows(study_report(*_plain_study(tmp_path)))[0]


def _plain_study(tmp_path) -> tuple[optuna.Study, str]:
    storage = build_study(tmp_path / "plain.journal", "plain", [TrialState.COMPLETE])
    return load_study(open_storage(storage), "plain"), storage


def test_varying_parameters_reads_each_trial_once(monkeypatch):
    """Which parameters vary is one pass over the trials: comparing every trial with every
    other took 90 s of a 3,000-trial study's report. A parameter only some trials have
    (units_2, with two layers) varies when those trials differ."""
    dists = {"layers": IntDistribution(1, 2), "units_1": IntDistribution(8, 30)}
    trials = [
        optuna.trial.create_trial(
            state=TrialState.COMPLETE,
            value=float(k),
            params={"layers": 1, "units_1": 8 + k % 2},
            distributions=dists,
        )
        for k in range(300)
    ]
    two = {**dists, "units_2": IntDistribution(8, 30)}
    trials += [
        optuna.trial.create_trial(
            state=TrialState.COMPLETE,
            value=1.0,
            params={"layers": 2, "units_1": 8, "units_2": units},
            distributions=two,
        )
        for units in (9, 10)
    ]
    reads = []
    params = optuna.trial.FrozenTrial.params
    monkeypatch.setattr(
        optuna.trial.FrozenTrial,
        "params",
        property(lambda trial: reads.append(1) or params.fget(trial), params.fset),
    )
    records = [TrialRecord.of(trial) for trial in trials]
    assert varying_parameters(records) == {"layers", "units_1", "units_2"}
    assert len(reads) == len(trials)
    assert varying_parameters(records[:300:2]) == set()  # units_1 = 8 in every even trial


def test_worker_strip_draws_a_collection_per_worker(tmp_path):
    """The trials-per-worker strip is one collection of bars per worker, a bar per trial
    coloured by its state: an artist per trial took 3 s to build and draw for 3,000 trials."""
    storage = build_study(tmp_path / "h.journal", "strip", mixed_states(40))
    trials = load_study(open_storage(storage), "strip").get_trials()
    top = throughput_figure(Trials.of(trials), datetime.datetime.now()).axes[0]
    assert not top.patches
    assert len(top.collections) == len(WORKERS)
    assert sum(len(c.get_paths()) for c in top.collections) == len(trials)
    assert len({tuple(colour) for c in top.collections for colour in c.get_facecolor()}) == 5


def test_no_complete_trial_says_export_trial_writes_a_pruned_one(tmp_path):
    """Nothing is best, but `export --trial N` writes a pruned or trashed trial: the page and
    export's message say so, instead of that export has nothing to write."""
    storage = build_study(tmp_path / "h.journal", "stuck", [TrialState.PRUNED] * 2)
    text = study_report(load_study(open_storage(storage), "stuck"), storage)
    assert "has no runcard to write" not in text
    assert text.count("hyperscan export --study stuck --trial N writes a pruned or trashed") == 2

    best = tmp_path / "best.yml"
    export = CliRunner().invoke(
        main, ["export", "--study", "stuck", "--storage", storage, "-o", best]
    )
    assert export.exit_code == 2 and not best.exists()
    assert "`hyperscan export --trial N` writes a pruned or trashed one" in export.output
    chosen = CliRunner().invoke(
        main, ["export", "--study", "stuck", "--storage", storage, "--trial", "0", "-o", best]
    )
    assert chosen.exit_code == 0, chosen.output
    assert best.exists()

    # Trial 1 was stopped by the pruner: the line and the runcard's header say when.
    pruned = load_study(open_storage(storage), "stuck").trials[1]
    step = max(pruned.intermediate_values)
    when = f"pruned after step {step}, value then {pruned.intermediate_values[step]:.6g}"
    args = ["export", "--study", "stuck", "--storage", storage, "--trial", "1", "-o", best]
    chosen = CliRunner().invoke(main, [*args, "--force"])
    assert chosen.output == f"trial 1 ({when}) written to {best}\n"
    assert f"\n# value: {when}\n" in best.read_text()


def _closure_study(path, objective: str, closure: bool = True) -> tuple[optuna.Study, str]:
    """studies/quickstart-scan.yml with ``objective``, and four complete trials that stored
    the ensemble figures and (with ``closure``) closure estimators of two folds, as a worker
    does."""
    text = (REPO / "studies" / "quickstart-scan.yml").read_text()
    text = text.replace(
        "    chi2: validation        # score each replica by its validation chi2 per point\n"
        "    statistic: mean         # mean over the replicas of a trial\n",
        f"    {objective}\n",
    )
    card = parse_scan_runcard(text)
    storage = open_storage(str(path), create=True)
    study, _ = create_study(card, storage, "closure")
    dists = {"layers": IntDistribution(1, 2), "units_1": IntDistribution(8, 30)}
    for number in range(4):
        rbv = (0.5 + 0.2 * number, 0.7 + 0.2 * number)  # per fold
        folds = {
            str(k): {"bias": 0.01 * (k + 1), "variance": 0.01 * (k + 1) / r**2, "rbv": r}
            | {"xi1sigma": 0.9 - 0.1 * number, "replicas": 2}
            for k, r in enumerate(rbv)
        }
        ensemble = {str(k): {"phi": 0.1 * (number + k + 1), "phi2": 0.01} for k in range(2)}
        study.add_trial(
            optuna.trial.create_trial(
                state=TrialState.COMPLETE,
                value=float(np.mean([abs(np.log(r)) for r in rbv])),
                params={"layers": 1 + number % 2, "units_1": 10 + 5 * number},
                distributions=dists,
                user_attrs={
                    "ensemble": {"proportion": 0.85, "scored": "all", "folds": ensemble},
                }
                | ({"closure": {"scored": "all", "folds": folds}} if closure else {}),
            )
        )
    return study, str(path)


def test_a_closure_study_is_labelled_by_its_objective_and_shows_the_estimators(tmp_path):
    """The trial value is |log R_bv|, not a χ² statistic; the best-trials table and a figure
    per estimator show φ and the closure estimators of every trial, each its folds' mean."""
    study, storage = _closure_study(tmp_path / "c.journal", "loss: rbv")
    text = study_report(study, storage)
    assert "|log R_bv|, R_bv = sqrt(bias / variance) of the replicas but diverged ones" in text
    assert "χ² per point (lower is better)" not in text
    rows = _best_rows(text)
    assert list(rows) == [2, 3, 1, 0]  # R_bv of 1 ± 0.1 (trial 2) first, 0.5 and 0.7 last
    for number, row in rows.items():
        assert float(row["R_bv"]) == pytest.approx(0.6 + 0.2 * number, rel=1e-3)
        assert float(row["φ"]) == pytest.approx(0.1 * number + 0.15, rel=1e-3)
        assert float(row["ξ₁σ"]) == pytest.approx(0.9 - 0.1 * number, rel=1e-3)
        assert float(row["bias"]) == pytest.approx(0.015, rel=1e-3)
        assert "variance" in row and "φ²" not in row
    images = {attrs["alt"]: attrs["src"] for tag, attrs in _tags(text) if tag == "img"}
    for label in ("φ", "bias", "variance", "R_bv", "ξ₁σ"):
        src = images[f"{label} against each parameter"]
        _assert_not_blank(base64.b64decode(src.split(",", 1)[1]), label)
    assert "Trial value against each hyperparameter" in text


def test_a_phi_squared_study_shows_phi_squared_and_no_closure_columns(tmp_path):
    objective = "{loss: phi2, phi_squared: true}"
    study, storage = _closure_study(tmp_path / "p.journal", objective, closure=False)
    text = study_report(study, storage)
    assert "1 / (n3fit's phi2 (phi² of the best 85% of the replicas)" in html.unescape(text)
    row = _best_rows(text)[0]
    assert float(row["φ²"]) == pytest.approx(0.01) and "φ" not in row and "R_bv" not in row
    alts = [attrs["alt"] for tag, attrs in _tags(text) if tag == "img"]
    assert "φ² against each parameter" in alts and "R_bv against each parameter" not in alts


def test_a_study_without_ensemble_figures_says_so(tmp_path):
    study, storage = _plain_study(tmp_path)
    text = study_report(study, storage)
    assert "No complete trial stored ensemble figures of merit" in text


def test_a_multi_objective_report_shows_its_front_not_a_best(tmp_path):
    """`study status` and `export` say a multi-objective study has no single best trial: the
    page's summary names its Pareto front instead, as status does, and the best-trials table
    says it ranks by the first objective and that `export` needs a rule."""
    # worst maximised, mean minimised: trials 0 and 1 are the front, 2 and 3 are beaten by 0
    storage = build_multi_study(
        tmp_path / "s.journal", "multi", [(3.0, 1.0), (4.0, 2.0), (2.0, 1.5), (1.0, 3.0)]
    )
    text = study_report(load_study(open_storage(storage), "multi"), storage)
    summary = text[text.index('<table class="kv">') :]
    summary = html.unescape(summary[: summary.index("</table>")])
    assert "<th>Pareto front</th><td>2 trials: 0, 1</td>" in summary
    assert "<th>best</th>" not in summary
    assert "(higher is better)" in summary  # the first objective, which the page shows
    best = html.unescape(text[text.index('<section id="best">') :])
    assert "Ranked by the first objective: a multi-objective study has no single best" in best
