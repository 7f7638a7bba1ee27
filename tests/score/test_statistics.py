# SPDX-License-Identifier: GPL-3.0-or-later
"""A trial's value from χ² per replica: statistics across replicas, then across folds.

Every expected value below is worked out by hand from the explicit numbers, not by running the
formula again.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import optuna
import pytest

from hyperscan.fit import MemberSpec, member_specs
from hyperscan.runcard import ObjectiveSection, load_scan_runcard
from hyperscan.score._statistics import (
    all_statistics,
    fold_statistic,
    replica_statistic,
    summary,
    trial_value,
)

STUDIES = Path(__file__).resolve().parents[2] / "studies"

# Five replicas, deliberately unsorted: sorted 1 2 3 4 5, mean 3, median 3, max 5,
# population std sqrt(2) = 1.41421356...
FIVE = np.array([5.0, 1.0, 4.0, 2.0, 3.0])


def objective(**settings) -> ObjectiveSection:
    return ObjectiveSection(**settings)


# --------------------------------------------------------------------------- one fold


@pytest.mark.parametrize(
    ("statistic", "chi2", "expected"),
    [
        ("mean", [5.0, 1.0, 4.0, 2.0, 3.0], 3.0),
        ("mean", [1.0, 2.0, 3.0, 10.0], 4.0),
        ("median", [5.0, 1.0, 4.0, 2.0, 3.0], 3.0),
        ("median", [1.0, 2.0, 3.0, 10.0], 2.5),  # even count: mean of the middle two
        ("max", [5.0, 1.0, 4.0, 2.0, 3.0], 5.0),
        ("max", [1.0, 2.0, 3.0, 10.0], 10.0),
        ("mean", [7.25], 7.25),
        ("median", [7.25], 7.25),
        ("max", [7.25], 7.25),
    ],
)
def test_plain_statistics(statistic: str, chi2: list[float], expected: float) -> None:
    value = replica_statistic(np.array(chi2), objective(statistic=statistic))
    assert isinstance(value, float)
    assert value == pytest.approx(expected, abs=1e-12)


def test_default_statistic_is_the_mean() -> None:
    assert replica_statistic(FIVE, objective()) == pytest.approx(3.0)


@pytest.mark.parametrize(
    ("fraction", "expected"),
    [
        (1.0, 3.0),  # all five: (1+2+3+4+5)/5
        (0.85, 3.0),  # 4.25 -> 5 replicas (a floor would keep 4: 2.5)
        (0.8, 2.5),  # 4.0 exactly -> 4 replicas: (1+2+3+4)/4
        (0.7, 2.5),  # 3.5 -> 4
        (0.6, 2.0),  # 3.0 exactly -> 3: (1+2+3)/3
        (0.5, 2.0),  # 2.5 -> 3 (rounding half to even would keep 2: 1.5)
        (0.3, 1.5),  # 1.5 -> 2: (1+2)/2
        (0.2, 1.0),  # 1.0 exactly -> the best replica only
        (0.1, 1.0),  # 0.5 -> 1
        (0.01, 1.0),  # 0.05 -> 1: never an empty mean
    ],
)
def test_trimmed_mean_keeps_the_best_ceil_fraction(fraction: float, expected: float) -> None:
    value = replica_statistic(FIVE, objective(statistic="trimmed_mean", best_fraction=fraction))
    assert value == pytest.approx(expected, abs=1e-12)


def test_trimmed_mean_of_one_replica_is_that_replica() -> None:
    card = objective(statistic="trimmed_mean", best_fraction=0.01)
    assert replica_statistic(np.array([42.5]), card) == 42.5


def test_trimmed_mean_ignores_the_worst_not_the_first() -> None:
    # 0.85 of 20 = 17 exactly: the three worst (100, 200, 300) are dropped wherever they sit.
    chi2 = np.array([300.0, 1.0] + [2.0] * 15 + [200.0, 3.0, 100.0])
    card = objective(statistic="trimmed_mean", best_fraction=0.85)
    # kept: 1 + 15*2 + 3 = 34 over 17 replicas
    assert replica_statistic(chi2, card) == pytest.approx(2.0)


@pytest.mark.parametrize(
    ("fraction", "replicas", "kept"),
    [
        (0.55, 100, 55),  # 0.55 * 100 = 55.00000000000001 in floating point
        (0.14, 50, 7),  # 7.000000000000001
    ],
)
def test_trimmed_mean_count_is_exact_for_whole_products(
    fraction: float, replicas: int, kept: int
) -> None:
    """A fraction times the replicas that is a whole number keeps exactly that many.

    χ² = 1..R shuffled: the mean of the best k is (1 + k) / 2, so one replica too many shows.
    """
    chi2 = np.random.default_rng(0).permutation(np.arange(1.0, replicas + 1))
    card = objective(statistic="trimmed_mean", best_fraction=fraction)
    assert replica_statistic(chi2, card) == pytest.approx((1 + kept) / 2, abs=1e-12)


@pytest.mark.parametrize(
    ("weight", "chi2", "expected"),
    [
        (1.0, [1.0, 3.0], 3.0),  # mean 2, population std 1
        (2.0, [1.0, 3.0], 4.0),
        (0.0, [1.0, 3.0], 2.0),  # no weight: the mean
        (0.5, [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0], 6.0),  # mean 5, std 2
        (3.0, [6.0, 6.0, 6.0], 6.0),  # no spread
        (1.0, [5.0, 1.0, 4.0, 2.0, 3.0], 3.0 + math.sqrt(2.0)),
    ],
)
def test_mean_plus_std(weight: float, chi2: list[float], expected: float) -> None:
    card = objective(statistic="mean_plus_std", std_weight=weight)
    assert replica_statistic(np.array(chi2), card) == pytest.approx(expected, abs=1e-12)


def test_default_std_weight_is_one() -> None:
    card = objective(statistic="mean_plus_std")
    assert replica_statistic(np.array([1.0, 3.0]), card) == pytest.approx(3.0)


@pytest.mark.parametrize("statistic", ["mean", "median", "max", "mean_plus_std"])
def test_a_nan_replica_makes_the_statistic_nan(statistic: str) -> None:
    value = replica_statistic(np.array([1.0, math.nan, 2.0]), objective(statistic=statistic))
    assert math.isnan(value)


@pytest.mark.parametrize("statistic", ["mean", "max", "mean_plus_std"])
def test_an_infinite_replica_makes_the_statistic_non_finite(statistic: str) -> None:
    with np.errstate(invalid="ignore"):
        value = replica_statistic(np.array([1.0, math.inf, 2.0]), objective(statistic=statistic))
    assert not math.isfinite(value)


def test_the_median_shrugs_off_a_minority_of_infinite_replicas() -> None:
    card = objective(statistic="median")
    assert replica_statistic(np.array([1.0, math.inf, 2.0]), card) == 2.0
    assert replica_statistic(np.array([1.0, math.inf, math.inf]), card) == math.inf


def test_trimmed_mean_with_every_replica_kept_stays_non_finite() -> None:
    card = objective(statistic="trimmed_mean", best_fraction=1.0)
    assert not math.isfinite(replica_statistic(np.array([1.0, math.inf, 2.0]), card))


def test_replica_statistic_accepts_lists_and_integers() -> None:
    assert replica_statistic([1, 2, 6], objective(statistic="mean")) == 3.0


# --------------------------------------------------------------------------- folds


@pytest.mark.parametrize(
    ("fold_stat", "expected"),
    [("mean", 4.0), ("median", 3.0), ("max", 8.0)],
)
def test_fold_statistic(fold_stat: str, expected: float) -> None:
    values = np.array([3.0, 8.0, 1.0])
    assert fold_statistic(values, objective(fold_statistic=fold_stat)) == expected


# Three folds of three replicas, members interleaved (not grouped) on purpose.
#   fold 0: 1, 2, 9   -> mean 4,  median 2, max 9
#   fold 1: 4, 4, 4   -> mean 4,  median 4, max 4
#   fold 2: 10, 0, 20 -> mean 10, median 10, max 20
FOLD_CHI2 = np.array([1.0, 4.0, 10.0, 2.0, 4.0, 0.0, 9.0, 4.0, 20.0])
FOLD_TAGS = np.array([0, 1, 2, 0, 1, 2, 0, 1, 2])


@pytest.mark.parametrize(
    ("statistic", "fold_stat", "expected"),
    [
        ("mean", "mean", 6.0),  # (4 + 4 + 10) / 3
        ("mean", "median", 4.0),
        ("mean", "max", 10.0),
        ("median", "mean", 16.0 / 3.0),  # (2 + 4 + 10) / 3
        ("median", "median", 4.0),
        ("max", "mean", 11.0),  # (9 + 4 + 20) / 3
        ("max", "max", 20.0),
        ("max", "median", 9.0),
    ],
)
def test_trial_value_reduces_each_fold_then_the_folds(
    statistic: str, fold_stat: str, expected: float
) -> None:
    card = objective(statistic=statistic, fold_statistic=fold_stat)
    assert trial_value(FOLD_CHI2, FOLD_TAGS, card) == pytest.approx(expected, abs=1e-12)


def test_trial_value_is_not_the_statistic_of_the_pooled_members() -> None:
    # Pooled median of all nine would be 4, pooled max 20; per fold then mean: 16/3 and 11.
    card = objective(statistic="median", fold_statistic="mean")
    assert trial_value(FOLD_CHI2, FOLD_TAGS, card) != pytest.approx(4.0)


def test_trial_value_trimmed_mean_per_fold() -> None:
    # best_fraction 0.5 of 3 replicas -> ceil(1.5) = 2 per fold:
    #   fold 0: (1+2)/2 = 1.5; fold 1: 4; fold 2: (0+10)/2 = 5  -> mean 3.5, max 5
    card = objective(statistic="trimmed_mean", best_fraction=0.5, fold_statistic="mean")
    assert trial_value(FOLD_CHI2, FOLD_TAGS, card) == pytest.approx(3.5)
    card = card.model_copy(update={"fold_statistic": "max"})
    assert trial_value(FOLD_CHI2, FOLD_TAGS, card) == pytest.approx(5.0)


def test_trial_value_without_folds_is_the_replica_statistic() -> None:
    # Without k-fold every member carries fold -1 (MemberSpec's default).
    card = objective(statistic="median", fold_statistic="max")
    assert trial_value(FIVE, np.full(5, -1), card) == pytest.approx(3.0)


def test_trial_value_a_non_finite_fold_is_not_hidden() -> None:
    chi2 = np.array([1.0, 2.0, math.nan, 4.0])
    folds = np.array([0, 0, 1, 1])
    for fold_stat in ("mean", "median", "max"):
        card = objective(fold_statistic=fold_stat)
        assert not math.isfinite(trial_value(chi2, folds, card))


# --------------------------------------------------------------------------- summary


def test_summary_keys_values_and_rounding() -> None:
    # 1, 2, 3, 4, 5 + 1e-7: min 1, max 5 (rounded to 5 decimals), mean 3, median 3,
    # population std sqrt(2) -> 1.41421; linear quantiles at 0.16 and 0.84 of 4 gaps:
    # position 0.64 -> 1.64, position 3.36 -> 4.36.
    values = np.array([5.0 + 1e-7, 1.0, 4.0, 2.0, 3.0])
    assert summary(values) == {
        "mean": 3.0,
        "std": 1.41421,
        "min": 1.0,
        "max": 5.0,
        "q16": 1.64,
        "q50": 3.0,
        "q84": 4.36,
        "n": 5,
    }


def test_summary_rounds_to_five_decimals() -> None:
    result = summary(np.array([1.234567891, 1.234567891]))
    assert result["mean"] == 1.23457
    assert result["std"] == 0.0
    assert result["min"] == result["max"] == result["q50"] == 1.23457


def test_summary_values_are_plain_json_types() -> None:
    result = summary(np.array([1.0, 2.0]))
    assert all(type(value) is float for key, value in result.items() if key != "n")
    assert type(result["n"]) is int


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([1.0, math.nan, 3.0], {"n": 3, "finite": 2}),
        ([math.inf, 2.0], {"n": 2, "finite": 1}),
        ([-math.inf], {"n": 1, "finite": 0}),
        ([math.nan, math.nan], {"n": 2, "finite": 0}),
        ([], {"n": 0, "finite": 0}),
    ],
)
def test_summary_of_non_finite_or_empty_values_only_counts(
    values: list[float], expected: dict[str, int]
) -> None:
    assert summary(np.array(values)) == expected


# --------------------------------------------------------------------------- all statistics


def test_all_statistics_hand_computed() -> None:
    card = objective(statistic="max", best_fraction=0.5, std_weight=2.0)
    # trimmed: ceil(2.5) = 3 best -> 2; mean + 2 std = 3 + 2 sqrt(2) = 5.8284271...
    assert all_statistics(FIVE, np.full(5, -1), card) == {
        "mean": 3.0,
        "median": 3.0,
        "trimmed_mean": 2.0,
        "max": 5.0,
        "mean_plus_std": 5.828427,
    }


def test_all_statistics_uses_the_objective_settings_and_rounds_to_six_decimals() -> None:
    chi2 = np.array([1.0, 2.0, 2.0, 5.0])
    # mean 2.5; deviations -1.5 -0.5 -0.5 2.5 -> population variance 9/4, std 1.5
    # default best_fraction 0.85 of 4 = 3.4 -> all 4 kept: 2.5; default std_weight 1: 4.0
    stats = all_statistics(chi2, np.full(4, -1), objective())
    assert stats["trimmed_mean"] == 2.5
    assert stats["mean_plus_std"] == 4.0
    # best 3 of 4: 5/3 rounded to 6 decimals; weight 0: the mean
    stats = all_statistics(chi2, np.full(4, -1), objective(best_fraction=0.75, std_weight=0.0))
    assert stats["trimmed_mean"] == 1.666667
    assert stats["mean_plus_std"] == stats["mean"] == 2.5
    # weight 2/3: 2.5 + 1 = 3.5; median of 1 2 2 5 is 2; max 5
    stats = all_statistics(chi2, np.full(4, -1), objective(std_weight=2.0 / 3.0))
    assert stats == {
        "mean": 2.5,
        "median": 2.0,
        "trimmed_mean": 2.5,
        "max": 5.0,
        "mean_plus_std": 3.5,
    }


@pytest.mark.parametrize("statistic", ["mean", "median", "trimmed_mean", "max", "mean_plus_std"])
def test_all_statistics_contains_the_trial_value_without_folds(statistic: str) -> None:
    """The stored statistics let a study be re-ranked: the chosen one is the trial's value."""
    card = objective(statistic=statistic, best_fraction=0.5, std_weight=1.5)
    stats = all_statistics(FIVE, np.full(5, -1), card)
    assert stats[statistic] == pytest.approx(trial_value(FIVE, np.full(5, -1), card), abs=1e-6)


