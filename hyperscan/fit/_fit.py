"""A whole fit: runcard → members → trained ensemble → FitResult."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import tensorflow as tf

from hyperscan.data import Problem, experimental_chi2, export_xgrid, level1_data, load_problem
from hyperscan.fit._fitinfo import arc_length_xgrid, arc_lengths
from hyperscan.fit._format import (
    DIVERGED,
    DIVERGED_STATUS,
    INTERRUPTED,
    OK,
    POSITIVITY_VETO,
    RUNNING,
)
from hyperscan.fit._loop import DIVERGENCE_REASONS, SyncReport, TrainerSettings
from hyperscan.fit._members import (
    MemberSpec,
    architecture_shape,
    build_members,
    member_shapes,
    member_specs,
    redrawn_weights,
)
from hyperscan.fit._rows import TrainingOutcome
from hyperscan.fit._trainer import Trainer
from hyperscan.model import (
    HELD_OUT,
    TRAINING,
    VALIDATION,
    EnsembleModel,
    embed,
    padded_widths,
    shape_classes,
    take_members,
    unembed,
)
from hyperscan.runcard import LAMBDA_UPDATE_INTERVAL, BatchLayout, FitRuncard

#: Replacement starts tried for a member whose initial loss is already past divergence.max_loss.
MAX_REDRAWS = 10
CATEGORY_NAMES = {TRAINING: "training", VALIDATION: "validation", HELD_OUT: "held_out"}


#: x below the output grid where n3fit's hyperopt penalties look at a PDF (scan's penalties):
#: integrability's 1e-9, 1e-8, 1e-7, then saturation's 100 log points from 1e-6 to 1e-4.
SMALL_X = np.concatenate([np.logspace(-9, -6, 3, endpoint=False), np.logspace(-6, -4, 100)])


def output_xgrid() -> np.ndarray:
    """The standard grid on which fitted PDFs are written: log below 0.1, linear above."""
    return np.concatenate([np.geomspace(1e-5, 0.1, 60, endpoint=False), np.linspace(0.1, 1, 41)])


@dataclass
class FitResult:
    """Per member (leading axis M) outcomes of a fit."""

    replicas: np.ndarray  # (M,)
    folds: np.ndarray  # (M,) -1 when nothing is held out
    level1: np.ndarray  # (M,) each member's level-1 fit (closure ``fits``), 0 with one
    status: list[str]  # ok | pos-veto | diverged | interrupted (MEMBER_STATUSES)
    best_epoch: np.ndarray  # (M,) -1 when no epoch passed positivity and the χ² threshold
    stop_epoch: np.ndarray  # (M,) -1 when the member ran until the last epoch
    divergence: list[str]  # why each diverged member diverged, "" for the others
    chi2_per_point: dict[str, np.ndarray]  # training, validation, held_out, experimental: (M,)
    dataset_names: list[str]
    dataset_chi2_per_point: np.ndarray  # (M, n_datasets) experimental, per dataset
    predictions: np.ndarray  # (M, N) each member's predictions for every point, problem order
    steps: int
    seconds: float  # the whole fit: building the members and the model, and training
    training_seconds: float  # the training loop alone
    interrupted: bool
    pdf_x: np.ndarray  # (n_x,)
    pdf: np.ndarray  # (M, n_x, 8) x·f in the fitted basis at Q0
    grid_x: np.ndarray  # (n_grid,) the fit's own x grid: the union of the FK tables' grids
    grid_pdf: np.ndarray  # (M, n_grid, 8) x·f there: FK ⊗ it gives the fit's predictions
    params: list[np.ndarray]
    history: list[SyncReport] = field(default_factory=list)
    redraws: np.ndarray | None = None  # (M,) replacement starts each member needed
    small_x_pdf: np.ndarray | None = None  # (M, n, 8) x·f at SMALL_X, for n3fit's penalties
    export_pdf: np.ndarray | None = None  # (M, 196, 8) x·f at export_xgrid(), for exportgrids
    arc_lengths: np.ndarray | None = None  # (M, 5) n3fit's, at Q0, for postfit (_fitinfo)
    # The batch a TrialBatch fitted the members in, which their rounding depends on (None:
    # fitted alone, or the batch was rebuilt under them, which no refit repeats).
    batch_layout: BatchLayout | None = None

    @property
    def n_members(self) -> int:
        return len(self.status)

    def count(self, status: str) -> int:
        return sum(s == status for s in self.status)


#: What every member of one model shares: one problem, one split into folds, one compiled loop.
SHARED_KEYS = ("data", "training", "divergence", "folds")


def trainer_settings(runcard: FitRuncard, members: int | Sequence[FitRuncard]) -> TrainerSettings:
    """The trainer's settings for `members`: a count (the runcard's settings for that many
    members) or one runcard per member, each member's training hyperparameters from its own
    (learning rate, clipnorm, optimizer, epochs, stopping, positivity), what the batch shares
    from `runcard` (`checked_member_runcards` checks it). Without a fixed ``positivity.multiplier``,
    λ's factor is chosen so that a member's λ reaches its ``positivity.max`` at its last
    update."""
    cards = [runcard] * members if isinstance(members, int) else list(members)

    def each(value: Callable[[FitRuncard], object], dtype: type = float) -> np.ndarray:
        return np.array([value(card) for card in cards], dtype=dtype)

    return TrainerSettings(
        optimizer=each(lambda card: card.optimizer.name, str),
        learning_rate=each(lambda card: card.optimizer.learning_rate),
        clipnorm=each(lambda card: card.optimizer.clipnorm or np.inf),
        epochs=each(lambda card: card.epochs, np.int64),
        patience_steps=each(
            lambda card: max(1, int(card.stopping.patience * card.epochs)), np.int64
        ),
        threshold_chi2=each(lambda card: card.stopping.threshold_chi2),
        positivity_threshold=each(lambda card: card.stopping.positivity_threshold),
        lambda_initial=each(lambda card: card.positivity.initial),
        lambda_factor=each(_lambda_factor),
        max_loss=runcard.divergence.max_loss,
        steps_per_call=runcard.training.steps_per_call,
        jit=runcard.training.jit,
        compact=runcard.training.compact,
    )


def _lambda_factor(card: FitRuncard) -> float:
    positivity = card.positivity
    if positivity.multiplier is not None:
        return positivity.multiplier
    updates = max(1, card.epochs // LAMBDA_UPDATE_INTERVAL)
    return (positivity.max / positivity.initial) ** (1.0 / updates)


def build_ensemble(
    runcard: FitRuncard,
    *,
    problem: Problem | None = None,
    member_runcards: Sequence[FitRuncard] | None = None,
) -> tuple[EnsembleModel, list[MemberSpec], list[np.ndarray]]:
    """The runcard's ensemble in one model, in the runcard's precision: the model, its members
    (folds × replicas) and their initial weights, not yet checked by `usable_starts`.
    `member_runcards` (one per member, in member order; None: the runcard for all) give each
    member its own methodology; members of different architectures are padded to one model
    (`run_fit` may split them into shape classes instead)."""
    problem = problem if problem is not None else load_problem(runcard)
    specs = member_specs(runcard.replica_ids, runcard.folds, runcard.data.level1_fits)
    cards = checked_member_runcards(runcard, member_runcards, specs)
    model, params = _ensemble(runcard, problem, specs, cards, level1_data(runcard, problem))
    return model, specs, params


def checked_member_runcards(
    runcard: FitRuncard, member_runcards: Sequence[FitRuncard] | None, specs: Sequence[MemberSpec]
) -> list[FitRuncard] | None:
    """`member_runcards` as a list (None: the runcard's `methodologies`, replica by replica;
    None without them), after checking there is one per member and that each shares
    SHARED_KEYS with `runcard` (ValueError naming the member and the key)."""
    if member_runcards is None and runcard.methodologies:
        member_runcards = [runcard.member_runcard(spec.replica) for spec in specs]
    if member_runcards is None:
        return None
    cards = list(member_runcards)
    n_members = len(specs)
    if len(cards) != n_members:
        raise ValueError(f"expected one member runcard per member ({n_members}), got {len(cards)}")
    for index, card in enumerate(cards):
        for key in SHARED_KEYS:
            if getattr(card, key) != getattr(runcard, key):
                raise ValueError(
                    f"member {index}: its runcard's '{key}' differs from the fit's; "
                    f"'{key}' must be the same for every member of one fit"
                )
    return cards


def _ensemble(
    runcard: FitRuncard,
    problem: Problem,
    specs: Sequence[MemberSpec],
    cards: Sequence[FitRuncard] | None,
    level1: np.ndarray,
) -> tuple[EnsembleModel, list[np.ndarray]]:
    inputs, params = build_members(runcard, problem, specs, cards, level1)
    dtype = tf.float64 if runcard.training.precision == "float64" else tf.float32
    shapes = None if cards is None else member_shapes(cards)
    # Members of one architecture, whether the base runcard's or not, need no padding.
    activations = (runcard if cards is None else cards[0]).architecture.activations
    return EnsembleModel(problem, inputs, activations, dtype=dtype, shapes=shapes), params


def run_fit(
    runcard: FitRuncard,
    *,
    problem: Problem | None = None,
    on_sync: Callable[[SyncReport], bool | None] | None = None,
    settings: TrainerSettings | None = None,
    initial_params: Sequence[np.ndarray] | None = None,
    member_runcards: Sequence[FitRuncard] | None = None,
) -> FitResult:
    """Fit the runcard's ensemble (its folds × replicas) in one model.

    `member_runcards` (one per member, in member order; by default those of the runcard's
    `methodologies`) give each member its own methodology.
    Members of different architectures share one padded model while its padding waste is
    within ``training.max_padding_waste``; past it they are split into shape classes
    (model/_shapes.py), each fitted as its own batched model, one after the other, and the
    result merges them back in member order (`on_sync` then sees each class's reports, for
    its members only, and its weights are padded to the widths of all members).
    `settings` and `initial_params` override what the runcard implies; tests use them to
    inject a diverging member. The members are fitted alone: a ``training.batch_layout`` is
    not looked at (`fit_runcard` refits in it).
    """
    started = time.perf_counter()
    problem = problem if problem is not None else load_problem(runcard)
    specs = member_specs(runcard.replica_ids, runcard.folds, runcard.data.level1_fits)
    cards = checked_member_runcards(runcard, member_runcards, specs)
    level1 = level1_data(runcard, problem)  # once: each extra level-1 fit loads the data
    classes = [np.arange(len(specs))]
    if cards is not None:
        shapes = [architecture_shape(card) for card in cards]
        classes = shape_classes(shapes, runcard.training.max_padding_waste)
    if len(classes) == 1:
        return _fit(
            runcard, problem, level1, specs, cards, on_sync, settings, initial_params, started
        )
    if initial_params is not None:
        raise ValueError("initial_params are for one model: not with several shape classes")
    parts = [
        _fit(
            runcard,
            problem,
            level1,
            [specs[m] for m in members],
            [cards[m] for m in members],
            on_sync,
            None if settings is None else take_members(settings, members),
            None,
            time.perf_counter(),
        )
        for members in classes
    ]
    return _merged(parts, classes, cards, started)


def _fit(
    runcard: FitRuncard,
    problem: Problem,
    level1: np.ndarray,
    specs: Sequence[MemberSpec],
    cards: Sequence[FitRuncard] | None,
    on_sync: Callable[[SyncReport], bool | None] | None,
    settings: TrainerSettings | None,
    initial_params: Sequence[np.ndarray] | None,
    started: float,
) -> FitResult:
    """The fit of `specs` in one model; `level1` is the runcard's `level1_data`."""
    model, params = _ensemble(runcard, problem, specs, cards, level1)
    settings = settings or trainer_settings(runcard, len(specs) if cards is None else cards)
    if initial_params is not None:
        params, redraws = list(initial_params), np.zeros(len(specs), dtype=np.int64)
    else:
        params, redraws = usable_starts(runcard, model, specs, params, settings, cards)
    training_started = time.perf_counter()
    outcome = Trainer(model, settings, params).run(on_sync)
    training_seconds = time.perf_counter() - training_started
    return fit_result(model, problem, level1, specs, outcome, redraws, started, training_seconds)


