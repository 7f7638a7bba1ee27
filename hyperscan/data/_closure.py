# SPDX-License-Identifier: GPL-3.0-or-later
"""Built-in closure-test data: LO DIS-like FK tables on the standard x grid, toy-PDF truth.

No download and no evolution: every FK table is a fixed flavour row (LO structure function with
quark charges) times degree-3 Lagrange weights in ln x of the data x on the dataset's grid nodes.
The arrays are bit-for-bit reproducible on any machine: inputs are rounded decimals, transcendental
functions come from libm one scalar at a time, and all sums run in a fixed order (no BLAS/LAPACK,
whose kernels differ between CPUs). That is what lets workers compare ``Problem.fingerprint()``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ._flavours import _fk_row, _rotate_fixed_order, fit_to_fk_rotation, toy_pdf
from ._problem import Dataset, PositivitySet, Problem
from ._tables import FkTable

CLOSURE_SIZES: tuple[str, ...] = ("tiny", "small", "medium", "nnpdf40")

# The standard 50-node x grid of pineko/eko (the "lambert" grid): uniform in
# y(x) = ln(1/x) + 5 (1 - x) from x = 2e-7 to x = 1, i.e. log-spaced at small x and close to
# linear at large x. Values as pineko writes them, so the nodes coincide bit for bit with those
# of the real FK tables in shared/data (tests check both the formula and that identity).
_STANDARD_XGRID_VALUES = (
    1.9999999999999954e-07,
    3.034304765867952e-07,
    4.6035014748963906e-07,
    6.984208530700364e-07,
    1.0596094959101024e-06,
    1.607585498470808e-06,
    2.438943292891682e-06,
    3.7002272069854957e-06,
    5.613757716930151e-06,
    8.516806677573355e-06,
    1.292101569074731e-05,
    1.9602505002391748e-05,
    2.97384953722449e-05,
    4.511438394964044e-05,
    6.843744918967896e-05,
    0.00010381172986576898,
    0.00015745605600841445,
    0.00023878782918561914,
    0.00036205449638139736,
    0.0005487795323670796,
    0.0008314068836488144,
    0.0012586797144272762,
    0.0019034634022867384,
    0.0028738675812817515,
    0.004328500638820811,
    0.006496206194633799,
    0.009699159574043398,
    0.014375068581090129,
    0.02108918668378717,
    0.030521584007828916,
    0.04341491741702269,
    0.060480028754447364,
    0.08228122126204893,
    0.10914375746330703,
    0.14112080644440345,
    0.17802566042569432,
    0.2195041265003886,
    0.2651137041582823,
    0.31438740076927585,
    0.3668753186482242,
    0.4221667753589648,
    0.4798989029610255,
    0.5397572337880445,
    0.601472197967335,
    0.6648139482473823,
    0.7295868442414312,
    0.7956242522922756,
    0.8627839323906108,
    0.9309440808717544,
    1.0,
)
STANDARD_XGRID: np.ndarray = np.array(_STANDARD_XGRID_VALUES)
"""(50,) the standard x grid; every closure dataset's xgrid is a contiguous slice of it."""
STANDARD_XGRID.setflags(write=False)

_NODES_BELOW = 7  # grid nodes kept below a dataset's smallest x (as in the real tables)
_GOLDEN = 0.6180339887498949


def _weyl(k: int) -> float:
    """Deterministic quasi-random number in [0, 1): fractional part of k * golden ratio."""
    return (k * _GOLDEN) % 1.0


def _round_sig(v: float, digits: int = 3) -> float:
    """Round to significant digits via the (correctly rounded) decimal repr: platform-proof."""
    return float(f"{v:.{digits - 1}e}")


def _logs(x: np.ndarray) -> np.ndarray:
    return np.array([math.log(v) for v in x.tolist()])


