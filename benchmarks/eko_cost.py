# SPDX-License-Identifier: GPL-3.0-or-later
"""Issue #52, part 2: what an EKO costs here, and what a coarser x grid costs in accuracy.

    python benchmarks/eko_cost.py FITDIR [--points 30 50 70 100 196] [--cache DIR]

For each number of x points, the EKO `hyperscan evolve` makes for FITDIR's theory (n3fit's 57
LHAPDF scales, nodes of the export grid spread by `eko_xgrid`), computed into an empty cache on
all cores: its wall time and the peak RSS of one process (this one, or one of eko's integration
processes). Then FITDIR's replicas evolved by each EKO, against those evolved by the EKO with
the most points, at Q = 100 GeV and at Q0: the largest difference per x region and flavour,
relative to the flavour's largest value there. The first EKO of a
process whose numba cache (eko's compiled kernels, in site-packages) is cold includes their
compilation: run it once before timing.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

import numpy as np
from vs_n3fit import machine

from hyperscan.pdfset import cached_eko, eko_xgrid, evolve, nnpdf_theory, read_fit

REGIONS = ((1e-9, 1e-5), (1e-5, 1e-3), (1e-3, 0.1), (0.1, 0.9))
FLAVOURS = {"g": 21, "u": 2, "dbar": -1, "s": 3}


def at_scale(blocks: dict, q: float) -> np.ndarray:
    """x·f (replicas, pid, x) at the set's scale nearest to ``q`` (GeV)."""
    scales = [
        (nf, k, abs(np.sqrt(mu2) - q))
        for nf, (grid, _) in blocks.items()
        for k, mu2 in enumerate(grid)
    ]
    nf, k, _ = min(scales, key=lambda s: s[2])
    return blocks[nf][1][:, k]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("fit", type=Path)
    parser.add_argument("--points", type=int, nargs="+", default=[30, 50, 70, 100, 196])
    parser.add_argument("--cache", type=Path, default=None)
    args = parser.parse_args()
    fit = read_fit(args.fit)
    theory = nnpdf_theory(fit.theory.card)
    cache = args.cache or Path(tempfile.mkdtemp(prefix="eko-cost-"))
    print(f"machine: {machine()}; theory {fit.theory.id}; cache {cache}")
    evolved = {}
    for points in sorted(args.points):
        started = time.perf_counter()
        path = cached_eko(theory, eko_xgrid(fit.xgrid, points), cache)
        seconds = time.perf_counter() - started
        rss = (
            max(  # eko's integration processes are children of this one
                resource.getrusage(who).ru_maxrss
                for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
            )
            / 2**20
        )
        size = path.stat().st_size / 2**20
        print(f"{points:4d} x points: {seconds:8.1f} s, peak RSS {rss:.2f} GiB, {size:.0f} MiB")
        _, blocks = evolve(fit, path)
        evolved[points] = {q: at_scale(blocks, q) for q in (np.sqrt(fit.q20), 100.0)}
    reference = max(evolved)
    pids = [22, -6, -5, -4, -3, -2, -1, 21, 1, 2, 3, 4, 5, 6]
    print(f"\nlargest |difference| / largest |x f| in the region, against {reference} points")
    header = "  ".join(f"{lo:.0e}-{hi:g}" for lo, hi in REGIONS)
    for q in (np.sqrt(fit.q20), 100.0):
        print(f"\nQ = {q:g} GeV    flavour  {header}")
        for points in sorted(evolved):
            if points == reference:
                continue
            for name, pid in FLAVOURS.items():
                got, want = (
                    evolved[points][q][:, pids.index(pid)],
                    evolved[reference][q][:, pids.index(pid)],
                )
                row = []
                for lo, hi in REGIONS:
                    inside = (fit.xgrid >= lo) & (fit.xgrid < hi)
                    scale = np.abs(want[:, inside]).max()
                    row.append(np.abs(got[:, inside] - want[:, inside]).max() / scale)
                print(f"{points:4d} points  {name:>7}  " + "  ".join(f"{v:9.1e}" for v in row))


if __name__ == "__main__":
    main()
