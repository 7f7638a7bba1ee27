"""A trial's value in words, from the same table of losses that scores it."""

from __future__ import annotations

from hyperscan.runcard import LOSSES, ObjectiveSection


def objective_label(objective: ObjectiveSection, folds: int) -> str:
    """A trial's value in words, as `study status` shows it above the best trial."""
    loss = LOSSES[objective.loss]
    value = loss.label.format(
        **objective.model_dump(),
        chi2_words="held-out" if objective.chi2 == "held_out" else "validation",
        best=f"best {objective.best_fraction:.0%} of the replicas",
        phi="phi²" if objective.phi_squared else "phi",
    )
    if loss.family == "closure":
        value += " of the replicas but diverged ones"
    if objective.penalties_in_loss:
        value += " + penalties " + ", ".join(objective.penalties)
    if folds:
        value += f", {objective.fold_statistic} over {folds} folds"
    if objective.loss == "phi2":
        value = f"1 / ({value})"
    return value + (" + n3fit's fit-quality term" if loss.family == "n3fit" else "")
