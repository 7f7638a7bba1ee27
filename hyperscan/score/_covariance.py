# SPDX-License-Identifier: GPL-3.0-or-later
"""A covariance's factorisations, made once: a scan scores every trial on the same few
covariances (one per fold), and a worker scores its finished trials one after another, so
factorising one of a thousand points (a second) for each trial held the others back (issue
#55, fault 6: four results took 20 s to write)."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable

import numpy as np

#: Factorisations kept, the most recently used, up to this many bytes: a few covariances per
#: study (a fold's of NNPDF4.0's 4,600 points is 170 MB).
KEPT_BYTES = 512 * 2**20
_kept: OrderedDict[tuple[str, bytes], np.ndarray] = OrderedDict()


def _cached(kind: str, covmat: np.ndarray, make: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    covmat = np.ascontiguousarray(covmat, dtype=np.float64)
    digest = hashlib.blake2b(covmat.tobytes(), digest_size=16).digest()
    key = (kind, digest + repr(covmat.shape).encode())
    if key in _kept:
        _kept.move_to_end(key)
        return _kept[key]
    _kept[key] = value = make(covmat)
    while len(_kept) > 1 and sum(kept.nbytes for kept in _kept.values()) > KEPT_BYTES:
        _kept.popitem(last=False)
    return value


def whitening(covmat: np.ndarray) -> np.ndarray:
    """L⁻¹ for C = L Lᵀ (Cholesky): rᵀ C⁻¹ r = |L⁻¹ r|². LinAlgError if C is not positive."""
    return _cached(
        "whitening", covmat, lambda c: np.linalg.solve(np.linalg.cholesky(c), np.eye(len(c)))
    )


def eigenvectors(covmat: np.ndarray) -> np.ndarray:
    """C's eigenvectors, as columns (numpy's ``eigh``)."""
    return _cached("eigenvectors", covmat, lambda c: np.linalg.eigh(c)[1])
