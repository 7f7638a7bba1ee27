# SPDX-License-Identifier: GPL-3.0-or-later
"""The Python API (docs/api.md) and the command line that renders it: the example of the
docs as it stands, the objects each call returns, `study status` as tables and as JSON, and
the one-line errors of a folder given as a runcard or an output into a missing folder."""

from __future__ import annotations

import datetime
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml
from click.testing import CliRunner
from optuna.trial import TrialState, create_trial

import hyperscan
from hyperscan.cli import main
from hyperscan.scan import ScanError, StorageError, open_storage
from hyperscan.scan.results import ExportedTrial, StudyStatus

ROOT = Path(__file__).resolve().parents[2]
TINY_SCAN: dict[str, Any] = {
    "data": {"closure": {"size": "tiny"}},
    "epochs": 100,
    "training": {"steps_per_call": 50},
    "scan": {
        "trials": 3,
        "replicas": 2,
        "sampler": {"name": "random", "seed": 0},
        "pruner": {"name": "none"},
        "space": {"optimizer": {"adam": {"learning_rate": {"low": 1.0e-3, "high": 3.0e-2}}}},
    },
}
BEST_ATTRS = {
    "statistics": {"mean": 1.25, "median": 1.2},
    "replicas": {
        "validation": {"mean": 1.25, "std": 0.1, "min": 1.1, "max": 1.4, "n": 2},
        "held_out": {"n": 2, "finite": 0},
    },
    "fit": {"members": 2, "diverged": 0, "seconds": 3.5},
}


def _card(path: Path, **scan: Any) -> Path:
    card = {**TINY_SCAN, "scan": {**TINY_SCAN["scan"], **scan}}
    path.write_text(yaml.safe_dump(card, sort_keys=False))
    return path


def _cli(*args: Any):
    return CliRunner().invoke(main, [str(arg) for arg in args])


@pytest.fixture
def study_with_trials(tmp_path):
    """A study of the tiny runcard with a complete, a trashed and a running trial, added by
    hand: status, export and list need no worker."""
    storage = str(tmp_path / "s.journal")
    study = hyperscan.create_study(_card(tmp_path / "tiny.yml"), storage)
    distribution = optuna.distributions.FloatDistribution(1e-3, 3e-2)
    params = {"optimizer": "adam", "adam.learning_rate": 0.01}
    distributions = {
        "optimizer": optuna.distributions.CategoricalDistribution(["adam"]),
        "adam.learning_rate": distribution,
    }
    added = study.optuna_study
    added.add_trial(
        create_trial(value=1.25, params=params, distributions=distributions, user_attrs=BEST_ATTRS)
    )
    added.add_trial(
        create_trial(
            state=TrialState.PRUNED,
            params=params,
            distributions=distributions,
            user_attrs={"trashed": "diverged"},
        )
    )
    added.add_trial(create_trial(state=TrialState.RUNNING, user_attrs={"worker": "node:7"}))
    return storage


def _docs_example() -> str:
    (code,) = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "api.md").read_text(), re.S)
    return code


def test_the_example_in_the_docs_runs(tmp_path, monkeypatch):
    """The code block of docs/api.md, as it stands, against the quickstart runcard."""
    code = _docs_example()
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    monkeypatch.setattr("tempfile.mkdtemp", lambda: str(tmp_path))
    namespace: dict[str, Any] = {}
    exec(compile(code, "docs/api.md", "exec"), namespace)  # noqa: S102
    assert namespace["report"].trials == 2
    assert sum(namespace["status"].counts.values()) == 2
    assert (tmp_path / "best.yml").read_text() == namespace["best"].text
    assert len(namespace["result"].status) == 2  # the quickstart's two replicas


#: What TensorFlow, absl and Optuna print at INFO: absl's "I0000 00:00:..." lines (oneDNN, the
#: CUDA probe, XLA's service), its notice before absl::InitializeLog, Optuna's "[I 2026-...]".
_INFO_LINES = re.compile(
    r"^(I\d{4} |\[I \d{4}-|WARNING: All log messages before absl)|oneDNN", re.M
)


