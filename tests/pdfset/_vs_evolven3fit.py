"""Run in the n3fit peer venv: hyperscan's EKO cards and LHAPDF set against n3fit 4.1.5's.

``python _vs_evolven3fit.py CARDS FIT EKO SET BETWEEN``: CARDS is a JSON file of the eko cards
hyperscan makes for theory 99000001 on the x grid it names; FIT a hyperscan fit folder; EKO an
EKO file; SET the LHAPDF set `hyperscan evolve` made from FIT with EKO; BETWEEN an npz of
hyperscan's reader's values of SET's member 1 at a Q between nodes (``q``, ``pids``, ``xf``
(pid, x)). Checks, as assertions: evolven3fit makes the same cards; `evolven3fit evolve FIT
--load EKO` writes the same numbers; validphys's LHAPDF (lhapdf-management and pdfflow, no
LHAPDF) loads SET, gives its values, and interpolates between Q nodes as hyperscan's reader
does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from evolven3fit import eko_utils
from nnpdf_data import THEORY_CARDS_PATH
from nnpdf_data.theorydbutils import fetch_theory


def blocks(path: Path) -> list[tuple[np.ndarray, np.ndarray, list[int], np.ndarray]]:
    """Each block of an LHAPDF .dat: x, Q, flavours, x·f as (x, Q, flavour)."""
    found = []
    for section in path.read_text().split("---")[1:]:
        lines = section.strip().splitlines()
        if lines:
            x, q = (np.array(line.split(), dtype=float) for line in lines[:2])
            pids = [int(p) for p in lines[2].split()]
            values = np.array([line.split() for line in lines[3:]], dtype=float)
            found.append((x, q, pids, values.reshape(x.size, q.size, len(pids))))
    return found


def computed(card: dict) -> dict:
    """The card without what says the machine and the installed eko, not what is computed."""
    card = json.loads(json.dumps(card, default=float))
    card["configs"].pop("n_integration_cores")  # how many CPUs
    card.pop("eko_version")  # the peer kit installs the latest eko 0.15, hyperscan pins one
    return card


def main(cards: Path, fit: Path, eko: Path, lhapdf_set: Path, between: Path) -> None:
    ours = json.loads(cards.read_text())
    theory = fetch_theory(THEORY_CARDS_PATH, 99000001)
    theory_card, operator_card = eko_utils.construct_eko_cards(theory, np.array(ours["xgrid"]))
    assert json.loads(json.dumps(theory_card.raw, default=float)) == ours["theory"], "theory card"
    assert computed(operator_card.raw) == computed(ours["operator"]), "operator card"

    subprocess.run(
        ["evolven3fit", "evolve", str(fit), "--load", str(eko)], check=True, capture_output=True
    )
    for replica_dat in sorted(fit.glob("nnfit/replica_*/*.dat")):
        replica = int(replica_dat.parent.name.removeprefix("replica_"))
        member = lhapdf_set / f"{lhapdf_set.name}_{replica:04d}.dat"
        theirs, mine = blocks(replica_dat), blocks(member)
        assert len(theirs) == len(mine)
        for a, b in zip(theirs, mine, strict=True):
            assert a[2] == b[2]
            for k in (0, 1, 3):
                np.testing.assert_allclose(b[k], a[k], rtol=1e-6, atol=0)

    os.environ["LHAPDF_DATA_PATH"] = str(lhapdf_set.parent)
    from validphys.lhapdf_compatibility import make_pdf

    x, q, pids, values = blocks(lhapdf_set / f"{lhapdf_set.name}_0001.dat")[0]
    (pdf,) = make_pdf(lhapdf_set.name, 1)
    for i in (40, 100, 160):
        for pid in (21, 2, -1):
            got = pdf.xfxQ2(pid, x[i], q[1] ** 2)
            np.testing.assert_allclose(got, values[i, 1, pids.index(pid)], rtol=1e-5)
    ours = np.load(between)  # hyperscan's reader between Q nodes: member 1, (pid, x) at q
    q2 = float(ours["q"]) ** 2
    for i in (40, 100, 160):
        for pid in (21, 2, -1):
            got = pdf.xfxQ2(pid, x[i], q2)
            expected = ours["xf"][list(ours["pids"]).index(pid), i]
            np.testing.assert_allclose(got, expected, rtol=1e-10)


if __name__ == "__main__":
    main(*map(Path, sys.argv[1:6]))
