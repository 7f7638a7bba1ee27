"""χ² per member and per category (training, validation, held-out), exactly, block by block.

A member's χ² of category c is r_Sᵀ C_SS⁻¹ r_S over its points S in that category only, so
it depends on the member's split. Each covariance block computes it the cheaper of two exact
ways, chosen per block, category and member (members padded to the largest size in a block
so that shapes are static; padding is zeros and contributes exactly nothing; while all
members' factors fit in cache, as for small ensembles, the direct way throughout):

- direct, S small (validation): gather r at S and multiply by the member's L_SS⁻¹
  (C_SS = L_SS L_SSᵀ), an s × s mat-vec per member;
- complement, S large (training): with the block's shared whitening G = L⁻¹ (C = L Lᵀ) and
  T the block's points outside S, χ²_S = min_y |G (r̃ + ỹ)|², r̃ being r with zeros on T and
  ỹ the vector y placed on T. The minimiser is the conditional mean of r_T given r_S,
  y* = B r_S with B = C_TS C_SS⁻¹ (t × s per member, t ≈ n/4 for training), so a step costs
  a t × s mat-vec per member (3n²/16 instead of n² for the training factor) and one GEMM
  with the shared (n, n) Gᵀ (compute-bound). The sum of squares is evaluated at the
  minimiser, where an error δy in y* changes χ² only at second order (δyᵀ K⁻¹ δy,
  K = C_TT − B C_ST); for the same reason (the envelope theorem: ∂/∂y vanishes there) the
  gradient need not flow through y*, which spares the mat-vec's backward pass.

  y* = B r_S rather than −K (C⁻¹ r̃)_T (K per member, t × t, and a second shared GEMM):
  C⁻¹ r̃ and K are huge and cancel to an O(r) y*, so in float32 their rounding alone leaves
  χ² wrong by orders of magnitude on a block with cond(C) ~ 1e9; B is O(1) and stays
  within float32 rounding of the direct way.

Blocks whose covariance is known as diag(σ²) + S Sᵀ with few systematics (k ≤ n/4 columns
of S) skip both: with w = r/σ and S̃ = S/σ, χ²_S = min_λ |w_S − S̃_S λ|² + |λ|², whose
minimiser λ* = K⁻¹ S̃_Sᵀ w_S, K = I + S̃_Sᵀ S̃_S, needs per member only the k × k K⁻¹ and
two thin products with the shared S̃. K⁻¹ is streamed every step, so it is kept in float32 where
that is safe and in float64 where K is stiff (a systematic dwarfing the statistical errors): a
float32 K⁻¹ moves λ* by up to ~ε‖K‖ relative and χ² by ~ε²‖K‖³ (cond(K) = ‖K‖, as K ≥ I), so
float32 is used only while ‖K‖ ≤ 1 + ‖S̃‖² stays under FLOAT32_KERNEL_MAX_NORM. The bound holds
for every member's subset, so the choice is the block's, never the ensemble's. As above, χ² is
a sum of squares at a minimiser, so rounding in λ* enters at second order only, and the
gradient skips λ*: backward is elementwise.

Diagonal blocks are 1/σ per point. The diagonal and nuisance points share one elementwise
pass over all points (whitening, the misfit after the nuisances, the squares summed per
category from each member's category per point, one byte), so per block only the two thin
products and K⁻¹ remain, and the backward pass, which skips the minimisers, is one
elementwise product with no per-block pieces to reassemble. Members never couple: the
shared matrices are constants and every product acts on one member's row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

TRAINING, VALIDATION, HELD_OUT = 0, 1, 2
N_CATEGORIES = 3
# These two only steer the choice of way, never the result. Per-member factors that fit in
# cache (float32, all categories and blocks, the direct way) are cheap to re-read every step,
# so the direct way, with no GEMMs, is used throughout below this size (half a 32 MiB L3):
CACHE_BYTES = 16 * 2**20
# and beyond it, the rough throughput of a GEMM with a shared matrix over a member-batched
# mat-vec streaming per-member matrices from memory (FLOP/s ratio on CPUs).
GEMM_ADVANTAGE = 8.0
SCHEMES = ("auto", "direct", "complement")
# A block with systematics takes the nuisance way when they are at most this share of its
# points: per member it then streams 2 categories × k² float64, no more than the dense ways'
# ~n²/4 float32.
NUISANCE_MAX_RANK_SHARE = 0.25
# A float32 fit keeps a block's K⁻¹ in float32 while ‖K‖ ≤ this: λ* then moves by ≤ ~6e-6
# relative and χ² by ≤ ~4e-9, below float32's own rounding of χ² (~1e-6 on the DIS covariance).
# Halving the bytes K⁻¹ streams per step saves 11% of a real DIS step at R = 16 (23% at
# R = 100), where the HERA block's 168 systematics (‖K‖ ≤ 97) make K⁻¹ the largest operand.
FLOAT32_KERNEL_MAX_NORM = 100.0


@dataclass(frozen=True)
class DirectTerm:
    """χ² of one category over one block, direct: |L_SS⁻¹ r_S|² per member."""

    category: int
    indices: np.ndarray  # (M, d) block-local index of each of S; padding points anywhere
    factors: np.ndarray  # (M, d, d) L_SS⁻¹, zero rows and columns for padding


@dataclass(frozen=True)
class ComplementTerm:
    """χ² of one category over one block, via the minimum over the points T outside S."""

    category: int
    mask: np.ndarray  # (M, n) 1 on S, 0 elsewhere (and for members using the direct way)
    indices: np.ndarray  # (M, s) block-local index of each of S; padding points anywhere
    targets: np.ndarray  # (M, t) block-local index of each of T; padding points anywhere
    regression: np.ndarray  # (M, t, s) B = C_TS C_SS⁻¹, zero rows and columns for padding


@dataclass(frozen=True)
class DenseBlock:
    start: int
    stop: int
    whitening_t: np.ndarray  # (n, n) Gᵀ = L⁻ᵀ, shared by all members
    direct: tuple[DirectTerm, ...]
    complement: tuple[ComplementTerm, ...]

    def flops(self) -> float:
        n = self.stop - self.start
        total = sum(4 * term.factors.shape[-1] ** 2 for term in self.direct)
        for term in self.complement:
            t, s = term.regression.shape[1:]
            # u Gᵀ, 2n² FLOPs forward and as many backward; the t × s mat-vec forward only.
            total += 4 * n * n + 2 * t * s
        return float(total)


@dataclass(frozen=True)
class DiagonalRun:
    """Consecutive points with a diagonal covariance."""

    start: int
    stop: int
    inverse_sigma: np.ndarray  # (n,)

    def flops(self) -> float:
        return 0.0


@dataclass(frozen=True)
class NuisanceBlock:
    """χ² per category of a block with few systematics, as the minimum over nuisances λ."""

    start: int
    stop: int
    inverse_sigma: np.ndarray  # (n,) 1/σ
    scaled_systematics: np.ndarray  # (n, k) S̃ = S/σ
    categories: tuple[int, ...]  # the categories with points in the block
    kernel_inverse: np.ndarray  # (C, M, k, k) K⁻¹ = (I + S̃_Sᵀ S̃_S)⁻¹, C = len(categories)
    kernel_norm_bound: float  # 1 + ‖S̃‖² ≥ ‖K‖ of every member and category

    def flops(self) -> float:
        n, k = self.scaled_systematics.shape
        # S̃ᵀw and S̃λ, 2nk each over the categories' points, and K⁻¹u, 2k² per category;
        # forward only (the gradient skips the minimiser).
        return float(4 * n * k + 2 * len(self.categories) * k * k)


@dataclass(frozen=True)
class Whitening:
    """Everything χ² per category needs, in float64 numpy: segments covering 0..N in order."""

    segments: tuple[DiagonalRun | DenseBlock | NuisanceBlock, ...]
    categories: np.ndarray  # (M, N) each member's category of each point

    @property
    def points_per_category(self) -> np.ndarray:
        """(M, 3) each member's number of points in each category."""
        return np.stack([(self.categories == c).sum(axis=1) for c in range(N_CATEGORIES)], 1)

    def flops(self) -> float:
        """Matmul FLOPs per member-step, forward + backward (elementwise work left out)."""
        return float(sum(segment.flops() for segment in self.segments))


