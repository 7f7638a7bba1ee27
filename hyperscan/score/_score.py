"""A trial's score from its fit: the values a study is told, the attributes it stores, and
why it is trashed. Pure: no study, no storage, no state kept between trials, so that the same
fit scores the same whichever worker, slot or order it came from."""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from hyperscan._version import __version__
from hyperscan.data import Problem, load_problem
from hyperscan.fit import (
    DIVERGED_STATUS,
    POSITIVITY_VETO,
    FitResult,
    SyncReport,
    member_specs,
)
from hyperscan.model import HELD_OUT, VALIDATION
from hyperscan.runcard import LOSSES, PENALTIES, ObjectiveSection, ScanRuncard
from hyperscan.score._closure import closure_loss, closure_record, multiclosure_record
from hyperscan.score._ensemble_metrics import central_chi2, fold_record
from hyperscan.score._n3fit_loss import fold_loss, n3fit_value
from hyperscan.score._penalties import all_penalties
from hyperscan.score._statistics import (
    all_statistics,
    fold_statistic,
    replica_statistic,
    summary,
    trial_value,
)


@dataclass(frozen=True)
class TrialScore:
    """What a trial's fit scored: ``values`` (one per objective; None when trashed or pruned),
    the attributes stored on the trial, and the reason it is trashed (None if it is not)."""

    values: list[float] | None
    attrs: dict
    trash_reason: str | None


@dataclass(frozen=True)
class Scoring:
    """What every trial of a study is scored against, built once per worker: the scan's
    runcard, the data, the members of each trial's fit, and the ensemble metrics' covariance."""

    runcard: ScanRuncard
    problem: Problem
    folds: np.ndarray  # (M,) each member's fold, -1 without folds
    level1: np.ndarray  # (M,) each member's level-1 fit
    metrics_covmat: np.ndarray

    @classmethod
    def of(cls, runcard: ScanRuncard, problem: Problem) -> Scoring:
        # The members of every trial's fit runcard (trial_runcard), as its fit orders them.
        specs = member_specs(
            runcard.scan.replica_ids, runcard.scan.folds, runcard.fit.data.level1_fits
        )
        return cls(
            runcard,
            problem,
            np.array([spec.fold for spec in specs]),
            np.array([spec.level1 for spec in specs]),
            _experimental_covmat(runcard, problem),
        )

    @property
    def primary(self) -> ObjectiveSection:
        """The (first) objective, whose χ² the stored statistics and the pruner's reports
        follow."""
        return self.runcard.scan.objective.entries[0]

    def interim_value(self, report: SyncReport) -> float:
        """The primary objective's statistic at a sync, as the pruner is told it."""
        category = HELD_OUT if self.primary.chi2 == "held_out" else VALIDATION
        return trial_value(report.chi2_per_point[:, category], self.folds, self.primary)


def score(result: FitResult, scoring: Scoring, *, pruned: bool = False) -> TrialScore:
    """The score of a finished fit; a pruned one (``pruned``) keeps its attributes, no value."""
    evidence = _evidence(result, scoring)
    attrs = _attrs(result, scoring, evidence)
    reason = _trash_reason(result, scoring.runcard)
    if reason is not None or pruned:
        return TrialScore(None, attrs, reason)
    entries = scoring.runcard.scan.objective.entries
    scored = [FOLD_LOSSES[LOSSES[e.loss].family](result, scoring, e, evidence) for e in entries]
    values = [value for _, value in scored]
    reason = next(filter(None, (_over_threshold(losses, scoring) for losses, _ in scored)), None)
    if reason is None and not np.all(np.isfinite(values)):
        # Optuna would record a non-finite value as FAIL, which TPE ignores.
        shown = values[0] if len(values) == 1 else values
        reason = f"non-finite trial value ({shown}); member status: {result.status}"
    return TrialScore(None if reason else values, attrs, reason)


@dataclass(frozen=True)
class _Evidence:
    """The fit's ensemble figures that the losses are taken from: n3fit's metrics per fold,
    the closure estimators (closure data only), and the penalties per member."""

    ensemble: dict
    closure: dict | None
    penalties: dict[str, np.ndarray]


def _evidence(result: FitResult, scoring: Scoring) -> _Evidence:
    closure = _closure_of(result, scoring) if scoring.problem.truth is not None else None
    return _Evidence(_ensemble(result, scoring), closure, _penalties_of(result, scoring))


def _statistic_losses(
    result: FitResult, scoring: Scoring, objective: ObjectiveSection, evidence: _Evidence
) -> tuple[list[float], float]:
    chi2 = result.chi2_per_point[objective.chi2]
    losses = [replica_statistic(chi2[scoring.folds == k], objective) for k in _fold_ids(scoring)]
    return losses, trial_value(chi2, scoring.folds, objective)


def _closure_losses(
    result: FitResult, scoring: Scoring, objective: ObjectiveSection, evidence: _Evidence
) -> tuple[list[float], float]:
    assert evidence.closure is not None, "the runcard allows closure losses on closure data only"
    records = evidence.closure["folds"].values()
    losses = [closure_loss(objective.loss, record) for record in records]
    return losses, fold_statistic(np.array(losses), objective)


