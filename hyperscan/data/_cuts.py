# SPDX-License-Identifier: GPL-3.0-or-later
"""NNPDF4.0's default kinematic cuts (validphys 4.1.5's ``use_cuts: internal`` rules).

validphys has one rule per process type only for DIS (Q² > q2min and W² > w2min); every
hadronic cut is a rule of one dataset. Those of the Drell–Yan, W and Z datasets are written
here as functions of the dataset's kinematics by their commondata names, its central values
and the theory's perturbative order (rules marked NNLO+ apply from PTO 2 on). A dataset with
no rule keeps every point, as in validphys.
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


def _at_least(variable: str, bound: float) -> _Rule:
    return lambda k, central: k[variable] >= bound


def _mass_at_most(variable: str, bound: float) -> _Rule:
    return lambda k, central: np.sqrt(k[variable]) <= bound


#: dataset -> (lowest PTO the rule applies at, rule).
_DATASET_RULES: dict[str, tuple[int, _Rule]] = {
    "DYE866_Z0_800GEV_PXSEC": (0, _fixed_target_drell_yan),
    "DYE605_Z0_38P8GEV_DW_PXSEC": (0, _fixed_target_drell_yan),
    "D0_WPWM_1P96TEV_ASY": (2, lambda k, central: np.abs(central) >= 0.03),
    "LHCB_Z0_7TEV_MUON_Y": (2, _at_least("y", 2.25)),
    "LHCB_Z0_8TEV_MUON_Y": (2, _at_least("y", 2.25)),
    "LHCB_WPWM_7TEV_MUON_Y": (2, _at_least("y", 2.25)),
    "LHCB_WPWM_8TEV_MUON_Y": (2, _at_least("y", 2.25)),
    "LHCB_DY_7TEV_MUON_Y": (2, _at_least("y", 2.25)),
    "LHCB_DY_8TEV_MUON_Y": (2, _at_least("y", 2.25)),
    "LHCB_Z0_13TEV_DIELECTRON-Y": (2, _at_least("y", 2.20)),
    "LHCB_Z0_13TEV_DIMUON-Y": (2, _at_least("y", 2.20)),
    "ATLAS_Z0_8TEV_LOWMASS_M-Y": (0, _mass_at_most("m_Z2", 116.0)),
}

#: Datasets whose cuts are known here: the DIS process types and the rules above.
RULED_DATASETS = frozenset(_DATASET_RULES)


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
        if name in _DATASET_RULES:
            lowest, rule = _DATASET_RULES[name]
            if pto >= lowest:
                keep &= rule(named, central)
    except KeyError as err:
        raise ValueError(
            f"{name}: its cut rule needs the kinematic variable {err}, the commondata give "
            f"{[k for k in kinematics_names if k]}"
        ) from None
    return keep
