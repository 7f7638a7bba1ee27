"""The member-batched network is each member's own multilayer perceptron."""

from __future__ import annotations

from typing import get_args

import numpy as np
import pytest
import tensorflow as tf

from hyperscan.model import ACTIVATIONS
from hyperscan.model._network import forward, initial_weights, network_features
from hyperscan.runcard._architecture import Activation, Initializer


def _perceptron(weights: list[np.ndarray], features: np.ndarray, activations) -> np.ndarray:
    """One member's network in plain numpy: (P, 2) → (P, 8)."""
    functions = {"tanh": np.tanh, "sigmoid": lambda v: 1.0 / (1.0 + np.exp(-v))}
    hidden = features @ weights[0] + weights[1]
    for layer, activation in enumerate(activations, start=1):
        hidden = functions[activation](hidden) @ weights[2 * layer] + weights[2 * layer + 1]
    return hidden


def test_forward_is_each_members_own_perceptron():
    rng = np.random.default_rng(0)
    nodes, activations = (7, 5), ("tanh", "sigmoid")
    members = [initial_weights(nodes, "glorot_normal", rng) for _ in range(3)]
    for weights in members:  # non-zero biases, so that they are checked too
        for bias in weights[1::2]:
            bias += rng.standard_normal(bias.shape)
    features = network_features(np.geomspace(1e-6, 0.9, 11))
    params = [tf.constant(np.stack(arrays)) for arrays in zip(*members, strict=True)]
    batched = forward(params, tf.constant(features), activations).numpy()
    for m, weights in enumerate(members):
        expected = _perceptron(weights, features, activations)
        np.testing.assert_allclose(batched[m], expected, rtol=1e-12, atol=1e-14)


# Each activation in plain numpy, for every name the runcard schema accepts.
_ACTIVATIONS = {
    "tanh": np.tanh,
    "sigmoid": lambda v: 1.0 / (1.0 + np.exp(-v)),
    "relu": lambda v: np.maximum(v, 0.0),
    "elu": lambda v: np.where(v > 0.0, v, np.expm1(np.minimum(v, 0.0))),
    "softplus": lambda v: np.log1p(np.exp(v)),
    "linear": lambda v: v,
}


def test_the_model_implements_every_activation_the_runcard_accepts():
    assert set(ACTIVATIONS) == set(get_args(Activation)) == set(_ACTIVATIONS)


@pytest.mark.parametrize("activation", get_args(Activation))
def test_each_activation_is_the_function_it_names(activation):
    rng = np.random.default_rng(1)
    weights = initial_weights((6, 4), "glorot_normal", rng)
    features = network_features(np.geomspace(1e-6, 0.9, 9))
    params = [tf.constant(w[None]) for w in weights]
    batched = forward(params, tf.constant(features), (activation, activation)).numpy()[0]
    hidden = features @ weights[0] + weights[1]
    for layer in (1, 2):
        hidden = _ACTIVATIONS[activation](hidden) @ weights[2 * layer] + weights[2 * layer + 1]
    np.testing.assert_allclose(batched, hidden, rtol=1e-12, atol=1e-14)


#: Keras' variance of each initializer's kernel entries, for fan_in and fan_out.
_VARIANCE = {
    "glorot_normal": lambda fan_in, fan_out: 2.0 / (fan_in + fan_out),
    "glorot_uniform": lambda fan_in, fan_out: 2.0 / (fan_in + fan_out),
    "he_normal": lambda fan_in, fan_out: 2.0 / fan_in,
    "he_uniform": lambda fan_in, fan_out: 2.0 / fan_in,
    "lecun_normal": lambda fan_in, fan_out: 1.0 / fan_in,
}


@pytest.mark.parametrize("initializer", get_args(Initializer))
def test_each_initializer_the_runcard_accepts_draws_its_keras_variance(initializer):
    kernel = initial_weights((2000,), initializer, np.random.default_rng(2))[2]  # (2000, 8)
    fan_in, fan_out = kernel.shape
    assert abs(kernel.mean()) < 0.05 * np.sqrt(_VARIANCE[initializer](fan_in, fan_out))
    np.testing.assert_allclose(kernel.var(), _VARIANCE[initializer](fan_in, fan_out), rtol=0.05)