def _n3fit_losses(
    result: FitResult, scoring: Scoring, objective: ObjectiveSection, evidence: _Evidence
) -> tuple[list[float], float]:
    losses, fitted = [], []
    records = evidence.ensemble["folds"].values()
    for k, record in zip(_fold_ids(scoring), records, strict=True):
        members = scoring.folds == k
        losses.append(
            fold_loss(
                objective,
                record,
                result.chi2_per_point["validation"][members],
                _experimental(result, scoring)[members],
                {name: values[members] for name, values in evidence.penalties.items()},
            )
        )
        fitted.append(np.nan if record["fitted_chi2"] is None else record["fitted_chi2"])
    return losses, n3fit_value(losses, fitted, objective)


#: Each fold's loss and the trial's value, by the family of the objective's loss (LOSSES).
FOLD_LOSSES: dict[str, Callable[..., tuple[list[float], float]]] = {
    "statistic": _statistic_losses,
    "n3fit": _n3fit_losses,
    "closure": _closure_losses,
}


def _over_threshold(losses: list[float], scoring: Scoring) -> str | None:
    """n3fit's fold threshold: a fold whose loss is above it trashes the trial."""
    threshold = scoring.runcard.scan.objective.threshold
    if threshold is None:
        return None
    over = [(k, loss) for k, loss in enumerate(losses) if loss > threshold]
    if not over:
        return None
    folds = ", ".join(f"fold {k}: {loss:.6g}" for k, loss in over)
    return f"loss above scan.objective.threshold = {threshold:g} ({folds})"


def _fold_ids(scoring: Scoring) -> np.ndarray:
    return np.unique(scoring.folds)


def _experimental(result: FitResult, scoring: Scoring) -> np.ndarray:
    """Each replica's experimental χ² per point on the data its fold scores."""
    return result.chi2_per_point["held_out" if scoring.runcard.scan.folds else "experimental"]


def _trash_reason(result: FitResult, runcard: ScanRuncard) -> str | None:
    limits = runcard.scan.divergence
    diverged = [m for m, status in enumerate(result.status) if status == DIVERGED_STATUS]
    if len(diverged) > limits.max_diverged:
        details = [
            f"{_member(result, m)} at epoch {result.stop_epoch[m]}: {result.divergence[m]}"
            for m in diverged
        ]
        return f"{len(diverged)} diverged: " + "; ".join(details)
    vetoed = [m for m, status in enumerate(result.status) if status == POSITIVITY_VETO]
    if limits.max_pos_veto is not None and len(vetoed) > limits.max_pos_veto:
        return (
            f"{len(vetoed)} pos-veto (no step passed positivity and the χ² threshold, "
            f"more than scan.divergence.max_pos_veto = {limits.max_pos_veto}): "
            + ", ".join(_member(result, m) for m in vetoed)
        )
    return None


def _attrs(result: FitResult, scoring: Scoring, evidence: _Evidence) -> dict:
    """The fit's user attributes, by name."""
    runcard, folds = scoring.runcard, scoring.folds
    chi2 = result.chi2_per_point[scoring.primary.chi2]
    attrs = {
        "statistics": all_statistics(chi2, folds, scoring.primary),
        "replicas": {name: summary(values) for name, values in result.chi2_per_point.items()},
    }
    if runcard.scan.folds:
        attrs["folds"] = {str(k): summary(chi2[folds == k]) for k in range(len(runcard.scan.folds))}
    attrs["ensemble"] = evidence.ensemble
    if evidence.closure is not None:
        attrs["closure"] = evidence.closure
    # Per replica, as n3fit stores them (4 significant digits: one list per fold; None where
    # not finite, as in `ensemble`).
    attrs["penalties"] = {
        name: {
            str(i): [_finite(v, 4) for v in values[folds == k]]
            for i, k in enumerate(_fold_ids(scoring))  # "0" without folds, as `ensemble`
        }
        for name, values in evidence.penalties.items()
    }
    attrs["fit"] = {
        "members": result.n_members,
        "diverged": result.count(DIVERGED_STATUS),
        "pos_veto": result.count(POSITIVITY_VETO),
        # starts past divergence.max_loss that were redrawn (fit/_fit.py usable_starts)
        "redrawn_starts": int(result.redraws.sum()) if result.redraws is not None else 0,
        # Quantiles, not the list: the dashboard cuts attributes at 1,024 characters.
        "best_epoch": summary(result.best_epoch[result.best_epoch >= 0]),
        "steps": result.steps,
        "seconds": round(result.seconds, 2),
        "host": socket.gethostname(),
        "threads": tf.config.threading.get_intra_op_parallelism_threads() or None,
        "hyperscan": __version__,
    }
    if result.batch_layout is not None:  # what `export` writes for `fit` to repeat it
        attrs["fit"]["batch_layout"] = result.batch_layout.model_dump(mode="json")
    return attrs