@pytest.mark.parametrize("statistic", ["median", "trimmed_mean", "max"])
@pytest.mark.parametrize("fold_statistic", ["mean", "max"])
def test_all_statistics_contain_the_trial_value_with_folds(
    statistic: str, fold_statistic: str
) -> None:
    """Per fold first, then across folds, exactly as the trial value; not pooled members."""
    card = objective(statistic=statistic, fold_statistic=fold_statistic, best_fraction=0.5)
    chi2 = np.array([1.0, 9.0, 2.0, 3.0, 4.0, 30.0])
    folds = np.array([0, 0, 0, 1, 1, 1])
    stats = all_statistics(chi2, folds, card)
    assert stats[statistic] == pytest.approx(trial_value(chi2, folds, card), abs=1e-6)


def test_all_statistics_keeps_non_finite_values() -> None:
    with np.errstate(invalid="ignore"):
        stats = all_statistics(
            np.array([1.0, math.inf]), np.full(2, -1), objective(best_fraction=1.0)
        )
    assert set(stats) == {"mean", "median", "trimmed_mean", "max", "mean_plus_std"}
    assert not any(math.isfinite(value) for value in stats.values())


# --------------------------------------------------------------------------- members


def test_member_specs_without_folds_are_the_replicas() -> None:
    card = load_scan_runcard(STUDIES / "quickstart-scan.yml")
    assert card.scan.replicas == 2 and not card.scan.folds
    assert member_specs(card.scan.replica_ids, card.scan.folds) == [MemberSpec(1), MemberSpec(2)]
    assert all(
        spec.fold == -1 and spec.held_out == ()
        for spec in member_specs(card.scan.replica_ids, card.scan.folds)
    )


