"""Elementwise optimisers whose state and hyperparameters carry the member axis.

Written here rather than taken from Keras because Keras keeps one step counter and one
learning rate per variable: a member that stops or diverges must freeze its own moments and
step count while the others go on, and packed members may use different learning rates. The
update formulas follow Keras 3 (same defaults), so a one-member fit matches a Keras fit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

EPSILON = 1e-7
Params = list[tf.Tensor]
State = dict[str, list[tf.Tensor] | tf.Tensor]


def per_member(values: tf.Tensor, like: tf.Tensor) -> tf.Tensor:
    """(M,) → (M, 1, ..., 1) broadcastable against a member-axis tensor."""
    return tf.reshape(values, [-1] + [1] * (like.shape.rank - 1))


@dataclass(frozen=True)
class Optimizer:
    """init(params) → state; update(params, grads, state, step, lr) → (params, state).

    `step` (M,) counts the updates each member already had; `lr` is (M,).
    """

    init: Callable[[Params], State]
    update: Callable[[Params, Params, State, tf.Tensor, tf.Tensor], tuple[Params, State]]


def _zeros(params: Sequence[tf.Tensor]) -> list[tf.Tensor]:
    return [tf.zeros_like(p) for p in params]


def _adam(amsgrad: bool) -> Optimizer:
    beta_1, beta_2 = 0.9, 0.999

    def init(params: Params) -> State:
        state: State = {"m": _zeros(params), "v": _zeros(params)}
        if amsgrad:
            state["v_max"] = _zeros(params)
        return state

    def update(params, grads, state, step, lr):
        t = tf.cast(step + 1, params[0].dtype)
        rate = lr * tf.sqrt(1.0 - beta_2**t) / (1.0 - beta_1**t)
        new_params, new_m, new_v, new_v_max = [], [], [], []
        for i, (p, g) in enumerate(zip(params, grads, strict=True)):
            m = state["m"][i] + (g - state["m"][i]) * (1.0 - beta_1)
            v = state["v"][i] + (tf.square(g) - state["v"][i]) * (1.0 - beta_2)
            if amsgrad:
                v_max = tf.maximum(state["v_max"][i], v)
                new_v_max.append(v_max)
                v_used = v_max
            else:
                v_used = v
            new_params.append(p - per_member(rate, p) * m / (tf.sqrt(v_used) + EPSILON))
            new_m.append(m)
            new_v.append(v)
        new_state: State = {"m": new_m, "v": new_v}
        if amsgrad:
            new_state["v_max"] = new_v_max
        return new_params, new_state

    return Optimizer(init, update)


def _nadam() -> Optimizer:
    beta_1, beta_2 = 0.9, 0.999

    def init(params: Params) -> State:
        members = tf.shape(params[0])[0]
        return {
            "m": _zeros(params),
            "v": _zeros(params),
            "u_product": tf.ones([members], dtype=params[0].dtype),
        }

    def update(params, grads, state, step, lr):
        t = tf.cast(step + 1, params[0].dtype)
        # Keras 3's momentum schedule (tf.keras 2 used 0.96 ** (0.004 * t)).
        u_t = beta_1 * (1.0 - 0.5 * 0.96**t)
        u_next = beta_1 * (1.0 - 0.5 * 0.96 ** (t + 1.0))
        u_product = state["u_product"] * u_t
        u_product_next = u_product * u_next
        beta_2_power = beta_2**t
        new_params, new_m, new_v = [], [], []
        for i, (p, g) in enumerate(zip(params, grads, strict=True)):
            m = state["m"][i] + (g - state["m"][i]) * (1.0 - beta_1)
            v = state["v"][i] + (tf.square(g) - state["v"][i]) * (1.0 - beta_2)
            m_hat = (
                per_member(u_next / (1.0 - u_product_next), p) * m
                + per_member((1.0 - u_t) / (1.0 - u_product), p) * g
            )
            v_hat = v / per_member(1.0 - beta_2_power, p)
            new_params.append(p - per_member(lr, p) * m_hat / (tf.sqrt(v_hat) + EPSILON))
            new_m.append(m)
            new_v.append(v)
        return new_params, {"m": new_m, "v": new_v, "u_product": u_product}

    return Optimizer(init, update)


def _rmsprop() -> Optimizer:
    rho = 0.9

    def init(params: Params) -> State:
        return {"velocity": _zeros(params)}

    def update(params, grads, state, step, lr):
        new_params, new_velocity = [], []
        for p, g, velocity in zip(params, grads, state["velocity"], strict=True):
            velocity = rho * velocity + (1.0 - rho) * tf.square(g)
            # Keras 3 adds ε under the root: with NNPDF's tiny clipnorm the gradients are ~1e-7,
            # so ε outside it would make the steps ~1000 times larger than n3fit's.
            new_params.append(p - per_member(lr, p) * g / tf.sqrt(velocity + EPSILON))
            new_velocity.append(velocity)
        return new_params, {"velocity": new_velocity}

    return Optimizer(init, update)


def _adadelta() -> Optimizer:
    rho = 0.95

    def init(params: Params) -> State:
        return {"grad_sq": _zeros(params), "delta_sq": _zeros(params)}

    def update(params, grads, state, step, lr):
        new_params, new_grad_sq, new_delta_sq = [], [], []
        for i, (p, g) in enumerate(zip(params, grads, strict=True)):
            grad_sq = rho * state["grad_sq"][i] + (1.0 - rho) * tf.square(g)
            delta = tf.sqrt(state["delta_sq"][i] + EPSILON) / tf.sqrt(grad_sq + EPSILON) * g
            delta_sq = rho * state["delta_sq"][i] + (1.0 - rho) * tf.square(delta)
            new_params.append(p - per_member(lr, p) * delta)
            new_grad_sq.append(grad_sq)
            new_delta_sq.append(delta_sq)
        return new_params, {"grad_sq": new_grad_sq, "delta_sq": new_delta_sq}

    return Optimizer(init, update)


def _sgd() -> Optimizer:
    def init(params: Params) -> State:
        return {}

    def update(params, grads, state, step, lr):
        return [p - per_member(lr, p) * g for p, g in zip(params, grads, strict=True)], {}

    return Optimizer(init, update)


_FACTORIES: dict[str, Callable[[], Optimizer]] = {
    "adam": lambda: _adam(amsgrad=False),
    "amsgrad": lambda: _adam(amsgrad=True),
    "nadam": _nadam,
    "rmsprop": _rmsprop,
    "adadelta": _adadelta,
    "sgd": _sgd,
}
OPTIMIZERS = tuple(_FACTORIES)


def make_optimizer(name: str) -> Optimizer:
    """A fresh optimizer (no shared mutable registry state between fits)."""
    try:
        return _FACTORIES[name]()
    except KeyError:
        raise ValueError(f"unknown optimizer {name!r}; choose one of {OPTIMIZERS}") from None


def variable_columns(sizes: Sequence[int], dtype: tf.DType) -> tf.Tensor:
    """(P, V) one-hot map from the columns of flat (M, P) parameters to their V variables."""
    owner = np.repeat(np.arange(len(sizes)), sizes)
    return tf.constant(owner[:, None] == np.arange(len(sizes))[None, :], dtype)


def variable_norms(flat: tf.Tensor, columns: tf.Tensor) -> tf.Tensor:
    """(M, V) norm of each member's gradient in each variable; `columns` from `variable_columns`.

    Computed once per step for both the clip and the divergence check: a member's gradient is
    finite exactly where all its variables' norms are (a non-finite entry spoils them all).
    """
    return tf.sqrt(tf.square(flat) @ columns)


def clip_per_variable(
    flat: tf.Tensor, norms: tf.Tensor, columns: tf.Tensor, clipnorm: tf.Tensor
) -> tf.Tensor:
    """Keras' clipnorm, member by member: each variable's gradient scaled to norm ≤ clipnorm.

    `flat` is the (M, P) gradient, `norms` its `variable_norms`, clipnorm (M,). Keras clips
    each variable on its own, so n3fit's defaults (NNPDF4.0's clipnorm) were tuned for that;
    with members in one variable it would clip them together, the coupling that made n3fit
    abandon its batched layer, so here every (member, variable) has its own norm.
    """
    limit = clipnorm[:, None]
    scale = tf.where(norms > limit, limit / norms, tf.ones_like(norms))
    return flat * tf.matmul(scale, columns, transpose_b=True)