def _penalties_of(result: FitResult, scoring: Scoring) -> dict[str, np.ndarray]:
    """n3fit's penalties of every member (nan without the small-x PDF)."""
    if result.small_x_pdf is None:
        nan = np.full(result.n_members, np.nan)
        return {name: nan for name in PENALTIES}
    card = scoring.runcard.fit
    return all_penalties(
        result.small_x_pdf,
        result.best_epoch,
        card.epochs,
        max(1, int(card.stopping.patience * card.epochs)),
        result.chi2_per_point["validation"],
    )


def _ensemble(result: FitResult, scoring: Scoring) -> dict:
    """n3fit's hyperopt metrics of each fold's ensemble, on the points the fold scores: its
    held-out datasets with k-fold, else all the data (the replicas' validation points differ,
    and n3fit's experimental χ² without a fold is over all the data). With several level-1
    fits, of the first fit's members: the metrics compare one ensemble with the data it
    fitted."""
    problem, folds = scoring.problem, scoring.runcard.scan.folds
    proportion = scoring.runcard.scan.objective.best_fraction
    experimental = _experimental(result, scoring)
    covmat = scoring.metrics_covmat
    records = {}
    for k, points in enumerate(_scored_points(scoring)):
        members = (scoring.folds == (k if folds else -1)) & (scoring.level1 == 0)
        records[str(k)] = fold_record(
            result.predictions[members][:, points],
            problem.central[points],
            covmat[np.ix_(points, points)],
            result.chi2_per_point["validation"][members],
            experimental[members],
            proportion,
        )
        # n3fit's fit-quality term looks at the data the fold fitted: all without folds.
        fitted = np.setdiff1d(np.arange(problem.n_data), points) if folds else points
        records[str(k)]["fitted_chi2"] = _finite(
            central_chi2(
                result.predictions[members][:, fitted],
                problem.central[fitted],
                covmat[np.ix_(fitted, fitted)],
            )
        )
    return {"proportion": proportion, "scored": "held_out" if folds else "all", "folds": records}


def _scored_points(scoring: Scoring) -> list[np.ndarray]:
    """The points each fold scores: its held-out datasets with k-fold, else all."""
    problem = scoring.problem
    slices = dict(zip(problem.names, problem.dataset_slices(), strict=True))
    scored = []
    for fold in scoring.runcard.scan.folds or [problem.names]:
        points = np.zeros(problem.n_data, dtype=bool)
        for name in fold:
            points[slices[name]] = True
        scored.append(np.flatnonzero(points))
    return scored


def _closure_of(result: FitResult, scoring: Scoring) -> dict:
    """The closure estimators of each fold's ensemble against the truth, on the points the
    fold scores (as ``ensemble``): of its replicas but the diverged ones (up to
    ``scan.divergence.max_diverged``), pos-veto ones counted as in every trial value, with the
    fit's own covariance (t0 with t0), as benchmarks/closure_real.py takes them. With several
    level-1 fits (closure ``fits``), each fit's ensemble separately (``fits``: per fold, one
    record per fit) and ``folds`` their multiclosure aggregate."""
    problem, folds = scoring.problem, scoring.runcard.scan.folds
    ok = np.array([status != DIVERGED_STATUS for status in result.status])
    fit_ids = np.unique(scoring.level1)
    records, per_fit = {}, {}
    for k, points in enumerate(_scored_points(scoring)):
        fits = []
        for j in fit_ids:
            members = ok & (scoring.folds == (k if folds else -1)) & (scoring.level1 == j)
            fits.append(
                closure_record(
                    result.predictions[members][:, points],
                    problem.truth[points],
                    problem.covmat[np.ix_(points, points)],
                )
            )
        records[str(k)] = multiclosure_record(fits)
        per_fit[str(k)] = fits
    closure = {"scored": "held_out" if folds else "all", "folds": records}
    return closure | ({"fits": per_fit} if len(fit_ids) > 1 else {})


def _experimental_covmat(runcard: ScanRuncard, problem: Problem) -> np.ndarray:
    """The covariance of the ensemble metrics: n3fit's ``compute_hyperopt_metrics`` takes the
    experimental one (validphys' ``dataset_inputs_covmat_from_systematics``), never t0, even
    when the fit uses t0; so does hyperscan, or its figures would not be n3fit's."""
    real = runcard.fit.data.real
    if real is None or not real.t0:
        return problem.covmat
    data = runcard.fit.data.model_copy(update={"real": real.model_copy(update={"t0": False})})
    experimental = load_problem(runcard.fit.model_copy(update={"data": data}))
    assert experimental.names == problem.names, "the same data in another order"
    return experimental.covmat


def _finite(value: float, digits: int = 9) -> float | None:
    """``digits`` significant digits (9: as the other ensemble figures), None where not
    finite."""
    return float(f"{value:.{digits}g}") if np.isfinite(value) else None


def _member(result: FitResult, m: int) -> str:
    fold = f" (fold {result.folds[m]})" if result.folds[m] >= 0 else ""
    fit = f" (level-1 fit {result.level1[m]})" if result.level1.any() else ""
    return f"replica {result.replicas[m]}{fold}{fit}"
