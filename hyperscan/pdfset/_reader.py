# SPDX-License-Identifier: GPL-3.0-or-later
"""An LHAPDF set read back, and its members at any Q on the set's own x nodes.

What ``hyperscan plot`` draws at Q = 100 GeV. The values between nodes are LHAPDF 6's
log-bicubic interpolation (cubic Hermites in ln x and ln Q², the slopes at the nodes the mean of
the neighbouring secants, one-sided at a block's ends), so a plot shows what LHAPDF would give.
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
        """(members, pid, x) x·f at ``q`` GeV on the set's x nodes: in the block that holds it
        (the higher one at a threshold, as LHAPDF takes it)."""
        for nodes, values in reversed(self.blocks):
            if nodes[0] <= q <= nodes[-1]:
                by_x = np.moveaxis(values, (3, 1), (0, 1))  # (x, Q, members, pid)
                return np.moveaxis(log_bicubic(self.x, nodes, by_x, self.x, q**2), 0, 2)
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


def _hermite(t: np.ndarray, low, low_slope, high, high_slope) -> np.ndarray:
    """The cubic Hermite on [0, 1] from its ends' values and slopes (times the interval)."""
    t2, t3 = t * t, t * t * t
    return (
        (2 * t3 - 3 * t2 + 1) * low
        + (t3 - 2 * t2 + t) * low_slope
        + (-2 * t3 + 3 * t2) * high
        + (t3 - t2) * high_slope
    )


def _slopes(values: np.ndarray, knots: np.ndarray) -> np.ndarray:
    """LHAPDF's slopes along axis 0: the mean of the two secants inside, one-sided at the
    ends."""
    secants = np.diff(values, axis=0) / np.diff(knots).reshape(-1, *[1] * (values.ndim - 1))
    return np.concatenate([secants[:1], (secants[:-1] + secants[1:]) / 2, secants[-1:]])


def log_bicubic(
    x_nodes: np.ndarray, q_nodes: np.ndarray, values: np.ndarray, x: np.ndarray, q2: float
) -> np.ndarray:
    """x·f at the points ``x`` and one Q² from ``values`` (x nodes, Q nodes, …) on one block,
    as LHAPDF 6's LogBicubicInterpolator computes it: Hermite cubics in ln x at the Q nodes
    around Q², then one in ln Q² whose slopes are the secants of those (two Q nodes: linear
    in ln Q²). NaN outside the x nodes: no extrapolation. Result: (len(x), …)."""
    logx, logq2 = np.log(x_nodes), np.log(np.asarray(q_nodes) ** 2)
    lx, lq = np.log(np.asarray(x, dtype=np.float64)), np.log(q2)
    ix = np.clip(np.searchsorted(logx, lx, side="right") - 1, 0, logx.size - 2)
    trailing = (-1, *[1] * (values.ndim - 2))
    width_x = (logx[ix + 1] - logx[ix]).reshape(trailing)
    tx = ((lx - logx[ix]) / (logx[ix + 1] - logx[ix])).reshape(trailing)
    dx = _slopes(values, logx)

    def at(j: int) -> np.ndarray:  # along x at Q node j
        low, high = values[ix, j], values[ix + 1, j]
        return _hermite(tx, low, dx[ix, j] * width_x, high, dx[ix + 1, j] * width_x)

    n_q = logq2.size
    iq = int(np.clip(np.searchsorted(logq2, lq, side="right") - 1, 0, n_q - 2))
    width = logq2[iq + 1] - logq2[iq]
    low, high = at(iq), at(iq + 1)
    secant = (high - low) / width
    low_slope = (
        secant if iq == 0 else (secant + (low - at(iq - 1)) / (logq2[iq] - logq2[iq - 1])) / 2
    )
    high_slope = (
        secant
        if iq + 2 == n_q
        else (secant + (at(iq + 2) - high) / (logq2[iq + 2] - logq2[iq + 1])) / 2
    )
    result = _hermite((lq - logq2[iq]) / width, low, low_slope * width, high, high_slope * width)
    outside = (lx < logx[0] - 1e-12) | (lx > logx[-1] + 1e-12)
    return np.where(outside.reshape(trailing), np.nan, result)
