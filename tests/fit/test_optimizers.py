"""The member-axis optimisers and clipping against Keras 3, which n3fit trains with."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from hyperscan.fit import OPTIMIZERS, make_optimizer
from hyperscan.fit._optimizers import clip_per_variable, variable_columns, variable_norms

KERAS = {
    "adam": lambda lr, clip: keras.optimizers.Adam(learning_rate=lr, clipnorm=clip),
    "amsgrad": lambda lr, clip: keras.optimizers.Adam(
        learning_rate=lr, clipnorm=clip, amsgrad=True
    ),
    "nadam": lambda lr, clip: keras.optimizers.Nadam(learning_rate=lr, clipnorm=clip),
    "rmsprop": lambda lr, clip: keras.optimizers.RMSprop(learning_rate=lr, clipnorm=clip),
    "adadelta": lambda lr, clip: keras.optimizers.Adadelta(learning_rate=lr, clipnorm=clip),
    "sgd": lambda lr, clip: keras.optimizers.SGD(learning_rate=lr, clipnorm=clip),
}
SHAPES = [(3, 4), (4,), (4, 2)]


def test_every_optimizer_is_compared():
    assert set(KERAS) == set(OPTIMIZERS)


@pytest.fixture
def keras_float64():
    """Keras keeps its hyperparameters in floatx: float64, so that only formulas can differ."""
    floatx = keras.config.floatx()
    keras.config.set_floatx("float64")
    yield
    keras.config.set_floatx(floatx)


@pytest.mark.usefixtures("keras_float64")
@pytest.mark.parametrize("name", OPTIMIZERS)
def test_each_member_steps_as_keras_with_clipnorm_would(name):
    """Two members with their own learning rate and clipnorm, gradients of a scale that clips
    some variables of a member and not others, and tiny ones (NNPDF's clipnorm makes them
    ~1e-7, where ε decides the step): every member's trajectory is Keras' for it alone."""
    rng = np.random.default_rng(7)
    sizes = [int(np.prod(shape)) for shape in SHAPES]
    learning_rate, clipnorm = np.array([1e-2, 3e-3]), np.array([0.5, 6e-6])
    start = rng.normal(size=(2, sum(sizes)))
    steps = [
        rng.normal(size=(2, sum(sizes))) * rng.choice([1e-7, 0.05, 1.0], size=3).repeat(sizes)
        for _ in range(6)
    ]

    optimizer = make_optimizer(name)
    params = tf.constant(start)
    state = optimizer.init([params])
    columns = variable_columns(sizes, tf.float64)
    for t, grad in enumerate(steps):
        grad = tf.constant(grad)
        norms = variable_norms(grad, columns)
        clipped = clip_per_variable(grad, norms, columns, tf.constant(clipnorm))
        (params,), state = optimizer.update(
            [params], [clipped], state, tf.fill([2], t), tf.constant(learning_rate)
        )

    for m in range(2):
        variables = [
            keras.Variable(piece.reshape(shape), dtype="float64")
            for piece, shape in zip(np.split(start[m], np.cumsum(sizes)[:-1]), SHAPES, strict=True)
        ]
        reference = KERAS[name](learning_rate[m], clipnorm[m])
        for grad in steps:
            pieces = np.split(grad[m], np.cumsum(sizes)[:-1])
            reference.apply_gradients(
                [
                    (tf.constant(p.reshape(s)), v)
                    for p, s, v in zip(pieces, SHAPES, variables, strict=True)
                ]
            )
        expected = np.concatenate([np.ravel(v.numpy()) for v in variables]) - start[m]
        # Keras' Adam family lands ~1e-5 (relative) off its own update formula, which this
        # code follows to the digit; a misplaced ε or a clip of the wrong norm is off by O(1).
        np.testing.assert_allclose(params.numpy()[m] - start[m], expected, rtol=1e-4)


def test_a_non_finite_gradient_entry_spoils_only_its_own_members_norms():
    """The trainer flags a member's gradient as non-finite from its variable norms alone."""
    sizes = [int(np.prod(shape)) for shape in SHAPES]
    grad = np.ones((3, sum(sizes)))
    grad[1, 2] = np.nan
    grad[2, -1] = np.inf
    norms = variable_norms(tf.constant(grad), variable_columns(sizes, tf.float64)).numpy()
    np.testing.assert_allclose(norms[0], np.sqrt(sizes))
    assert not np.isfinite(norms[1]).any() and not np.isfinite(norms[2]).any()