def fit_result(
    model: EnsembleModel,
    problem: Problem,
    level1: np.ndarray,
    specs: Sequence[MemberSpec],
    outcome: TrainingOutcome,
    redraws: np.ndarray,
    started: float,
    training_seconds: float,
) -> FitResult:
    """The FitResult of `specs`, fitted in `model`, from the training's outcome: their
    χ², predictions and PDFs at their best weights."""
    dtype = model.dtype
    final = [tf.constant(p, dtype) for p in outcome.params]
    observables = model.observables(final)
    points = model.points_per_category
    chi2 = observables.chi2.numpy() / np.maximum(points, 1)
    status = member_status(outcome.status, outcome.best_step, outcome.interrupted)
    predictions = model.predictions(final).numpy()
    centrals = level1[[s.level1 for s in specs]]
    experimental, per_dataset = experimental_chi2(problem, predictions, centrals)
    pdf_x = output_xgrid()
    return FitResult(
        replicas=np.array([s.replica for s in specs]),
        folds=np.array([s.fold for s in specs]),
        level1=np.array([s.level1 for s in specs]),
        status=status,
        best_epoch=outcome.best_step,
        stop_epoch=outcome.stop_step,
        divergence=[DIVERGENCE_REASONS.get(int(code), "") for code in outcome.divergence],
        chi2_per_point={
            **{
                name: np.where(points[:, c] > 0, chi2[:, c], np.nan)
                for c, name in CATEGORY_NAMES.items()
            },
            "experimental": experimental,
        },
        dataset_names=[d.name for d in problem.datasets],
        dataset_chi2_per_point=per_dataset,
        predictions=predictions,
        steps=outcome.steps,
        seconds=time.perf_counter() - started,
        training_seconds=training_seconds,
        interrupted=outcome.interrupted,
        pdf_x=pdf_x,
        pdf=model.pdf(final, pdf_x),
        grid_x=model.xgrid,
        grid_pdf=model.pdf(final, model.xgrid),
        params=outcome.params,
        history=outcome.history,
        redraws=redraws,
        small_x_pdf=model.pdf(final, SMALL_X),
        export_pdf=model.pdf(final, export_xgrid()),
        arc_lengths=arc_lengths(model.pdf(final, arc_length_xgrid())),
    )


