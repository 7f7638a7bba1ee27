# SPDX-License-Identifier: GPL-3.0-or-later
"""An LHAPDF set read back, and its members at any Q on the set's own x nodes.

What ``hyperscan plot`` draws at Q = 100 GeV. Between Q nodes the values are LHAPDF 6's
log-cubic interpolation in ln Q² (cubic Hermite, the slopes at the nodes the mean of the
neighbouring secants, one-sided at a block's ends), so a plot shows what LHAPDF would give.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ._errors import EvolveError
from ._lhapdf import member_blocks


@dataclass(frozen=True)
class PdfSet:
    """A set's members: per block (one per number of flavours) its Q nodes and x·f
    (members, Q, pid, x), on x nodes and flavours that every block shares."""

    folder: Path
    x: np.ndarray
    pids: tuple[int, ...]
    blocks: tuple[tuple[np.ndarray, np.ndarray], ...]
    replicas: tuple[int | None, ...]  # each member's FromMCReplica; None for member 0

    def at(self, q: float) -> np.ndarray:
        """(members, pid, x) x·f at ``q`` GeV: in the block that holds it (the higher one at
        a threshold, as LHAPDF takes it)."""
        for nodes, values in reversed(self.blocks):
            if nodes[0] <= q <= nodes[-1]:
                return _log_cubic(np.log(nodes**2), values, np.log(q**2))
        raise EvolveError(f"{self.folder}: Q = {q} GeV is outside the set's grid")


def read_set(folder: Path | str) -> PdfSet:
    """The set in ``folder`` (its ``.info`` and ``_NNNN.dat`` files)."""
    folder = Path(folder)
    files = sorted(folder.glob(f"{folder.name}_[0-9][0-9][0-9][0-9].dat"))
    if not (folder / f"{folder.name}.info").is_file() or not files:
        raise EvolveError(f"{folder} is not an LHAPDF set (no {folder.name}.info and members)")
    members, replicas = [], []
    for path in files:
        text = path.read_text()
        found = re.search(r"^FromMCReplica:\s*(\d+)", text.split("---", 1)[0], re.MULTILINE)
        replicas.append(int(found.group(1)) if found else None)
        members.append(member_blocks(text))
    first = members[0]
    for path, blocks in zip(files, members, strict=True):
        if len(blocks) != len(first) or any(
            b[2] != a[2] or not (np.array_equal(b[0], a[0]) and np.array_equal(b[1], a[1]))
            for a, b in zip(first, blocks, strict=True)
        ):
            raise EvolveError(f"{path}: its grids differ from {files[0].name}'s")
    if any(not np.array_equal(b[0], first[0][0]) or b[2] != first[0][2] for b in first):
        raise EvolveError(f"{files[0]}: its blocks have different x nodes or flavours")
    return PdfSet(
        folder=folder,
        x=first[0][0],
        pids=first[0][2],
        blocks=tuple(
            (q, np.stack([member[i][3] for member in members]))
            for i, (_, q, _, _) in enumerate(first)
        ),
        replicas=tuple(replicas),
    )


def _log_cubic(t_nodes: np.ndarray, values: np.ndarray, t: float) -> np.ndarray:
    """LHAPDF's cubic Hermite in t = ln Q² over axis 1 of ``values``; linear with two nodes."""
    n = t_nodes.size
    i = min(int(np.searchsorted(t_nodes, t, side="right")) - 1, n - 2)
    if n == 2:
        weight = (t - t_nodes[i]) / (t_nodes[i + 1] - t_nodes[i])
        return (1 - weight) * values[:, i] + weight * values[:, i + 1]
    width = t_nodes[i + 1] - t_nodes[i]

    def slope(k: int) -> np.ndarray:
        forward = backward = None
        if k + 1 < n:
            forward = (values[:, k + 1] - values[:, k]) / (t_nodes[k + 1] - t_nodes[k])
        if k > 0:
            backward = (values[:, k] - values[:, k - 1]) / (t_nodes[k] - t_nodes[k - 1])
        if forward is None:
            return backward
        return forward if backward is None else (forward + backward) / 2

    u = (t - t_nodes[i]) / width
    h00, h10 = 2 * u**3 - 3 * u**2 + 1, u**3 - 2 * u**2 + u
    h01, h11 = -2 * u**3 + 3 * u**2, u**3 - u**2
    return (
        h00 * values[:, i]
        + h10 * width * slope(i)
        + h01 * values[:, i + 1]
        + h11 * width * slope(i + 1)
    )