# --- observables --------------------------------------------------------------------------
# LO structure functions as combinations of physical x*f (no evolution, no Q2 dependence).
_E_U, _E_D = 4.0 / 9.0, 1.0 / 9.0
_OBSERVABLES: dict[str, tuple[str, dict[str, float], float, float]] = {
    # name: (process, coefficients of x*f, smallest x, largest x allowed)
    # proton F2, charged-lepton NC: sum_q e_q^2 x(q + qbar)
    "F2P": (
        "DIS_NC",
        {
            "u": _E_U,
            "ubar": _E_U,
            "c": _E_U,
            "cbar": _E_U,
            "d": _E_D,
            "dbar": _E_D,
            "s": _E_D,
            "sbar": _E_D,
        },
        2e-6,
        0.85,
    ),
    # isoscalar deuteron F2 per nucleon: u <-> d averaged
    "F2D": (
        "DIS_NC",
        {
            "u": 0.5 * (_E_U + _E_D),
            "ubar": 0.5 * (_E_U + _E_D),
            "d": 0.5 * (_E_U + _E_D),
            "dbar": 0.5 * (_E_U + _E_D),
            "s": _E_D,
            "sbar": _E_D,
            "c": _E_U,
            "cbar": _E_U,
        },
        1e-4,
        0.85,
    ),
    # W+ exchange on a proton (nu p, e+ p CC): absorbed by d, s, ubar, cbar
    "F2WP": ("DIS_CC", {"d": 2.0, "s": 2.0, "ubar": 2.0, "cbar": 2.0}, 1e-4, 0.8),
    "XF3WP": ("DIS_CC", {"d": 2.0, "s": 2.0, "ubar": -2.0, "cbar": -2.0}, 1e-4, 0.8),
    # W- exchange on a proton (nubar p, e- p CC): absorbed by u, c, dbar, sbar.
    # xF3 of the toy changes sign near x = 0.009: keep x >= 0.03 so the truth stays positive.
    "F2WM": ("DIS_CC", {"u": 2.0, "c": 2.0, "dbar": 2.0, "sbar": 2.0}, 1e-4, 0.8),
    "XF3WM": ("DIS_CC", {"u": 2.0, "c": 2.0, "dbar": -2.0, "sbar": -2.0}, 0.03, 0.8),
    # neutrino dimuon production (W+ s -> c, W- sbar -> cbar): what separates s from sbar and
    # s + sbar from the other sea quarks (NuTeV-like), up to the charm branching ratio
    "DIMUNU": ("DIS_CC", {"s": 1.0}, 0.01, 0.5),
    "DIMUNB": ("DIS_CC", {"sbar": 1.0}, 0.01, 0.5),
    # TOY: a "scaling violation" observable, dF2/dlnQ2 ~ (alpha_s / 2 pi) x g at small x, reduced
    # to a pure gluon term so that g is constrained directly. Not a real observable.
    "GLUON": ("TOY_GLUON", {"g": 0.1}, 2e-6, 0.3),
}

_POSITIVITY: dict[str, dict[str, float]] = {
    "POS_F2U": {"u": 1.0, "ubar": 1.0},
    "POS_F2D": {"d": 1.0, "dbar": 1.0},
    "POS_F2S": {"s": 1.0, "sbar": 1.0},
    "POS_GLUON": {"g": 1.0},
    "POS_F2C": {"c": 1.0, "cbar": 1.0},
    "POS_UBAR": {"ubar": 1.0},
    "POS_DBAR": {"dbar": 1.0},
    "POS_SBAR": {"sbar": 1.0},
}
_POSITIVITY_BY_SIZE = {
    "tiny": ("POS_F2U", "POS_F2D", "POS_F2S", "POS_GLUON"),
    "small": ("POS_F2U", "POS_F2D", "POS_F2S", "POS_GLUON"),
    "medium": tuple(_POSITIVITY),
    "nnpdf40": tuple(_POSITIVITY),
}
_POSITIVITY_POINTS = 20
_POSITIVITY_RANGE = (5e-7, 0.9)  # points sit on the grid nodes inside this range


