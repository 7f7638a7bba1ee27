# SPDX-License-Identifier: GPL-3.0-or-later
"""Flavour bases, the fit -> FK rotation, observable rows and the Les Houches toy PDF.

Everything here is exact or bit-reproducible on purpose: closure data built from these pieces are
fingerprinted, and a worker on another CPU must rebuild the very same bytes. Hence rational
snapping of the numerically inverted flavour matrix, fixed-order sums instead of BLAS, and
``math.pow`` (libm) instead of numpy's CPU-dispatched SIMD ``power``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from functools import cache

import numpy as np

FK_BASIS: tuple[str, ...] = (
    "photon",
    "Sigma",
    "g",
    "V",
    "V3",
    "V8",
    "V15",
    "V24",
    "V35",
    "T3",
    "T8",
    "T15",
    "T24",
    "T35",
)
"""Axis-1 order of every FK table (validphys FK basis, as in the real npz files)."""

FIT_BASIS: tuple[str, ...] = ("Sigma", "g", "V", "V3", "V8", "T3", "T8", "T15")
"""The 8 fitted evolution-basis functions (NNPDF4.0 basis, nf = 4 with c = cbar at Q0)."""

PHYSICAL_FLAVOURS: tuple[str, ...] = ("u", "ubar", "d", "dbar", "s", "sbar", "c", "cbar", "g")
"""Keys accepted by :func:`flavour_combination`."""

# The 9 independent evolution-basis functions of 4 quark flavours + gluon (V15 still separate).
_EVOLUTION_9: tuple[str, ...] = ("Sigma", "g", "V", "V3", "V8", "V15", "T3", "T8", "T15")

# Rows: _EVOLUTION_9; columns: PHYSICAL_FLAVOURS. Written with q+ = q + qbar, q- = q - qbar.
_QUARK_COLUMNS = {"u": (0, 1), "d": (2, 3), "s": (4, 5), "c": (6, 7)}
_EVOLUTION_DEFINITIONS: dict[str, tuple[str, dict[str, int]]] = {
    # name: (sign type, {quark: weight}); "+" uses q + qbar, "-" uses q - qbar.
    "Sigma": ("+", {"u": 1, "d": 1, "s": 1, "c": 1}),
    "V": ("-", {"u": 1, "d": 1, "s": 1, "c": 1}),
    "V3": ("-", {"u": 1, "d": -1}),
    "V8": ("-", {"u": 1, "d": 1, "s": -2}),
    "V15": ("-", {"u": 1, "d": 1, "s": 1, "c": -3}),
    "T3": ("+", {"u": 1, "d": -1}),
    "T8": ("+", {"u": 1, "d": 1, "s": -2}),
    "T15": ("+", {"u": 1, "d": 1, "s": 1, "c": -3}),
}


@cache
def _physical_to_evolution() -> np.ndarray:
    """(9, 9) integer matrix e = M @ p, rows _EVOLUTION_9, columns PHYSICAL_FLAVOURS."""
    m = np.zeros((9, 9))
    for row, name in enumerate(_EVOLUTION_9):
        if name == "g":
            m[row, PHYSICAL_FLAVOURS.index("g")] = 1.0
            continue
        sign, weights = _EVOLUTION_DEFINITIONS[name]
        for quark, w in weights.items():
            q, qbar = _QUARK_COLUMNS[quark]
            m[row, q] = w
            m[row, qbar] = w if sign == "+" else -w
    m.setflags(write=False)
    return m


@cache
def _evolution_to_physical() -> np.ndarray:
    """(9, 9) inverse of :func:`_physical_to_evolution`, p = M^-1 @ e.

    Inverted numerically, then each entry snapped to the nearest fraction with a small
    denominator: the exact inverse is rational (denominators divide 24), and snapping makes the
    bits independent of the LAPACK build that did the inversion.
    """
    inv = np.linalg.inv(_physical_to_evolution())
    snapped = np.array(
        [[float(Fraction(v).limit_denominator(1000)) for v in row] for row in inv.tolist()]
    )
    if np.max(np.abs(snapped - inv)) > 1e-12:  # pragma: no cover - would mean a wrong matrix
        raise RuntimeError("physical -> evolution matrix has no small-denominator inverse")
    snapped.setflags(write=False)
    return snapped


def fit_to_fk_rotation() -> np.ndarray:
    """(14, 8) matrix R with ``xf_fk = R @ xf_fit`` (FK_BASIS rows, FIT_BASIS columns).

    Why these identities: at Q0 with nf = 4 fitted flavours, c = cbar and no b, t, so
    V15 = V24 = V35 = V and T24 = T35 = Sigma; the photon is not fitted (row of zeros).
    """
    r = np.zeros((len(FK_BASIS), len(FIT_BASIS)))
    for j, name in enumerate(FIT_BASIS):
        r[FK_BASIS.index(name), j] = 1.0
    v = FIT_BASIS.index("V")
    sigma = FIT_BASIS.index("Sigma")
    for name in ("V15", "V24", "V35"):
        r[FK_BASIS.index(name), v] = 1.0
    for name in ("T24", "T35"):
        r[FK_BASIS.index(name), sigma] = 1.0
    return r


LHA_BASIS: tuple[str, ...] = (
    "TBAR",
    "BBAR",
    "CBAR",
    "SBAR",
    "UBAR",
    "DBAR",
    "GLUON",
    "D",
    "U",
    "S",
    "C",
    "B",
    "T",
    "PHT",
)
"""The flavour basis of n3fit's exportgrids (labels as n3fit writes them; PDG ids -6 … 6, 22)."""

