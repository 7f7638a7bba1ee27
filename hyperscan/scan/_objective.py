"""One trial = one ensemble (folds × replicas) fitted in one model, scored across replicas."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable

import numpy as np
import optuna
import tensorflow as tf

from hyperscan._version import __version__
from hyperscan.data import Problem, load_problem
from hyperscan.fit import (
    DIVERGED,
    DIVERGED_STATUS,
    POSITIVITY_VETO,
    FitResult,
    SyncReport,
    member_specs,
    run_fit,
)
from hyperscan.model import HELD_OUT, VALIDATION
from hyperscan.runcard import (
    CLOSURE_LOSSES,
    PENALTIES,
    FitRuncard,
    ObjectiveSection,
    RuncardError,
    ScanRuncard,
)
from hyperscan.scan._closure import closure_loss, closure_record, multiclosure_record
from hyperscan.scan._ensemble_metrics import central_chi2, fold_record
from hyperscan.scan._n3fit_loss import fold_loss, n3fit_value
from hyperscan.scan._penalties import all_penalties
from hyperscan.scan._statistics import (
    all_statistics,
    fold_statistic,
    replica_statistic,
    summary,
    trial_value,
)
from hyperscan.scan._trial_attrs import (
    REQUEUED_ATTR,
    RETRY_OF_ATTR,
    TRASHED_ATTR,
    WORKER_ATTR,
    worker_id,
)
from hyperscan.scan.storage import record_with_retries


class WorkerStopping(Exception):
    """The worker was asked to stop; the trial is failed and re-queued for another worker."""


class Objective:
    """Callable for `study.optimize`: suggest → fit → report → statistics → value or trash.

    Its halves, :meth:`start` and :meth:`finish`, serve a worker that fits several trials at
    once (ask and tell), with a :class:`_Monitor` per trial as its fit's sync hook."""

    def __init__(
        self,
        runcard: ScanRuncard,
        problem: Problem,
        stop: threading.Event,
        on_start: Callable[[optuna.Trial, dict], None] | None = None,
    ) -> None:
        self.runcard = runcard
        self.problem = problem
        self.stop = stop
        self.on_start = on_start  # told of each trial with its drawn values, before its fit
        # The members of every trial's fit runcard (trial_runcard), as its fit orders them.
        specs = member_specs(
            runcard.scan.replica_ids, runcard.scan.folds, runcard.fit.data.level1_fits
        )
        self.folds = np.array([spec.fold for spec in specs])
        self.level1 = np.array([spec.level1 for spec in specs])
        # The stored statistics and the pruner's reports follow the (first) objective's χ².
        self.primary = runcard.scan.objective.entries[0]
        self.category = HELD_OUT if self.primary.chi2 == "held_out" else VALIDATION
        self.metrics_covmat = _experimental_covmat(runcard, problem)
        # The running trial's ensemble records and penalties, which its value may use.
        self._records: dict = {}
        self._penalties: dict[str, np.ndarray] = {}
        self._closure: dict = {}

    def __call__(self, trial: optuna.Trial) -> float | list[float]:
        params, card = self.start(trial)
        monitor = _Monitor(self, trial)
        result = (
            None if self.stop.is_set() else run_fit(card, problem=self.problem, on_sync=monitor)
        )
        return self.finish(trial, params, result, monitor)

    def start(self, trial: optuna.Trial) -> tuple[dict, FitRuncard]:
        """The first half of a trial, before its fit: its drawn values and fit runcard.

        Raises TrialPruned, the trial trashed, when the drawn values make no valid runcard."""
        trial.set_user_attr(WORKER_ATTR, worker_id())
        params = self.runcard.scan.space.suggest(trial)
        if self.on_start is not None:
            self.on_start(trial, params)
        try:
            return params, self.runcard.trial_runcard(params)
        except RuncardError as error:
            # Each value was checked alone when the study was created; together they can still
            # break a rule (a drawn positivity.max below a drawn initial). A region for the
            # sampler to learn to avoid, as divergence is, not a reason to stop the worker.
            reason = f"the drawn values make no valid fit runcard: {error}"
            trial.set_user_attr(TRASHED_ATTR, reason)
            raise optuna.TrialPruned(f"trashed: {reason}") from None

    def finish(
        self,
        trial: optuna.Trial,
        params: dict,
        result: FitResult | None,
        monitor: _Monitor,
    ) -> float | list[float]:
        """The second half of a trial, after its fit (None: never started, the worker
        stopping): its attributes recorded, and its value returned, or TrialPruned raised
        (pruned or trashed), or WorkerStopping (re-queued)."""
        # A stop at the fit's last sync, or after it (while its results were computed), cut
        # nothing short: the trial is recorded, not thrown away and fitted again elsewhere.
        if result is None or (monitor.stopped and result.interrupted):
            trial.study.enqueue_trial(params, user_attrs={RETRY_OF_ATTR: trial.number})
            trial.set_user_attr(REQUEUED_ATTR, True)
            raise WorkerStopping(f"worker {worker_id()} stopped; trial re-queued")
        attrs = self._attrs(result)
        reason = self._trash_reason(result)
        value: float | list[float] | None = None
        if reason is None and not monitor.pruned:
            entries = self.runcard.scan.objective.entries
            scored = [self._fold_losses(result, entry) for entry in entries]
            values = [value for _, value in scored]
            over = (self._over_threshold(losses) for losses, _ in scored)
            reason = next(filter(None, over), None)
            if reason is None and not np.all(np.isfinite(values)):
                # Optuna would record a non-finite value as FAIL, which TPE ignores.
                shown = values[0] if len(values) == 1 else values
                reason = f"non-finite trial value ({shown}); member status: {result.status}"
            if reason is None:
                # a multi-objective study is told every objective's value, in order
                value = values if self.runcard.scan.objective.multi else values[0]
        if reason is not None:
            attrs[TRASHED_ATTR] = reason
        # Hours of fit are not thrown away for seconds of outage: the result waits on disk,
        # and its writes are retried, until the database takes them.
        record_with_retries(
            trial,
            {"study": trial.study.study_name, "number": trial.number, "params": params}
            | {"value": value, "user_attrs": attrs},
        )
        for key, attr in attrs.items():  # a handful of writes
            trial.set_user_attr(key, attr)
        if reason is not None:
            # PRUNED, not FAIL: TPE ignores failed trials but ranks pruned ones below every
            # complete trial, so it learns to avoid the diverging region.
            raise optuna.TrialPruned(f"trashed: {reason}")
        if value is None:
            raise optuna.TrialPruned(f"pruned at epoch {result.steps}")
        return value

    def _fold_losses(
        self, result: FitResult, objective: ObjectiveSection
    ) -> tuple[list[float], float]:
        """Each fold's loss and the trial's value, by the objective's loss."""
        chi2 = self._chi2(result, objective)
        if objective.loss == "statistic":
            losses = [replica_statistic(chi2[self.folds == k], objective) for k in self._fold_ids]
            return losses, trial_value(chi2, self.folds, objective)
        if objective.loss in CLOSURE_LOSSES:
            records = self._closure["folds"].values()
            losses = [closure_loss(objective.loss, record) for record in records]
            return losses, fold_statistic(np.array(losses), objective)
        losses, fitted = [], []
        for k, record in zip(self._fold_ids, self._records["folds"].values(), strict=True):
            members = self.folds == k
            losses.append(
                fold_loss(
                    objective,
                    record,
                    result.chi2_per_point["validation"][members],
                    self._experimental(result)[members],
                    {name: values[members] for name, values in self._penalties.items()},
                )
            )
            fitted.append(np.nan if record["fitted_chi2"] is None else record["fitted_chi2"])
        return losses, n3fit_value(losses, fitted, objective)

    def _over_threshold(self, losses: list[float]) -> str | None:
        """n3fit's fold threshold: a fold whose loss is above it trashes the trial."""
        threshold = self.runcard.scan.objective.threshold
        if threshold is None:
            return None
        over = [(k, loss) for k, loss in enumerate(losses) if loss > threshold]
        if not over:
            return None
        folds = ", ".join(f"fold {k}: {loss:.6g}" for k, loss in over)
        return f"loss above scan.objective.threshold = {threshold:g} ({folds})"

    @property
    def _fold_ids(self) -> np.ndarray:
        return np.unique(self.folds)

    def _experimental(self, result: FitResult) -> np.ndarray:
        """Each replica's experimental χ² per point on the data its fold scores."""
        return result.chi2_per_point["held_out" if self.runcard.scan.folds else "experimental"]

    def _chi2(self, result: FitResult, objective: ObjectiveSection | None = None) -> np.ndarray:
        """Each member's χ² that ``objective`` (default: the first) scores."""
        return result.chi2_per_point[(objective or self.primary).chi2]

    def _trash_reason(self, result: FitResult) -> str | None:
        limits = self.runcard.scan.divergence
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

    def _attrs(self, result: FitResult) -> dict:
        """The fit's user attributes, by name."""
        objective = self.primary
        chi2 = self._chi2(result)
        attrs = {
            "statistics": all_statistics(chi2, self.folds, objective),
            "replicas": {name: summary(values) for name, values in result.chi2_per_point.items()},
        }
        if self.runcard.scan.folds:
            attrs["folds"] = {
                str(k): summary(chi2[self.folds == k]) for k in range(len(self.runcard.scan.folds))
            }
        self._records = self._ensemble(result)
        attrs["ensemble"] = self._records
        if self.problem.truth is not None:
            self._closure = self._closure_of(result)
            attrs["closure"] = self._closure
        self._penalties = self._penalties_of(result)
        # Per replica, as n3fit stores them (4 significant digits: one list per fold; None
        # where not finite, as in `ensemble`).
        attrs["penalties"] = {
            name: {
                str(i): [_finite(v, 4) for v in values[self.folds == k]]
                for i, k in enumerate(self._fold_ids)  # "0" without folds, as `ensemble`
            }
            for name, values in self._penalties.items()
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
        return attrs

    def _penalties_of(self, result: FitResult) -> dict[str, np.ndarray]:
        """n3fit's penalties of every member (nan without the small-x PDF)."""
        if result.small_x_pdf is None:
            nan = np.full(result.n_members, np.nan)
            return {name: nan for name in PENALTIES}
        card = self.runcard.fit
        return all_penalties(
            result.small_x_pdf,
            result.best_epoch,
            card.epochs,
            max(1, int(card.stopping.patience * card.epochs)),
            result.chi2_per_point["validation"],
        )

    def _ensemble(self, result: FitResult) -> dict:
        """n3fit's hyperopt metrics of each fold's ensemble, on the points the fold scores: its
        held-out datasets with k-fold, else all the data (the replicas' validation points
        differ, and n3fit's experimental χ² without a fold is over all the data). With several
        level-1 fits, of the first fit's members: the metrics compare one ensemble with the
        data it fitted."""
        problem, folds = self.problem, self.runcard.scan.folds
        proportion = self.runcard.scan.objective.best_fraction
        experimental = self._experimental(result)
        records = {}
        for k, points in enumerate(self._scored_points()):
            members = (self.folds == (k if folds else -1)) & (self.level1 == 0)
            records[str(k)] = fold_record(
                result.predictions[members][:, points],
                problem.central[points],
                self.metrics_covmat[np.ix_(points, points)],
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
                    self.metrics_covmat[np.ix_(fitted, fitted)],
                )
            )
        return {
            "proportion": proportion,
            "scored": "held_out" if folds else "all",
            "folds": records,
        }

    def _scored_points(self) -> list[np.ndarray]:
        """The points each fold scores: its held-out datasets with k-fold, else all."""
        problem = self.problem
        slices = dict(zip(problem.names, problem.dataset_slices(), strict=True))
        scored = []
        for fold in self.runcard.scan.folds or [problem.names]:
            points = np.zeros(problem.n_data, dtype=bool)
            for name in fold:
                points[slices[name]] = True
            scored.append(np.flatnonzero(points))
        return scored

    def _closure_of(self, result: FitResult) -> dict:
        """The closure estimators of each fold's ensemble against the truth, on the points
        the fold scores (as ``ensemble``): of its replicas but the diverged ones (up to
        ``scan.divergence.max_diverged``), pos-veto ones counted as in every trial value, with
        the fit's own covariance (t0 with t0), as benchmarks/closure_real.py takes them. With
        several level-1 fits (closure ``fits``), each fit's ensemble separately (``fits``: per
        fold, one record per fit) and ``folds`` their multiclosure aggregate."""
        problem, folds = self.problem, self.runcard.scan.folds
        ok = np.array([status != DIVERGED_STATUS for status in result.status])
        fit_ids = np.unique(self.level1)
        records, per_fit = {}, {}
        for k, points in enumerate(self._scored_points()):
            fits = []
            for j in fit_ids:
                members = ok & (self.folds == (k if folds else -1)) & (self.level1 == j)
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


class _Monitor:
    """The fit's sync hook: intermediate reports for pruning, early trash, worker stop."""

    def __init__(self, objective: Objective, trial: optuna.Trial) -> None:
        self.objective = objective
        self.trial = trial
        self.syncs = 0
        self.pruned = False
        self.stopped = False  # the worker's stop ended the fit

    def __call__(self, report: SyncReport) -> bool:
        self.syncs += 1
        if self.objective.stop.is_set():
            self.stopped = True
            return True
        diverged = int((report.status == DIVERGED).sum())
        if diverged > self.objective.runcard.scan.divergence.max_diverged:
            return True  # trashed anyway: stop spending compute on it
        pruner = self.objective.runcard.scan.pruner
        if self.objective.runcard.scan.objective.multi or self.syncs % pruner.report_every:
            return False  # Optuna takes no reports in a multi-objective study
        chi2 = report.chi2_per_point[:, self.objective.category]
        value = trial_value(chi2, self.objective.folds, self.objective.primary)
        if np.isfinite(value):
            self.trial.report(value, step=report.step)
            if self.trial.should_prune():
                self.pruned = True
                return True
        return False