def _positivity_x() -> np.ndarray:
    """20 grid nodes spread over [5e-7, 0.9].

    Why nodes: there the interpolation weights are exact deltas, so the toy truth is >= 0 on
    every positivity point (between nodes near x = 1 the cubic in ln x can undershoot a steep
    (1 - x)^6 sea by ~1e-7 and make the truth itself violate positivity).
    """
    lo, hi = _POSITIVITY_RANGE
    grid = STANDARD_XGRID
    inside = np.flatnonzero((grid >= lo) & (grid <= hi))
    picks = [
        inside[0] + (len(inside) - 1) * i // (_POSITIVITY_POINTS - 1)
        for i in range(_POSITIVITY_POINTS)
    ]
    return np.array(STANDARD_XGRID[picks])


@dataclass(frozen=True)
class _Spec:
    """Recipe of one closure dataset (internal)."""

    name: str
    observable: str
    x_lo: float
    x_hi: float
    n_points: int
    group: str | None  # datasets of one group share a normalisation uncertainty
    key: int  # drives the deterministic variations of this dataset


_FIXED: dict[str, tuple[_Spec, ...]] = {
    "tiny": (
        _Spec("TOY_HERA_NC_F2P", "F2P", 1e-4, 0.5, 18, "HERA", 1),
        _Spec("TOY_HERA_CC_F2WP", "F2WP", 1e-3, 0.5, 14, "HERA", 2),
        _Spec("TOY_NUTEV_XF3WP", "XF3WP", 0.01, 0.6, 14, None, 3),
        _Spec("TOY_GLUON", "GLUON", 1e-5, 0.1, 14, None, 4),
    ),
    "small": (
        _Spec("TOY_HERA_NC_F2P", "F2P", 3e-5, 0.65, 65, "HERA", 1),
        _Spec("TOY_HERA_CC_F2WP", "F2WP", 1e-3, 0.4, 30, "HERA", 3),
        _Spec("TOY_NMC_F2D", "F2D", 5e-3, 0.75, 40, None, 4),
        _Spec("TOY_CHORUS_XF3WP", "XF3WP", 0.01, 0.7, 35, "CHORUS", 5),
        _Spec("TOY_CHORUS_XF3WM", "XF3WM", 0.03, 0.7, 35, "CHORUS", 6),
        _Spec("TOY_NUTEV_DIMUNU", "DIMUNU", 0.02, 0.4, 25, "NUTEV", 7),
        _Spec("TOY_NUTEV_DIMUNB", "DIMUNB", 0.02, 0.4, 25, "NUTEV", 8),
        _Spec("TOY_GLUON", "GLUON", 1e-5, 0.1, 45, None, 2),
    ),
}
# Generated presets: (n_datasets, total points, how far towards small x the ranges reach)
_GENERATED = {"medium": (20, 1000, 0.5), "nnpdf40": (82, 4618, 0.8)}
_CYCLE = ("F2P", "F2D", "F2WP", "XF3WP", "DIMUNU", "F2P", "F2WM", "XF3WM", "DIMUNB", "GLUON")


