# SPDX-License-Identifier: GPL-3.0-or-later
"""The shipped LO hadronic grids against their LO formulas, integrated here afresh.

Each grid of hyperscan/data/hadronic/grids (built by tools/build_hadronic.py) is convolved by
PineAPPL with a known analytic PDF (the Les Houches toy, with some made-up charm and bottom, the
same at every scale), and compared, point by point, with the leading-order cross section of the
same PDF integrated numerically here: scipy's adaptive quadrature and Gauss-Legendre rules, the
gamma*/Z couplings from helicity amplitudes, the W decay integrated numerically over the
lepton's rest-frame rapidity. The tool instead integrates on its own x interpolation (see
docs/hadronic.md), with an ESW-form gamma*/Z factor and the decay integrated analytically. The
kinematics come from nnpdf-data's files. Needs pineappl and nnpdf-data (the test extra), not the
theory extra.
"""

from __future__ import annotations

import math
from functools import cache
from pathlib import Path

import nnpdf_data
import numpy as np
import pytest
import yaml
from pineappl.grid import Grid
from scipy.integrate import quad_vec
from scipy.special import roots_legendre

GRIDS = Path(__file__).resolve().parents[2] / "hyperscan" / "data" / "hadronic" / "grids"
COMMONDATA = Path(nnpdf_data.__file__).parent / "commondata"
TOLERANCE = 1e-6

# The electroweak inputs the grids declare (G_mu scheme), and what follows from them.
MZ, GZ, MW, GF = 91.1876, 2.4952, 80.398, 1.1663787e-5
CW2 = MW**2 / MZ**2
SW2 = 1 - CW2
ALPHA = math.sqrt(2) * GF * MW**2 * SW2 / math.pi
BR_W = 0.1086
PB, NB = 0.3893793721e9, 0.3893793721e6  # GeV^-2 in pb, nb
V2 = {  # |V_CKM|^2 of theory card 99000001
    (2, 1): 0.97428**2,
    (2, 3): 0.2253**2,
    (2, 5): 0.00347**2,
    (4, 1): 0.2252**2,
    (4, 3): 0.97345**2,
    (4, 5): 0.041**2,
}
CHARGE = {1: -1 / 3, 2: 2 / 3, 3: -1 / 3, 4: 2 / 3, 5: -1 / 3}


def toy(pid: int, x):
    """f (not x f) of the Les Houches toy PDF, plus charm and bottom so that every quark
    channel counts; the same at every scale."""
    x = np.asarray(x, dtype=float)
    dbar = 0.1939875 * x**-0.1 * (1 - x) ** 6
    xf = {
        1: 3.06432 * x**0.8 * (1 - x) ** 4 + dbar,
        2: 5.1072 * x**0.8 * (1 - x) ** 3 + (1 - x) * dbar,
        -1: dbar,
        -2: (1 - x) * dbar,
        3: 0.2 * (2 - x) * dbar,
        -3: 0.2 * (2 - x) * dbar,
        4: 0.08 * dbar * (1 - x),
        -4: 0.08 * dbar * (1 - x),
        5: 0.03 * dbar * (1 - x) ** 2,
        -5: 0.03 * dbar * (1 - x) ** 2,
    }[pid]
    return xf / x


def hadron(beam: str, pid: int, x):
    """f of the second hadron: proton, antiproton, or a deuteron's average nucleon."""
    if beam == "p":
        return toy(pid, x)
    if beam == "pbar":
        return toy(-pid, x)
    swap = {1: 2, 2: 1, -1: -2, -2: -1}.get(pid, pid)
    return 0.5 * (toy(pid, x) + toy(swap, x))


def couplings(q: int, m2):
    """(1/4) sum over quark and lepton chiralities of |Q_q Q_l + g_q g_l / (s_w^2 c_w^2)
    * M^2 / (M^2 - M_Z^2 + i M_Z Gamma_Z)|^2: gamma* and Z with their interference."""
    t3 = 0.5 if q in (2, 4) else -0.5
    gq = (t3 - CHARGE[q] * SW2, -CHARGE[q] * SW2)  # left, right
    gl = (-0.5 + SW2, SW2)
    z = m2 / (m2 - MZ**2 + 1j * MZ * GZ)
    return sum(abs(CHARGE[q] * -1 + a * b / (SW2 * CW2) * z) ** 2 for a in gq for b in gl) / 4