# LHA_BASIS as (quark, antiquark) columns of the 6 quarks, in the evolution basis's order.
_LHA_QUARKS = (
    ("U", "UBAR"),
    ("D", "DBAR"),
    ("S", "SBAR"),
    ("C", "CBAR"),
    ("B", "BBAR"),
    ("T", "TBAR"),
)


@cache
def fk_to_lha_rotation(active_flavours: int = 4) -> np.ndarray:
    """(14, 14) matrix R with ``xf_lha = R @ xf_fk`` (LHA_BASIS rows, FK_BASIS columns).

    The exact inverse of the evolution basis's definition (Sigma = sum of q+, V = sum of q-,
    T_k, V_k = the first k/... quarks against the next), in fractions, so the rows carry no LAPACK
    rounding. Quarks heavier than the ``active_flavours`` lightest get zero rows, as n3fit writes
    its exportgrids: at Q0 they hold rounding noise only, which must not reach an evolution.
    """
    m = [[Fraction(0)] * 14 for _ in range(14)]  # FK_BASIS rows, LHA_BASIS columns
    m[FK_BASIS.index("photon")][LHA_BASIS.index("PHT")] = Fraction(1)
    m[FK_BASIS.index("g")][LHA_BASIS.index("GLUON")] = Fraction(1)
    for sign, total, prefix in ((1, "Sigma", "T"), (-1, "V", "V")):
        for quark, antiquark in _LHA_QUARKS:
            m[FK_BASIS.index(total)][LHA_BASIS.index(quark)] = Fraction(1)
            m[FK_BASIS.index(total)][LHA_BASIS.index(antiquark)] = Fraction(sign)
        for k, size in enumerate((3, 8, 15, 24, 35), start=2):  # T3 = u+ - d+, T8 = u+ + d+ - 2 s+
            row = m[FK_BASIS.index(f"{prefix}{size}")]
            for j, (quark, antiquark) in enumerate(_LHA_QUARKS[:k]):
                weight = Fraction(1 - k if j == k - 1 else 1)
                row[LHA_BASIS.index(quark)] = weight
                row[LHA_BASIS.index(antiquark)] = sign * weight
    inverse = _inverted(m)
    for quark, antiquark in _LHA_QUARKS[active_flavours:]:
        inverse[LHA_BASIS.index(quark)] = [Fraction(0)] * 14
        inverse[LHA_BASIS.index(antiquark)] = [Fraction(0)] * 14
    rotation = np.array([[float(v) for v in row] for row in inverse])
    rotation.setflags(write=False)
    return rotation


def _inverted(matrix: list[list[Fraction]]) -> list[list[Fraction]]:
    """Gauss-Jordan in exact fractions (the matrix is invertible by construction)."""
    n = len(matrix)
    rows = [row[:] + [Fraction(int(i == j)) for j in range(n)] for i, row in enumerate(matrix)]
    for col in range(n):
        pivot = next(r for r in range(col, n) if rows[r][col] != 0)
        rows[col], rows[pivot] = rows[pivot], rows[col]
        rows[col] = [v / rows[col][col] for v in rows[col]]
        for r in range(n):
            if r != col and rows[r][col] != 0:
                factor = rows[r][col]
                rows[r] = [a - factor * b for a, b in zip(rows[r], rows[col], strict=True)]
    return [row[n:] for row in rows]


