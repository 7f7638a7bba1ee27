# SPDX-License-Identifier: GPL-3.0-or-later
"""The evolution kernel operator (EKO) from Q0 to an LHAPDF set's scales.

Computed with eko under the fit's NNPDF theory card, with the settings n3fit 4.1.5's evolven3fit
gives it, so that one EKO serves both tools; then kept in a cache keyed by everything it was
computed from (the cards in eko's own form, and eko's version). An EKO takes minutes to hours on
a CPU, and the same theory and grids recur fit after fit.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hyperscan._files import cache_root

from ._errors import EvolveError
from ._scales import evolution_points

if TYPE_CHECKING:
    from eko.io.runcards import OperatorCard, TheoryCard

#: eko's settings for each of NNPDF's evolution methods (the theory card's ModEv), as
#: evolven3fit sets them: truncated at first order, or iterated exactly.
_METHODS = {
    "TRN": {
        "ev_op_iterations": 1,
        "ev_op_max_order": (1, 0),
        "evolution_method": "truncated",
        "inversion_method": "expanded",
    },
    "EXA": {
        "ev_op_max_order": (1, 0),
        "evolution_method": "iterate-exact",
        "inversion_method": "exact",
    },
}
_INTERPOLATION_DEGREE = 4


def nnpdf_theory(card: Path) -> dict[str, Any]:
    """An NNPDF theory card with nnpdf-data's defaults filled in, as validphys reads it."""
    from nnpdf_data.theory import TheoryCard as NnpdfTheoryCard
    from nnpdf_data.utils import parse_yaml_inp

    if not Path(card).is_file():
        raise EvolveError(f"theory card {card} does not exist")
    try:
        return parse_yaml_inp(Path(card), NnpdfTheoryCard).asdict()
    except Exception as error:  # validobj's and YAML's errors: the card is not a theory card
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise EvolveError(f"theory card {card} is not an NNPDF theory card: {first}") from None


def eko_cards(
    theory: Mapping[str, Any], xgrid: np.ndarray, cores: int = 1
) -> tuple[TheoryCard, OperatorCard]:
    """eko's theory and operator cards for an NNPDF theory, evolving on ``xgrid`` to the set's
    scales (_scales.py), its integrals shared out among ``cores`` processes."""
    from eko.io import runcards

    if theory.get("ModEv") not in _METHODS:
        raise EvolveError(
            f"theory {theory.get('ID')}: ModEv {theory.get('ModEv')!r} is not one of "
            f"{sorted(_METHODS)}"
        )
    settings = {key: value for key, value in theory.items() if key != "FNS"}
    settings.setdefault("nfref", 5)
    if settings["MaxNfPdf"] < 5:
        settings["kbThr"] = math.inf
    if settings["MaxNfPdf"] < 6:
        settings["ktThr"] = math.inf
    settings["Qedref"], settings["MaxNfAs"] = settings["Qref"], settings["MaxNfPdf"]
    configs = {
        "ev_op_iterations": theory.get("IterEv"),
        "n_integration_cores": cores,
        "polarized": False,
        **_METHODS[theory["ModEv"]],
        "interpolation_polynomial_degree": _INTERPOLATION_DEGREE,
        "interpolation_is_log": True,
        "scvar_method": None,
        "time_like": False,
    }
    operator = {
        "init": (theory["Q0"], theory["nf0"]),
        "mugrid": evolution_points(theory),
        "xgrid": [float(x) for x in xgrid],
        "configs": configs,
        "debug": {"skip_singlet": False, "skip_non_singlet": False},
    }
    return runcards.Legacy(settings, {}).new_theory, runcards.OperatorCard.from_dict(operator)


def cache_key(theory_card: TheoryCard, operator_card: OperatorCard) -> str:
    """What the EKO depends on: both cards as eko writes them, and eko's version; not how many
    cores computed it (each integral is computed whole, by one of them)."""
    from eko import __version__ as eko_version

    operator = operator_card.raw
    operator["configs"] = {
        k: v for k, v in operator["configs"].items() if k != "n_integration_cores"
    }
    cards = {"theory": theory_card.raw, "operator": operator, "eko": eko_version}
    return hashlib.sha256(json.dumps(cards, sort_keys=True, default=str).encode()).hexdigest()


def default_cache_dir() -> Path:
    return cache_root() / "ekos"


def cached_eko(
    theory: Mapping[str, Any],
    xgrid: np.ndarray,
    cache_dir: Path | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Path:
    """The EKO's file: from the cache, or computed into it on all of this machine's cores
    (``progress(done, total)`` after each piece). A computation cut short leaves no entry: it
    is written aside, then renamed."""
    theory_card, operator_card = eko_cards(theory, xgrid, cores=os.cpu_count() or 1)
    folder = cache_dir or default_cache_dir()
    path = folder / f"theory_{theory['ID']}-{cache_key(theory_card, operator_card)[:16]}.tar"
    if path.is_file():
        return path
    folder.mkdir(parents=True, exist_ok=True)
    handle, partial = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".tar", dir=folder)
    os.close(handle)
    os.unlink(partial)  # eko creates the archive itself
    try:
        _solve(theory_card, operator_card, Path(partial), progress)
        os.replace(partial, path)
    finally:
        Path(partial).unlink(missing_ok=True)
    return path


def _solve(
    theory_card: TheoryCard,
    operator_card: OperatorCard,
    path: Path,
    progress: Callable[[int, int], None] | None,
) -> None:
    """eko's managed run, piece by piece through its public primitives, to report progress:
    the evolution between scales, the matchings at thresholds, then one operator per scale."""
    from eko.io.items import Target
    from eko.io.struct import EKO
    from eko.runner import operators, parts, recipes

    with EKO.create(path) as builder:
        eko = builder.load_cards(theory_card, operator_card).build()
        recipes.create(eko)
        evolutions, matchings = list(eko.recipes), list(eko.recipes_matching)
        total, done = len(evolutions) + len(matchings) + len(operator_card.evolgrid), 0

        def advance(step: int = 1) -> None:
            nonlocal done
            done += step
            if progress is not None:
                progress(done, total)

        advance(0)
        for recipe in evolutions:
            eko.parts[recipe] = parts.evolve(eko, recipe)
            del eko.parts[recipe]  # written to disk; frees the memory
            advance()
        for recipe in matchings:
            eko.parts_matching[recipe] = parts.match(eko, recipe)
            del eko.parts_matching[recipe]
            advance()
        for point in operator_card.evolgrid:
            target = Target.from_ep(point)
            eko.operators[target] = operators.join(operators.retrieve(point, eko))
            del eko.parts
            del eko.operators[target]
            advance()