def _merged(
    parts: Sequence[FitResult],
    classes: Sequence[np.ndarray],
    cards: Sequence[FitRuncard],
    started: float,
) -> FitResult:
    """One result from the shape classes' results, every per-member output in member order,
    the weights padded to the widths of all members."""
    order = np.argsort(np.concatenate(classes), kind="stable")

    def stacked(arrays: Sequence[np.ndarray]) -> np.ndarray:
        return np.concatenate(arrays)[order]

    def listed(lists: Sequence[list[str]]) -> list[str]:
        flat = [item for items in lists for item in items]
        return [flat[i] for i in order]

    widths = padded_widths([architecture_shape(card) for card in cards])
    weights = []
    for part, members in zip(parts, classes, strict=True):
        own = padded_widths([architecture_shape(cards[m]) for m in members])
        for row, member in enumerate(members):
            nodes = cards[member].architecture.nodes
            weights.append(embed(unembed([p[row] for p in part.params], nodes, own), nodes, widths))
    weights = [weights[i] for i in order]
    first = parts[0]
    return FitResult(
        replicas=stacked([p.replicas for p in parts]),
        folds=stacked([p.folds for p in parts]),
        level1=stacked([p.level1 for p in parts]),
        status=listed([p.status for p in parts]),
        best_epoch=stacked([p.best_epoch for p in parts]),
        stop_epoch=stacked([p.stop_epoch for p in parts]),
        divergence=listed([p.divergence for p in parts]),
        chi2_per_point={
            name: stacked([p.chi2_per_point[name] for p in parts]) for name in first.chi2_per_point
        },
        dataset_names=first.dataset_names,
        dataset_chi2_per_point=stacked([p.dataset_chi2_per_point for p in parts]),
        predictions=stacked([p.predictions for p in parts]),
        steps=max(p.steps for p in parts),
        seconds=time.perf_counter() - started,
        training_seconds=sum(p.training_seconds for p in parts),
        interrupted=any(p.interrupted for p in parts),
        pdf_x=first.pdf_x,
        pdf=stacked([p.pdf for p in parts]),
        grid_x=first.grid_x,
        grid_pdf=stacked([p.grid_pdf for p in parts]),
        params=[np.stack(layer) for layer in zip(*weights, strict=True)],
        history=[report for p in parts for report in p.history],
        redraws=stacked([p.redraws for p in parts]),
        small_x_pdf=stacked([p.small_x_pdf for p in parts]),
        export_pdf=stacked([p.export_pdf for p in parts]),
        arc_lengths=stacked([p.arc_lengths for p in parts]),
    )


