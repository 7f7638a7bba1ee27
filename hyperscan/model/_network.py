"""The member-batched network: weights (members, in, out), pure functions of the parameters."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import tensorflow as tf

if TYPE_CHECKING:
    from hyperscan.model._shapes import MemberShapes

N_INPUTS = 2  # (x, ln x)
N_OUTPUTS = 8  # the fitted evolution basis

ACTIVATIONS: dict[str, Callable[[tf.Tensor], tf.Tensor]] = {
    "tanh": tf.tanh,
    "sigmoid": tf.sigmoid,
    "relu": tf.nn.relu,
    "elu": tf.nn.elu,
    "softplus": tf.nn.softplus,
    "linear": tf.identity,
}

# Keras draws its "normal" initialisers from a normal truncated at 2σ, rescaled by this factor
# so that the truncated distribution keeps the nominal variance.
_TRUNCATED_NORMAL_STD = 0.87962566103423978


def layer_sizes(nodes: Sequence[int]) -> list[int]:
    return [N_INPUTS, *nodes, N_OUTPUTS]


def initial_weights(
    nodes: Sequence[int], initializer: str, rng: np.random.Generator
) -> list[np.ndarray]:
    """One member's [kernel, bias, kernel, bias, ...], drawn from its own generator.

    Drawn in numpy rather than TensorFlow so that a member's start does not depend on how many
    members are batched with it, nor on TensorFlow's global random state.
    """
    sizes = layer_sizes(nodes)
    weights: list[np.ndarray] = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:], strict=True):
        weights.append(_draw_kernel(initializer, fan_in, fan_out, rng))
        weights.append(np.zeros(fan_out))
    return weights


def _draw_kernel(name: str, fan_in: int, fan_out: int, rng: np.random.Generator) -> np.ndarray:
    shape = (fan_in, fan_out)
    if name == "glorot_uniform":
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        return rng.uniform(-limit, limit, shape)
    if name == "he_uniform":
        limit = np.sqrt(6.0 / fan_in)
        return rng.uniform(-limit, limit, shape)
    scales = {
        "glorot_normal": 2.0 / (fan_in + fan_out),
        "he_normal": 2.0 / fan_in,
        "lecun_normal": 1.0 / fan_in,
    }
    if name not in scales:
        raise ValueError(f"unknown initializer {name!r}")
    return _truncated_normal(shape, np.sqrt(scales[name]) / _TRUNCATED_NORMAL_STD, rng)


def _truncated_normal(shape: tuple[int, int], std: float, rng: np.random.Generator) -> np.ndarray:
    values = rng.standard_normal(shape)
    outside = np.abs(values) > 2.0
    while outside.any():
        values[outside] = rng.standard_normal(int(outside.sum()))
        outside = np.abs(values) > 2.0
    return values * std


def network_features(x: np.ndarray) -> np.ndarray:
    """(n_x,) → (n_x, 2): the network sees x and ln x."""
    return np.stack([x, np.log(x)], axis=-1)


def forward(
    params: Sequence[tf.Tensor],
    features: tf.Tensor,
    activations: Sequence[str],
    shapes: MemberShapes | None = None,
) -> tf.Tensor:
    """params [(M, in, out), (M, out), ...], features (P, 2) → raw output (M, P, 8).

    Members share the input and nothing else, so each member's output depends on its own
    weights only: batching cannot couple them. `shapes`: members of different architectures
    padded to one (None: all share `activations` and the parameters' widths).
    """
    kernel, bias = params[0], params[1]
    # The first layer has N_INPUTS = 2 inputs: as broadcast products it fuses with the
    # activation, members leading like every later layer. As a dot, XLA computes it points
    # leading, (P, M·out), and transposes it forward and backward (~5% of a step).
    hidden = bias[:, None, :]
    for i in range(features.shape[1]):
        hidden = hidden + features[None, :, i, None] * kernel[:, None, i, :]
    if shapes is None:
        for layer, activation in enumerate(activations, start=1):
            hidden = ACTIVATIONS[activation](hidden)
            kernel, bias = params[2 * layer], params[2 * layer + 1]
            hidden = tf.einsum("mpi,mio->mpo", hidden, kernel) + bias[:, None, :]
        return hidden
    # Members of different architectures (model/_shapes.py): hidden layer l is the member's
    # activation of its pre-activation, or, past the member's depth, its input passed through.
    previous = None
    for layer in range(len(shapes.widths)):
        if layer > 0:
            kernel, bias = params[2 * layer], params[2 * layer + 1]
            hidden = tf.einsum("mpi,mio->mpo", previous, kernel) + bias[:, None, :]
        hidden = _activate(hidden, shapes.names, shapes.activation[:, layer])
        skip = shapes.skip[:, layer]
        # A refillable model's (fit/_rows.py) are variables: any member may skip.
        if tf.is_tensor(skip) and layer > 0 or not tf.is_tensor(skip) and skip.any():
            through = _resized(previous, shapes.widths[layer])
            hidden = tf.where(tf.cast(skip, tf.bool)[:, None, None], through, hidden)
        previous = hidden
    kernel, bias = params[-2], params[-1]
    return tf.einsum("mpi,mio->mpo", previous, kernel) + bias[:, None, :]


def _activate(hidden: tf.Tensor, names: Sequence[str], chosen: np.ndarray | tf.Tensor) -> tf.Tensor:
    """Each member's activation (index `chosen` into `names`) of its rows of `hidden`: every
    activation present (all of `names` when `chosen` is a tensor, which may change between
    calls) computed for all rows, each member's selected. Selection measured 1.5x faster than
    gathering each activation's members and stitching them back (docs/performance.md)."""
    present = np.arange(len(names)) if tf.is_tensor(chosen) else np.unique(chosen)
    out = ACTIVATIONS[names[present[0]]](hidden)
    for index in present[1:]:
        mask = tf.equal(chosen, tf.cast(index, chosen.dtype))[:, None, None]
        out = tf.where(mask, ACTIVATIONS[names[index]](hidden), out)
    return out


def _resized(hidden: tf.Tensor, width: int) -> tf.Tensor:
    """(M, P, W) → (M, P, width): cut or zero-padded at the end (only padding is cut)."""
    if hidden.shape[-1] >= width:
        return hidden[..., :width]
    return tf.pad(hidden, [[0, 0], [0, 0], [0, width - hidden.shape[-1]]])