def whitening(
    covmat: np.ndarray,
    blocks: tuple[slice, ...],
    categories: np.ndarray,
    scheme: str = "auto",
    cache_bytes: float = CACHE_BYTES,
    systematics: Sequence[tuple[np.ndarray, np.ndarray]] | None = None,
) -> Whitening:
    """Set-up for χ² per category of members with categories (M, N) over covmat's blocks.

    systematics: per block, its uncorrelated variance σ² (n,) and correlated systematics
    S (n, k) with the block of covmat = diag(σ²) + S Sᵀ (as the Problem holds them); blocks
    with few take the nuisance way. For the dense blocks, scheme
    "auto" picks per block, category and member the cheaper way; "direct" and "complement"
    force one way for every member (for tests).
    """
    if scheme not in SCHEMES:
        raise ValueError(f"unknown whitening scheme {scheme!r}, not one of {SCHEMES}")
    members = categories.shape[0]
    onehot = np.eye(N_CATEGORIES)[categories]  # (M, N, 3)
    by_nuisance = _nuisance_blocks(covmat, blocks, systematics)
    dense_blocks = tuple(b for i, b in enumerate(blocks) if i not in by_nuisance)
    if scheme == "auto" and _direct_bytes(covmat, dense_blocks, onehot) <= cache_bytes:
        scheme = "direct"
    segments: list[DiagonalRun | DenseBlock | NuisanceBlock] = []
    for index, block in enumerate(blocks):
        if index in by_nuisance:
            segments.append(_nuisance(block, *systematics[index], categories))
            continue
        cov = covmat[block, block]
        n = cov.shape[0]
        if _is_diagonal(cov):
            start = block.start
            if segments and isinstance(segments[-1], DiagonalRun):
                start = segments.pop().start
            inverse_sigma = 1.0 / np.sqrt(np.diag(covmat)[start : block.stop])
            segments.append(DiagonalRun(start, block.stop, inverse_sigma))
            continue
        direct: list[DirectTerm] = []
        complement: list[ComplementTerm] = []
        for category in range(N_CATEGORIES):
            in_s = categories[:, block] == category
            use_direct = _choose(in_s.sum(axis=1), n, members, scheme)
            if np.any(in_s & use_direct[:, None]):
                direct.append(_direct(category, cov, in_s & use_direct[:, None]))
            if np.any(in_s & ~use_direct[:, None]):
                complement.append(_complement(category, cov, in_s & ~use_direct[:, None]))
        whitening_t = _inverse_cholesky(cov).T.copy() if complement else np.zeros((0, 0))
        segments.append(
            DenseBlock(block.start, block.stop, whitening_t, tuple(direct), tuple(complement))
        )
    return Whitening(tuple(segments), categories)


