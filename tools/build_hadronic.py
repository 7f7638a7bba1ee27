# SPDX-License-Identifier: GPL-3.0-or-later
"""Build LO PineAPPL grids for hadronic datasets of nnpdf-data 4.1.5 from their kinematics.

    python tools/build_hadronic.py [TABLE ...] [--out DIR] [--check]

Each grid is one FK table that nnpdf-data's metadata name (``theory: FK_tables``), computed
here at LEADING ORDER in QCD (these are LO tables, not NNPDF's NNLO ones): Drell-Yan through
gamma*/Z, and W production in the narrow-width approximation with its leptonic decay. The
coefficients are integrated by Gauss-Legendre quadrature against degree-7 Lagrange polynomials
on a dense x grid (see ``XGrid``) and stored as PineAPPL ``ImportSubgridV1`` subgrids (PDG
basis, acting on f, one scale node per bin, one unit-width bin per data point). Needs pineappl
1.5 and nnpdf-data 4.1.5 (both in the ``test`` extra), not the ``theory`` extra.

Writes ``DIR/<TABLE>.pineappl.lz4`` (default DIR: hyperscan/data/hadronic/grids). ``--check``
builds into a temporary folder and compares with the shipped grids: byte for byte, and else the
convolution with a fixed toy PDF (exit 1 if a relative difference exceeds 1e-12).
Conventions and checks: docs/hadronic.md.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hyperscan.runcard.real_datasets import commondata_files, read_yaml

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "hyperscan" / "data" / "hadronic" / "grids"

# Electroweak inputs, G_mu scheme: M_Z, M_W (as nnpdf-data's kinematics give them), G_F;
# sin^2(theta_W) and alpha follow at tree level, so the gamma/Z couplings are consistent.
MZ = 91.1876
GAMMA_Z = 2.4952
MW = 80.398
GF = 1.1663787e-5
SW2 = 1.0 - MW**2 / MZ**2
ALPHA = math.sqrt(2.0) * GF * MW**2 * SW2 / math.pi
KAPPA = 1.0 / (4.0 * SW2 * (1.0 - SW2))  # = sqrt(2) G_F M_Z^2 / (4 pi alpha)
BR_W_LNU = 0.1086  # PDG, one lepton flavour
GEV2_TO_PB = 0.3893793721e9
GEV2_TO_NB = 0.3893793721e6
# |V_ij| of theory card 99000001 (NNPDF's 40000000), up-type (u, c) x down-type (d, s, b)
CKM = {
    (2, 1): 0.97428,
    (2, 3): 0.2253,
    (2, 5): 0.00347,
    (4, 1): 0.2252,
    (4, 3): 0.97345,
    (4, 5): 0.041,
}
UP, DOWN = (2, 4), (1, 3, 5)
CHARGE = {1: -1 / 3, 2: 2 / 3, 3: -1 / 3, 4: 2 / 3, 5: -1 / 3}
ISOSPIN = {1: 2, 2: 1, -1: -2, -2: -1}  # proton -> neutron
PT_LEPTON_MIN = 25.0  # D0 W -> mu nu: p_T(mu) > 25 GeV (= missing E_T at LO)

# x interpolation: pineappl's F2 map y(x) = ln(1/x) + 5 (1 - x), nodes equally spaced in y
# (step Y_STEP) from just below the data's smallest x up to x = 1, Lagrange degree 7.
Y_STEP = 0.15
DEGREE = 7
MAP_A = 5.0


def ymap(x: np.ndarray) -> np.ndarray:
    return -np.log(x) + MAP_A * (1.0 - x)


def xmap(y: np.ndarray) -> np.ndarray:
    """Inverse of ``ymap`` by Newton's method (monotonic, converges from x = exp(-y))."""
    y = np.asarray(y, dtype=float)
    x = np.exp(-y)
    for _ in range(100):
        step = (ymap(x) - y) / (-1.0 / x - MAP_A)
        x = np.clip(x - step, 1e-300, 1.0)
        if np.all(np.abs(step) <= 1e-16 * x):
            break
    return x


