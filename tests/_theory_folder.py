"""Theory folders built by the tests: small PineAPPL FK tables with known entries.

The hadronic tables are made with PineAPPL's own Python API (pineappl 1.5, through
``hyperscan.data._fk_writer``), so the reader is tested on real PineAPPL files with no
download. Their numbers are made up (smooth, positive), not physics, scaled so that the toy PDF
predicts each dataset's measured values: the tests check that each table and operation is read
and computed as validphys does, not what Drell–Yan looks like. The DIS tables are the shipped
ones, from ../shared/data.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from hyperscan.data import fit_to_fk_rotation, toy_pdf
from hyperscan.data._commondata import read_commondata
from hyperscan.data._fk_writer import write_fk_table
from hyperscan.data._theory import EVOLUTION_PIDS
from hyperscan.runcard.real_datasets import commondata_files

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
Q0 = 1.65
#: Hadronic datasets of nnpdf-data 4.1.5 that the built folder holds: a NULL with cuts, a
#: RATIO, an ASY, an ADD and a COM (of 20 tables), each operation that unpolarised data use.
HADRONIC = (
    "DYE605_Z0_38P8GEV_DW_PXSEC",
    "DYE866_Z0_800GEV_DW_RATIO_PDXSECRATIO",
    "D0_WPWM_1P96TEV_ASY",
    "CMS_WCHARM_7TEV_WPWM-TOT",
    "DYE906_Z0_120GEV_DW_PDXSECRATIO",
)
#: A Drell–Yan positivity set of NNPDF4.0 that the built folder holds.
POSITIVITY = "NNPDF_POS_2P24GEV_DYU"
#: Flavour pairs of the made-up hadronic tables, in PineAPPL's evolution-basis ids.
PAIRS = ((100, 100), (21, 21), (100, 21), (200, 200))
XGRID = np.geomspace(2e-3, 0.9, 9)


def made_up_values(n: int, seed: int) -> np.ndarray:
    """(n, P, n_x, n_x) smooth positive entries, each point peaked at its own x1, x2."""
    rng = np.random.default_rng(seed)
    logs = np.log(XGRID)
    centre = rng.uniform(logs[1], logs[-2], size=(n, 2))
    width = 0.8
    bump = (
        np.exp(
            -((logs[None, :, None] - centre[:, 0, None, None]) ** 2)
            - (logs[None, None, :] - centre[:, 1, None, None]) ** 2
        )
        / width
    )
    weights = rng.uniform(0.5, 1.5, size=(n, len(PAIRS)))
    return weights[:, :, None, None] * bump[:, None]


def build_theory_folder(root: Path, hadronic: tuple[str, ...] = HADRONIC) -> Path:
    """``root``/theory_99000001: the shipped DIS tables (by their FK table names), tables for
    ``hadronic`` and POSITIVITY, and the card; returns the theory folder."""
    folder = root / "theory_99000001"
    fastkernel = folder / "fastkernel"
    fastkernel.mkdir(parents=True)
    shutil.copy(SHARED_DATA / "theory_99000001.yaml", folder / "theory.yaml")
    rows = (SHARED_DATA / "datasets.tsv").read_text().splitlines()[1:]
    for dataset, _, fk_name, *_ in (r.split("\t") for r in rows):
        shutil.copy(
            SHARED_DATA / "fktables" / f"{dataset}.pineappl.lz4",
            fastkernel / f"{fk_name}.pineappl.lz4",
        )
    for seed, name in enumerate(hadronic):
        files = commondata_files(name, None)
        central = read_commondata(name, None).central
        # each operand's table predicts, with the toy PDF, what makes the dataset's observable
        # its measured data: closure data then match the data's uncertainties
        targets = {
            "NULL": [central],
            "RATIO": [central, np.ones_like(central)],
            "ASY": [(1 + central) / 2, (1 - central) / 2],
            "ADD": [central / 2, central / 2],
            "COM": [central / 10] * 10 + [np.full_like(central, 0.1)] * 10,
        }[files.operation]
        base = made_up_values(files.ndata, seed)
        for (table,), target in zip(files.fk_tables, targets, strict=True):
            values = base * (target / _toy_predictions(base))[:, None, None, None]
            write_fk_table(fastkernel / f"{table}.pineappl.lz4", list(PAIRS), XGRID, values, Q0)
    files = commondata_files(POSITIVITY, None)
    ((table,),) = files.fk_tables
    values = made_up_values(files.ndata, len(hadronic))
    values = values / _toy_predictions(values)[:, None, None, None]
    write_fk_table(fastkernel / f"{table}.pineappl.lz4", list(PAIRS), XGRID, values, Q0)
    return folder


def _toy_predictions(values: np.ndarray) -> np.ndarray:
    """What PineAPPL's convolution of ``values`` (acting on f) gives with the toy PDF."""
    f = (fit_to_fk_rotation() @ toy_pdf(XGRID).T) / XGRID  # (14, n_x)
    left = np.array([f[EVOLUTION_PIDS.index(a)] for a, _ in PAIRS])
    right = np.array([f[EVOLUTION_PIDS.index(b)] for _, b in PAIRS])
    return np.einsum("ncab,ca,cb->n", values, left, right)