def test_the_example_in_the_docs_is_quiet(tmp_path):
    """A script is as quiet as the command line: TensorFlow is imported the way the CLI imports
    it (unless the script did it first), and Optuna's INFO lines stay out of hyperscan's calls.
    The example, with one short trial, in a fresh process."""
    code = _docs_example()
    short = code.replace('"epochs": 200', '"epochs": 20').replace("n_trials=2", "n_trials=1")
    assert '"epochs": 200' not in short and "n_trials=2" not in short
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "TF_XLA_FLAGS")}
    env.update(CUDA_VISIBLE_DEVICES="-1", TMPDIR=str(tmp_path))
    done = subprocess.run(
        [sys.executable, "-c", short],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert "1 trials" in done.stdout
    assert not _INFO_LINES.search(done.stderr), done.stderr


def test_import_hyperscan_loads_neither_optuna_nor_tensorflow():
    """The API's names load their packages on first use: `import hyperscan` stays light, and
    a study is opened without TensorFlow."""
    light = "import sys, hyperscan; print('optuna' in sys.modules, 'tensorflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", light], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
    scan = "import sys, hyperscan; hyperscan.open_study; print('tensorflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", scan], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False"]
    assert {"create_study", "open_study", "list_studies", "run_scan"} <= set(dir(hyperscan))


def test_create_study_says_whether_it_created_changed_or_found_the_study(tmp_path):
    storage = str(tmp_path / "s.journal")
    created = hyperscan.create_study(_card(tmp_path / "tiny.yml"), storage)
    assert (created.name, created.creation.created, created.creation.old_budget) == (
        "tiny",
        True,
        None,
    )
    assert created.storage == f"journal://{tmp_path / 's.journal'}"
    again = hyperscan.create_study(tmp_path / "tiny.yml", storage)
    assert (again.creation.created, again.creation.old_budget) == (False, None)
    more = hyperscan.create_study(_card(tmp_path / "more.yml", trials=5), storage, "tiny")
    assert (more.creation.created, more.creation.old_budget) == (False, 3)
    assert more.runcard.scan.trials == 5
    with pytest.raises(ScanError, match="exists with a different runcard"):
        hyperscan.create_study(_card(tmp_path / "other.yml", replicas=3), storage, "tiny")
    with pytest.raises(ScanError, match="needs a name"):
        hyperscan.create_study(more.runcard, storage)


def test_open_study_and_list_studies_return_plain_objects(study_with_trials):
    study = hyperscan.open_study("tiny", study_with_trials)
    status = study.status()
    assert isinstance(status, StudyStatus)
    assert status.counts == {
        "complete": 1,
        "pruned": 0,
        "trashed": 1,
        "fail": 0,
        "running": 1,
        "waiting": 0,
    }
    assert (status.budget, status.finished) == (3, 2)
    assert (status.best.number, status.best.value) == (0, 1.25)
    assert status.best.replicas == BEST_ATTRS["replicas"]
    assert [(t.number, t.worker, t.lost) for t in status.running] == [(2, "node:7", False)]
    assert status.trashed == [(1, "diverged")]
    (summary,) = hyperscan.list_studies(study_with_trials)
    assert (summary.name, summary.finished, summary.budget, summary.best_value) == (
        "tiny",
        2,
        3,
        1.25,
    )
    with pytest.raises(StorageError, match="no study named 'nope'"):
        hyperscan.open_study("nope", study_with_trials)


def test_export_gives_the_runcard_and_writes_it_only_into_an_existing_folder(
    study_with_trials, tmp_path
):
    study = hyperscan.open_study("tiny", study_with_trials)
    best = study.export()
    assert isinstance(best, ExportedTrial)
    assert (best.study, best.number, best.outcome, best.value) == ("tiny", 0, "value 1.25", 1.25)
    assert "# trial: 0\n" in best.text
    trashed = study.export(1)
    assert (trashed.outcome, trashed.value) == ("trashed: diverged", None)
    assert best.write(tmp_path / "best.yml") == tmp_path / "best.yml"
    assert (tmp_path / "best.yml").read_text() == best.text
    with pytest.raises(ScanError, match="exists; use --force"):
        best.write(tmp_path / "best.yml")
    with pytest.raises(ScanError, match=f"the folder {tmp_path / 'nothere'} does not exist"):
        best.write(tmp_path / "nothere" / "best.yml")
    assert not (tmp_path / "nothere").exists()


