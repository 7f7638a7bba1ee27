"""Several level-1 fits in one fit (closure ``fits``, validphys' multiclosure): members are
fits × (folds ×) replicas, each member the same replica fitted in a one-fit runcard with its
fit's seed; the runcard rule that the fits need level 1."""

from __future__ import annotations

import numpy as np
import pytest

from hyperscan.data import _from_runcard, level1_data, load_problem, replica_data
from hyperscan.fit import build_members, member_specs, run_fit
from hyperscan.fit._members import MemberSpec
from hyperscan.fit._output import results_document
from hyperscan.runcard import RuncardError, parse_fit_runcard

STABLE = {
    "replicas": [1, 2],
    "optimizer": {"name": "nadam", "learning_rate": 0.005, "clipnorm": 0.1},
    "epochs": 200,
}


def test_members_are_fits_times_folds_times_replicas() -> None:
    specs = member_specs([1, 2], [["A"], ["B"]], level1_fits=2)
    assert [(s.level1, s.fold, s.replica) for s in specs] == [
        (j, k, r) for j in (0, 1) for k in (0, 1) for r in (1, 2)
    ]
    assert member_specs([3]) == [MemberSpec(3)]  # one fit: the members as before


def test_each_fits_data_are_a_one_fit_runcard_with_its_seed(make_card) -> None:
    """Fit j fluctuates the truth with seed + j; its replicas fluctuate that around it."""
    card = make_card(data={"closure": {"size": "tiny", "level": 1, "seed": 3, "fits": 3}})
    problem = load_problem(card)
    centrals = level1_data(card, problem)
    inputs, _ = build_members(card, problem, member_specs(card.replica_ids, (), 3))
    assert centrals.shape == (3, problem.n_data)
    for j in range(3):
        alone = load_problem(make_card(data={"closure": {"size": "tiny", "seed": 3 + j}}))
        np.testing.assert_array_equal(centrals[j], alone.central)
        for i, replica in enumerate(card.replica_ids):
            expected = replica_data(alone, replica, card.seeds.data)
            np.testing.assert_array_equal(inputs.data[3 * j + i], expected)
    assert not np.allclose(centrals[0], centrals[1])


def test_each_fits_data_are_loaded_once_for_runcards_of_the_same_data(
    make_card, monkeypatch
) -> None:
    """A scan worker's trials differ in everything but their data: their extra level-1 fits
    are loaded once, not once a trial, and are the same arrays the first load gave."""
    loads = []
    fitted_data = _from_runcard._fitted_data

    def counted(data, source, fit=0):
        loads.append(fit)
        return fitted_data(data, source, fit)

    monkeypatch.setattr(_from_runcard, "_fitted_data", counted)
    _from_runcard._level1_central.cache_clear()  # what earlier tests loaded
    data = {"closure": {"size": "tiny", "level": 1, "seed": 5, "fits": 3}}
    first, second = make_card(data=data, epochs=10), make_card(data=data, epochs=20)
    problem = load_problem(first)
    loads.clear()  # the problem's own load: fit 0
    centrals = level1_data(first, problem)
    np.testing.assert_array_equal(level1_data(second, problem), centrals)
    assert loads == [1, 2]
    other = make_card(data={"closure": {**data["closure"], "seed": 6}}, epochs=10)
    assert not np.array_equal(level1_data(other, problem)[1], centrals[1])  # other data: loaded
    assert loads == [1, 2, 1, 2]


def test_a_member_equals_its_replica_in_a_one_fit_runcard(make_card) -> None:
    """float64: the batched multiclosure fit and the one-seed fits agree to 1e-6."""
    data = {"closure": {"size": "tiny", "level": 1, "seed": 3, "fits": 2}}
    result = run_fit(make_card(**STABLE, data=data))
    assert result.level1.tolist() == [0, 0, 1, 1] and result.replicas.tolist() == [1, 2, 1, 2]
    members = results_document(result)["members"]
    assert [m["level1"] for m in members] == [0, 0, 1, 1]
    for j in (0, 1):
        alone = run_fit(make_card(**STABLE, data={"closure": {"size": "tiny", "seed": 3 + j}}))
        together = result.level1 == j
        assert alone.level1.tolist() == [0, 0]
        assert alone.best_epoch.tolist() == result.best_epoch[together].tolist()
        np.testing.assert_allclose(
            result.predictions[together], alone.predictions, rtol=1e-6, atol=0
        )
        for name, values in result.chi2_per_point.items():
            np.testing.assert_allclose(values[together], alone.chi2_per_point[name], rtol=1e-6)


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ("{closure: {size: tiny, level: 0, fits: 2}}", r"data\.closure\.fits: 2 level-1 fits need"),
        (
            "{real: {closure: {level: 0, fits: 3}}}",
            r"data\.real\.closure\.fits: 3 level-1 fits need level 1, got level 0",
        ),
        ("{closure: {size: tiny, fits: 0}}", r"data\.closure\.fits"),
        ("{closure: {size: tiny, fits: two}}", r"data\.closure\.fits"),
    ],
)
def test_level1_fits_need_level1_and_a_positive_count(data: str, match: str) -> None:
    with pytest.raises(RuncardError, match=match):
        parse_fit_runcard(f"data: {data}\n", "multi.yml")


def test_a_one_fit_runcard_is_unchanged() -> None:
    card = parse_fit_runcard("data: {closure: {size: tiny, seed: 4}}\n", "one.yml")
    assert card.data.closure.fits == 1 and card.data.level1_fits == 1