def _generated_specs(size: str) -> tuple[_Spec, ...]:
    n_sets, n_total, reach = _GENERATED[size]
    weights = [0.5 + _weyl(7 * k + 3) for k in range(n_sets)]
    scale = n_total / sum(weights)
    counts = [max(8, round(w * scale)) for w in weights]
    counts[int(np.argmax(counts))] += n_total - sum(counts)
    specs, k, experiment = [], 0, 0
    while k < n_sets:
        members = min(1 + int(3 * _weyl(11 * experiment + 5)), n_sets - k)  # 1..3 datasets
        group = f"E{experiment:02d}" if members > 1 else None
        for _ in range(members):
            obs = _CYCLE[k % len(_CYCLE)]
            _, _, lo, hi = _OBSERVABLES[obs]
            decades = math.log10(hi / lo)
            # lower end: somewhere in the first (1 - reach) part of the allowed range
            x_lo = _round_sig(lo * 10.0 ** (decades * (1.0 - reach) * _weyl(13 * k + 1)), 2)
            # upper end: at least 1.5 decades above, at most the allowed maximum
            up = math.log10(x_lo) + 1.5 + (math.log10(hi / x_lo) - 1.5) * (0.3 + 0.7 * _weyl(k))
            x_hi = _round_sig(min(hi, 10.0**up), 2)
            name = f"TOY_E{experiment:02d}_{k:02d}_{obs}"
            specs.append(_Spec(name, obs, x_lo, x_hi, counts[k], group, 100 + k))
            k += 1
        experiment += 1
    return tuple(specs)


def _specs(size: str) -> tuple[_Spec, ...]:
    return _FIXED[size] if size in _FIXED else _generated_specs(size)


# --- FK tables ----------------------------------------------------------------------------
def _grid_slice(x_min: float) -> slice:
    """Contiguous slice of STANDARD_XGRID from _NODES_BELOW nodes below x_min up to x = 1."""
    below = int(np.searchsorted(STANDARD_XGRID, x_min, side="left"))
    return slice(max(0, below - _NODES_BELOW), STANDARD_XGRID.size)