def test_copy_to_gives_the_copy(study_with_trials, tmp_path):
    study = hyperscan.open_study("tiny", study_with_trials)
    with pytest.raises(ScanError, match="has running trials"):
        study.copy_to(str(tmp_path / "copy.journal"))
    study.optuna_study._storage.set_trial_state_values(
        study.optuna_study.trials[2]._trial_id, TrialState.FAIL
    )
    copy = study.copy_to(str(tmp_path / "copy.journal"), "copied")
    assert (copy.name, copy.status().counts["complete"]) == ("copied", 1)


def test_study_status_is_a_table_and_json(study_with_trials):
    shown = _cli("study", "status", "--study", "tiny", "--storage", study_with_trials)
    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.splitlines()
    # no dictionary dumped in a line (the storage's path, in the header, is as long as it is)
    assert max(len(line) for line in lines if ".journal" not in line) <= 100
    assert "{" not in shown.stdout
    assert "best: trial 0, value 1.25" in lines
    assert "    adam.learning_rate  0.01" in lines
    assert re.search(
        r"^    category\s+mean\s+std\s+min\s+q16\s+q50\s+q84\s+max\s+n$", shown.stdout, re.M
    )
    assert re.search(r"^    validation\s+1\.25\s+0\.1\s+1\.1\s+1\.4\s+2$", shown.stdout, re.M)
    assert "  fit: members 2, diverged 0, seconds 3.5" in lines
    assert re.search(r"^  trial 2 on node:7, started \d+m\d\ds ago$", shown.stdout, re.M)
    as_json = _cli("study", "status", "--study", "tiny", "--storage", study_with_trials, "--json")
    assert as_json.exit_code == 0, as_json.output
    data = json.loads(as_json.stdout)
    assert data["counts"]["trashed"] == 1
    assert data["best"]["replicas"]["validation"]["mean"] == 1.25
    (running,) = data["running"]
    assert (running["number"], running["worker"], running["lost"]) == (2, "node:7", False)
    assert datetime.datetime.fromisoformat(running["started"])
    assert data["trashed"] == [{"trial": 1, "reason": "diverged"}]


@pytest.mark.parametrize(
    "command",
    [
        ["fit", "{folder}", "-o", "out"],
        ["scan", "{folder}"],
        ["study", "create", "{folder}"],
    ],
)
def test_a_folder_given_as_a_runcard_is_one_line_and_exit_2(tmp_path, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cards").mkdir()
    result = _cli(*(part.format(folder="cards") for part in command))
    assert result.exit_code == 2, result.output
    assert result.stderr == "error: cards: cannot read the runcard: it is a directory\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cards"]


@pytest.mark.parametrize("command", [["export"], ["report"]])
def test_an_output_into_a_missing_folder_is_refused_not_created(
    study_with_trials, tmp_path, monkeypatch, command
):
    monkeypatch.chdir(tmp_path)
    output = Path("nothere") / "out.file"
    result = _cli(*command, "--study", "tiny", "--storage", study_with_trials, "-o", output)
    assert result.exit_code == 2, result.output
    assert result.stderr == f"error: cannot write {output}: the folder nothere does not exist\n"
    assert not (tmp_path / "nothere").exists()


def test_scan_refuses_an_output_into_a_missing_folder_before_it_starts(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _card(tmp_path / "tiny.yml")
    result = _cli("scan", "tiny.yml", "--storage", "s.journal", "-o", "nothere/best.yml")
    assert result.exit_code == 2, result.output
    assert "the folder nothere does not exist" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny.yml"]  # no study created


def test_storage_errors_are_one_line(tmp_path):
    missing = tmp_path / "none.journal"
    result = _cli("study", "status", "--study", "s", "--storage", missing)
    assert result.exit_code == 2 and result.stderr.startswith("error: "), result.output
    assert result.stderr.count("\n") == 1
    with pytest.raises(StorageError):
        open_storage(str(missing))
