# SPDX-License-Identifier: GPL-3.0-or-later
"""NNPDF4.0's default kinematic cuts (validphys 4.1.5's ``use_cuts: internal`` rules).

validphys has one rule per process type only for DIS (Q² > q2min and W² > w2min); every
hadronic cut is a rule of one dataset. Those of the Drell–Yan, W and Z datasets are written
here as functions of the dataset's kinematics by their commondata names, its central values
and the theory's perturbative order (NNLO+ rules apply from PTO 2 on, NNLO- below it). A
dataset with no rule keeps every point, as in validphys; one whose rules are not ported here
(top-pair and jet data, charm structure functions) is refused (``unsupported``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

#: validphys's defaults (``cuts/defaults.yaml``).
DEFAULT_MAX_TAU = 0.080
_MAX_Y_FIXED_TARGET = 0.663

Kinematics = Mapping[str, np.ndarray]
_Rule = Callable[[Kinematics, np.ndarray], np.ndarray]


def _fixed_target_drell_yan(k: Kinematics, central: np.ndarray) -> np.ndarray:
    tau = k["M2"] / k["sqrts"] ** 2
    rapidity_max = -0.5 * np.log(tau)
    return (tau <= DEFAULT_MAX_TAU) & (np.abs(k["y"] / rapidity_max) <= _MAX_Y_FIXED_TARGET)


def _range(variable: str, low: float = -np.inf, high: float = np.inf) -> _Rule:
    """low <= variable <= high."""
    return lambda k, central: (k[variable] >= low) & (k[variable] <= high)


def _mass_at_most(variable: str, bound: float) -> _Rule:
    return lambda k, central: np.sqrt(k[variable]) <= bound


def _cms_dimuon_nlo(k: Kinematics, central: np.ndarray) -> np.ndarray:
    mass = np.sqrt(k["m_Z2"])
    return (mass <= 200.0) & (mass >= 30.0) & (k["y"] <= 2.2)


def _cms_dimuon_nnlo(k: Kinematics, central: np.ndarray) -> np.ndarray:
    return (np.sqrt(k["m_Z2"]) <= 200.0) & (k["y"] <= 2.2)


def _not_first_points(n: int) -> _Rule:
    return lambda k, central: np.arange(central.size) >= n


_ANY, _NNLO_PLUS, _NNLO_MINUS = (0, 99), (2, 99), (0, 1)
#: dataset -> its rules, each with the perturbative orders it applies at (lowest, highest);
#: a point is kept when every rule that applies keeps it.
_RULES: dict[str, list[tuple[tuple[int, int], _Rule]]] = {
    "DYE866_Z0_800GEV_PXSEC": [(_ANY, _fixed_target_drell_yan)],
    "DYE605_Z0_38P8GEV_DW_PXSEC": [(_ANY, _fixed_target_drell_yan)],
    "D0_WPWM_1P96TEV_ASY": [(_NNLO_PLUS, lambda k, central: np.abs(central) >= 0.03)],
    **{
        f"LHCB_{boson}_{energy}TEV_MUON_Y": [(_NNLO_PLUS, _range("y", low=2.25))]
        for boson in ("Z0", "WPWM", "DY")
        for energy in (7, 8)
    },
    "LHCB_Z0_13TEV_DIELECTRON-Y": [(_NNLO_PLUS, _range("y", low=2.20))],
    "LHCB_Z0_13TEV_DIMUON-Y": [(_NNLO_PLUS, _range("y", low=2.20))],
    "ATLAS_Z0_8TEV_LOWMASS_M-Y": [(_ANY, _mass_at_most("m_Z2", 116.0))],
    "ATLAS_Z0_7TEV_49FB_HIMASS": [(_ANY, _range("m_ll", high=200.0))],
    "ATLAS_Z0_7TEV_LOMASS_M": [(_NNLO_MINUS, _not_first_points(2))],
    "CMS_Z0_13TEV_AFB": [(_ANY, lambda k, central: (k["m_ll"] < 86.0) | (k["m_ll"] > 96.0))],
    "ATLAS_WJ_8TEV_WP-PT": [(_ANY, _range("pT", low=30.0))],
    "ATLAS_WJ_8TEV_WM-PT": [(_ANY, _range("pT", low=30.0))],
    "ATLAS_Z0J_8TEV_PT-M": [(_ANY, _range("pT", low=30.0))],
    "ATLAS_Z0J_8TEV_PT-Y": [(_ANY, _range("pT", low=30.0, high=150.0))],
    "ATLAS_Z0J_13TEV_PT_LL": [(_ANY, _range("pT", low=30.0, high=150.0))],
    "CMS_Z0_7TEV_DIMUON_2D": [(_NNLO_MINUS, _cms_dimuon_nlo), (_NNLO_PLUS, _cms_dimuon_nnlo)],
    "CMS_Z0J_8TEV_PT-Y": [(_ANY, _range("pT", 30.0, 170.0)), (_ANY, _range("abs_y", high=1.6))],
    "CMS_Z0J_13TEV_PT-M": [(_ANY, _range("pT", 30.0, 170.0)), (_ANY, _range("m_ll", low=76.0))],
}


def unsupported(name: str, process: str) -> str | None:
    """Why the default cuts of ``name`` cannot be applied here (None: they can)."""
    if process == "DIS_NC_CHARM":
        return "its cuts depend on the heavy-flavour scheme (DIS_NC_CHARM), not ported"
    if ("_TTBAR_" in name and name.endswith("-NORM")) or "1JET" in name or "2JET" in name:
        return "its validphys cut rules (top-pair or jet data) are not ported"
    if process == "INTEG" or process.startswith("POS_"):
        return f"it is a {process} set, not data: give positivity sets in data.real.positivity"
    return None


def default_cut_mask(
    name: str,
    process: str,
    kinematics: np.ndarray,
    kinematics_names: tuple[str, ...],
    central: np.ndarray,
    *,
    q2min: float,
    w2min: float,
    pto: int,
) -> np.ndarray:
    """The points NNPDF4.0's default rules keep: (n,) bool."""
    named = {k: kinematics[:, i] for i, k in enumerate(kinematics_names) if k}
    keep = np.ones(kinematics.shape[0], dtype=bool)
    try:
        if process.startswith("DIS"):
            x, q2 = named["x"], named["Q2"]
            keep &= (q2 > q2min) & (q2 * (1.0 - x) / x > w2min)
        for (lowest, highest), rule in _RULES.get(name, []):
            if lowest <= pto <= highest:
                keep &= rule(named, central)
    except KeyError as err:
        raise ValueError(
            f"{name}: its cut rule needs the kinematic variable {err}, the commondata give "
            f"{[k for k in kinematics_names if k]}"
        ) from None
    return keep