def sigma_hat(q: int, m2):
    """q qbar -> l+ l- at s-hat = M^2, colour-averaged (GeV^-2)."""
    return 4 * math.pi * ALPHA**2 / (3 * 3 * m2) * couplings(q, m2)


def dy_lumi(q: int, beam: str, x1, x2):
    return toy(q, x1) * hadron(beam, -q, x2) + toy(-q, x1) * hadron(beam, q, x2)


@cache
def kinematics(setname: str, variable_file: str) -> list[dict]:
    rows = yaml.safe_load((COMMONDATA / setname / variable_file).read_text())["bins"]
    return rows


def convolve(table: str) -> np.ndarray:
    grid = Grid.read(str(GRIDS / f"{table}.pineappl.lz4"))

    def xfx(pid, x, q2):
        return float(x * toy(pid, x)) if pid in CHARGE or -pid in CHARGE else 0.0

    return np.asarray(
        grid.convolve(pdg_convs=grid.convolutions, xfxs=[xfx, xfx], alphas=lambda q2: 0.118)
    )


def fixed_target(setname: str, beam: str, per_dxf: bool = False) -> np.ndarray:
    """M^3 d^2 sigma / dM dy (nb GeV^2) at each point (y, M^2) of nnpdf-data's kinematics."""
    out = []
    for row in kinematics(setname, "kinematics.yaml"):
        y, m2, s = row["y"]["mid"], row["M2"]["mid"], row["sqrts"]["mid"] ** 2
        x1, x2 = math.sqrt(m2 / s) * math.exp(y), math.sqrt(m2 / s) * math.exp(-y)
        value = 2 * m2**2 / s * sum(sigma_hat(q, m2) * dy_lumi(q, beam, x1, x2) for q in CHARGE)
        if per_dxf:  # the other convention, d x_F instead of d y: must not pass
            value /= 2 * math.sqrt(m2 / s) * math.cosh(y)
        out.append(value * NB)
    return np.array(out)


def gauss(lo: float, hi: float, n: int = 48) -> tuple[np.ndarray, np.ndarray]:
    t, w = roots_legendre(n)
    return 0.5 * (hi - lo) * t + 0.5 * (hi + lo), 0.5 * (hi - lo) * w


def z_rapidity(
    setname: str = "CDF_Z0_1P96TEV", window: tuple[float, float] = (66.0, 116.0), photon_only=False
) -> np.ndarray:
    """CDF or D0: d sigma/dy (pb), the bin's average over y > 0, M in the window, mu = M_Z: an
    adaptive integral over M of Gauss-Legendre integrals over each bin's y."""
    rows = kinematics(setname, "kinematics_ZRAP.yaml")
    s = rows[0]["sqrts"]["mid"] ** 2
    bins = np.array([(r["y"]["min"], r["y"]["max"]) for r in rows])
    # every bin's Gauss-Legendre nodes in one array, summed bin by bin
    rules = [gauss(lo, hi) for lo, hi in bins]
    y = np.concatenate([r[0] for r in rules])
    w = np.concatenate([r[1] for r in rules]) / np.repeat(bins[:, 1] - bins[:, 0], len(rules[0][0]))
    starts = np.arange(len(bins)) * len(rules[0][0])

    def over_m(m: float) -> np.ndarray:
        m2 = m * m
        x1, x2 = m / math.sqrt(s) * np.exp(y), m / math.sqrt(s) * np.exp(-y)
        total = 0.0
        for q in CHARGE:
            if photon_only:
                factor = CHARGE[q] ** 2 * 4 * math.pi * ALPHA**2 / (9 * m2)
            else:
                factor = sigma_hat(q, m2)
            total = total + factor * dy_lumi(q, "pbar", x1, x2)
        return 2 * m / s * np.add.reduceat(w * total, starts)

    value, _ = quad_vec(over_m, *window, epsrel=1e-11, points=[MZ])
    return value * PB