def _nuisance_blocks(
    covmat: np.ndarray,
    blocks: tuple[slice, ...],
    systematics: Sequence[tuple[np.ndarray, np.ndarray]] | None,
) -> set[int]:
    """Indices of the blocks that take the nuisance way."""
    if systematics is None:
        return set()
    if len(systematics) != len(blocks):
        raise ValueError(f"{len(systematics)} systematics matrices for {len(blocks)} blocks")
    chosen = set()
    for index, (block, (_, columns)) in enumerate(zip(blocks, systematics, strict=True)):
        n = block.stop - block.start
        if columns.shape[0] != n:
            raise ValueError(f"systematics of block {index} have {columns.shape[0]} rows, not {n}")
        rank = columns.shape[1]
        if 0 < rank <= NUISANCE_MAX_RANK_SHARE * n and not _is_diagonal(covmat[block, block]):
            chosen.add(index)
    return chosen


def _nuisance(
    block: slice, variance: np.ndarray, systematics: np.ndarray, categories: np.ndarray
) -> NuisanceBlock:
    """σ, S̃ and categories of the block, and each member's K⁻¹ per category."""
    inverse_sigma = 1.0 / np.sqrt(variance)
    scaled = systematics * inverse_sigma[:, None]
    onehot = np.eye(N_CATEGORIES)[categories[:, block]]
    present = tuple(c for c in range(N_CATEGORIES) if onehot[..., c].any())
    onehot = onehot[..., present]  # (M, n, C)
    k = scaled.shape[1]
    kernel = np.eye(k) + np.einsum("mnc,nk,nl->cmkl", onehot, scaled, scaled, optimize=True)
    identity = tf.eye(k, batch_shape=kernel.shape[:-2], dtype=tf.float64)
    kernel_inverse = tf.linalg.cholesky_solve(_cholesky(kernel), identity).numpy()
    # ‖S̃‖² = largest eigenvalue of S̃ᵀS̃ (k × k), in TensorFlow like the factors above.
    gram = tf.constant(scaled.T @ scaled, tf.float64)
    norm_bound = 1.0 + float(tf.reduce_max(tf.linalg.eigvalsh(gram)))
    return NuisanceBlock(
        block.start, block.stop, inverse_sigma, scaled, present, kernel_inverse, norm_bound
    )


def _is_diagonal(cov: np.ndarray) -> bool:
    return np.count_nonzero(cov - np.diag(np.diag(cov))) == 0


def _direct_bytes(covmat: np.ndarray, blocks: tuple[slice, ...], onehot: np.ndarray) -> float:
    """float32 bytes of all members' padded L_SS⁻¹ of the dense blocks."""
    total = 0
    for block in blocks:
        if not _is_diagonal(covmat[block, block]):
            total += np.sum(onehot[:, block].sum(axis=1).max(axis=0) ** 2)
    return 4.0 * onehot.shape[0] * total