def test_member_specs_are_folds_times_replicas() -> None:
    card = load_scan_runcard(STUDIES / "kfold-scan.yml")
    folds = [tuple(fold) for fold in card.scan.folds]
    assert len(folds) == 3 and card.scan.replicas == 2
    specs = member_specs(card.scan.replica_ids, card.scan.folds)
    assert specs == [
        MemberSpec(1, held_out=folds[0], fold=0),
        MemberSpec(2, held_out=folds[0], fold=0),
        MemberSpec(1, held_out=folds[1], fold=1),
        MemberSpec(2, held_out=folds[1], fold=1),
        MemberSpec(1, held_out=folds[2], fold=2),
        MemberSpec(2, held_out=folds[2], fold=2),
    ]
    assert len(specs) == card.scan.members


def test_member_specs_scale_with_replicas_and_feed_trial_value() -> None:
    base = load_scan_runcard(STUDIES / "kfold-scan.yml")
    card = base.model_copy(update={"scan": base.scan.model_copy(update={"replicas": 4})})
    specs = member_specs(card.scan.replica_ids, card.scan.folds)
    assert len(specs) == 12
    assert [spec.replica for spec in specs] == [1, 2, 3, 4] * 3
    tags = np.array([spec.fold for spec in specs])
    assert tags.tolist() == [0] * 4 + [1] * 4 + [2] * 4
    # Each fold's replicas are grouped by that tag: fold k has χ² = k + 1 for every replica.
    chi2 = tags + 1.0
    card_max = ObjectiveSection(statistic="mean", fold_statistic="max")
    assert trial_value(chi2, tags, card_max) == 3.0
    assert trial_value(chi2, tags, ObjectiveSection(fold_statistic="mean")) == 2.0


def test_a_trial_s_fit_runcard_has_the_trial_s_members() -> None:
    """The fit runcard of a k-fold trial (what export writes) lists the trial's folds and
    replicas, so `hyperscan fit` of it fits the members the worker fitted, in its order."""
    card = load_scan_runcard(STUDIES / "kfold-scan.yml")
    params = card.scan.space.suggest(
        optuna.create_study(sampler=optuna.samplers.RandomSampler(0)).ask()
    )
    fit = card.trial_runcard(params)
    assert fit.folds == card.scan.folds and fit.replica_ids == card.scan.replica_ids