def z_total(window: tuple[float, float] = (71.0, 111.0), photon_only=False) -> np.ndarray:
    """D0's normalisation: sigma(Z/gamma* -> l+l-) (pb) over every y, M in the window."""
    s = kinematics("D0_Z0_1P96TEV", "kinematics_ZRAP.yaml")[0]["sqrts"]["mid"] ** 2

    def over_m(m: float) -> float:
        y, w = gauss(-math.log(math.sqrt(s) / m), math.log(math.sqrt(s) / m), 160)
        x1, x2 = m / math.sqrt(s) * np.exp(y), m / math.sqrt(s) * np.exp(-y)
        total = 0.0
        for q in CHARGE:
            photon = CHARGE[q] ** 2 * 4 * math.pi * ALPHA**2 / (9 * m * m)
            factor = photon if photon_only else sigma_hat(q, m * m)
            total += factor * np.dot(w, dy_lumi(q, "pbar", x1, x2))
        return 2 * m * total / s

    value, _ = quad_vec(over_m, *window, epsrel=1e-11, points=[MZ])
    return np.array([value * PB])


def w_lepton(charge: int, flip_decay: bool = False) -> np.ndarray:
    """D0: d sigma(W -> mu nu)/d eta_mu (pb), each bin's average over eta > 0, narrow W,
    p_T(mu) > 25 GeV: an adaptive integral over the muon's rest-frame rapidity eta* of
    Gauss-Legendre integrals over the W's rapidity y = eta - eta*."""
    rows = kinematics("D0_WPWM_1P96TEV", "kinematics_ASY.yaml")
    s = rows[0]["sqrts"]["mid"] ** 2
    bins = [(r["abs_eta"]["min"], r["abs_eta"]["max"]) for r in rows]
    y_max = math.log(math.sqrt(s) / MW)
    eta_star_max = math.acosh(MW / 50.0)  # p_T = (M_W / 2) / cosh(eta*) > 25 GeV
    # the l- follows the quark, the l+ the antiquark
    lepton_along_quark = (charge < 0) != flip_decay

    def over_eta_star(eta_star: float) -> np.ndarray:
        cos = math.tanh(eta_star)  # against the proton's direction
        jacobian = 1 / math.cosh(eta_star) ** 2
        out = []
        for lo, hi in bins:
            y, w = gauss(max(lo - eta_star, -y_max), min(hi - eta_star, y_max))
            x1, x2 = MW / math.sqrt(s) * np.exp(y), MW / math.sqrt(s) * np.exp(-y)
            total = 0.0
            for (u, d), v2 in V2.items():
                quark, antiquark = (u, -d) if charge > 0 else (d, -u)
                for proton_quark in (True, False):  # which hadron brings the quark
                    a, b = (quark, antiquark) if proton_quark else (antiquark, quark)
                    cos_q = cos if proton_quark else -cos
                    decay = 3 / 8 * (1 + cos_q if lepton_along_quark else 1 - cos_q) ** 2
                    total += v2 * decay * np.dot(w, toy(a, x1) * hadron("pbar", b, x2))
            out.append(total * jacobian / (hi - lo))
        return np.array(out)

    value, _ = quad_vec(over_eta_star, -eta_star_max, eta_star_max, epsrel=1e-11)
    sigma_w = math.pi * math.sqrt(2) / 3 * GF * MW**2
    return value * sigma_w * BR_W / s * PB


