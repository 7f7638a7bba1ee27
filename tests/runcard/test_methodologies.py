# SPDX-License-Identifier: GPL-3.0-or-later
"""Per-replica methodologies: each entry merged key by key over the runcard, validated as the
runcard it makes, its mistakes reported at their key paths inside `methodologies`."""

from __future__ import annotations

import pytest

from hyperscan.runcard import (
    MEMBER_KEYS,
    FitRuncard,
    RuncardError,
    dump_runcard,
    parse_fit_runcard,
    parse_scan_runcard,
)

BASE = """\
replicas: [3, 5, 8]
architecture: {nodes: [12, 10], activations: [relu, relu], initializer: he_normal}
optimizer: {name: adam, learning_rate: 1.0e-2}
positivity: {initial: 10, max: 1000}
epochs: 500
"""

METHODOLOGIES = """\
methodologies:
  - {trial: 4, optimizer: {learning_rate: 1.0e-3}}
  - {architecture: {nodes: [30]}, positivity: {multiplier: 1.1}, epochs: 900}
  - {trial: 0, preprocessing: {g: {alpha: [0.9, 1.0]}}, seeds: {network: 11}}
"""


@pytest.fixture
def runcard() -> FitRuncard:
    return parse_fit_runcard(BASE + METHODOLOGIES)


def test_an_entry_is_merged_key_by_key_over_the_base(runcard):
    base = parse_fit_runcard(BASE)
    first = runcard.member_runcard(3)
    assert first.optimizer.learning_rate == 1.0e-3
    assert first.optimizer.name == "adam"  # the base's, kept
    assert first.architecture == base.architecture and first.epochs == 500

    second = runcard.member_runcard(5)
    # nodes alone: one tanh layer, the default rule; the base's initializer kept
    assert second.architecture.nodes == (30,)
    assert second.architecture.activations == ("tanh",)
    assert second.architecture.initializer == "he_normal"
    # multiplier alone clears max; initial kept
    assert (second.positivity.multiplier, second.positivity.max) == (1.1, None)
    assert second.positivity.initial == 10
    assert second.epochs == 900 and second.optimizer == base.optimizer

    third = runcard.member_runcard(8)
    assert third.preprocessing["g"].alpha == (0.9, 1.0)
    assert third.preprocessing["g"].beta == base.preprocessing["g"].beta
    assert third.preprocessing["Sigma"] == base.preprocessing["Sigma"]
    assert third.seeds.network == 11 and third.seeds.data == base.seeds.data


def test_member_runcard_is_that_replica_alone(runcard):
    for replica in runcard.replica_ids:
        member = runcard.member_runcard(replica)
        assert member.replica_ids == (replica,)
        assert member.methodologies == ()
        assert member.data == runcard.data and member.training == runcard.training
        # the same as the runcard a user would write for it
        assert member == parse_fit_runcard(dump_runcard(member))
    assert [runcard.member_trial(r) for r in runcard.replica_ids] == [4, None, 0]
    with pytest.raises(ValueError, match="replica 4 is not fitted"):
        runcard.member_runcard(4)


def test_without_methodologies_every_member_fits_the_base():
    base = parse_fit_runcard(BASE)
    assert base.member_runcard(5) == base.model_copy(update={"replicas": (5,)})
    assert base.member_trial(5) is None


def test_dump_loads_back_to_an_equal_runcard(runcard):
    again = parse_fit_runcard(dump_runcard(runcard))
    assert again == runcard and hash(again) == hash(runcard)
    assert [again.member_runcard(r) for r in again.replica_ids] == [
        runcard.member_runcard(r) for r in runcard.replica_ids
    ]
    assert dump_runcard(again) == dump_runcard(runcard)


def _problems(text: str) -> dict[str, str]:
    with pytest.raises(RuncardError) as info:
        parse_fit_runcard(text)
    return dict(info.value.problems)


def test_a_list_of_the_wrong_length_names_both_lengths():
    problems = _problems(BASE + "methodologies: [{}, {epochs: 10}]\n")
    assert problems == {
        "methodologies": "expected one entry per replica, in the order of `replicas`: the "
        "runcard fits 3 replicas but `methodologies` has 2 entries"
    }


@pytest.mark.parametrize("key", ["data", "training", "divergence", "folds", "replicas"])
def test_a_key_shared_by_all_replicas_is_refused_at_its_path(key):
    value = {"data": "{pseudodata: false}", "folds": "[[a]]", "replicas": "2"}.get(key, "{}")
    text = BASE + f"methodologies: [{{}}, {{{key}: {value}}}, {{}}]\n"
    problems = _problems(text)
    assert list(problems) == [f"methodologies[1].{key}"]
    assert f"'{key}' must be the same for all replicas" in problems[f"methodologies[1].{key}"]


def test_mistakes_inside_entries_are_all_reported_at_their_key_paths():
    text = BASE + (
        "methodologies:\n"
        "  - {optimizer: {learning_rate: -1, name: adm}}\n"
        "  - {architecture: {nodes: [30], activations: [tanh, relu]}, epoch: 3}\n"
        "  - {positivity: {initial: 2.0e3}, trial: -1}\n"
    )
    problems = _problems(text)
    assert problems["methodologies[0].optimizer.learning_rate"] == "must be > 0, got -1"
    assert "did you mean 'adam'?" in problems["methodologies[0].optimizer.name"]
    assert "'activations' has 2 entries" in problems["methodologies[1].architecture.activations"]
    unknown = problems["methodologies[1].epoch"]
    assert "did you mean 'epochs'?" in unknown
    assert unknown.endswith("allowed keys: " + ", ".join(("trial", *MEMBER_KEYS)))
    # a rule between the entry's value and the base's: max (the base's 1000) >= initial
    assert "must be >= initial (2000)" in problems["methodologies[2].positivity.max"]
    assert problems["methodologies[2].trial"] == "must be >= 0, got -1"


def test_an_entry_must_be_a_mapping():
    problems = _problems(BASE + "methodologies: [{}, 7, {}]\n")
    assert problems == {"methodologies[1]": "expected a mapping, got the integer 7"}


def test_a_scan_runcard_refuses_methodologies():
    with pytest.raises(RuncardError) as info:
        parse_scan_runcard(
            "methodologies: [{epochs: 10}]\n"
            "scan: {space: {parameters: {epochs: {low: 10, high: 20}}}}\n"
        )
    ((path, message),) = info.value.problems
    assert path == "methodologies"
    assert "a scan runcard has no per-replica methodologies" in message
