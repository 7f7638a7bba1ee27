"""Run in the n3fit peer venv: hyperscan's exportgrids as n3fit 4.1.5 reads them.

``python _evolven3fit.py FIT FK_NPZ``: FIT is a hyperscan fit folder, FK_NPZ holds each
member's x·f in the FK (evolution) basis on the export grid (``xf``, ``replicas``). Checks, as
assertions: the x grid is n3fit's; n3fit's own rotation (writer.evln2lha) of those x·f gives
the exportgrids' values; and ``evolven3fit evolve FIT --load EKO`` accepts the folder as it is,
with an EKO that leaves the PDF unchanged (so that no evolution is computed), and writes each
replica's values at Q0 to LHAPDF's printed precision.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import eko
import numpy as np
from eko.io.items import Operator
from evolven3fit import eko_utils
from n3fit.io.writer import XGRID, evln2lha
from nnpdf_data import THEORY_CARDS_PATH
from nnpdf_data.theorydbutils import fetch_theory
from validphys.utils import yaml_safe

#: evolven3fit's .dat flavours (PDG ids) in exportgrid label order.
PIDS = {"TBAR": -6, "BBAR": -5, "CBAR": -4, "SBAR": -3, "UBAR": -2, "DBAR": -1, "GLUON": 21}
PIDS |= {"D": 1, "U": 2, "S": 3, "C": 4, "B": 5, "T": 6, "PHT": 22}


def identity_eko(path: Path) -> float:
    """An EKO of theory 99000001 on n3fit's export grid whose operators are the identity, at
    Q0 and 2 Q0 (LHAPDF needs two scales); Q0."""
    theory, operator = eko_utils.construct_eko_cards(
        fetch_theory(THEORY_CARDS_PATH, 99000001), XGRID
    )
    q0, nf = operator.init
    operator = dataclasses.replace(operator, mugrid=[(q0, nf), (2 * q0, nf)])
    identity = np.einsum("ab,ij->aibj", np.eye(14), np.eye(len(XGRID)))
    with eko.EKO.create(path) as builder:
        built = builder.load_cards(theory, operator).build()
        for point in operator.evolgrid:
            built[point] = Operator(operator=identity)
    return q0


def dat_values(path: Path) -> tuple[list[int], np.ndarray]:
    """A one-block .dat's flavours (PDG ids) and x·f, (x, Q, flavour)."""
    block = path.read_text().split("---")[1].strip().splitlines()
    n_x, n_q = len(block[0].split()), len(block[1].split())
    pids = [int(p) for p in block[2].split()]
    values = np.array([row.split() for row in block[3:]], dtype=float)
    return pids, values.reshape(n_x, n_q, len(pids))


def main(fit: Path, fk_npz: Path) -> None:
    fk = np.load(fk_npz)
    grids = {}
    for replica, xf in zip(fk["replicas"], fk["xf"], strict=True):
        path = fit / "nnfit" / f"replica_{replica}" / f"{fit.name}.exportgrid"
        grid = yaml_safe.load(path.read_text())
        assert np.array_equal(grid["xgrid"], XGRID), "not n3fit's export grid"
        theirs = evln2lha(xf.T, nf=4).T
        ours = np.array(grid["pdfgrid"])
        np.testing.assert_allclose(ours, theirs, rtol=1e-13, atol=1e-15 * np.abs(theirs).max())
        grids[replica] = grid
    q0 = identity_eko(fit.parent / "identity.tar")
    assert all(g["q20"] == q0**2 for g in grids.values())
    subprocess.run(
        ["evolven3fit", "evolve", str(fit), "--load", str(fit.parent / "identity.tar")],
        check=True,
        capture_output=True,
    )
    for replica, grid in grids.items():
        pids, values = dat_values(fit / "nnfit" / f"replica_{replica}" / f"{fit.name}.dat")
        label_of = {pid: label for label, pid in PIDS.items()}
        columns = [grid["labels"].index(label_of[pid]) for pid in pids]
        expected = np.array(grid["pdfgrid"])[:, columns]
        for at_q in (0, 1):
            np.testing.assert_allclose(values[:, at_q], expected, rtol=1e-7, atol=1e-12)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
