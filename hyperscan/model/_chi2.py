"""χ² per member and per category (training, validation, held-out) via whitening factors.

A member's training χ² is rᵀ C_SS⁻¹ r over its training points S only, so each member needs
its own factor. For a covariance block with points in categories S_1, S_2, ... the factor
stacks L_{S_c}⁻¹ (C_{S_c S_c} = L Lᵀ) row-wise: one (n, n) matrix-vector product gives the
whitened residuals of every category at once, and |z|² summed over a category's rows is that
category's χ². A diagonal block stays a vector and needs no per-member factor.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import tensorflow as tf

TRAINING, VALIDATION, HELD_OUT = 0, 1, 2
N_CATEGORIES = 3


@dataclass(frozen=True)
class Segment:
    """A contiguous range of data points with its whitening factor."""

    start: int
    stop: int
    whitening: np.ndarray  # diagonal: (n,) 1/σ; dense: (members, n, n)

    @property
    def diagonal(self) -> bool:
        return self.whitening.ndim == 1


def whitening_segments(
    covmat: np.ndarray, blocks: tuple[slice, ...], categories: np.ndarray
) -> tuple[list[Segment], np.ndarray]:
    """Segments covering all points, and the category of each whitened row: (members, N)."""
    row_categories = np.array(categories, dtype=np.int64, copy=True)
    segments: list[Segment] = []
    for block in blocks:
        cov = covmat[block, block]
        if np.count_nonzero(cov - np.diag(np.diag(cov))) == 0:
            segments.append(Segment(block.start, block.stop, 1.0 / np.sqrt(np.diag(cov))))
            continue
        factors = np.zeros((categories.shape[0], cov.shape[0], cov.shape[0]))
        for member, member_categories in enumerate(categories[:, block]):
            row = 0
            for category in range(N_CATEGORIES):
                points = np.flatnonzero(member_categories == category)
                if points.size == 0:
                    continue
                cholesky = np.linalg.cholesky(cov[np.ix_(points, points)])
                inverse = np.linalg.solve(cholesky, np.eye(points.size))
                factors[member][row : row + points.size, points] = inverse
                row_categories[member, block.start + row : block.start + row + points.size] = (
                    category
                )
                row += points.size
        segments.append(Segment(block.start, block.stop, factors))
    return _merge_diagonal(segments), row_categories


def _merge_diagonal(segments: list[Segment]) -> list[Segment]:
    merged: list[Segment] = []
    for segment in segments:
        if merged and merged[-1].diagonal and segment.diagonal:
            previous = merged.pop()
            segment = Segment(
                previous.start,
                segment.stop,
                np.concatenate([previous.whitening, segment.whitening]),
            )
        merged.append(segment)
    return merged


def whitened_residuals(residuals: tf.Tensor, segments: list[tuple[int, int, tf.Tensor]]):
    """residuals (M, N) → z (M, N) with |z|² per category = χ² per category."""
    parts = []
    for start, stop, factor in segments:
        part = residuals[:, start:stop]
        if factor.shape.rank == 1:
            parts.append(part * factor)
        else:
            parts.append(tf.einsum("mij,mj->mi", factor, part))
    return parts[0] if len(parts) == 1 else tf.concat(parts, axis=1)


def chi2_by_category(whitened: tf.Tensor, row_onehot: tf.Tensor) -> tf.Tensor:
    """whitened (M, N), row_onehot (M, N, 3) → χ² (M, 3)."""
    return tf.einsum("mn,mnc->mc", tf.square(whitened), row_onehot)
