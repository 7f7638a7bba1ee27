"""The ensemble PDF model: network → preprocessing → sum rules → observables → χ² per member."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import tensorflow as tf

from hyperscan.data import FIT_BASIS, Problem
from hyperscan.model._chi2 import Chi2
from hyperscan.model._chi2_plan import TRAINING, whitening
from hyperscan.model._member_axis import MemberAxis, take_members
from hyperscan.model._network import forward, network_features
from hyperscan.model._observables import Observable, TableProducts
from hyperscan.model._quadrature import Quadrature, sum_rule_quadrature
from hyperscan.model._shapes import MemberShapes

# Sum rules: ∫V = 3, ∫V3 = 1, ∫V8 = 3 (number of valence quarks), momentum ∫x(Σ + g) = 1.
VALENCE_SUM_RULES = {"V": 3.0, "V3": 1.0, "V8": 3.0}
_SIGMA, _GLUON = FIT_BASIS.index("Sigma"), FIT_BASIS.index("g")
# n3fit's positivity penalty: elu(-y) with a tiny slope on the allowed side.
POSITIVITY_ELU_ALPHA = 1e-7

# float32 means float32 on GPUs too: TensorFlow would otherwise run float32 matmuls there in
# TensorFloat-32, whose 10-bit mantissa spoils χ² at the 1e-3 level. CPUs ignore the setting.
tf.config.experimental.enable_tensor_float_32_execution(False)


@dataclass(frozen=True)
class MemberInputs:
    """Everything that differs between members, each row one member."""

    data: np.ndarray  # (M, N) the member's pseudodata
    categories: np.ndarray  # (M, N) TRAINING, VALIDATION or HELD_OUT per point
    alpha: np.ndarray  # (M, 8) small-x preprocessing exponents
    beta: np.ndarray  # (M, 8) large-x preprocessing exponents

    @property
    def n_members(self) -> int:
        return self.data.shape[0]


@dataclass(frozen=True)
class Observables:
    chi2: tf.Tensor  # (M, 3) training, validation, held-out
    positivity: tf.Tensor  # (M, S) each positivity set's penalty Σ elu(−λ·y), λ inside

    @property
    def loss(self) -> tf.Tensor:
        """What training minimises, (M,): the training χ² and every positivity penalty."""
        return self.chi2[:, TRAINING] + tf.reduce_sum(self.positivity, axis=1)


def preprocessing(x: np.ndarray, alpha: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """x^(1-α) (1-x)^β: (n_x,), (M, 8), (M, 8) → (M, n_x, 8). Fixed, not trained (NNPDF4.0)."""
    x = x[None, :, None]
    with np.errstate(divide="ignore"):
        return np.exp((1.0 - alpha[:, None, :]) * np.log(x) + beta[:, None, :] * np.log1p(-x))


class EnsembleModel:
    """All members of an ensemble as one computation with a leading member axis.

    Holds the constants (x grids, FK tables rotated to the fitted basis, χ² set-up,
    pseudodata); the trainable parameters are passed in, so the compiled training loop can
    carry them as loop variables.
    """

    # The χ² (_chi2) is not taken but rebuilt from the taken plan (`_members_taken`): its
    # scatter indices name members.
    member_axis: ClassVar[MemberAxis] = MemberAxis(
        {
            "alpha": 0,
            "beta": 0,
            "points_per_category": 0,
            "_preprocessing": 0,
            "_data": 0,
            "_categories": 0,
        },
        nested=("_whitening", "shapes"),
        then="_members_taken",
    )

    def __init__(
        self,
        problem: Problem,
        members: MemberInputs,
        activations: Sequence[str],
        dtype: tf.DType = tf.float64,
        quadrature: Quadrature | None = None,
        shapes: MemberShapes | None = None,
    ) -> None:
        self.problem = problem
        self.activations = tuple(activations)
        # Members of different architectures padded to one (None: all share one).
        self.shapes = shapes
        self.dtype = dtype
        self.n_members = members.n_members
        self.alpha, self.beta = members.alpha, members.beta
        quadrature = quadrature or sum_rule_quadrature()
        self._quadrature = quadrature

        grids = [d.xgrid for d in problem.datasets] + [p.xgrid for p in problem.positivity]
        self.xgrid = np.unique(np.concatenate(grids))
        self._x_all = np.concatenate([self.xgrid, quadrature.x])
        self._features = self._constant(network_features(self._x_all))
        self._preprocessing = self._member_preprocessing(members)
        self._number_weights = self._constant(quadrature.number_weights)
        self._momentum_weights = self._constant(quadrature.momentum_weights)

        self._data_products = TableProducts(
            [Observable(d.name, d.tables, d.operation) for d in problem.datasets],
            self.xgrid,
            dtype,
        )
        self._positivity_products = (
            TableProducts(
                [Observable(p.name, (p.table,)) for p in problem.positivity], self.xgrid, dtype
            )
            if problem.positivity
            else None
        )
        sets = np.repeat(
            np.arange(len(problem.positivity)), [p.n_points for p in problem.positivity]
        )
        self._positivity_sets = self._constant(sets[:, None] == np.arange(len(problem.positivity)))
        self._data = self._constant(members.data)
        self._categories = members.categories
        blocks = problem.blocks()
        systematics = (
            None
            if problem.systematics is None
            else [
                (problem.uncorrelated_variance[block], problem.block_systematics(block))
                for block in blocks
            ]
        )
        self._whitening = whitening(
            problem.covmat, blocks, members.categories, systematics=systematics
        )
        self._chi2 = Chi2(self._whitening, dtype)
        self.points_per_category = self._whitening.points_per_category  # (M, 3)

    def select(self, members: np.ndarray) -> EnsembleModel:
        """The model of `members` alone (indices into this model's, in that order), sharing
        its constants: the smaller batch of a fit whose other members stopped.

        The χ² plan is taken member by member, not planned anew for the fewer members, so each
        member's χ² is computed the same way (same factors, same padding) in either batch.
        """
        return take_members(self, members)

    def with_inputs(self, members: MemberInputs, activations: Sequence[str]) -> EnsembleModel:
        """A model of other members of the same split (same categories, so the same χ² plan)
        and architecture kind, sharing this one's constants: each trial of a trial batch gets
        its own model for its starts and results without planning its χ² again (fit/_slots.py)."""
        if self.shapes is not None or not np.array_equal(self._categories, members.categories):
            raise ValueError("other members need this model's split, unpadded")
        model = copy.copy(self)
        model.use_inputs(members, activations)
        return model

    def use_inputs(self, members: MemberInputs, activations: Sequence[str]) -> None:
        """Take the pseudodata, preprocessing and activations of `members` (`with_inputs`'s
        copy does, so that the model it was copied from keeps its own)."""
        self.activations = tuple(activations)
        self.alpha, self.beta = members.alpha, members.beta
        self._data = self._constant(members.data)
        self._preprocessing = self._member_preprocessing(members)

    def _members_taken(self, members: np.ndarray) -> None:
        """What derives from the taken arrays, set on the copy `take_members` made."""
        self.n_members = len(members)
        self._chi2 = Chi2(self._whitening, self.dtype)

    def _member_preprocessing(self, members: MemberInputs) -> tf.Tensor:
        """`members`' preprocessing factors at the grid and the quadrature nodes."""
        return self._constant(preprocessing(self._x_all, members.alpha, members.beta))

    def _constant(self, value: np.ndarray) -> tf.Tensor:
        return tf.constant(value, dtype=self.dtype)

    def _normalised_pdf(self, params: Sequence[tf.Tensor]) -> tf.Tensor:
        """x·f in the fitted basis on the union grid: (M, P, 8)."""
        return self._normalised(params, self._features, self._preprocessing, self.xgrid.size)

    def _normalised(
        self, params: Sequence[tf.Tensor], features: tf.Tensor, prep: tf.Tensor, n_x: int
    ) -> tf.Tensor:
        """x·f at the first n_x of the points of ``features`` (n_x + I, 2) and ``prep``
        (M, n_x + I, 8), normalised by the sum rules on the I quadrature nodes after them:
        (M, n_x, 8). One function for training and output, so the exported PDF is the
        trained one."""
        raw = forward(params, features, self.activations, self.shapes) * prep
        norm = self._sum_rule_factors(raw[:, n_x:, :])
        return raw[:, :n_x, :] * norm[:, None, :]

    def _sum_rule_factors(self, xf_nodes: tf.Tensor) -> tf.Tensor:
        """x·f on the quadrature nodes (M, I, 8) → normalisation factors (M, 8)."""
        number = tf.einsum("mif,i->mf", xf_nodes, self._number_weights)
        momentum = tf.einsum("mif,i->mf", xf_nodes, self._momentum_weights)
        ones = tf.ones_like(number[:, 0])
        factors = []
        for index, name in enumerate(FIT_BASIS):
            if name == "g":
                factors.append((1.0 - momentum[:, _SIGMA]) / momentum[:, _GLUON])
            elif name in VALENCE_SUM_RULES:
                factors.append(VALENCE_SUM_RULES[name] / number[:, index])
            else:
                factors.append(ones)
        return tf.stack(factors, axis=1)

    def predictions(self, params: Sequence[tf.Tensor]) -> tf.Tensor:
        """Theory predictions for every data point: (M, N)."""
        return self._data_products(self._normalised_pdf(params))

    def chi2_from_residuals(self, residuals: tf.Tensor) -> tf.Tensor:
        """χ² per category of data − predictions (M, N): (M, 3) training, validation, held-out."""
        return self._chi2(residuals)

    def whitening_flops(self) -> float:
        """Matmul FLOPs of the χ² per member-step, forward + backward."""
        return self._chi2.flops()

    def positivity_penalty(self, pdf: tf.Tensor, multiplier: tf.Tensor | float) -> tf.Tensor:
        """Each positivity set's penalty Σ elu(−λ·y) from the normalised PDF (M, X, 8): (M, S).

        λ multiplies the observable inside the elu, as in n3fit: far inside the allowed region
        a point then costs −α and pulls with λα·exp(−λy) ≈ 0; with λ outside, the pull would be
        λα·exp(−y), ~0.1 per point once λ reaches 1e6.
        """
        if self._positivity_products is None:
            return tf.zeros([self.n_members, 0], self.dtype)
        scale = tf.reshape(tf.cast(multiplier, self.dtype), [-1, 1])
        values = -scale * self._positivity_products(pdf)
        penalty = tf.nn.relu(values) + POSITIVITY_ELU_ALPHA * (
            tf.exp(tf.minimum(values, 0.0)) - 1.0
        )
        return penalty @ self._positivity_sets

    def observables(
        self, params: Sequence[tf.Tensor], multiplier: tf.Tensor | float = 1.0
    ) -> Observables:
        """χ² per category and positivity penalties, λ = `multiplier` (scalar or (M,))."""
        pdf = self._normalised_pdf(params)
        residuals = self._data - self._data_products(pdf)
        chi2 = self.chi2_from_residuals(residuals)
        return Observables(chi2, self.positivity_penalty(pdf, multiplier))

    def pdf(self, params: Sequence[tf.Tensor], x: np.ndarray) -> np.ndarray:
        """Normalised x·f in the fitted basis at any x: (M, n_x, 8), as numpy."""
        x_all = np.concatenate([x, self._quadrature.x])
        features = self._constant(network_features(x_all))
        prep = self._constant(preprocessing(x_all, self.alpha, self.beta))
        return self._normalised(params, features, prep, x.size).numpy()
