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
  K = C_TT − B C_ST).

  y* = B r_S rather than −K (C⁻¹ r̃)_T (K per member, t × t, and a second shared GEMM):
  C⁻¹ r̃ and K are huge and cancel to an O(r) y*, so in float32 their rounding alone leaves
  χ² wrong by orders of magnitude on a block with cond(C) ~ 1e9; B is O(1) and stays
  within float32 rounding of the direct way.

Diagonal blocks are 1/σ per point and a one-hot category per member. Members never couple:
the shared matrices are constants and every product acts on one member's row.
"""

from __future__ import annotations

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
            # u Gᵀ and the t × s mat-vec, each 2·size FLOPs forward and as many backward.
            total += 4 * n * n + 4 * t * s
        return float(total)


@dataclass(frozen=True)
class DiagonalRun:
    """Consecutive points with a diagonal covariance."""

    start: int
    stop: int
    inverse_sigma: np.ndarray  # (n,)
    onehot: np.ndarray  # (M, n, 3) each member's category of each point

    def flops(self) -> float:
        return 0.0


@dataclass(frozen=True)
class Whitening:
    """Everything χ² per category needs, in float64 numpy: segments covering 0..N in order."""

    segments: tuple[DiagonalRun | DenseBlock, ...]
    points_per_category: np.ndarray  # (M, 3)

    def flops(self) -> float:
        """Matmul FLOPs per member-step, forward + backward (elementwise work left out)."""
        return float(sum(segment.flops() for segment in self.segments))


def whitening(
    covmat: np.ndarray,
    blocks: tuple[slice, ...],
    categories: np.ndarray,
    scheme: str = "auto",
    cache_bytes: float = CACHE_BYTES,
) -> Whitening:
    """Set-up for χ² per category of members with categories (M, N) over covmat's blocks.

    scheme "auto" picks per block, category and member the cheaper way; "direct" and
    "complement" force one way for every member (for tests).
    """
    if scheme not in SCHEMES:
        raise ValueError(f"unknown whitening scheme {scheme!r}, not one of {SCHEMES}")
    members = categories.shape[0]
    onehot = np.eye(N_CATEGORIES)[categories]  # (M, N, 3)
    if scheme == "auto" and _direct_bytes(covmat, blocks, onehot) <= cache_bytes:
        scheme = "direct"
    segments: list[DiagonalRun | DenseBlock] = []
    for block in blocks:
        cov = covmat[block, block]
        n = cov.shape[0]
        if _is_diagonal(cov):
            start = block.start
            if segments and isinstance(segments[-1], DiagonalRun):
                start = segments.pop().start
            inverse_sigma = 1.0 / np.sqrt(np.diag(covmat)[start : block.stop])
            segments.append(
                DiagonalRun(start, block.stop, inverse_sigma, onehot[:, start : block.stop])
            )
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
    return Whitening(tuple(segments), onehot.sum(axis=1))


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
        self._sizes = [segment.stop - segment.start for segment in setup.segments]

        def constant(value: np.ndarray) -> tf.Tensor:
            return tf.constant(value, dtype=dtype)

        def index(value: np.ndarray) -> tf.Tensor:
            return tf.constant(value, dtype=tf.int32)

        self._segments: list[tuple] = []
        for segment in setup.segments:
            if isinstance(segment, DiagonalRun):
                self._segments.append((constant(segment.inverse_sigma), constant(segment.onehot)))
                continue
            direct = [(t.category, index(t.indices), constant(t.factors)) for t in segment.direct]
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
            self._segments.append((direct, constant(segment.whitening_t), complement))

    def flops(self) -> float:
        return self._flops

    def __call__(self, residuals: tf.Tensor) -> tf.Tensor:
        # One split (its gradient is one concatenation), not a slice per block.
        pieces = tf.split(residuals, self._sizes, axis=1) if len(self._sizes) > 1 else [residuals]
        terms: list[list[tf.Tensor]] = [[] for _ in range(N_CATEGORIES)]
        diagonal: list[tf.Tensor] = []
        for piece, segment in zip(pieces, self._segments, strict=True):
            if len(segment) == 2:
                inverse_sigma, onehot = segment
                diagonal.append(tf.einsum("mn,mnc->mc", tf.square(piece * inverse_sigma), onehot))
                continue
            direct, whitening_t, complement = segment
            for category, indices, factors in direct:
                part = tf.gather(piece, indices, batch_dims=1)
                whitened = tf.einsum("mij,mj->mi", factors, part)
                terms[category].append(tf.reduce_sum(tf.square(whitened), axis=1))
            for category, mask, indices, targets, regression in complement:
                completed = piece * mask
                if regression.shape[1] and regression.shape[2]:
                    # r_S completed on T by its conditional mean; padding of y* is zero.
                    part = tf.gather(piece, indices, batch_dims=1)
                    mean = tf.einsum("mts,ms->mt", regression, part)
                    completed = tf.tensor_scatter_nd_add(completed, targets, mean)
                whitened = completed @ whitening_t
                terms[category].append(tf.reduce_sum(tf.square(whitened), axis=1))
        zero = tf.zeros_like(residuals[:, 0])
        chi2 = tf.stack([tf.add_n(t) if t else zero for t in terms], axis=1)
        return tf.add_n([chi2, *diagonal]) if diagonal else chi2


def _with_member(indices: np.ndarray) -> np.ndarray:
    """(M, t) indices → (M, t, 2) (member, index) pairs for scatter_nd."""
    members = np.broadcast_to(np.arange(indices.shape[0])[:, None], indices.shape)
    return np.stack([members, indices], axis=-1)