W_PLUS = "D0WMASY-grid-40-6-15-3-Wplus_wly_pt25"
W_MINUS = "D0WMASY-grid-40-6-15-3-Wminus_wly_pt25"
Z_CDF = "CDFZRAP_NEW-CDF_ZRAP_MCgrid_500M_last_two_bins_combined"
Z_D0, Z_D0_TOTAL = "D0ZRAP-D0_ZRAP_MCgrid_500M", "D0ZRAP-D0_ZNORM_MCgrid_500M"
D0_WINDOW = (71.0, 111.0)
CASES = {
    "DYE866R_D": lambda: fixed_target("DYE866_Z0_800GEV_DW_RATIO", "d"),
    "DYE866R_P": lambda: fixed_target("DYE866_Z0_800GEV_DW_RATIO", "p"),
    "DYE866P": lambda: fixed_target("DYE866_Z0_800GEV", "p"),
    Z_CDF: z_rapidity,
    Z_D0: lambda: z_rapidity("D0_Z0_1P96TEV", D0_WINDOW),
    Z_D0_TOTAL: z_total,
    W_PLUS: lambda: w_lepton(+1),
    W_MINUS: lambda: w_lepton(-1),
}
#: Each table's formula with one convention changed: the check must tell it apart.
WRONG = {
    "DYE866R_D": lambda: fixed_target("DYE866_Z0_800GEV_DW_RATIO", "p"),
    "DYE866R_P": lambda: fixed_target("DYE866_Z0_800GEV_DW_RATIO", "d"),
    "DYE866P": lambda: fixed_target("DYE866_Z0_800GEV", "p", per_dxf=True),
    Z_CDF: lambda: z_rapidity(photon_only=True),
    Z_D0: lambda: z_rapidity("D0_Z0_1P96TEV", (66.0, 116.0)),  # CDF's window
    Z_D0_TOTAL: lambda: z_total(photon_only=True),
    W_PLUS: lambda: w_lepton(+1, flip_decay=True),
    W_MINUS: lambda: w_lepton(-1, flip_decay=True),
}


@cache
def formula(table: str) -> np.ndarray:
    return CASES[table]()


@pytest.mark.parametrize("table", list(CASES))
def test_grid_equals_the_lo_formula(table):
    grid, reference = convolve(table), formula(table)
    assert grid.shape == reference.shape
    assert np.all(reference > 0)
    worst = float(np.max(np.abs(grid / reference - 1)))
    assert worst < TOLERANCE, f"{table}: max relative difference {worst:.2e}"


@pytest.mark.parametrize("table", list(WRONG))
def test_a_wrong_convention_fails_the_check(table):
    wrong = WRONG[table]()
    assert float(np.max(np.abs(convolve(table) / wrong - 1))) > 100 * TOLERANCE


def test_the_observables_are_the_datas():
    """The W asymmetry, the pd/pp ratio and D0's normalised Z rapidity, as commondata combine
    the tables, come out where the measurements are with this crude PDF (to 0.03, 0.15 and
    0.03 on average), and the CDF Z rapidity and E866 pp cross sections within a factor 2 (LO,
    a toy PDF at a low scale): units and normalisation are the data's."""

    def central(setname: str, name: str) -> np.ndarray:
        return np.array(yaml.safe_load((COMMONDATA / setname / name).read_text())["data_central"])

    wp, wm = convolve(W_PLUS), convolve(W_MINUS)
    asymmetry = (wp - wm) / (wp + wm)
    assert np.max(np.abs(asymmetry - central("D0_WPWM_1P96TEV", "data_ASY.yaml"))) < 0.03
    ratio = convolve("DYE866R_D") / convolve("DYE866R_P")
    data = central("DYE866_Z0_800GEV_DW_RATIO", "data.yaml")
    assert np.mean(np.abs(ratio - data)) < 0.15
    shape = convolve(Z_D0) / convolve(Z_D0_TOTAL)
    data = central("D0_Z0_1P96TEV", "data_ZRAP.yaml")
    assert abs(np.sum(shape * 0.1) - np.sum(data * 0.1)) < 0.01  # both ~ 1/2: one side of y
    assert np.mean(np.abs(shape - data)) < 0.03
    for table, setname, name in (
        (Z_CDF, "CDF_Z0_1P96TEV", "data_ZRAP.yaml"),
        ("DYE866P", "DYE866_Z0_800GEV", "data.yaml"),
    ):
        ratio = convolve(table) / central(setname, name)
        assert 0.5 < np.median(ratio) < 2, (table, np.median(ratio))


@pytest.mark.parametrize("table", list(CASES))
def test_grids_declare_leading_order_and_their_inputs(table):
    grid = Grid.read(str(GRIDS / f"{table}.pineappl.lz4"))
    meta = grid.metadata
    assert meta["hyperscan_order"].startswith("LO")
    assert f"M_Z {MZ}" in meta["hyperscan_electroweak"]
    assert f"M_W {MW}" in meta["hyperscan_electroweak"]
    assert f"G_F {GF}" in meta["hyperscan_electroweak"]
    assert [(o.as_tuple()) for o in grid.orders()] == [(0, 2, 0, 0, 0)]