def _lagrange_weights(x: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """(n, n_x) degree-3 Lagrange weights in ln x: f(x_n) ~ sum_a w[n, a] f(nodes_a).

    The 4-node window is the one around the interval holding x (shifted at the grid ends).
    """
    n_x = nodes.size
    if n_x < 4:
        raise ValueError("need at least 4 grid nodes for cubic interpolation")
    t = _logs(x)
    tn = _logs(nodes)
    interval = np.clip(np.searchsorted(nodes, x, side="right") - 1, 0, n_x - 2)
    first = np.clip(interval - 1, 0, n_x - 4)
    weights = np.zeros((x.size, n_x))
    rows = np.arange(x.size)
    for j in range(4):
        w = np.ones(x.size)
        tj = tn[first + j]
        for m in range(4):
            if m != j:
                tm = tn[first + m]
                w = w * ((t - tm) / (tj - tm))
        weights[rows, first + j] = w
    return weights


def _fk_table(coefficients: dict[str, float], x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """fk (n, 14, n_x) and its xgrid for observable row ``coefficients`` at data x."""
    grid = np.array(STANDARD_XGRID[_grid_slice(float(x.min()))])
    weights = _lagrange_weights(x, grid)
    row = _fk_row(coefficients)
    fk = row[None, :, None] * weights[:, None, :] + 0.0
    return fk, grid


def _toy_fk_basis(grid: np.ndarray) -> np.ndarray:
    """(14, n_x) toy x*f in FK_BASIS on ``grid``."""
    return _rotate_fixed_order(fit_to_fk_rotation(), toy_pdf(grid)).T.copy()


# --- one dataset --------------------------------------------------------------------------
def _points(spec: _Spec) -> np.ndarray:
    """Sorted data x: log-spaced over [x_lo, x_hi] with a deterministic jitter, 3 digits."""
    a, b = math.log(spec.x_lo), math.log(spec.x_hi)
    xs = []
    for i in range(spec.n_points):
        u = (i + 0.5 + 0.6 * (_weyl(spec.key * 1009 + i) - 0.5)) / spec.n_points
        xs.append(_round_sig(math.exp(a + u * (b - a))))
    return np.array(sorted(xs))


def _q2(x: np.ndarray, key: int) -> np.ndarray:
    """Fake but plausible Q2 in [2, 1000] GeV^2 growing with x (metadata only: no evolution)."""
    out = []
    for i, v in enumerate(x.tolist()):
        q2 = 2.0 * math.sqrt(v / 1e-5) * (1.0 + 2.0 * _weyl(key * 7919 + i))
        out.append(_round_sig(min(1000.0, max(2.0, q2))))
    return np.array(out)


def _uncertainties(spec: _Spec, x: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Statistical (n,) and correlated systematics (n, k) of one dataset, absolute.

    Multiplicative ones are taken relative to the truth (a t0-like choice), so the covariance
    does not depend on the closure level or seed. Systematics are smooth in z in [-1, 1] (ln x
    position within the dataset); the last column is the dataset's own normalisation.
    """
    k = spec.key
    lx = _logs(x)
    span = lx[-1] - lx[0]
    z = (2.0 * (lx - lx[0]) / span - 1.0) if span > 0 else np.zeros_like(lx)
    rel = 0.01 + 0.03 * _weyl(17 * k + 2)  # 1%..4% statistical, varying per dataset
    jitter = np.array([_weyl(31 * k + 3 * i) for i in range(x.size)])
    stat = rel * (0.75 + 0.5 * jitter) * (1.0 + 0.5 * z * z) * t
    amplitudes = [0.01 + 0.01 * _weyl(19 * k + j) for j in range(3)]
    shapes = [z, 1.0 - z * z, z * z * z - 0.5 * z]
    n_sys = 2 + (k % 2)
    columns = [amplitudes[j] * shapes[j] * t for j in range(n_sys)]
    columns.append((0.015 + 0.01 * _weyl(23 * k + 4)) * t)  # normalisation
    return stat, np.stack(columns, axis=1)


def _outer_sum(columns: np.ndarray) -> np.ndarray:
    """sum_k s_k s_k^T in a fixed order (elementwise products: same bits on every CPU)."""
    out = np.zeros((columns.shape[0], columns.shape[0]))
    for j in range(columns.shape[1]):
        out = out + np.multiply.outer(columns[:, j], columns[:, j])
    return out


def _cholesky_fixed_order(a: np.ndarray) -> np.ndarray:
    """Lower Cholesky factor with a fixed operation order (LAPACK's bits depend on the CPU)."""
    n = a.shape[0]
    lower = np.zeros_like(a)
    for j in range(n):
        row = lower[j, :j]
        d = a[j, j] - (row * row).sum()
        if not d > 0.0:
            raise ValueError("covariance block is not positive definite")
        ljj = math.sqrt(d)
        lower[j, j] = ljj
        if j + 1 < n:
            lower[j + 1 :, j] = (a[j + 1 :, j] - (lower[j + 1 :, :j] * row).sum(axis=1)) / ljj
    return lower


def _build(size: str) -> Problem:
    """Level-0 closure problem (central = truth) for a preset size."""
    specs = _specs(size)
    datasets, truths, stats, sys_list = [], [], [], []
    for spec in specs:
        process, coefficients, _, _ = _OBSERVABLES[spec.observable]
        x = _points(spec)
        table = FkTable(*_fk_table(coefficients, x))
        truth = table.fixed_order_predictions(_toy_fk_basis(table.xgrid))
        if not np.all(truth > 0.0):  # pragma: no cover - guards the x ranges above
            raise RuntimeError(f"{spec.name}: truth not positive")
        kinematics = np.stack([x, _q2(x, spec.key), np.full(x.size, np.nan)], axis=1)
        datasets.append(Dataset(spec.name, process, (table,), truth, kinematics))
        stat, sys = _uncertainties(spec, x, truth)
        truths.append(truth)
        stats.append(stat)
        sys_list.append(sys)

    n_total = sum(d.n_data for d in datasets)
    covmat = np.zeros((n_total, n_total))
    offsets = np.cumsum([0] + [d.n_data for d in datasets])
    columns: list[np.ndarray] = []  # the correlated systematics, for Problem.systematics
    for i in range(len(specs)):
        s = slice(offsets[i], offsets[i + 1])
        covmat[s, s] = np.diag(stats[i] * stats[i]) + _outer_sum(sys_list[i])
        for j in range(sys_list[i].shape[1]):
            column = np.zeros(n_total)
            column[s] = sys_list[i][:, j]
            columns.append(column)
    # a normalisation shared by all datasets of a group: the cross-dataset blocks
    groups: dict[str, list[int]] = {}
    for i, spec in enumerate(specs):
        if spec.group is not None:
            groups.setdefault(spec.group, []).append(i)
    for members in groups.values():
        if len(members) < 2:
            continue
        if members != list(range(members[0], members[-1] + 1)):  # pragma: no cover
            raise RuntimeError("datasets of a group must be adjacent")
        s = slice(offsets[members[0]], offsets[members[-1] + 1])
        amplitude = 0.01 + 0.01 * _weyl(29 * specs[members[0]].key)
        shared = amplitude * np.concatenate([truths[i] for i in members])
        covmat[s, s] = covmat[s, s] + np.multiply.outer(shared, shared)
        column = np.zeros(n_total)
        column[s] = shared
        columns.append(column)

    covmat.setflags(write=False)  # hand over without a copy

    positivity = []
    px = _positivity_x()
    for name in _POSITIVITY_BY_SIZE[size]:
        fk, grid = _fk_table(_POSITIVITY[name], px)
        positivity.append(PositivitySet(name, FkTable(fk, grid)))

    return Problem(
        datasets=tuple(datasets),
        covmat=covmat,
        positivity=tuple(positivity),
        truth=np.concatenate(truths),
        systematics=np.stack(columns, axis=1),
    )


def closure_problem(size: str = "small", level: int = 0, seed: int = 0) -> Problem:
    """Built-in closure problem: FK tables x toy_pdf truth, realistic covariance.

    size in CLOSURE_SIZES ("tiny" ~60 points for quick unit tests, "small" ~300, "medium" ~1000,
    "nnpdf40" 4618 points in 82 datasets like NNPDF4.0). level 0: central = truth; level 1:
    central = truth + L eta with eta ~ N(0, 1) from ``np.random.default_rng(seed)``, L the
    Cholesky factor of covmat. Same arrays (and fingerprint) on every call and machine.
    ``systematics``: each dataset's correlated columns, plus one shared normalisation column
    per group of datasets, so that covmat = diag(stat^2) + S S^T.
    """
    if size not in CLOSURE_SIZES:
        raise ValueError(f"unknown closure size {size!r}; choose one of {CLOSURE_SIZES}")
    if level not in (0, 1):
        raise ValueError(f"closure level must be 0 or 1, got {level!r}")
    problem = _build(size)
    if level == 0:
        return problem
    return with_closure_data(problem, problem.truth, level, seed)


def with_closure_data(problem: Problem, truth: np.ndarray, level: int, seed: int) -> Problem:
    """``problem`` with ``truth`` (N,) as its truth and closure data as its central values.

    Level 0: the truth itself; level 1: truth + L eta, eta ~ N(0, 1) from
    ``np.random.default_rng(seed)``, L the Cholesky factor of covmat. Shared by the built-in
    and the real-table closure tests, so that one seed fluctuates both the same way; the
    factor is computed in a fixed order, so the data have the same bytes on every machine.
    """
    central = np.array(truth, dtype=np.float64)
    if level == 1:
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        eta = np.random.default_rng(int(seed)).standard_normal(problem.n_data)
        for b in problem.blocks():
            lower = _cholesky_fixed_order(np.asarray(problem.covmat[b, b]))
            central[b] = central[b] + (lower * eta[b][None, :]).sum(axis=1)
    datasets = tuple(
        replace(d, central=central[s])
        for d, s in zip(problem.datasets, problem.dataset_slices(), strict=True)
    )
    return Problem(datasets, problem.covmat, problem.positivity, truth, problem.systematics)
