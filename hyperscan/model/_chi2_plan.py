"""The χ² plan: everything χ² per member and category needs that is decided once, in numpy.

From the covariance blocks (and their systematics, where known) and each member's category of
each point, it picks per block how χ² is computed — elementwise (diagonal), through nuisance
parameters (few systematics), or dense, directly or via the complement — and precomputes the
factors, padded to static shapes. ``hyperscan.model._chi2`` evaluates it in TensorFlow every
step. Why each way is exact and when it is cheaper: docs/methods.md#chi-squared-per-member.

It lives in the model layer, not in data: its inputs are data (covariance, systematics) and
the fit's splits, but its choices follow the cost of the evaluation (cache, GEMMs), and its
factorisations use TensorFlow's kernels (see ``_linalg``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from hyperscan.model._linalg import (
    cholesky,
    cholesky_solve,
    inverse_cholesky,
    largest_eigenvalue,
    spd_inverse,
)
from hyperscan.model._member_axis import MemberAxis

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


@dataclass(frozen=True)
class DirectTerm:
    """χ² of one category over one block, direct: |L_SS⁻¹ r_S|² per member."""

    member_axis: ClassVar[MemberAxis] = MemberAxis({"indices": 0, "factors": 0})

    category: int
    indices: np.ndarray  # (M, d) block-local index of each of S; padding points anywhere
    factors: np.ndarray  # (M, d, d) L_SS⁻¹, zero rows and columns for padding


@dataclass(frozen=True)
class ComplementTerm:
    """χ² of one category over one block, via the minimum over the points T outside S."""

    member_axis: ClassVar[MemberAxis] = MemberAxis(
        {"mask": 0, "indices": 0, "targets": 0, "regression": 0}
    )

    category: int
    mask: np.ndarray  # (M, n) 1 on S, 0 elsewhere (and for members using the direct way)
    indices: np.ndarray  # (M, s) block-local index of each of S; padding points anywhere
    targets: np.ndarray  # (M, t) block-local index of each of T; padding points anywhere
    regression: np.ndarray  # (M, t, s) B = C_TS C_SS⁻¹, zero rows and columns for padding


@dataclass(frozen=True)
class DenseBlock:
    """A correlated block whose χ² is computed densely, each category its way."""

    member_axis: ClassVar[MemberAxis] = MemberAxis(nested=("direct", "complement"))

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

    member_axis: ClassVar[MemberAxis] = MemberAxis()

    start: int
    stop: int
    inverse_sigma: np.ndarray  # (n,)

    def flops(self) -> float:
        return 0.0


@dataclass(frozen=True)
class NuisanceBlock:
    """χ² per category of a block with few systematics, as the minimum over nuisances λ."""

    member_axis: ClassVar[MemberAxis] = MemberAxis({"kernel_inverse": 1})

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

    member_axis: ClassVar[MemberAxis] = MemberAxis({"categories": 0}, nested=("segments",))

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
        whitening_t = inverse_cholesky(cov).T.copy() if complement else np.zeros((0, 0))
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
    kernel_inverse = spd_inverse(kernel)
    # ‖S̃‖² = largest eigenvalue of S̃ᵀS̃ (k × k).
    norm_bound = 1.0 + largest_eigenvalue(scaled.T @ scaled)
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
    factors = inverse_cholesky(np.where(pair, _gather(cov, indices, indices), np.eye(d)))
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
        factor = cholesky(np.where(pair, _gather(cov, indices, indices), np.eye(s)))
        cross = _gather(cov, indices, targets) * (valid[:, :, None] & valid_t[:, None, :])
        regression = np.swapaxes(cholesky_solve(factor, cross), 1, 2)
    mask = in_s.astype(np.float64)
    return ComplementTerm(category, mask, indices, targets, regression)
