# SPDX-License-Identifier: GPL-3.0-or-later
"""`hyperscan export --format n3fit` and `hyperscan import-n3fit`: a trial as an n3fit 4.1.5
runcard, an n3fit runcard as a hyperscan one, and every refusal one line, exit code 2, nothing
written.

The studies are made by hand on a journal file: trials drawn from the space as a worker draws
them and told a value, no fit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from _n3fit_cards import small_n3fit_card
from _told_study import NAMES, REAL_SCAN, cli, export, refused, told_study

from hyperscan.runcard import ScanRuncard, load_runcard, read_n3fit_card, trial_to_n3fit
from hyperscan.scan import open_storage
from hyperscan.scan._study import check_new_study
from hyperscan.scan.storage import load_study

KIT = Path(__file__).resolve().parents[3] / "shared" / "peer" / "runcards"


@pytest.fixture(scope="module")
def real_study(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    folder = tmp_path_factory.mktemp("real")
    return told_study(folder, REAL_SCAN), folder


# --------------------------------------------------------------------------------------------
# export --format n3fit


def test_a_trial_is_written_as_the_n3fit_card_of_its_fit_runcard(real_study):
    url, folder = real_study
    plain, n3fit = folder / "best.yml", folder / "best-n3fit.yml"
    assert export(url, plain).exit_code == 0
    result = export(url, n3fit, "--format", "n3fit")
    assert result.exit_code == 0, result.output
    assert f"trial 1 (value 0.1) written to {n3fit} (an n3fit 4.1.5 runcard)" in result.stdout
    card, args = read_n3fit_card(n3fit.read_text())
    # The same conversion of the same trial's fit runcard (the export time aside).
    same, _ = read_n3fit_card(trial_to_n3fit(plain.read_text()))
    assert card == same
    assert args == "1 -r 2"  # the trial's 2 replicas
    trials = load_study(open_storage(url), "s").get_trials()
    assert card["parameters"]["optimizer"] == {
        "optimizer_name": "Adam",
        "learning_rate": trials[1].params["adam.learning_rate"],
        "clipnorm": 1.0,
    }
    assert [d["dataset"] for d in card["dataset_inputs"]] == NAMES  # every dataset: no folds
    assert card["theory"] == {"theoryid": 99000001}
    assert card["debug"] is False  # no worker's thread count: the trial was told by hand
    text = n3fit.read_text()
    assert "left out: the trial's 2 folds" in text and "#   study: s" in text


def test_trial_n_too(real_study):
    url, folder = real_study
    out = folder / "t2.yml"
    assert export(url, out, "--trial", 2, "--format", "n3fit").exit_code == 0
    card, _ = read_n3fit_card(out.read_text())
    trials = load_study(open_storage(url), "s").get_trials()
    assert (
        card["parameters"]["optimizer"]["learning_rate"] == trials[2].params["adam.learning_rate"]
    )


def test_a_confirmed_trial_is_written_as_the_n3fit_card_of_its_refit(tmp_path):
    """--confirm refits (TensorFlow, seconds): the refit's fresh replicas are n3fit's too."""
    # No thread count: TensorFlow may already run in this test process with another one.
    url = told_study(tmp_path, {**REAL_SCAN, "training": {}})
    out = tmp_path / "confirmed.yml"
    result = export(url, out, "--confirm", 1, "--format", "n3fit")
    assert result.exit_code == 0, result.output
    assert f"written to {out} (an n3fit 4.1.5 runcard)" in result.stdout
    card, args = read_n3fit_card(out.read_text())
    assert args == "3 -r 4"  # fresh replicas: after the trial's 1 and 2
    assert "confirmed value" in out.read_text() and card["parameters"]["epochs"] == 100


def test_a_sampled_ensemble_is_refused_in_one_line(real_study):
    url, folder = real_study
    out = folder / "sampled.yml"
    message = refused(export(url, out, "--sample", 2, "--format", "n3fit"))
    assert "--format n3fit cannot write --sample: n3fit 4.1.5 takes per-replica" in message
    assert "trial_specs" in message and not out.exists()


@pytest.fixture(scope="module")
def closure_study(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    folder = tmp_path_factory.mktemp("closure")
    card = {**REAL_SCAN, "data": {"closure": {"size": "tiny"}}}
    card["scan"] = {**REAL_SCAN["scan"], "folds": []}
    return told_study(folder, card), folder


@pytest.mark.parametrize("args", [(), ("--confirm", 2)])
def test_closure_data_are_refused_by_name_before_any_refit(closure_study, args):
    url, folder = closure_study
    out = folder / "closure.yml"
    result = export(url, out, "--format", "n3fit", *args)
    message = refused(result)
    assert "n3fit 4.1.5 cannot express: data.closure (hyperscan's built-in closure" in message
    assert "confirming" not in result.stdout  # refused before the refits
    assert not out.exists()


# --------------------------------------------------------------------------------------------
# import-n3fit


def n3fit_card(**changes: Any) -> dict[str, Any]:
    card = small_n3fit_card(**changes)
    card["parameters"] |= {
        "optimizer": {"optimizer_name": "Nadam", "learning_rate": 2e-3},
        "epochs": 500,
    }
    return card


def write(path: Path, card: dict[str, Any], first_line: str = "") -> Path:
    path.write_text(first_line + yaml.safe_dump(card, sort_keys=False))
    return path


def test_an_n3fit_fit_card_becomes_a_fit_runcard_that_loads(tmp_path):
    source = write(tmp_path / "n3.yml", n3fit_card(), "# n3fit-args: 1 -r 3\n")
    out = tmp_path / "hs.yml"
    result = cli("import-n3fit", source, "-o", out)
    assert result.exit_code == 0, result.output
    assert f"fit runcard written to {out}" in result.stdout
    runcard = load_runcard(out)
    assert runcard.replica_ids == (1, 2, 3) and runcard.epochs == 500
    assert (runcard.optimizer.name, runcard.optimizer.learning_rate) == ("nadam", 2e-3)
    assert runcard.optimizer.clipnorm == 1.0  # n3fit's default
    assert out.read_text().startswith("# Imported by hyperscan")

    again = cli("import-n3fit", source, "-o", tmp_path / "r5.yml", "--n3fit-args", "2 -r 5")
    assert again.exit_code == 0, again.output
    assert load_runcard(tmp_path / "r5.yml").replica_ids == (2, 3, 4, 5)


def test_the_peer_hyperopt_card_becomes_a_scan_runcard(tmp_path, skip_or_fail_on_ci):
    if not (KIT / "hyperopt.yml").exists():
        skip_or_fail_on_ci(f"no n3fit peer kit at {KIT}", on_ci=f"the peer kit is missing at {KIT}")
    out = tmp_path / "scan.yml"
    result = cli("import-n3fit", KIT / "hyperopt.yml", "-o", out)
    assert result.exit_code == 0, result.output
    assert f"scan runcard written to {out}" in result.stdout
    scan = load_runcard(out)
    assert isinstance(scan, ScanRuncard) and scan.scan.trials == 4
    check_new_study(scan)  # `hyperscan scan` takes it for a new study


def test_every_key_it_cannot_map_is_named_in_one_line_and_nothing_is_written(tmp_path):
    card = n3fit_card(tensorboard={}, fiatlux={"luxset": "x"}, wobble=3)
    card["parameters"] |= {"dropout": 0.2, "regularizer": "l2"}
    card["dataset_inputs"][1]["cfac"] = ["QCD"]
    source = write(tmp_path / "n3.yml", card)
    out = tmp_path / "hs.yml"
    message = refused(cli("import-n3fit", source, "-o", out))
    assert message.startswith(f"error: {source}: cannot map to hyperscan (n3fit 4.1.5 runcard): ")
    for key in (
        "fiatlux (a photon PDF",
        "wobble (not an n3fit runcard key that hyperscan maps)",
        "parameters.dropout (0.2:",
        "parameters.regularizer (hyperscan's network has no weight regulariser)",
        "dataset_inputs[1].cfac (['QCD']:",
    ):
        assert key in message, key
    assert "tensorboard" not in message  # an output option: ignored
    assert not out.exists()


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("dataset_inputs: [\n", "invalid YAML"),
        ("- a list\n", "an n3fit runcard is a mapping of keys"),
        ("a: 1\na: 2\nb: 1\nb: 2\n", "duplicate key 'a' (lines 1 and 2)"),
    ],
)
def test_a_file_that_is_no_runcard_is_one_line(tmp_path, text, said):
    source = tmp_path / "n3.yml"
    source.write_text(text)
    assert said in refused(cli("import-n3fit", source, "-o", tmp_path / "hs.yml"))


def test_values_hyperscan_refuses_are_one_line(tmp_path):
    card = n3fit_card()
    card["parameters"]["stopping_patience"] = 1.5  # n3fit too would refuse it
    source = write(tmp_path / "n3.yml", card)
    message = refused(cli("import-n3fit", source, "-o", tmp_path / "hs.yml"))
    assert "the hyperscan runcard it maps to is invalid" in message
    assert "stopping.patience: must be <= 1, got 1.5" in message


def test_the_output_is_not_the_input_and_is_kept_without_force(tmp_path):
    source = write(tmp_path / "n3.yml", n3fit_card())
    assert "is the n3fit runcard" in refused(cli("import-n3fit", source, "-o", source))
    out = tmp_path / "hs.yml"
    out.write_text("mine\n")
    assert "exists; use --force" in refused(cli("import-n3fit", source, "-o", out))
    assert out.read_text() == "mine\n"
    assert cli("import-n3fit", source, "-o", out, "--force").exit_code == 0
    assert out.read_text() != "mine\n"