def _check_coefficients(coefficients: Mapping[str, float]) -> None:
    unknown = sorted(set(coefficients) - set(PHYSICAL_FLAVOURS))
    if unknown:
        raise ValueError(
            f"unknown flavour(s) {unknown}; expected keys among {list(PHYSICAL_FLAVOURS)}"
        )


def _fk_row(coefficients: Mapping[str, float]) -> np.ndarray:
    """(14,) FK-basis row of ``sum_p coefficients[p] * x f_p`` (physical flavours).

    Weight lands on Sigma, g, V, V3, V8, V15, T3, T8, T15 only; photon, V24, V35, T24, T35 stay
    zero, the same pattern as the real nf = 4 FK tables. Summed in a fixed order (no BLAS) so
    the bits do not depend on the CPU.
    """
    _check_coefficients(coefficients)
    inv = _evolution_to_physical()
    row9 = np.zeros(9)
    for p, name in enumerate(PHYSICAL_FLAVOURS):
        c = float(coefficients.get(name, 0.0))
        if c != 0.0:
            row9 = row9 + c * inv[p]  # O = a . p = a . (M^-1 e): row of M^-1 for flavour p
    row14 = np.zeros(len(FK_BASIS))
    for k, name in enumerate(_EVOLUTION_9):
        row14[FK_BASIS.index(name)] = row9[k]
    return row14 + 0.0  # + 0.0 turns any -0.0 into +0.0 (stable bytes)


def flavour_combination(coefficients: Mapping[str, float]) -> np.ndarray:
    """(8,) FIT_BASIS row of a linear combination of physical x*f.

    ``coefficients`` maps keys among u, ubar, d, dbar, s, sbar, c, cbar, g to weights, e.g. LO
    proton F2 = {u: 4/9, ubar: 4/9, d: 1/9, dbar: 1/9, s: 1/9, sbar: 1/9, c: 4/9, cbar: 4/9}.
    Because the fit basis assumes c = cbar, a weight on c alone acts as half of c + cbar.
    """
    return fit_to_fk_rotation().T @ _fk_row(coefficients) + 0.0


# --- Les Houches toy PDF ------------------------------------------------------------------
# x f = A x^a (1 - x)^b terms (Les Houches benchmark toy, hep-ph/0204316):
#   xuv = 5.1072 x^0.8 (1-x)^3, xdv = 3.06432 x^0.8 (1-x)^4, xg = 1.7 x^-0.1 (1-x)^5,
#   xdbar = 0.1939875 x^-0.1 (1-x)^6, xubar = (1-x) xdbar, xs = xsbar = 0.2 x (ubar + dbar).
_LH_UV = (5.1072, 0.8, 3)
_LH_DV = (3.06432, 0.8, 4)
_LH_G = (1.7, -0.1, 5)
_LH_DBAR = (0.1939875, -0.1, 6)


def _beta(a: float, b: float) -> float:
    """Euler beta B(a, b) = int_0^1 x^(a-1) (1-x)^(b-1) dx (exact, via log-gamma)."""
    return math.exp(math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b))


