"""Stopping, positivity veto and divergence act on each member alone."""

from __future__ import annotations

import dataclasses
import os
import signal
import threading
import time

import numpy as np
import pytest

from hyperscan.data import FIT_BASIS, load_problem, replica_data
from hyperscan.fit import (
    DIVERGED,
    RUNNING,
    STOPPED,
    build_members,
    member_specs,
    run_fit,
    stop_on_signals,
    summary,
    trainer_settings,
)
from hyperscan.fit._fit import member_status
from hyperscan.model import HELD_OUT


def _settings(card, **changes):
    return dataclasses.replace(trainer_settings(card, len(card.replica_ids)), **changes)


def _constant_pdf_weights(card, sigma_bias: float, gluon_bias: float):
    """Weights whose PDF is the preprocessing alone, scaled by the output biases."""
    problem = load_problem(card)
    _, params = build_members(card, problem, member_specs(card.replica_ids)[:1])
    params = [np.zeros_like(p) for p in params]
    params[-1][0, FIT_BASIS.index("Sigma")] = sigma_bias
    params[-1][0, FIT_BASIS.index("g")] = gluon_bias
    for name in ("V", "V3", "V8"):
        params[-1][0, FIT_BASIS.index(name)] = 1.0
    return params


def test_a_held_out_fold_is_scored_against_the_central_data(make_card):
    """As n3fit scores its folds; the points a member fits keep the replica's pseudodata."""
    card = make_card(replicas=[1, 2])
    problem = load_problem(card)
    fold = [problem.datasets[0].name]
    inputs, _ = build_members(card, problem, member_specs(card.replica_ids, [fold]))
    held_out = inputs.categories == HELD_OUT
    assert held_out.any(axis=1).all() and not held_out.all(axis=1).any()
    for m, replica in enumerate(card.replica_ids):
        pseudodata = replica_data(problem, replica, card.seeds.data)
        expected = np.where(held_out[m], problem.central, pseudodata)
        np.testing.assert_array_equal(inputs.data[m], expected)
        assert not np.allclose(pseudodata[held_out[m]], problem.central[held_out[m]])


def test_a_member_that_cannot_improve_stops_after_patience(make_card):
    card = make_card(
        replicas=[1, 2],
        epochs=300,
        optimizer={"name": "adam", "clipnorm": None},
        stopping={"threshold_chi2": 1e6},
    )
    start = _constant_pdf_weights(card, sigma_bias=1.0, gluon_bias=1.0)
    params = [np.concatenate([p, p]) for p in start]
    settings = _settings(card, learning_rate=np.array([0.0, 1e-3]), patience_steps=30)
    result = run_fit(card, settings=settings, initial_params=params)
    # Member 0 never moves: its first step is its best, and it stops when the steps since
    # then exceed the patience, as n3fit's stopping does.
    assert result.best_epoch[0] == 0
    assert result.stop_epoch[0] == 31
    assert result.best_epoch[1] > 30
    assert result.status == ["ok", "ok"]


def test_a_member_never_below_the_chi2_threshold_is_vetoed(make_card):
    """n3fit's rule: no step is a member's best before its validation χ²/point has been below
    threshold_chi2, so a member that never gets there has no best weights, is vetoed and runs
    until the last epoch."""
    card = make_card(replicas=[1, 2], epochs=60, stopping={"threshold_chi2": 1e-6})
    result = run_fit(card)
    assert result.status == ["pos-veto", "pos-veto"]
    assert result.best_epoch.tolist() == [-1, -1]
    assert result.stop_epoch.tolist() == [-1, -1]
    passing = run_fit(make_card(replicas=[1, 2], epochs=60, stopping={"threshold_chi2": 1e6}))
    assert passing.status == ["ok", "ok"]


def test_positivity_veto_is_per_member(make_card):
    card = make_card(replicas=[1, 2], epochs=50, optimizer={"name": "sgd", "clipnorm": None})
    negative = _constant_pdf_weights(card, sigma_bias=-1.0, gluon_bias=1.0)
    positive = _constant_pdf_weights(card, sigma_bias=1.0, gluon_bias=1.0)
    params = [np.concatenate([n, p]) for n, p in zip(negative, positive, strict=True)]
    settings = _settings(card, learning_rate=np.array([0.0, 0.0]))
    result = run_fit(card, settings=settings, initial_params=params)
    assert result.status == ["pos-veto", "ok"]
    assert result.best_epoch.tolist() == [-1, 0]


def test_a_nan_member_is_flagged_at_once_and_the_others_finish(make_card):
    card = make_card(replicas=[1, 2, 4], epochs=200)
    problem = load_problem(card)
    _, params = build_members(card, problem, member_specs(card.replica_ids))
    params[0][1] = np.nan
    result = run_fit(card, initial_params=params)
    assert result.status[1] == "diverged"
    assert "diverged" not in (result.status[0], result.status[2])
    assert result.stop_epoch.tolist()[1] == 0
    assert result.divergence == ["", "non-finite loss", ""]
    assert np.isfinite(result.chi2_per_point["training"][[0, 2]]).all()


def test_an_exploding_member_is_flagged_and_the_others_finish(make_card):
    card = make_card(replicas=[1, 2, 4], epochs=200)
    settings = _settings(card, learning_rate=np.array([0.005, 1e12, 0.005]))
    result = run_fit(card, settings=settings)
    assert result.status == ["ok", "diverged", "ok"]
    assert 0 <= result.stop_epoch[1] < 5
    assert result.divergence[1] in {
        "loss above divergence.max_loss",
        "non-finite loss",
        "non-finite parameters after the update",
    }
    assert np.isfinite(result.chi2_per_point["training"][[0, 2]]).all()


