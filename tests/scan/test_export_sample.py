# SPDX-License-Identifier: GPL-3.0-or-later
"""`hyperscan export --sample`: a fit runcard whose replicas draw their methodology from a
study's best eligible trials, reproducibly, with every mistake refused before anything is
written.

The studies are made by hand on the embedded journal: trials drawn from the space as a
worker draws them and told a value, no fit.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import optuna
import pytest
from _service import assert_clean_failure, cli, create, scan_card, write_card
from optuna.trial import TrialState

from hyperscan.fit import run_fit
from hyperscan.runcard import load_fit_runcard, load_scan_runcard
from hyperscan.scan import open_storage
from hyperscan.scan._trial_attrs import TRASHED_ATTR
from hyperscan.scan.storage import load_study

SPACE = {
    "optimizer": {"adam": {"learning_rate": {"low": 1.0e-3, "high": 3.0e-2, "log": True}}},
    "parameters": {"epochs": {"low": 50, "high": 400}},
}
#: Values told to trials 0..9 (lower is better); trial 5 is trashed, trial 7 fails.
VALUES = [0.5, 0.1, 0.9, 0.3, 0.2, 0.05, 0.8, None, 0.15, 0.6]
TRASHED, FAILED = 5, 7


def told_study(tmp_path: Path, card: dict[str, Any], values: list[float | None]) -> str:
    """Study 's' of `card` on a journal file, a trial drawn from its space for each value and
    told it (None: failed; trial number TRASHED: trashed); its storage URL."""
    url = str(tmp_path / "scan.journal")
    path = write_card(tmp_path / "scan.yml", card)
    create(path, url, "s")
    space = load_scan_runcard(path).scan.space
    # A seeded sampler: the drawn trials, and so every test's fits, are the same on each run.
    sampler = optuna.samplers.RandomSampler(seed=0)
    optuna_study = load_study(open_storage(url), "s", sampler=sampler)
    with warnings.catch_warnings():  # trials asked for by hand: no heartbeat
        warnings.simplefilter("ignore", UserWarning)
        for number, value in enumerate(values):
            trial = optuna_study.ask()
            space.suggest(trial)
            if number == TRASHED:
                trial.set_user_attr(TRASHED_ATTR, "a rule broken together")
                optuna_study.tell(trial, state=TrialState.PRUNED)
            elif value is None:
                optuna_study.tell(trial, state=TrialState.FAIL)
            else:
                optuna_study.tell(trial, value)
    return url


@pytest.fixture
def study(tmp_path: Path) -> tuple[str, Path]:
    """A study of 10 finished trials on a journal file, of 4 replicas each."""
    card = scan_card(scan={"trials": 20, "replicas": 4, "space": SPACE})
    return told_study(tmp_path, card, VALUES), tmp_path


def sample(url: str, out: Path, *args: Any) -> Any:
    return cli("export", "--study", "s", "--storage", url, "-o", out, *args)


def trials_of(path: Path) -> list[int]:
    runcard = load_fit_runcard(path)
    return [runcard.member_trial(replica) for replica in runcard.replica_ids]


def best(n: int, thermalization: int = 0) -> list[int]:
    """The n best eligible trials by their told value."""
    eligible = [
        (value, number)
        for number, value in enumerate(VALUES)
        if value is not None and number not in (TRASHED, FAILED) and number >= thermalization
    ]
    return [number for _, number in sorted(eligible)[:n]]


def test_sample_draws_replicas_from_the_best_eligible_trials(study):
    url, tmp = study
    out = tmp / "ensemble.yml"
    result = sample(url, out, "--sample", 3, "--thermalization", 2)
    assert result.exit_code == 0, result.output
    drawn = trials_of(out)
    assert len(drawn) == 4  # one per replica of a trial
    assert set(drawn) <= set(best(3, 2))
    assert f"written to {out}" in result.stdout

    # Each replica fits its trial's methodology: the trial's own fit runcard, for that replica.
    runcard = load_fit_runcard(out)
    scan = load_scan_runcard(tmp / "scan.yml")
    trials = {t.number: t for t in load_study(open_storage(url), "s").get_trials()}
    for replica in runcard.replica_ids:
        member = runcard.member_runcard(replica)
        alone = scan.scan.space.apply(scan.fit, trials[runcard.member_trial(replica)].params)
        assert member.optimizer == alone.optimizer
        assert member.epochs == alone.epochs
        assert member.data == scan.fit.data and member.replica_ids == (replica,)
        assert member.folds == ()  # the ensemble fits all data

    # The header says which trials were eligible and the rule (lines wrapped at spaces).
    text = out.read_text()
    comments = [line[1:] for line in text.splitlines() if line.startswith("#")]
    header = " ".join(" ".join(comments).split())
    eligible = [n for n in range(2, len(VALUES)) if n not in (TRASHED, FAILED)]
    assert f"eligible: {', '.join(map(str, eligible))} " in header
    rule = "one of the 3 best (lowest value) of the eligible trials: complete, not trashed, "
    assert rule + "numbered 2 or above" in header
    assert "seed: 0" in header


def test_sample_is_reproducible_from_its_seed(study):
    url, tmp = study
    runs = {}
    for name, args in [
        ("a", ()),
        ("b", ()),
        ("c", ("--seed", 0)),
        ("d", ("--seed", 7)),
    ]:
        result = sample(url, tmp / f"{name}.yml", "--sample", 4, "--override", "replicas=40", *args)
        assert result.exit_code == 0, result.output
        runs[name] = trials_of(tmp / f"{name}.yml")
    assert runs["a"] == runs["b"] == runs["c"]  # the default seed is 0
    assert runs["d"] != runs["a"]  # 40 draws among 4 trials: another seed draws otherwise
    assert set(runs["a"]) == set(best(4))  # 40 draws take every one of 4 trials
    assert "seed: 7" in (tmp / "d.yml").read_text()


def test_overrides_apply_to_the_base_and_every_methodology(study):
    url, tmp = study
    out = tmp / "long.yml"
    args = ("--sample", 2, "--override", "epochs=1000", "--override", "optimizer.clipnorm=1e-3")
    result = sample(url, out, *args)
    assert result.exit_code == 0, result.output
    runcard = load_fit_runcard(out)
    assert runcard.epochs == 1000 and runcard.optimizer.clipnorm == 1.0e-3
    for replica in runcard.replica_ids:
        member = runcard.member_runcard(replica)
        assert member.epochs == 1000  # each trial drew its own epochs: overridden
        assert member.optimizer.clipnorm == 1.0e-3
        assert member.optimizer.name == "adam"  # the trial's, kept
    assert "overrides: epochs=1000 optimizer.clipnorm=0.001" in out.read_text()


def test_plain_export_still_writes_the_best_trial(study):
    url, tmp = study
    result = sample(url, tmp / "best.yml")
    assert result.exit_code == 0, result.output
    assert f"trial {best(1)[0]} " in result.stdout
    assert load_fit_runcard(tmp / "best.yml").methodologies == ()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--sample", 9), "--sample 9 is more than the 8 eligible trials"),
        (("--sample", 6, "--thermalization", 3), "--sample 6 is more than the 5 eligible"),
        (("--sample", 1, "--thermalization", 10), "--thermalization 10 leaves no trial"),
        (("--sample", 2, "--override", "epochs=0"), "epochs: must be >= 1, got 0"),
        (("--sample", 2, "--override", "epoch=10"), "unknown key 'epoch' (did you mean"),
        (("--sample", 2, "--override", "epochs.x=1"), "'epochs' is not a section"),
        (("--sample", 2, "--override", "epochs"), "expected a dotted key path, '=' and a"),
        (("--sample", 2, "--override", "epochs=[1,"), "--override epochs: invalid YAML"),
        (("--sample", 2, "--override", "methodologies=[]"), "the methodologies are what"),
        (("--sample", 2, "--override", "data=1"), "data: expected a mapping"),
        (("--sample", 2, "--trial", 1), "either --trial N (one trial) or --sample N"),
        (("--seed", 3), "--seed only apply with --sample N"),
    ],
)
def test_mistakes_exit_2_and_write_nothing(study, args, message):
    url, tmp = study
    out = tmp / "refused.yml"
    refused = assert_clean_failure(sample(url, out, *args))
    assert message in refused
    assert not out.exists()


def test_a_multi_objective_study_is_refused(tmp_path):
    """Trials of several objectives have no one ranking to take the best of."""
    url = str(tmp_path / "scan.journal")
    create(write_card(tmp_path / "scan.yml", scan_card()), url, "s")
    storage = open_storage(url)
    two = optuna.create_study(storage=storage, study_name="two", directions=["minimize"] * 2)
    for key, value in load_study(storage, "s").user_attrs.items():  # the same runcard
        two.set_user_attr(key, value)
    out = tmp_path / "two.yml"
    args = ("export", "--study", "two", "--storage", url, "-o", out, "--sample", 1)
    refused = assert_clean_failure(cli(*args))
    assert "study 'two' has 2 objectives" in refused
    assert not out.exists()


#: A space whose trials differ in every kind of methodology the engine batches: optimiser
#: kind and learning rate, depth, widths, activation, initialiser, epochs.
MIXED_SPACE = {
    "optimizer": {
        "adam": {"learning_rate": {"low": 1.0e-3, "high": 3.0e-2, "log": True}},
        "nadam": {"learning_rate": {"low": 1.0e-3, "high": 3.0e-2, "log": True}},
    },
    "layers": {"low": 1, "high": 2},
    "units": {"low": 3, "high": 8},
    "activation": ["tanh", "sigmoid"],
    "parameters": {
        "epochs": {"low": 60, "high": 120},
        "architecture.initializer": {"choices": ["glorot_normal", "he_uniform"]},
    },
}


def test_a_sampled_ensemble_fits_in_one_model_as_its_members_alone(tmp_path):
    """`hyperscan fit` of an exported --sample runcard fits every replica with its trial's
    methodology in one batched model: each member's χ² equals that trial's runcard fitted for
    that replica alone (float64: to 1e-6), and results.json names each member's trial."""
    card = scan_card(
        scan={"trials": 20, "replicas": 1, "space": MIXED_SPACE},
        training={"precision": "float64", "jit": False, "steps_per_call": 20},
    )
    url = told_study(tmp_path, card, [0.3, 0.1, 0.2, 0.4])
    out = tmp_path / "ensemble.yml"
    drawn = sample(url, out, "--sample", 3, "--override", "replicas=5", "--seed", 4)
    assert drawn.exit_code == 0, drawn.output
    runcard = load_fit_runcard(out)
    cards = [runcard.member_runcard(replica) for replica in runcard.replica_ids]
    assert len({c.architecture for c in cards}) > 1, "the draw should mix architectures"

    fitted = cli("fit", out, "-o", tmp_path / "fit", "--no-progress")
    assert fitted.exit_code == 0, fitted.output
    members = json.loads((tmp_path / "fit" / "results.json").read_text())["members"]
    assert [m["trial"] for m in members] == trials_of(out)
    for member, alone in zip(members, cards, strict=True):
        expected = run_fit(alone)
        assert member["replica"] == expected.replicas[0]
        for category in ("training", "validation"):
            assert member["chi2_per_point"][category] == pytest.approx(
                expected.chi2_per_point[category][0], rel=1e-6
            )
