"""Run in the n3fit peer venv: hyperscan's fit information and postfit against validphys 4.1.5's.

``python _postfit_vs_n3fit.py definitions NPZ``: NPZ holds PDFs in the LHA flavour basis on
the arc-length and integrability grids (``x_arc``, ``xf_arc``, ``x_int``, ``xf_int``, each
(replicas, x, 14)) and hyperscan's ``arc_lengths`` and ``integrability`` of them. Checks, as
assertions, that n3fit's own functions (vpinterface's compute_arclength and
integrability_numbers) give the same numbers of the same PDFs.

``python _postfit_vs_n3fit.py postfit FIT EKO OURS``: FIT is a hyperscan fit folder, EKO an
EKO file, OURS the postfit folder `hyperscan postfit` wrote for a copy of FIT evolved with EKO.
Runs ``evolven3fit evolve FIT --load EKO`` and n3fit's ``postfit`` on FIT with as many replicas as
OURS selected, then checks the same vetoes, the same replicas in the same order, and the same
final set.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
from n3fit.vpinterface import compute_arclength, integrability_numbers
from validphys.core import Stats
from validphys.pdfbases import ALL_FLAVOURS


class GridPDF:
    """One replica's x·f on fixed x nodes, as validphys asks a PDF for it (any Q)."""

    stats_class = Stats

    def __init__(self, x: np.ndarray, xf: np.ndarray) -> None:
        self.x, self.xf = x, xf

    def get_members(self) -> int:
        return 1

    def load(self) -> GridPDF:
        return self

    def grid_values(self, flavours, xgrid, qgrid) -> np.ndarray:
        rows = [int(np.argmin(np.abs(self.x - x))) for x in xgrid]
        assert np.allclose(self.x[rows], xgrid, rtol=1e-14, atol=0), "x off the nodes"
        columns = [ALL_FLAVOURS.index(21 if f == 0 else f) for f in flavours]
        values = self.xf[np.ix_(rows, columns)].T  # (flavour, x)
        return np.repeat(values[None, :, :, None], len(qgrid), axis=-1)


def definitions(npz: Path) -> None:
    data = np.load(npz)
    for r in range(data["xf_arc"].shape[0]):
        arcs = compute_arclength(GridPDF(data["x_arc"], data["xf_arc"][r]))
        np.testing.assert_allclose(data["arc_lengths"][r], arcs, rtol=1e-12)
        numbers = integrability_numbers(GridPDF(data["x_int"], data["xf_int"][r]))
        # n3fit's rotation through the flavour basis cancels terms: absolute rounding
        np.testing.assert_allclose(data["integrability"][r], numbers, rtol=1e-12, atol=1e-13)


def blocks(path: Path) -> list[np.ndarray]:
    """The x·f of each block of an LHAPDF .dat, with its x, Q and flavours, as one array."""
    found = []
    for section in path.read_text().split("---")[1:]:
        lines = section.strip().splitlines()
        if lines:
            found.append(np.array(" ".join(lines).split(), dtype=float))
    return found


def postfit(fit: Path, eko: Path, ours: Path) -> None:
    selected = sorted(ours.glob("replica_*"), key=lambda p: int(p.name.removeprefix("replica_")))
    run = {"check": True, "capture_output": True}
    subprocess.run(["evolven3fit", "evolve", str(fit), "--load", str(eko)], **run)
    subprocess.run(["postfit", str(len(selected)), str(fit)], **run)
    theirs = fit / "postfit"
    mine, n3fit = (json.loads((p / "veto_count.json").read_text()) for p in (ours, theirs))
    assert mine == n3fit, (mine, n3fit)
    for link in selected:
        assert link.readlink().name == (theirs / link.name).readlink().name, link.name
    name = fit.name
    for member in range(len(selected) + 1):
        mine_blocks = blocks(ours / name / f"{name}_{member:04d}.dat")
        n3fit_blocks = blocks(theirs / name / f"{name}_{member:04d}.dat")
        assert len(mine_blocks) == len(n3fit_blocks)
        for a, b in zip(mine_blocks, n3fit_blocks, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-12)
    info = (theirs / name / f"{name}.info").read_text()
    assert f"NumMembers: {len(selected) + 1}\n" in info


if __name__ == "__main__":
    if sys.argv[1] == "definitions":
        definitions(Path(sys.argv[2]))
    else:
        postfit(*map(Path, sys.argv[2:5]))
