"""EKOs made in a test: eko's own file format and cards, with operators chosen by the test
(no evolution is computed), so that what `hyperscan evolve` does with an EKO can be checked."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
from eko.io.items import Operator
from eko.io.struct import EKO

from hyperscan.pdfset import eko_cards

#: (Q in GeV, flavours): two scales for each of two blocks, as an LHAPDF set has them.
SCALES = [(1.65, 4), (3.0, 4), (10.0, 5), (100.0, 5)]


def made_eko(
    path: Path, theory: dict, xgrid: np.ndarray, seed: int | None, scales=SCALES
) -> dict[tuple[float, int], np.ndarray]:
    """An EKO of ``theory``'s cards on ``xgrid`` at ``scales``: random operators (``seed``) or,
    with ``seed=None``, the identity; the operators by (Q², flavours)."""
    theory_card, operator_card = eko_cards(theory, xgrid)
    operator_card = dataclasses.replace(operator_card, mugrid=list(scales))
    rng = np.random.default_rng(seed)
    n = len(xgrid)
    operators = {}
    with EKO.create(path) as builder:
        eko = builder.load_cards(theory_card, operator_card).build()
        for point in operator_card.evolgrid:
            if seed is None:
                operator = np.einsum("ab,ij->aibj", np.eye(14), np.eye(n))
            else:
                operator = rng.normal(size=(14, n, 14, n)) / n
            eko[point] = Operator(operator=operator)
            operators[point] = operator
    return operators
