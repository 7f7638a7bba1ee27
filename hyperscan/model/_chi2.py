"""χ² per member and category (training, validation, held-out) in TensorFlow, every step.

Evaluates a plan (``hyperscan.model._chi2_plan``) as constants of one dtype: one elementwise
pass for the diagonal and nuisance points, per-member mat-vecs and shared GEMMs for the dense
blocks. Minimisers (nuisances, conditional means) carry no gradient: χ² is a sum of squares at
a minimum, so by the envelope theorem their gradient vanishes. Members never couple: the shared
matrices are constants and every product acts on one member's row. The derivations:
docs/methods.md#chi-squared-per-member.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from hyperscan.model._chi2_plan import N_CATEGORIES, DenseBlock, NuisanceBlock, Whitening

# A float32 fit keeps a block's K⁻¹ in float32 while ‖K‖ ≤ this: λ* then moves by ≤ ~6e-6
# relative and χ² by ≤ ~4e-9, below float32's own rounding of χ² (~1e-6 on the DIS covariance).
# Halving the bytes K⁻¹ streams per step saves 11% of a real DIS step at R = 16 (23% at
# R = 100), where the HERA block's 168 systematics (‖K‖ ≤ 97) make K⁻¹ the largest operand.
FLOAT32_KERNEL_MAX_NORM = 100.0


class Chi2:
    """χ² per category (M, 3) from residuals (M, N), as TensorFlow constants of one dtype."""

    def __init__(self, setup: Whitening, dtype: tf.DType) -> None:
        self._flops = setup.flops()
        self._dtype = dtype
        self._sizes = [segment.stop - segment.start for segment in setup.segments]

        def constant(value: np.ndarray) -> tf.Tensor:
            return tf.constant(value, dtype=dtype)

        def index(value: np.ndarray) -> tf.Tensor:
            return tf.constant(value, dtype=tf.int32)

        # 1/σ of the points the elementwise pass covers; 0 on the dense blocks' points.
        inverse_sigma = np.zeros(setup.categories.shape[1])
        self._dense: list[tuple] = []  # (segment index, direct, Gᵀ, complement)
        self._nuisance: list[tuple] = []  # (start, stop, S̃, categories, K⁻¹)
        for position, segment in enumerate(setup.segments):
            if isinstance(segment, DenseBlock):
                direct = [
                    (t.category, index(t.indices), constant(t.factors)) for t in segment.direct
                ]
                complement = [
                    (
                        t.category,
                        constant(t.mask),
                        index(t.indices),
                        index(_with_member(t.targets)),
                        constant(t.regression),
                    )
                    for t in segment.complement
                ]
                self._dense.append((position, direct, constant(segment.whitening_t), complement))
                continue
            inverse_sigma[segment.start : segment.stop] = segment.inverse_sigma
            if isinstance(segment, NuisanceBlock):
                self._nuisance.append(
                    (
                        segment.start,
                        segment.stop,
                        constant(segment.scaled_systematics),
                        segment.categories,
                        tf.constant(segment.kernel_inverse, _kernel_dtype(segment, dtype)),
                    )
                )
        self._pointwise = len(self._dense) < len(setup.segments)
        self._inverse_sigma = constant(inverse_sigma)
        self._categories = tf.constant(setup.categories, tf.int8)
        self._present = [bool(np.any(setup.categories == c)) for c in range(N_CATEGORIES)]

    def flops(self) -> float:
        return self._flops

    def __call__(self, residuals: tf.Tensor) -> tf.Tensor:
        terms: list[list[tf.Tensor]] = [[] for _ in range(N_CATEGORIES)]
        if self._pointwise:
            chi2 = self._elementwise(residuals)
            for category in range(N_CATEGORIES):
                terms[category].append(chi2[category])
        if self._dense:
            # One split (its gradient is one concatenation), not a slice per block.
            pieces = (
                tf.split(residuals, self._sizes, axis=1) if len(self._sizes) > 1 else [residuals]
            )
            for position, direct, whitening_t, complement in self._dense:
                for category, chi2 in _dense_chi2(
                    pieces[position], direct, whitening_t, complement
                ):
                    terms[category].append(chi2)
        zero = tf.zeros_like(residuals[:, 0])
        return tf.stack([tf.add_n(t) if t else zero for t in terms], axis=1)

    def _elementwise(self, residuals: tf.Tensor) -> list[tf.Tensor]:
        """χ² of the diagonal and nuisance points per category: 3 × (M,)."""
        whitened = residuals * self._inverse_sigma
        masks = [self._categories == category for category in range(N_CATEGORIES)]
        if self._nuisance:
            # The minimiser: no gradient needed (envelope theorem, module docstring).
            fit, pulls_squared = self._nuisance_fit(tf.stop_gradient(whitened), masks)
            squares = tf.square(whitened - fit)
        else:
            squares = tf.square(whitened)
            pulls_squared = [tf.zeros_like(residuals[:, 0])] * N_CATEGORIES
        # A category no member has (held-out, outside k-fold scans) needs no pass over the points.
        return [
            _sum_over(squares, mask) + pulls if present else pulls
            for mask, pulls, present in zip(masks, pulls_squared, self._present, strict=True)
        ]

    def _nuisance_fit(
        self, whitened: tf.Tensor, masks: list[tf.Tensor]
    ) -> tuple[tf.Tensor, list[tf.Tensor]]:
        """S̃λ* of each point's own category (M, N), 0 off the nuisance blocks; and |λ*|² of
        each category summed over the blocks, 3 × (M,)."""
        members, points = self._categories.shape
        fitted = sorted({c for block in self._nuisance for c in block[3]})
        masked = {c: tf.where(masks[c], whitened, tf.zeros_like(whitened)) for c in fitted}
        columns: dict[int, list[tf.Tensor]] = {c: [] for c in fitted}
        pulls_squared = [tf.zeros([members], self._dtype) for _ in range(N_CATEGORIES)]
        position = 0
        for start, stop, scaled, categories, kernel_inverse in self._nuisance:
            gap = tf.zeros([members, start - position], self._dtype)
            lhs = tf.concat([masked[category][:, start:stop] for category in categories], 0)
            pulls = tf.reshape(lhs @ scaled, kernel_inverse.shape[:-1])  # (C, M, k)
            nuisance = tf.linalg.matvec(kernel_inverse, tf.cast(pulls, kernel_inverse.dtype))
            nuisance = tf.cast(nuisance, self._dtype)
            fits = tf.matmul(nuisance, scaled, transpose_b=True)  # (C, M, n)
            for category in fitted:
                columns[category].append(gap)
                if category in categories:
                    c = categories.index(category)
                    columns[category].append(fits[c])
                    pulls_squared[category] += tf.reduce_sum(tf.square(nuisance[c]), axis=1)
                else:
                    columns[category].append(tf.zeros_like(fits[0]))
            position = stop
        tail = tf.zeros([members, points - position], self._dtype)
        fit = tf.zeros_like(whitened)
        for category in fitted:
            fit = tf.where(masks[category], tf.concat([*columns[category], tail], 1), fit)
        return fit, pulls_squared


def _kernel_dtype(block: NuisanceBlock, dtype: tf.DType) -> tf.DType:
    """float32 for K⁻¹ only in a float32 fit and where K is not stiff (FLOAT32_KERNEL_MAX_NORM)."""
    if dtype == tf.float32 and block.kernel_norm_bound <= FLOAT32_KERNEL_MAX_NORM:
        return tf.float32
    return tf.float64


def _dense_chi2(
    piece: tf.Tensor, direct: list[tuple], whitening_t: tf.Tensor, complement: list[tuple]
) -> list[tuple[int, tf.Tensor]]:
    """χ² of each category over one dense block, each term its way (docs/methods.md)."""
    terms = []
    for category, indices, factors in direct:
        part = tf.gather(piece, indices, batch_dims=1)
        whitened = tf.einsum("mij,mj->mi", factors, part)
        terms.append((category, tf.reduce_sum(tf.square(whitened), axis=1)))
    for category, mask, indices, targets, regression in complement:
        completed = piece * mask
        if regression.shape[1] and regression.shape[2]:
            # r_S completed on T by its conditional mean; padding of y* is zero.
            part = tf.stop_gradient(tf.gather(piece, indices, batch_dims=1))
            mean = tf.einsum("mts,ms->mt", regression, part)  # the minimiser
            completed = tf.tensor_scatter_nd_add(completed, targets, mean)
        whitened = completed @ whitening_t
        terms.append((category, tf.reduce_sum(tf.square(whitened), axis=1)))
    return terms


def _sum_over(values: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """Σ over the points in mask, per member: (M, n), (M, n) bool → (M,)."""
    return tf.reduce_sum(tf.where(mask, values, tf.zeros_like(values)), axis=1)


def _with_member(indices: np.ndarray) -> np.ndarray:
    """(M, t) indices → (M, t, 2) (member, index) pairs for scatter_nd."""
    members = np.broadcast_to(np.arange(indices.shape[0])[:, None], indices.shape)
    return np.stack([members, indices], axis=-1)