@cache
def _toy_normalisations() -> tuple[float, float, float]:
    """(A_uv, A_dv, A_g) rescaled so that the sum rules hold (exact Beta-function integrals).

    Valence: int uv = 2, int dv = 1 (so int V = 3, int V3 = 1, int V8 = 3 with s = sbar).
    Momentum: the gluon absorbs what the quarks leave, int x (Sigma + g) = 1, as in n3fit where
    the momentum sum rule fixes the gluon normalisation. The published constants already satisfy
    these to ~2e-8 (momentum) and ~1e-15 (valence); the rescaling only removes that residue.
    """
    _, a_uv, b_uv = _LH_UV
    _, a_dv, b_dv = _LH_DV
    _, a_g, b_g = _LH_G
    c_db, a_db, b_db = _LH_DBAR
    n_uv = 2.0 / _beta(a_uv, b_uv + 1)  # int x^(a-1) (1-x)^b
    n_dv = 1.0 / _beta(a_dv, b_dv + 1)
    # momentum of each piece: int x f dx = A * B(a + 1, b + 1)
    mom_uv = n_uv * _beta(a_uv + 1, b_uv + 1)
    mom_dv = n_dv * _beta(a_dv + 1, b_dv + 1)
    mom_dbar = c_db * _beta(a_db + 1, b_db + 1)
    mom_ubar = c_db * _beta(a_db + 1, b_db + 2)  # xubar = (1 - x) xdbar
    # Sigma = uv + dv + 2 ubar + 2 dbar + 2 s, with s = 0.2 (ubar + dbar)
    mom_quarks = mom_uv + mom_dv + 2.4 * (mom_ubar + mom_dbar)
    n_g = (1.0 - mom_quarks) / _beta(a_g + 1, b_g + 1)
    return n_uv, n_dv, n_g


def _pow(x: np.ndarray, a: float) -> np.ndarray:
    """x**a element by element through libm (numpy's SIMD power differs between CPUs)."""
    return np.array([math.pow(v, a) for v in x.tolist()], dtype=np.float64).reshape(x.shape)


def _toy_physical(x: np.ndarray, normalise: bool = True) -> np.ndarray:
    """(n_x, 9) toy x*f in PHYSICAL_FLAVOURS order."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError(f"x must be 1-d, got shape {x.shape}")
    if not np.all((x > 0.0) & (x <= 1.0)):
        raise ValueError("toy_pdf needs 0 < x <= 1")
    if normalise:
        a_uv, a_dv, a_g = _toy_normalisations()
    else:
        a_uv, a_dv, a_g = _LH_UV[0], _LH_DV[0], _LH_G[0]
    one_m = 1.0 - x
    om2 = one_m * one_m
    om3 = om2 * one_m
    om4 = om3 * one_m
    om5 = om4 * one_m
    om6 = om5 * one_m
    x08 = _pow(x, 0.8)
    xm01 = _pow(x, -0.1)
    xuv = a_uv * x08 * om3
    xdv = a_dv * x08 * om4
    xg = a_g * xm01 * om5
    xdbar = _LH_DBAR[0] * xm01 * om6
    xubar = one_m * xdbar
    xs = 0.2 * (xubar + xdbar)
    zero = np.zeros_like(x)
    columns = {
        "u": xuv + xubar,
        "ubar": xubar,
        "d": xdv + xdbar,
        "dbar": xdbar,
        "s": xs,
        "sbar": xs,
        "c": zero,
        "cbar": zero,
        "g": xg,
    }
    return np.stack([columns[name] for name in PHYSICAL_FLAVOURS], axis=1)


def _rotate_fixed_order(matrix: np.ndarray, values: np.ndarray) -> np.ndarray:
    """values (n, k) -> (n, m) with out[:, i] = sum_j matrix[i, j] values[:, j], fixed order."""
    out = np.zeros((values.shape[0], matrix.shape[0]))
    for i in range(matrix.shape[0]):
        acc = np.zeros(values.shape[0])
        for j in range(matrix.shape[1]):
            if matrix[i, j] != 0.0:
                acc = acc + matrix[i, j] * values[:, j]
        out[:, i] = acc
    return out


def toy_pdf(x: np.ndarray, *, normalise: bool = True) -> np.ndarray:
    """(n_x, 8) Les Houches toy x*f at Q0 in FIT_BASIS, the truth of every closure test.

    With ``normalise=True`` (default) the uv, dv and gluon constants are rescaled so that the
    valence (int V = 3, int V3 = 1, int V8 = 3) and momentum (int x(Sigma + g) = 1) sum rules hold
    to rounding; ``normalise=False`` keeps the published constants (5.1072, 3.06432, 1.7), the
    convention of the ``toy_prediction`` arrays in the real-data kit's npz files (they differ
    by < 1e-7); the shipped tables' :meth:`RealDataset.toy_prediction` uses the default.
    """
    physical = _toy_physical(x, normalise=normalise)
    evolution9 = _rotate_fixed_order(_physical_to_evolution(), physical)
    columns = [_EVOLUTION_9.index(name) for name in FIT_BASIS]
    return np.ascontiguousarray(evolution9[:, columns]) + 0.0
