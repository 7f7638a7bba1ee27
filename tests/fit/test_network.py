"""The member-batched network is each member's own multilayer perceptron."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from hyperscan.model._network import forward, initial_weights, network_features


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