@dataclass(frozen=True)
class XGrid:
    """Nodes equally spaced in y = ymap(x), from y = 0 (x = 1) to past the smallest x."""

    y: np.ndarray  # ascending: y[0] = 0 is x = 1

    @classmethod
    def covering(cls, x_min: float) -> XGrid:
        n = math.ceil(ymap(np.array(x_min)) / Y_STEP) + DEGREE // 2 + 2
        return cls(np.arange(n) * Y_STEP)

    @property
    def x(self) -> np.ndarray:
        """The nodes in x, ascending (as PineAPPL stores them)."""
        return xmap(self.y)[::-1]

    def weights(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(index, weight) arrays (N, DEGREE+1): f(x) ~ sum_k weight * f(x[index]) on the
        ascending ``self.x``, from the DEGREE+1 nodes centred on x's interval in y."""
        y = ymap(np.asarray(x, dtype=float))
        n = self.y.size
        if np.any(y > self.y[-1]):
            raise ValueError(f"x = {float(np.min(x)):.3g} lies below the grid")
        interval = np.floor(y / Y_STEP).astype(int)
        first = np.clip(interval - (DEGREE - 1) // 2, 0, n - DEGREE - 1)
        stencil = first[:, None] + np.arange(DEGREE + 1)[None, :]  # indices into self.y
        nodes = self.y[stencil]
        weights = np.ones_like(nodes)
        for j in range(DEGREE + 1):
            for m in range(DEGREE + 1):
                if m != j:
                    weights[:, j] *= (y - nodes[:, m]) / (nodes[:, j] - nodes[:, m])
        return n - 1 - stencil, weights  # ascending-x indices


# --- partonic LO cross sections -------------------------------------------------------------


def dy_couplings(q: int, m2: np.ndarray) -> np.ndarray:
    """gamma*/Z -> l+l- coupling factor of quark |q| (Q_q^2 for the photon alone)."""
    t3 = 0.5 if q in UP else -0.5
    vq, aq = t3 - 2 * CHARGE[q] * SW2, t3
    vl, al = -0.5 + 2 * SW2, -0.5
    denominator = (m2 - MZ**2) ** 2 + (GAMMA_Z * MZ) ** 2
    chi1 = KAPPA * m2 * (m2 - MZ**2) / denominator
    chi2 = KAPPA**2 * m2**2 / denominator
    return (
        CHARGE[q] ** 2 - 2 * CHARGE[q] * vl * vq * chi1 + (vl**2 + al**2) * (vq**2 + aq**2) * chi2
    )


def sigma_dy(q: int, m2: np.ndarray) -> np.ndarray:
    """sigma-hat(q qbar -> gamma*/Z -> l+l-) at s-hat = M^2, colour-averaged, GeV^-2."""
    return 4 * math.pi * ALPHA**2 / (9 * m2) * dy_couplings(q, m2)


SIGMA_W = math.pi * math.sqrt(2.0) / 3.0 * GF * MW**2  # q qbar' -> W, times delta(s-hat - M_W^2)


def decay_fraction(c_lo: np.ndarray, c_hi: np.ndarray, sign: int) -> np.ndarray:
    """int (3/8)(1 + sign c)^2 dc over [c_lo, c_hi]: the lepton's share in cos(theta*)."""
    return ((1 + sign * c_hi) ** 3 - (1 + sign * c_lo) ** 3) * sign / 8.0


# --- channels -------------------------------------------------------------------------------

Lumi = list[tuple[tuple[int, int], float]]


def _merged(entries: Lumi) -> Lumi:
    out: dict[tuple[int, int], float] = {}
    for pids, factor in entries:
        out[pids] = out.get(pids, 0.0) + factor
    return sorted(out.items())


def _target(pid: int, beam: str) -> list[tuple[int, float]]:
    """Parton ``pid`` of the second hadron in proton PDFs: proton, antiproton, or a deuteron's
    average nucleon (p + n)/2 by isospin."""
    if beam == "pp":
        return [(pid, 1.0)]
    if beam == "ppbar":
        return [(-pid, 1.0)]
    if beam == "pd":
        return [(pid, 0.5), (ISOSPIN.get(pid, pid), 0.5)]
    raise ValueError(beam)


def dy_channels(beam: str, quarks: tuple[int, ...]) -> Lumi:
    """q qbar + qbar q of the given quarks, hadron 1 a proton, hadron 2 ``beam``'s."""
    entries = []
    for q in quarks:
        for a in (q, -q):
            entries += [((a, b), w) for b, w in _target(-a, beam)]
    return _merged(entries)


def w_channels(charge: int, quark_first: bool) -> Lumi:
    """W+- in p pbar: |V|^2-weighted (q, qbar') pairs; ``quark_first``: the quark in the proton."""
    entries = []
    for (u, d), v in CKM.items():
        quark, antiquark = (u, -d) if charge > 0 else (d, -u)
        a, b = (quark, antiquark) if quark_first else (antiquark, quark)
        entries += [((a, pb), v**2 * w) for pb, w in _target(b, "ppbar")]
    return _merged(entries)


# --- the tables -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Channel:
    lumi: Lumi
    # (kinematics of one bin) -> (x1, x2, coefficient) samples; the bin's value is
    # sum(coefficient * f(x1) f(x2)) over the lumi's pairs
    samples: Callable[[dict], tuple[np.ndarray, np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class Table:
    name: str  # nnpdf-data's FK table name
    dataset: str  # <setname>_<observable>
    observable: str  # what each bin holds, with units
    scale: Callable[[dict], float]  # mu^2 of a bin
    channels: tuple[Channel, ...]
    total: bool = False  # one bin, the dataset's first point's kinematics (a RATIO's total)


def _gauss(lo: float, hi: float, n: int) -> tuple[np.ndarray, np.ndarray]:
    t, w = np.polynomial.legendre.leggauss(n)
    return 0.5 * (hi - lo) * t + 0.5 * (hi + lo), 0.5 * (hi - lo) * w


def fixed_target_point(q: int) -> Callable:
    """M^3 d^2sigma/dM dy (nb GeV^2) at the point (y, M^2): nnpdf-data's E866 data,
    converted from x_F to y (see docs/hadronic.md), are M^3 * 2M * sigma-hat(M^2) / s * f f."""

    def samples(k: dict):
        m2, y, s = k["M2"], k["y"], k["sqrts"] ** 2
        root_tau = math.sqrt(m2 / s)
        coefficient = 2 * m2**2 / s * float(sigma_dy(q, np.array(m2)))
        x1, x2 = root_tau * math.exp(y), root_tau * math.exp(-y)
        return np.array([x1]), np.array([x2]), np.array([coefficient * GEV2_TO_NB])

    return samples


def _dy_point_channels(beam: str) -> tuple[Channel, ...]:
    """One channel per quark flavour: the couplings differ by quark type and M."""
    return tuple(Channel(dy_channels(beam, (q,)), fixed_target_point(q)) for q in (*UP, *DOWN))


def z_rapidity(q: int, m_lo: float, m_hi: float) -> Callable:
    """d sigma/dy (pb) averaged over the bin [y_lo, y_hi], gamma*/Z -> l+l- with
    m_lo < M < m_hi, at mu = M_Z; M^2 = M_Z^2 + M_Z Gamma_Z tan(theta) flattens the peak."""

    def samples(k: dict):
        (y_lo, y_hi), s = k["y"], k["sqrts"] ** 2
        n_y = 24 * math.ceil(round((y_hi - y_lo) / 0.1, 9))
        y, wy = _gauss(y_lo, y_hi, n_y)
        t_lo, t_hi = (math.atan((m**2 - MZ**2) / (MZ * GAMMA_Z)) for m in (m_lo, m_hi))
        t, wt = _gauss(t_lo, t_hi, 96)
        m2 = MZ**2 + MZ * GAMMA_Z * np.tan(t)
        jacobian = MZ * GAMMA_Z / np.cos(t) ** 2
        yy, mm = np.meshgrid(y, m2, indexing="ij")
        weight = wy[:, None] * (wt * jacobian * sigma_dy(q, m2))[None, :] / s / (y_hi - y_lo)
        x1 = np.sqrt(mm / s) * np.exp(yy)
        x2 = np.sqrt(mm / s) * np.exp(-yy)
        return x1.ravel(), x2.ravel(), weight.ravel() * GEV2_TO_PB

    return samples


def z_total(q: int, m_lo: float, m_hi: float) -> Callable:
    """sigma(Z/gamma* -> l+l-) (pb) over all rapidities, m_lo < M < m_hi, at mu = M_Z: the
    normalisation of a 1/sigma d sigma/dy measurement."""

    def samples(k: dict):
        s = k["sqrts"] ** 2
        t_lo, t_hi = (math.atan((m**2 - MZ**2) / (MZ * GAMMA_Z)) for m in (m_lo, m_hi))
        t, wt = _gauss(t_lo, t_hi, 96)
        m2 = MZ**2 + MZ * GAMMA_Z * np.tan(t)
        jacobian = MZ * GAMMA_Z / np.cos(t) ** 2
        x1, x2, weight = [], [], []
        for m2_i, w_i in zip(m2, wt * jacobian * sigma_dy(q, m2) / s, strict=True):
            y_max = 0.5 * math.log(s / m2_i)
            y, wy = _gauss(-y_max, y_max, 128)
            x1.append(np.sqrt(m2_i / s) * np.exp(y))
            x2.append(np.sqrt(m2_i / s) * np.exp(-y))
            weight.append(w_i * wy)
        return np.concatenate(x1), np.concatenate(x2), np.concatenate(weight) * GEV2_TO_PB

    return samples


def w_lepton(charge: int, quark_first: bool) -> Callable:
    """d sigma(W -> l nu)/d eta_l (pb) averaged over the bin [eta_lo, eta_hi] (eta_l > 0, the
    proton's direction), narrow W, p_T(l) > PT_LEPTON_MIN, the decay integrated analytically:
    the l- follows the quark, the l+ the antiquark, (3/8)(1 -+ cos theta)^2."""
    eta_star_max = math.acosh(MW / (2 * PT_LEPTON_MIN))
    # cos(theta*) of the lepton against the proton's direction: the sign of the (1 +- c)^2
    quark_along = quark_first  # the quark moves along +z
    sign = (1 if quark_along else -1) * (-1 if charge > 0 else 1)

    def samples(k: dict):
        (eta_lo, eta_hi), s = k["abs_eta"], k["sqrts"] ** 2
        y_max = math.log(math.sqrt(s) / MW)
        edges = sorted(
            {
                max(-y_max, min(y_max, e))
                for e in (
                    eta_lo - eta_star_max,
                    eta_lo + eta_star_max,
                    eta_hi - eta_star_max,
                    eta_hi + eta_star_max,
                )
            }
        )
        ys, ws = [], []
        for lo, hi in zip(edges[:-1], edges[1:], strict=False):
            y, w = _gauss(lo, hi, 64)
            ys.append(y)
            ws.append(w)
        y, w = np.concatenate(ys), np.concatenate(ws)
        lo = np.tanh(np.clip(eta_lo - y, -eta_star_max, eta_star_max))
        hi = np.tanh(np.clip(eta_hi - y, -eta_star_max, eta_star_max))
        share = decay_fraction(lo, hi, sign)
        weight = w * share * SIGMA_W * BR_W_LNU / s / (eta_hi - eta_lo)
        x1, x2 = MW / math.sqrt(s) * np.exp(y), MW / math.sqrt(s) * np.exp(-y)
        return x1, x2, weight * GEV2_TO_PB

    return samples


def _w_table(name: str, charge: int) -> Table:
    return Table(
        name,
        "D0_WPWM_1P96TEV_ASY",
        f"d sigma(W{'+' if charge > 0 else '-'} -> mu nu)/d eta_mu [pb], p_T(mu) > 25 GeV",
        lambda k: MW**2,
        tuple(
            Channel(w_channels(charge, first), w_lepton(charge, first)) for first in (True, False)
        ),
    )


def _z_rapidity(name: str, dataset: str, m_lo: int, m_hi: int) -> Table:
    return Table(
        name,
        dataset,
        f"d sigma(Z/gamma* -> e+e-)/dy [pb], {m_lo} < M_ee < {m_hi} GeV, per unit y (y > 0)",
        lambda k: MZ**2,
        tuple(
            Channel(dy_channels("ppbar", (q,)), z_rapidity(q, float(m_lo), float(m_hi)))
            for q in (*UP, *DOWN)
        ),
    )


def _e866(name: str, dataset: str, beam: str) -> Table:
    target = {"pp": "proton", "pd": "deuteron per nucleon, (p + n)/2 by isospin"}[beam]
    return Table(
        name,
        dataset,
        f"M^3 d^2sigma/dM dy [nb GeV^2], 800 GeV p on {target}",
        lambda k: k["M2"],
        _dy_point_channels(beam),
    )


TABLES: dict[str, Table] = {
    t.name: t
    for t in (
        _e866("DYE866R_D", "DYE866_Z0_800GEV_DW_RATIO_PDXSECRATIO", "pd"),
        _e866("DYE866R_P", "DYE866_Z0_800GEV_DW_RATIO_PDXSECRATIO", "pp"),
        _e866("DYE866P", "DYE866_Z0_800GEV_PXSEC", "pp"),
        _z_rapidity(
            "CDFZRAP_NEW-CDF_ZRAP_MCgrid_500M_last_two_bins_combined",
            "CDF_Z0_1P96TEV_ZRAP",
            66,
            116,
        ),
        _z_rapidity("D0ZRAP-D0_ZRAP_MCgrid_500M", "D0_Z0_1P96TEV_ZRAP", 71, 111),
        Table(
            "D0ZRAP-D0_ZNORM_MCgrid_500M",
            "D0_Z0_1P96TEV_ZRAP",
            "sigma(Z/gamma* -> e+e-) [pb], 71 < M_ee < 111 GeV, all y; one bin",
            lambda k: MZ**2,
            tuple(
                Channel(dy_channels("ppbar", (q,)), z_total(q, 71.0, 111.0)) for q in (*UP, *DOWN)
            ),
            total=True,
        ),
        _w_table("D0WMASY-grid-40-6-15-3-Wplus_wly_pt25", +1),
        _w_table("D0WMASY-grid-40-6-15-3-Wminus_wly_pt25", -1),
    )
}


# --- kinematics, grids, files ---------------------------------------------------------------


def bin_kinematics(dataset: str) -> list[dict]:
    """Per data point: each kinematic variable of nnpdf-data's kinematics file, as its
    (min, max) where the file gives a bin, else its mid value."""
    files = commondata_files(dataset, None)
    rows = read_yaml(files.folder / files.kinematics)["bins"]
    out = []
    for row in rows:
        out.append(
            {
                var: (v["min"], v["max"]) if v.get("min") is not None else v["mid"]
                for var, v in row.items()
            }
        )
    if len(out) != files.ndata:
        raise ValueError(f"{dataset}: {len(out)} kinematic bins, metadata say {files.ndata}")
    return out


def _interp(lo: float, hi: float, nodes: int, order: int, on_x: bool):
    from pineappl.interpolation import Interp, InterpolationMethod, MappingMethod, ReweightingMethod

    return Interp(
        min=lo,
        max=hi,
        nodes=nodes,
        order=order,
        reweight_meth=ReweightingMethod.NoReweight,
        map=MappingMethod.ApplGridF2 if on_x else MappingMethod.ApplGridH0,
        interpolation_meth=InterpolationMethod.Lagrange,
    )


def build_grid(table: Table):  # -> pineappl.grid.Grid
    """The LO grid of ``table``: one unit-width bin per data point, one channel per ``Channel``."""
    from pineappl.boc import BinsWithFillLimits, Kinematics, Order, ScaleFuncForm, Scales
    from pineappl.boc import Channel as PineapplChannel
    from pineappl.convolutions import Conv, ConvType
    from pineappl.grid import Grid
    from pineappl.pids import PidBasis
    from pineappl.subgrid import ImportSubgridV1

    kinematics = bin_kinematics(table.dataset)[: 1 if table.total else None]
    samples = [[ch.samples(k) for ch in table.channels] for k in kinematics]
    x_min = min(float(min(x1.min(), x2.min())) for row in samples for x1, x2, _ in row)
    xgrid = XGrid.covering(x_min)
    x, n = xgrid.x, xgrid.y.size
    proton = Conv(convolution_types=ConvType(polarized=False, time_like=False), pid=2212)
    grid = Grid(
        pid_basis=PidBasis.Pdg,
        channels=[
            PineapplChannel([(list(pids), factor) for pids, factor in ch.lumi])
            for ch in table.channels
        ],
        orders=[Order(0, 2, 0, 0, 0)],
        bins=BinsWithFillLimits.from_fill_limits(
            fill_limits=[float(i) for i in range(len(kinematics) + 1)]
        ),
        convolutions=[proton, proton],
        interpolations=[_interp(1.0, 1e5, 40, 3, False)]
        + [_interp(x[0], 1.0, n, DEGREE, True)] * 2,
        kinematics=[Kinematics.Scale(0), Kinematics.X(0), Kinematics.X(1)],
        scale_funcs=Scales(
            ren=ScaleFuncForm.Scale(0), fac=ScaleFuncForm.Scale(0), frg=ScaleFuncForm.NoScale(0)
        ),
    )
    for b, (k, row) in enumerate(zip(kinematics, samples, strict=True)):
        mu2 = float(table.scale(k))
        for c, (x1, x2, coefficient) in enumerate(row):
            i1, w1 = xgrid.weights(x1)
            i2, w2 = xgrid.weights(x2)
            values = coefficient[:, None, None] * w1[:, :, None] * w2[:, None, :]
            flat = i1[:, :, None] * n + i2[:, None, :]
            array = np.bincount(flat.ravel(), weights=values.ravel(), minlength=n * n)
            subgrid = ImportSubgridV1(
                array=array.reshape(1, n, n), node_values=[np.array([mu2]), x, x]
            )
            grid.set_subgrid(0, b, c, subgrid.into())
    for key, value in metadata(table, kinematics, xgrid).items():
        grid.set_metadata(key, value)
    return grid


def metadata(table: Table, kinematics: list[dict], xgrid: XGrid) -> dict[str, str]:
    return {
        "hyperscan_table": table.name,
        "hyperscan_dataset": table.dataset,
        "hyperscan_order": "LO (alpha_s^0): leading-order tables, not NNPDF's NNLO",
        "hyperscan_observable": table.observable + "; one unit-width bin per data point",
        "hyperscan_kinematics": "nnpdf-data 4.1.5 commondata of " + table.dataset,
        "hyperscan_electroweak": (
            f"G_mu scheme: M_Z {MZ}, Gamma_Z {GAMMA_Z}, M_W {MW}, G_F {GF}, sin2w {SW2:.10f}, "
            f"1/alpha {1 / ALPHA:.8f}, BR(W->l nu) {BR_W_LNU}, |V_CKM| {CKM}"
        ),
        "hyperscan_x_interpolation": (
            f"{xgrid.y.size} nodes equally spaced by {Y_STEP} in ln(1/x) + 5(1-x), from "
            f"x = {xgrid.x[0]:.6g} to 1, Lagrange degree {DEGREE}"
        ),
        "hyperscan_tool": "tools/build_hadronic.py",
    }


def toy_xfx(pid: int, x: float, q2: float) -> float:
    """x f of the Les Houches toy PDF (plus small made-up charm and bottom), at any scale:
    a fixed, smooth PDF for --check."""
    del q2
    sea = 0.1939875 * x**-0.1 * (1 - x) ** 6
    table = {
        2: 5.1072 * x**0.8 * (1 - x) ** 3 + (1 - x) * sea,
        1: 3.06432 * x**0.8 * (1 - x) ** 4 + sea,
        -2: (1 - x) * sea,
        -1: sea,
        3: 0.2 * sea * (2 - x),
        -3: 0.2 * sea * (2 - x),
        4: 0.05 * sea,
        -4: 0.05 * sea,
        5: 0.02 * sea,
        -5: 0.02 * sea,
        21: 1.7 * x**-0.1 * (1 - x) ** 5,
    }
    return table.get(pid, 0.0)


def toy_xfx_at_q0(pid: int, x: float, q2: float) -> float:
    """The toy as the FK tables see it at Q0: pineko optimises them for Nf4Ind, which drops the
    b and t of the PDF at Q0."""
    return toy_xfx(pid, x, q2) if abs(pid) < 5 else 0.0


def convolve(path: Path) -> np.ndarray:
    from pineappl.grid import Grid

    grid = Grid.read(str(path))
    return np.asarray(grid.convolve(pdg_convs=grid.convolutions, xfxs=[toy_xfx, toy_xfx],
                                    alphas=lambda q2: 0.118))  # fmt: skip


def write(table: Table, out: Path) -> Path:
    """Writes ``out/<name>.pineappl.lz4`` through a temporary file (no half-written grid)."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{table.name}.pineappl.lz4"
    partial = out / f".{table.name}.partial.pineappl.lz4"
    build_grid(table).write_lz4(str(partial))
    partial.replace(path)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tables", nargs="*", help=f"default: all of {', '.join(TABLES)}")
    parser.add_argument("--out", type=Path, default=SHIPPED, help="default: %(default)s")
    parser.add_argument("--check", action="store_true", help="compare with the shipped grids")
    args = parser.parse_args(argv)
    unknown = [t for t in args.tables if t not in TABLES]
    if unknown:
        print(f"error: unknown table(s) {unknown}; known: {', '.join(TABLES)}", file=sys.stderr)
        return 2
    names = args.tables or list(TABLES)
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) if args.check else args.out
        for name in names:
            path = write(TABLES[name], out)
            size = path.stat().st_size
            line = f"{name}: {path.name} {size / 1e3:.0f} kB"
            if args.check:
                shipped = SHIPPED / path.name
                if not shipped.is_file():
                    line += " -- NOT SHIPPED"
                    failed.append(name)
                elif shipped.read_bytes() == path.read_bytes():
                    line += ", identical to the shipped grid"
                else:
                    new, ref = convolve(path), convolve(shipped)
                    diff = float(np.max(np.abs(new / ref - 1))) if new.shape == ref.shape else 1.0
                    line += f", bytes differ; max rel. difference of the convolution {diff:.1e}"
                    if diff > 1e-12:
                        failed.append(name)
            print(line)
    if failed:
        print(f"FAILED: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
