"""Cholesky-based factorisations for the χ² plan: float64 numpy in, float64 numpy out.

TensorFlow's kernels rather than numpy's: numpy's threaded OpenBLAS stalls (100× slower) when
TensorFlow's thread pools are busy on the same cores. This module is the plan's only contact
with TensorFlow; it builds no graph and keeps nothing.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf


def cholesky(matrices: np.ndarray) -> np.ndarray:
    """L with L Lᵀ = A for SPD A (..., n, n); refuses a matrix that is not positive definite."""
    factor = tf.linalg.cholesky(tf.constant(matrices, tf.float64)).numpy()
    if not np.all(np.isfinite(factor)):
        raise ValueError("a covariance block is not positive definite")
    return factor


def inverse_cholesky(matrices: np.ndarray) -> np.ndarray:
    """L⁻¹ with L Lᵀ = A for SPD A (..., n, n)."""
    identity = tf.eye(matrices.shape[-1], batch_shape=matrices.shape[:-2], dtype=tf.float64)
    return tf.linalg.triangular_solve(cholesky(matrices), identity, lower=True).numpy()


def cholesky_solve(factor: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """A⁻¹ B from the Cholesky factor L of A (..., n, n) and B (..., n, k)."""
    return tf.linalg.cholesky_solve(factor, tf.constant(rhs, tf.float64)).numpy()


def spd_inverse(matrices: np.ndarray) -> np.ndarray:
    """A⁻¹ for SPD A (..., n, n), through its Cholesky factor."""
    identity = tf.eye(matrices.shape[-1], batch_shape=matrices.shape[:-2], dtype=tf.float64)
    return tf.linalg.cholesky_solve(cholesky(matrices), identity).numpy()


def largest_eigenvalue(symmetric: np.ndarray) -> float:
    """The largest eigenvalue of a symmetric matrix (n, n)."""
    return float(tf.reduce_max(tf.linalg.eigvalsh(tf.constant(symmetric, tf.float64))))