def member_status(training: np.ndarray, best_step: np.ndarray, interrupted: bool) -> list[str]:
    """Each member's status from its training state and best step. A member still training
    without a best step when the fit was interrupted is `interrupted`, not `pos-veto`: it was
    cut short, not found wanting (a member with a best step is ok, whenever it stopped); one
    whose own epochs ran out (FINISHED) was not cut short."""

    def status(state: int, best: int) -> str:
        if state == DIVERGED:
            return DIVERGED_STATUS
        if best >= 0:  # passed positivity and the χ² threshold once
            return OK
        return INTERRUPTED if interrupted and state == RUNNING else POSITIVITY_VETO

    return [status(s, b) for s, b in zip(training, best_step, strict=True)]


def usable_starts(
    runcard: FitRuncard,
    model: EnsembleModel,
    specs: Sequence[MemberSpec],
    params: Sequence[np.ndarray],
    settings: TrainerSettings,
    member_runcards: Sequence[FitRuncard] | None = None,
) -> tuple[list[np.ndarray], np.ndarray]:
    """Initial weights with every member's starting loss finite and below ``max_loss``, as
    far as MAX_REDRAWS new starts get there.

    About one random start in a hundred puts a PDF so far from the data that the loss at step
    0 already exceeds ``divergence.max_loss``: that member would count as diverged before
    training and trash a scan trial for an unlucky draw, not for its hyperparameters. Such a
    member is given a new start from its own seeded stream (``redrawn_weights``), up to
    MAX_REDRAWS times; members are judged one by one, so a member gets the same start alone
    or batched. A member whose last redraw is still past the limit keeps it, and diverges at
    its first step. Returns the weights and how many redraws each member took. With
    `member_runcards`, each member redraws from its own runcard, padded to the model's widths.
    """
    params = [np.array(p) for p in params]
    redraws = np.zeros(len(specs), dtype=np.int64)
    for attempt in range(1, MAX_REDRAWS + 1):
        bad = np.flatnonzero(~_start_ok(model, params, settings))
        if bad.size == 0:
            break
        for member in bad:
            card = runcard if member_runcards is None else member_runcards[member]
            redrawn = redrawn_weights(card, specs[member], attempt, model.shapes)
            for layer, weights in enumerate(redrawn):
                params[layer][member] = weights
        redraws[bad] = attempt
    return params, redraws


def _start_ok(
    model: EnsembleModel, params: Sequence[np.ndarray], settings: TrainerSettings
) -> np.ndarray:
    weights = [tf.constant(p, model.dtype) for p in params]
    loss = model.observables(weights, settings.lambda_initial).loss.numpy()
    return np.isfinite(loss) & (loss <= settings.max_loss)
