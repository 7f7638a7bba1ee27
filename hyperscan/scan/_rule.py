# SPDX-License-Identifier: GPL-3.0-or-later
"""`hyperscan export --rule`: one trial chosen from a multi-objective study's Pareto front by
a rule a physicist states, e.g. NNPDF's "min chi2 within 0.05 of best, then min phi2".

Grammar (docs/objectives.md), case-sensitive names, words in any case::

    rule   := clause (", then" clause)*
    clause := ("min" | "max") NAME ["within" NUMBER ["%"] "of best"]

Clauses narrow the front in turn: ``min NAME within X of best`` keeps the trials whose NAME is
at most X above the lowest among those kept (``X%``: X per cent of the lowest's magnitude);
without ``within``, the ones at the lowest (``max``: the highest) value. Ties left after the
last clause go to the lowest trial number.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hyperscan.scan._study import ScanError

_CLAUSE = re.compile(
    r"(?P<sense>min|max)\s+(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
    r"(?:\s+within\s+(?P<within>[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(?P<percent>%)?"
    r"\s+of\s+best)?",
    re.IGNORECASE,
)
_THEN = re.compile(r"\s*,\s*then\s+", re.IGNORECASE)
_SYNTAX = "min|max NAME [within X[%] of best], joined by ', then'"


class RuleError(ScanError):
    """A rule that does not parse, or names no objective of the study."""


@dataclass(frozen=True)
class Clause:
    """One step of a rule: keep the trials at (or within ``within`` of) the best ``name``."""

    maximize: bool
    name: str
    within: float | None = None
    percent: bool = False

    def keep(self, trials: Sequence[tuple[int, Mapping[str, float]]]) -> list:
        """The trials this clause keeps of ``trials`` (number, values by name)."""
        sign = -1.0 if self.maximize else 1.0
        best = min(sign * values[self.name] for _, values in trials)
        margin = 0.0
        if self.within is not None:
            margin = self.within * abs(best) / 100 if self.percent else self.within
        return [t for t in trials if sign * t[1][self.name] <= best + margin]

    def __str__(self) -> str:
        text = f"{'max' if self.maximize else 'min'} {self.name}"
        if self.within is not None:
            text += f" within {self.within:g}{'%' if self.percent else ''} of best"
        return text


@dataclass(frozen=True)
class Rule:
    """A parsed rule: its clauses, applied in turn."""

    clauses: tuple[Clause, ...]

    def choose(self, trials: Sequence[tuple[int, Mapping[str, float]]]) -> int:
        """The number of the trial the rule chooses among ``trials`` (number, values by
        name), e.g. the Pareto front."""
        if not trials:
            raise RuleError("no trial to choose from: the study has no complete trial yet")
        kept = list(trials)
        for clause in self.clauses:
            kept = clause.keep(kept)
        return min(number for number, _ in kept)

    def __str__(self) -> str:
        return ", then ".join(str(clause) for clause in self.clauses)


def parse_rule(text: str, names: Sequence[str]) -> Rule:
    """The rule in ``text`` over the objectives ``names``; RuleError says what is wrong."""
    parts = _THEN.split(text.strip())
    clauses = []
    for k, part in enumerate(parts):
        found = _CLAUSE.fullmatch(part.strip())
        if found is None:
            where = f"clause {k + 1} {part.strip()!r}" if len(parts) > 1 else repr(text.strip())
            raise RuleError(f"--rule: cannot read {where}: expected {_SYNTAX}")
        name = found["name"]
        if name not in names:
            raise RuleError(
                f"--rule: no objective named {name!r}; the study's objectives are "
                + ", ".join(names)
            )
        within = None if found["within"] is None else float(found["within"])
        if within is not None and not math.isfinite(within):
            raise RuleError(f"--rule: 'within {found['within']}' is not a finite number")
        clauses.append(
            Clause(found["sense"].lower() == "max", name, within, found["percent"] is not None)
        )
    return Rule(tuple(clauses))
