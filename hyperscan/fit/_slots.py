"""Continuous trial batching: P trials of one scan in one compiled model.

A trial of a scan is small (NNPDF's k-fold trial: a few replicas × 4 folds), and building its
own model costs more than fitting it (of a 2.9 s trial of the peer card, ~2.5 s is tracing and
compiling). A `TrialBatch` holds P *slots* of one model's rows, one trial's members each, and,
like an inference server batching requests, refills a slot at a sync as soon as its trial
ends, without tracing or compiling anew: what differs between trials (weights, optimiser
state, settings, activations, skipped layers, pseudodata, preprocessing) lives in variables
the compiled loop reads. Every trial of a scan has the same members (replicas, folds, level-1
fits) with the same splits, so a slot's χ² plan never changes. Architectures are padded to the
widest seen so far (model/_shapes.py); a trial that needs wider rows, another activation or
optimiser rebuilds the model once, carrying the trials in flight over unchanged.

A trial's members never couple with another trial's, so each trial's result is what
`run_fit` of its runcard gives, up to the rounding of the padded products; refitted in the
batch layout it records (`refit_in_batch`), it is the same bit for bit
(tests/fit/test_trial_batch.py).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import tensorflow as tf

from hyperscan.data import Problem, level1_data
from hyperscan.fit._fit import (
    FitResult,
    checked_member_runcards,
    fit_result,
    run_fit,
    trainer_settings,
    usable_starts,
)
from hyperscan.fit._loop import SyncReport, TrainerSettings
from hyperscan.fit._members import architecture_shape, build_members, member_specs
from hyperscan.fit._rows import MemberRows, RefillableModel
from hyperscan.model import (
    EnsembleModel,
    MemberInputs,
    MemberShapes,
    Shape,
    embed,
    layer_cost,
    padded_widths,
    unembed,
    zero_weights,
)
from hyperscan.runcard import BatchLayout, FitRuncard

#: Rows (members of all slots) that `auto_slots` aims at: where, on a CPU, a step's cost per
#: member stops falling (benchmarks/slots.py); a GPU takes far more before its step slows.
AUTO_ROWS = {"CPU": 64, "GPU": 4096}
#: The share of the device's memory that `auto_slots` lets the batch's state take.
AUTO_MEMORY_SHARE = 0.25


class MustFitAlone(ValueError):
    """A trial whose runcard changes what the batch's members share (a searched
    ``data.training_fraction``, ``training.precision``, ...): it is fitted on its own."""


@dataclass
class _Slot:
    """A trial in the batch: its own model (for its starts and results) and its rows."""

    key: Hashable
    card: FitRuncard
    model: EnsembleModel
    inputs: MemberInputs
    redraws: np.ndarray
    on_sync: Callable[[SyncReport], bool | None] | None
    rows: np.ndarray
    start: int  # the batch's step at which the trial started
    started: float
    builds: int = 0  # the batch's builds when the trial started: more at its end, rebuilt
    history: list[SyncReport] = field(default_factory=list)

    @property
    def shape(self) -> Shape:
        return architecture_shape(self.card)


class TrialBatch:
    """P slots of one scan's trials, fitted in one compiled model; a slot freed at a sync is
    refilled with another trial without recompiling.

    `runcard` is the fit runcard every trial of the scan starts from (`ScanRuncard.trial_base`):
    every trial's runcard shares its data, training, divergence, folds and replicas (what one
    model shares). `reserve`: trial runcards whose architectures and optimisers the model
    makes room for from the start (`Space.widest`), so that no later trial needs it rebuilt.
    `layout`: the batch to build instead, exactly (:func:`refit_in_batch`).

    A member's rounding depends on the batch's layout (its rows, padded widths, activations
    and optimisers), not on what the other rows hold: each result carries the layout it was
    fitted in, and a batch of that layout with the other slots empty repeats it bit for bit.
    """

    def __init__(
        self,
        runcard: FitRuncard,
        problem: Problem,
        slots: int,
        reserve: Sequence[FitRuncard] = (),
        layout: BatchLayout | None = None,
    ) -> None:
        self._runcard = runcard
        self._problem = problem
        self._specs = member_specs(runcard.replica_ids, runcard.folds, runcard.data.level1_fits)
        self._level1 = level1_data(runcard, problem)
        self._dtype = tf.float64 if runcard.training.precision == "float64" else tf.float32
        self._slots: list[_Slot | None] = [None] * slots
        self._model: RefillableModel | None = None
        self._trainer: MemberRows | None = None
        self._kinds: tuple[str, ...] = ()
        # The first trial's own model: every later trial's shares its constants and χ² plan.
        self._template: EnsembleModel | None = None
        self._reserve = [architecture_shape(card) for card in reserve]
        self._reserved_kinds = {card.optimizer.name for card in reserve}
        self._layout = layout
        if layout is not None:
            self._reserved_kinds |= set(layout.optimizers)
        #: How many times the model was built (and its loop traced and compiled): once,
        #: unless a trial needed wider rows, another activation or another optimiser.
        self.builds = 0

    @property
    def free_slots(self) -> int:
        return sum(slot is None for slot in self._slots)

    @property
    def in_flight(self) -> list[Hashable]:
        """The keys of the trials in the batch, by slot."""
        return [slot.key for slot in self._slots if slot is not None]

    def place(
        self,
        key: Hashable,
        card: FitRuncard,
        on_sync: Callable[[SyncReport], bool | None] | None = None,
        at: int | None = None,
    ) -> None:
        """Put trial `key`, of fit runcard `card`, in a free slot (slot `at`, if given); it
        starts at the next `advance`. `on_sync` sees the trial's own sync reports, as
        `run_fit`'s would. MustFitAlone when `card` cannot share the batch; ValueError when
        no slot is free."""
        free = [index for index, slot in enumerate(self._slots) if slot is None]
        if at is not None:
            free = [at] if at in free else []
        if not free:
            raise ValueError("no free slot in the trial batch")
        if key in self.in_flight:
            raise ValueError(f"trial {key!r} is in the batch already")
        specs = self._specs
        try:
            checked_member_runcards(self._runcard, [card] * len(specs), specs)
        except ValueError as error:
            raise MustFitAlone(str(error)) from None
        started = time.perf_counter()
        inputs, params = build_members(card, self._problem, specs, None, self._level1)
        activations = card.architecture.activations
        if self._template is None:
            self._template = EnsembleModel(self._problem, inputs, activations, dtype=self._dtype)
        model = self._template.with_inputs(inputs, activations)
        settings = trainer_settings(card, len(specs))
        params, redraws = usable_starts(card, model, specs, params, settings)
        index = free[0]
        rows = index * len(specs) + np.arange(len(specs))
        slot = _Slot(key, card, model, inputs, redraws, on_sync, rows, 0, started)
        if not self._holds(slot):
            self._build(slot)
        slot.builds = self.builds
        self._slots[index] = slot
        self._restart(slot, params, settings)

    def advance(self) -> list[tuple[Hashable, FitResult]]:
        """One device call of `training.steps_per_call` steps; each trial's `on_sync` sees
        its report. Returns the trials that ended, with their results, their slots freed: a
        trial ends when none of its members runs or its epochs are out, or when its
        `on_sync` returned True (its running members are then `interrupted`, as in
        `run_fit`)."""
        if self._trainer is None:
            return []
        report = self._trainer.advance(self._runcard.training.steps_per_call)
        ended = []
        for index, slot in enumerate(self._slots):
            if slot is None:
                continue
            own = SyncReport(
                step=report.step - slot.start,
                chi2=report.chi2[slot.rows],
                chi2_per_point=report.chi2_per_point[slot.rows],
                status=report.status[slot.rows],
                batch=report.batch,
            )
            slot.history.append(own)
            finished = own.n_running == 0 or own.step >= slot.card.epochs
            if slot.on_sync is not None and slot.on_sync(own):
                ended.append((slot.key, self._end(index, interrupted=not finished)))
            elif finished:
                ended.append((slot.key, self._end(index, interrupted=False)))
        return ended

    def drop(self, key: Hashable) -> None:
        """Take trial `key` out of the batch without a result."""
        for index, slot in enumerate(self._slots):
            if slot is not None and slot.key == key:
                self._trainer.retire(slot.rows)
                self._slots[index] = None
                return
        raise KeyError(f"trial {key!r} is not in the batch")

    def _end(self, index: int, interrupted: bool) -> FitResult:
        slot = self._slots[index]
        outcome = self._trainer.outcome(slot.rows, interrupted, slot.history)
        self._trainer.retire(slot.rows)
        self._slots[index] = None
        nodes, widths = slot.card.architecture.nodes, self._model.shapes.widths
        own = [
            unembed([p[m] for p in outcome.params], nodes, widths) for m in range(len(slot.rows))
        ]
        outcome.params = [np.stack(layer) for layer in zip(*own, strict=True)]
        seconds = time.perf_counter() - slot.started
        result = fit_result(
            slot.model,
            self._problem,
            self._level1,
            self._specs,
            outcome,
            slot.redraws,
            slot.started,
            seconds,
        )
        if self.builds == slot.builds:
            shapes = self._model.shapes
            result.batch_layout = BatchLayout(
                slots=len(self._slots),
                slot=index,
                widths=tuple(int(width) for width in shapes.widths),
                activations=shapes.names,
                optimizers=self._kinds,
            )
        return result

    def _holds(self, slot: _Slot) -> bool:
        """Whether the model's rows can take `slot`'s trial as they are."""
        if self._model is None:
            return False
        shapes = self._model.shapes
        return (
            padded_widths([slot.shape, _widest(shapes.widths)]) == shapes.widths
            and set(slot.shape.activations) <= set(shapes.names)
            and slot.card.optimizer.name in self._kinds
        )

    def _build(self, new: _Slot) -> None:
        """A model and loop for the slots in flight and `new`, wide enough for all of them
        and for the rows before; the trials in flight carry their state over."""
        slots = [slot for slot in self._slots if slot is not None] + [new]
        shapes = [slot.shape for slot in slots] + self._reserve
        if self._model is not None:
            shapes.append(_widest(self._model.shapes.widths))
            names = set(self._model.shapes.names)
        else:
            names = set()
        widths = padded_widths(shapes)
        names = tuple(sorted(names | {a for s in shapes for a in s.activations}))
        if self._layout is not None:  # the batch a trial was fitted in
            widths, names = self._layout.widths, self._layout.activations
        kinds = {s.card.optimizer.name for s in slots} | self._reserved_kinds
        self._kinds = tuple(sorted(set(self._kinds) | kinds))
        by_row = {}  # row → (slot, member)
        for slot in slots:
            for member, row in enumerate(slot.rows):
                by_row[int(row)] = (slot, member)
        n_rows = len(self._slots) * len(self._specs)
        # Free rows hold a copy of the new trial's members until a trial takes them.
        rows = [by_row.get(row, (new, row % len(self._specs))) for row in range(n_rows)]
        inputs = MemberInputs(
            *(
                np.stack([getattr(slot.inputs, name)[member] for slot, member in rows])
                for name in ("data", "categories", "alpha", "beta")
            )
        )
        row_shapes = [slot.shape for slot, _ in rows]
        model = RefillableModel(
            self._problem,
            inputs,
            names[:1] * len(widths),
            self._dtype,
            MemberShapes.of(row_shapes, widths, names),
        )
        cards = [slot.card for slot, _ in rows]
        settings = trainer_settings(self._runcard, cards)
        zeros = [np.zeros((n_rows, *w.shape)) for w in zero_weights(widths)]
        trainer = MemberRows(model, settings, zeros, kinds=self._kinds)
        carried = np.array([row for slot in slots if slot is not new for row in slot.rows], int)
        if self._trainer is not None:
            trainer.carry_over(self._trainer, carried)
        # The other rows start as trials take them (`_restart`).
        trainer.retire(np.setdiff1d(np.arange(n_rows), carried))
        self._model, self._trainer = model, trainer
        self.builds += 1

    def _restart(self, slot: _Slot, params: list[np.ndarray], settings: TrainerSettings) -> None:
        """Start `slot`'s members in its rows at the batch's current step."""
        widths, names = self._model.shapes.widths, self._model.shapes.names
        shapes = MemberShapes.of([slot.shape] * len(slot.rows), widths, names)
        self._model.assign_members(slot.rows, slot.inputs, shapes)
        nodes = slot.card.architecture.nodes
        padded = [embed([p[m] for p in params], nodes, widths) for m in range(len(slot.rows))]
        stacked = [np.stack(layer) for layer in zip(*padded, strict=True)]
        self._trainer.restart(slot.rows, stacked, settings, shapes.gradient_mask)
        slot.start = int(self._trainer.variables["step"].numpy())


def refit_in_batch(
    runcard: FitRuncard,
    problem: Problem,
    on_sync: Callable[[SyncReport], bool | None] | None = None,
) -> FitResult:
    """Fit a trial's runcard in the batch of its ``training.batch_layout``, in its slot, the
    other slots empty: the members' arithmetic is the scan's, and so is the result, bit for
    bit (same machine, versions and thread count)."""
    layout = runcard.training.batch_layout
    if layout is None:
        raise ValueError("the runcard has no training.batch_layout to refit in")
    batch = TrialBatch(runcard, problem, layout.slots, layout=layout)
    batch.place(0, runcard, on_sync=on_sync, at=layout.slot)
    while True:
        for _, result in batch.advance():
            return result


def fit_together(
    cards: Mapping[Hashable, FitRuncard],
    problem: Problem,
    slots: int | None = None,
    reserve: Sequence[FitRuncard] = (),
) -> Iterator[tuple[Hashable, FitResult]]:
    """Fit runcards of one scan's trials at once, in one batch of ``slots`` (default: one per
    runcard) with room made for them and for ``reserve`` (as `TrialBatch`), each result as its
    fit ends; a runcard that cannot share the batch (:class:`MustFitAlone`) is fitted alone
    first."""
    if not cards:
        return
    runcards = list(cards.values())
    batch = TrialBatch(runcards[0], problem, slots or len(cards), [*runcards, *reserve])
    for key, card in cards.items():
        try:
            batch.place(key, card)
        except MustFitAlone:
            yield key, run_fit(card, problem=problem)
    while batch.in_flight:
        yield from batch.advance()


def _widest(widths: Sequence[int]) -> Shape:
    """A shape as wide as `widths`, standing for the rows a model already has."""
    return Shape(tuple(widths), ("linear",) * len(widths))


def auto_slots(runcard: FitRuncard, problem: Problem) -> int:
    """`--slots auto`: as many slots as keep the batch near AUTO_ROWS members for the device
    (where a step's cost per member stops falling), within `max_slots`."""
    rows = AUTO_ROWS["GPU" if _on_gpu() else "CPU"]
    return max(1, min(rows // _trial_members(runcard), max_slots(runcard, problem)))


def max_slots(runcard: FitRuncard, problem: Problem) -> int:
    """The most slots whose state stays within AUTO_MEMORY_SHARE of the device's memory (0:
    not even one trial)."""
    per_trial = _trial_members(runcard) * _member_bytes(runcard, problem)
    return int(AUTO_MEMORY_SHARE * _device_memory(_on_gpu()) // per_trial)


def _on_gpu() -> bool:
    return bool(tf.config.list_logical_devices("GPU"))


def _trial_members(runcard: FitRuncard) -> int:
    return len(member_specs(runcard.replica_ids, runcard.folds, runcard.data.level1_fits))


def _device_memory(gpu: bool) -> float:
    """The device's memory in bytes: the first GPU's as nvidia-smi reports it (16 GiB if it
    cannot be read), or the host's."""
    if gpu:
        try:
            query = ["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"]
            out = subprocess.run(query, capture_output=True, text=True, check=True, timeout=10)
            return float(out.stdout.split()[0]) * 2**20
        except (OSError, subprocess.SubprocessError, ValueError, IndexError):
            return 16.0 * 2**30
    return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def _member_bytes(runcard: FitRuncard, problem: Problem) -> float:
    """A rough bound on one member's bytes in the loop: its data and χ² factors (a dense
    N² at most), and ~8 copies of its weights (state, moments, best weights, gradients)."""
    itemsize = 8 if runcard.training.precision == "float64" else 4
    nodes = runcard.architecture.nodes
    return itemsize * (problem.n_data**2 + 8 * (layer_cost(nodes) + sum(nodes) + 8))
