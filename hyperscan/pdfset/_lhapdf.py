# SPDX-License-Identifier: GPL-3.0-or-later
"""An LHAPDF 6 set from a fit's exportgrids and an EKO: member 0 the replicas' mean.

The EKO is applied as evolven3fit applies it, and the files are printed as its (eko's) writer
prints them, so that the two sets agree number for number; an EKO on a grid other than the
exportgrids' is first interpolated onto theirs by eko.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import yaml

from hyperscan._version import __version__

from ._errors import EvolveError
from ._fit_folder import ExportedFit

#: The flavours of every block, as PDG ids (eko's flavour basis).
PIDS = (22, -6, -5, -4, -3, -2, -1, 21, 1, 2, 3, 4, 5, 6)
_LHA_PIDS = (-6, -5, -4, -3, -2, -1, 21, 1, 2, 3, 4, 5, 6, 22)  # LHA_BASIS's (TBAR … T, PHT)


def evolve(
    fit: ExportedFit, eko_path: Path
) -> tuple[dict, dict[int, tuple[np.ndarray, np.ndarray]]]:
    """The set's info and, per number of flavours (ascending), its Q² values and x·f
    (replicas, Q², PIDS, x)."""
    import eko
    from eko.interpolation import XGrid
    from eko.io import manipulate
    from ekobox import info_file

    values = np.moveaxis(fit.xf[:, :, [_LHA_PIDS.index(p) for p in PIDS]], 1, 2) / fit.xgrid
    with eko.EKO.read(eko_path) as operator:
        if operator.mu20 != fit.q20:
            raise EvolveError(
                f"{eko_path}: the EKO evolves from Q0² = {operator.mu20} GeV², the fit's "
                f"exportgrids are at {fit.q20} GeV²"
            )
        theirs, ours = operator.xgrid, XGrid(fit.xgrid)
        degree = operator.operator_card.configs.interpolation_polynomial_degree
        points: dict[int, list[tuple[float, np.ndarray]]] = {}
        for (mu2, nf), element in operator.items():
            if theirs != ours:  # the EKO's own interpolation, onto the exportgrids' nodes
                element = manipulate.xgrid_reshape(
                    element, theirs, degree, targetgrid=ours, inputgrid=ours
                )
            evolved = np.einsum("ajbk,rbk->raj", element.operator, values)
            points.setdefault(int(nf), []).append((float(mu2), evolved * fit.xgrid))
        info = info_file.build(operator.theory_card, operator.operator_card, 1, {})
    info |= {
        "SetDesc": f"hyperscan {__version__} fit {fit.folder.name}, evolved from "
        f"{np.sqrt(fit.q20):g} GeV",
        "NumMembers": len(fit.replicas) + 1,
        "ErrorType": "replicas",
        "XMin": float(fit.xgrid[0]),
        "XMax": float(fit.xgrid[-1]),
        "Flavors": list(PIDS),
    }
    blocks = {}
    for nf, scales in sorted(points.items()):
        scales.sort(key=lambda point: point[0])
        blocks[nf] = (np.array([mu2 for mu2, _ in scales]), np.stack([xf for _, xf in scales], 1))
    return info, blocks


def write_set(
    fit: ExportedFit, info: dict, blocks: dict, target: Path, name: str, central_only: bool = False
) -> Path:
    """``target/name``: ``name.info`` and ``name_0000.dat`` (the mean) … one per replica (none
    with ``central_only``), written aside and renamed into place, so that a set is there whole
    or not at all."""
    folder = target / name
    with written_aside(folder) as staging:
        count = 1 if central_only else len(fit.replicas) + 1
        (staging / f"{name}.info").write_text(_info_text(info | {"NumMembers": count}))
        for member in range(count):
            header = (
                "PdfType: central\n"
                if member == 0
                else f"PdfType: replica\nFromMCReplica: {fit.replicas[member - 1]}\n"
            )
            member_xf = [
                (fit.xgrid, mu2, xf.mean(axis=0) if member == 0 else xf[member - 1])
                for mu2, xf in blocks.values()
            ]
            (staging / f"{name}_{member:04d}.dat").write_text(member_text(header, member_xf))
    return folder


def member_text(header: str, blocks: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> str:
    """A member's .dat: the header, then each block from its x, Q² and x·f (Q², PIDS, x)."""
    return "".join([header, "Format: lhagrid1\n---\n", *(_block(*block) for block in blocks)])


def _block(xgrid: np.ndarray, mu2: np.ndarray, xf: np.ndarray) -> str:
    """One block: x, Q, flavours, then x·f for each x (outer) and Q (inner) — eko's format."""
    lines = [
        " ".join(f"{x:.6e}" for x in xgrid),
        " ".join(f"{q:.6e}" for q in np.sqrt(mu2)),
        " ".join(str(p) for p in PIDS),
    ]
    rows = np.transpose(xf, (2, 0, 1)).reshape(-1, len(PIDS))  # (Q², pid, x) -> (x, Q², pid)
    lines += [" ".join(f"{v:.8e}" for v in row) for row in rows]
    return "\n".join(lines) + "\n---\n"


def member_blocks(text: str) -> list[tuple[np.ndarray, np.ndarray, tuple[int, ...], np.ndarray]]:
    """A member's .dat read back: per block x, Q, flavours (PDG ids) and x·f (Q², pid, x)."""
    found = []
    for section in text.split("---")[1:]:
        lines = section.strip().splitlines()
        if lines:
            x, q = (np.array(line.split(), dtype=np.float64) for line in lines[:2])
            pids = tuple(int(p) for p in lines[2].split())
            rows = np.array([line.split() for line in lines[3:]], dtype=np.float64)
            found.append((x, q, pids, rows.reshape(x.size, q.size, len(pids)).transpose(1, 2, 0)))
    return found


def _info_text(info: dict) -> str:
    """LHAPDF's info format: one ``Key: value`` line per key, values in YAML flow style."""

    def flow(value: object) -> str:
        text = yaml.safe_dump(value, default_flow_style=True, width=100000).strip()
        return text.removesuffix("...").strip()  # a lone scalar's document end

    return "".join(f"{key}: {flow(value)}\n" for key, value in info.items())


@contextmanager
def written_aside(folder: Path) -> Iterator[Path]:
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        yield staging
        os.chmod(staging, 0o755)
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(staging, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