def _choose(sizes: np.ndarray, n: int, members: int, scheme: str) -> np.ndarray:
    """Which members compute this category directly: (M,) bool.

    Members with |S| ≤ θ go direct (padded to d = the largest such |S|), the others use the
    complement (padded to the largest |T| and |S| among them). Cost per step in floats
    streamed: 2M(d² + t·s) for the per-member mat-vecs forward and backward, plus the
    shared GEMM forward and backward, 2n², which streams its matrix once for a few members
    and is compute-bound (GEMM_ADVANTAGE× faster per FLOP) for many.
    """
    if scheme != "auto":
        return np.full(sizes.shape, scheme == "direct")
    best, best_cost = sizes.max(), np.inf
    for threshold in np.unique(np.concatenate([[-1], sizes]))[::-1]:
        d = max(threshold, 0)
        rest = sizes[sizes > threshold]
        cost = 2.0 * members * d * d
        if rest.size:
            t, s = n - rest.min(), rest.max()
            cost += 2.0 * members * t * s + 2.0 * n * n * max(1.0, members / GEMM_ADVANTAGE)
        if cost < best_cost:  # thresholds descend: ties keep the more direct choice
            best, best_cost = threshold, cost
    return sizes <= best


def _inverse_cholesky(matrices: np.ndarray) -> np.ndarray:
    """L⁻¹ with L Lᵀ = A for SPD A (..., n, n), in float64.

    TensorFlow's kernels rather than numpy's: numpy's threaded OpenBLAS stalls (100× slower)
    when TensorFlow's thread pools are busy on the same cores.
    """
    factor = _cholesky(matrices)
    identity = tf.eye(matrices.shape[-1], batch_shape=matrices.shape[:-2], dtype=tf.float64)
    return tf.linalg.triangular_solve(factor, identity, lower=True).numpy()


def _cholesky(matrices: np.ndarray) -> tf.Tensor:
    factor = tf.linalg.cholesky(tf.constant(matrices, tf.float64))
    if not np.all(np.isfinite(factor.numpy())):
        raise ValueError("a covariance block is not positive definite")
    return factor


def _padded(chosen: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each member's chosen points first, in order: indices (M, k) (padding 0), valid (M, k)."""
    sizes = chosen.sum(axis=1)
    k = int(sizes.max())
    indices = np.argsort(~chosen, axis=1, kind="stable")[:, :k]
    valid = np.arange(k)[None, :] < sizes[:, None]
    return np.where(valid, indices, 0), valid


def _gather(cov: np.ndarray, rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """cov at each member's rows × columns: (M, a), (M, b) → (M, a, b)."""
    return cov[rows[:, :, None], columns[:, None, :]]


def _direct(category: int, cov: np.ndarray, in_s: np.ndarray) -> DirectTerm:
    """Padded L_SS⁻¹ of each member's S (empty for members using the complement)."""
    indices, valid = _padded(in_s)
    pair = valid[:, :, None] & valid[:, None, :]
    d = indices.shape[1]
    factors = _inverse_cholesky(np.where(pair, _gather(cov, indices, indices), np.eye(d)))
    return DirectTerm(category, indices, factors * pair)


def _complement(category: int, cov: np.ndarray, in_s: np.ndarray) -> ComplementTerm:
    """Padded B = C_TS C_SS⁻¹ of each member's S (empty for members using the direct way).

    Members without points in S here have an empty T as well, so they contribute zero.
    """
    indices, valid = _padded(in_s)
    targets, valid_t = _padded(~in_s & in_s.any(axis=1, keepdims=True))
    s, t = indices.shape[1], targets.shape[1]
    regression = np.zeros((in_s.shape[0], t, s))
    if t:
        pair = valid[:, :, None] & valid[:, None, :]
        factor = _cholesky(np.where(pair, _gather(cov, indices, indices), np.eye(s)))
        cross = _gather(cov, indices, targets) * (valid[:, :, None] & valid_t[:, None, :])
        regression = np.swapaxes(tf.linalg.cholesky_solve(factor, cross).numpy(), 1, 2)
    mask = in_s.astype(np.float64)
    return ComplementTerm(category, mask, indices, targets, regression)


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
            # The minimiser: no gradient needed (see above).
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
    """float32 for K⁻¹ only in a float32 fit and where K is not stiff (see above)."""
    if dtype == tf.float32 and block.kernel_norm_bound <= FLOAT32_KERNEL_MAX_NORM:
        return tf.float32
    return tf.float64


def _dense_chi2(
    piece: tf.Tensor, direct: list[tuple], whitening_t: tf.Tensor, complement: list[tuple]
) -> list[tuple[int, tf.Tensor]]:
    """χ² of each category over one dense block, each term its way (see above)."""
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