def test_the_summary_tables_ok_members_only(make_card):
    """The person reading a fit's summary sees the chi2 of the members that ended ok, and a
    sentence instead of an empty table when none did."""
    result = run_fit(make_card(replicas=[1, 2], epochs=20))
    ok = dataclasses.replace(result, status=["ok", "diverged"])
    lines = summary(ok).splitlines()
    assert "1 ok, 0 pos-veto, 1 diverged" in lines[0]
    training = next(line for line in lines if line.startswith("training"))
    value = f"{ok.chi2_per_point['training'][0]:.4f}"
    assert training.split()[1:] == [value] * 4  # mean, median, min and max of one member
    none = dataclasses.replace(result, status=["diverged", "pos-veto"])
    assert summary(none).splitlines()[1:] == [
        "no member ended ok, so no chi2 summary (results.json has each member's)"
    ]


def test_the_summary_of_a_kfold_fit_gives_each_fold_over_every_member(make_card):
    """An exported k-fold trial's refit is compared with the trial: per fold, the mean over all
    its members, pos-veto ones included as the trial counts them, and the mean over the folds
    (the default objective's value), which the table of ok members, pooling folds, is not."""
    card = make_card(replicas=[1, 2], epochs=20, folds=[["TOY_GLUON"], ["TOY_HERA_CC_F2WP"]])
    result = run_fit(card)
    vetoed = dataclasses.replace(result, status=["ok", "pos-veto", "pos-veto", "ok"])
    held_out = result.chi2_per_point["held_out"]
    folds = [held_out[:2].mean(), held_out[2:].mean()]
    line = next(line for line in summary(vetoed).splitlines() if "by fold" in line)
    assert f"fold 0 {folds[0]:.4f}, fold 1 {folds[1]:.4f}" in line
    assert line.endswith(f"mean over the folds {np.mean(folds):.4f}")
    assert not any("by fold" in line for line in summary(run_fit(make_card(epochs=20))).split("\n"))


def test_a_stop_asked_at_the_last_sync_is_not_an_interruption(make_card):
    card = make_card(
        replicas=[1],
        epochs=40,
        stopping={"patience": 1.0},  # runs to the last epoch
        training={"steps_per_call": 20, "jit": False},
    )
    at_the_end = run_fit(card, on_sync=lambda report: report.step >= card.epochs)
    assert at_the_end.steps == card.epochs and not at_the_end.interrupted
    at_once = run_fit(card, on_sync=lambda report: True)
    assert at_once.steps == 20 and at_once.interrupted


def test_members_still_training_when_interrupted_are_interrupted_not_vetoed(make_card):
    """Ctrl-C at 3,300 of 40,000 epochs said "2 ok, 2 pos-veto": the members without a best
    step yet were cut short, not found wanting. A member with a best step is ok, and one that
    ran to the end without one is still pos-veto."""
    card = make_card(
        replicas=[1, 2],
        epochs=40,
        optimizer={"name": "sgd", "clipnorm": None},
        stopping={"patience": 1.0},
        training={"steps_per_call": 20, "jit": False},
    )
    negative = _constant_pdf_weights(card, sigma_bias=-1.0, gluon_bias=1.0)
    positive = _constant_pdf_weights(card, sigma_bias=1.0, gluon_bias=1.0)
    params = [np.concatenate([n, p]) for n, p in zip(negative, positive, strict=True)]
    settings = _settings(card, learning_rate=np.array([0.0, 0.0]))
    cut = run_fit(card, settings=settings, initial_params=params, on_sync=lambda report: True)
    assert cut.interrupted and cut.steps == 20
    assert cut.status == ["interrupted", "ok"]
    assert "1 ok, 0 pos-veto, 0 diverged, 1 interrupted" in summary(cut).splitlines()[0]
    whole = run_fit(card, settings=settings, initial_params=params)
    assert whole.status == ["pos-veto", "ok"]
    assert summary(whole).splitlines()[0].endswith("1 ok, 1 pos-veto, 0 diverged")


def test_only_members_still_training_at_an_interruption_are_interrupted():
    """A member that stopped or diverged before the interruption keeps its status."""
    training = np.array([RUNNING, RUNNING, STOPPED, DIVERGED])
    best = np.array([-1, 12, -1, -1])
    assert member_status(training, best, interrupted=True) == [
        "interrupted",
        "ok",
        "pos-veto",
        "diverged",
    ]
    assert member_status(training, best, interrupted=False) == [
        "pos-veto",
        "ok",
        "pos-veto",
        "diverged",
    ]


@pytest.mark.parametrize("second_aborts", [False, True])
def test_signals_stop_the_fit_and_a_second_aborts_only_when_asked(second_aborts):
    stop = threading.Event()
    before = signal.getsignal(signal.SIGINT)
    with stop_on_signals(stop, second_aborts=second_aborts):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # the handler runs in the main thread, between bytecodes
        assert stop.is_set()
        if second_aborts:
            with pytest.raises(KeyboardInterrupt):
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)
        else:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)  # still handled: a worker ends its trial at the next sync
    assert signal.getsignal(signal.SIGINT) is before  # restored


def test_held_signals_only_ask_to_stop():
    """While the results are written (after `hold`), no signal may cut the write short: even
    a second Ctrl-C, or SIGTERM's default exit, only sets `stop`."""
    stop = threading.Event()
    with stop_on_signals(stop, second_aborts=True) as hold:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
        hold()
        for sig in (signal.SIGINT, signal.SIGTERM):
            os.kill(os.getpid(), sig)
            time.sleep(0.05)
        assert stop.is_set()
