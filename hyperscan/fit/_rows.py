"""Each member's row of the training state, in the model's order: rows that leave the batch
(compaction), start afresh or freeze mid-fit (a trial batch's slots), carry over into a wider
batch, and are read out as the members' outcome; and the model whose rows new members take."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import tensorflow as tf

from hyperscan.data import Problem
from hyperscan.fit._format import FINISHED, RUNNING
from hyperscan.fit._loop import SyncReport, TrainerSettings, TrainingLoop, stored
from hyperscan.model import EnsembleModel, MemberInputs, MemberShapes


@dataclass
class TrainingOutcome:
    params: list[np.ndarray]  # best weights restored, (M, ...) each
    status: np.ndarray  # (M,)
    best_step: np.ndarray  # (M,) -1 where no step passed positivity and the χ² threshold
    stop_step: np.ndarray  # (M,) step at which the member stopped or diverged, -1 if it ran out
    divergence: np.ndarray  # (M,) key of DIVERGENCE_REASONS, 0 when the member did not diverge
    steps: int  # steps run in total
    interrupted: bool  # a sync callback asked to stop
    history: list[SyncReport] = field(default_factory=list)


class MemberRows(TrainingLoop):
    """The training loop's state as rows of the model's members: everything it reports and
    returns is for all of them, in the model's order, whichever are in the batch.

    Members leave the batch: a stopped member still costs its row of every step,
    so at a sync where enough members have stopped, `compact` moves the running ones into a
    batch of the next power of two (topped up with stopped ones) and traces its loop anew; the
    sizes recur from fit to fit, so XLA's cache has their loops. A trial batch (fit/_slots.py)
    instead keeps its rows and hands them from trial to trial (`retire`, `restart`).
    """

    # The final state of the members that left the batch, (M, ...) numpy in the model's
    # order (the rows of the batch's members are stale); None while all are in the batch.
    _left: dict | None = None

    def parameters(self) -> list[np.ndarray]:
        """The current parameters (not the best ones) of all members, (M, ...) each."""
        return [p.numpy() for p in self._split(tf.constant(self._all_members()["params"]))]

    def _all_members(self) -> dict:
        """The current state of all members, in the model's order, as numpy."""
        batch = tf.nest.map_structure(lambda value: value.numpy(), self.state)
        if self._left is None:
            return batch
        return tf.nest.map_structure(self._in_model_order, self._left, batch)

    def _in_model_order(self, left: np.ndarray, batch: np.ndarray) -> np.ndarray:
        """The batch's rows of a state entry put back among those of the members that left."""
        if batch.ndim == 0:  # the step counter, shared
            return batch
        merged = left.copy()
        merged[self._members] = batch
        return merged

    def advance(self, n_steps: int) -> SyncReport:
        """Run up to `n_steps` steps in one device call (fewer if every member stops); the
        report is of all members, those that left the batch as they left it."""
        report = super().advance(n_steps)
        if self._left is None:
            return report
        chi2 = self._in_model_order(self._left["chi2"], report.chi2)
        status = self._in_model_order(self._left["status"], report.status)
        points = self.model.points_per_category
        return SyncReport.of(report.step, chi2, status, points, report.batch)

    def compact(self) -> bool:
        """Move the running members into the smallest power-of-two batch that holds them,
        topped up with stopped or diverged ones; False if that batch is no smaller.

        Frozen members keep their state whichever batch they are in, and a member's
        computation never involves another's, so the fit's results do not change, up to the
        rounding of the batch's products (tested: tests/fit/test_compaction.py).
        """
        state = tf.nest.map_structure(lambda value: value.numpy(), self.state)
        running = state["status"] == RUNNING
        size = batch_size(int(running.sum()))
        if not running.any() or size >= len(self._members):
            return False
        top_up = np.flatnonzero(~running)[: size - int(running.sum())]
        keep = np.sort(np.concatenate([np.flatnonzero(running), top_up]))
        self._left = self._all_members()
        kept = tf.nest.map_structure(lambda value: value if value.ndim == 0 else value[keep], state)
        self._load(self._members[keep], kept)
        return True

    def _compaction_pays(self, report: SyncReport) -> bool:
        """Whether the member-steps a compaction saves pay for tracing the smaller loop."""
        cfg = self.settings
        batch = len(self._members)
        if not cfg.compact or report.n_running == 0:
            return False
        dropped = batch - batch_size(report.n_running)
        # The smaller batch runs until its running members' epochs run out.
        left = int(cfg.epochs[report.status == RUNNING].max()) - report.step
        return left * dropped >= cfg.compaction_cost * batch

    def outcome(
        self, members: np.ndarray, interrupted: bool, history: list[SyncReport]
    ) -> TrainingOutcome:
        """The outcome of `members` (indices into the model's) as it stands: each member's
        best weights restored, its steps counted from its start."""
        state = self._all_members()
        best_step = state["best_step"][members]
        restore = best_step >= 0
        best = np.where(restore[:, None], state["best_params"][members], state["params"][members])
        return TrainingOutcome(
            params=[p.numpy() for p in self._split(tf.constant(best))],
            status=state["status"][members],
            best_step=best_step,
            stop_step=state["stop_step"][members],
            divergence=state["divergence"][members],
            steps=_steps_run(state, members, self.settings.epochs[members]),
            interrupted=interrupted,
            history=history,
        )

    def restart(
        self,
        members: np.ndarray,
        params: Sequence[np.ndarray],
        settings: TrainerSettings,
        gradient_mask: np.ndarray | None = None,
    ) -> None:
        """Start `members` (indices into the model's) afresh at the current step, with new
        weights, settings and, in a padded model, gradient mask, as if each were a new member
        fitted alone from here: a trial batch refills a freed slot this way (fit/_slots.py).
        The loop is not traced again: only the variables it reads change. Not after `compact`.
        """
        if self._left is not None:
            raise ValueError("members cannot restart in a compacted batch")
        if set(settings.optimizer.tolist()) - set(self._optimizers):
            raise ValueError("a restarted member's optimiser kind must be one the loop has")
        fresh = self._fresh(params, settings.lambda_initial, int(self._variables["step"].numpy()))
        rows = tf.constant(members[:, None], tf.int64)
        for name, value in fresh.items():
            tf.nest.map_structure(
                lambda variable, value: variable.scatter_nd_update(
                    rows, tf.cast(value, variable.dtype)
                ),
                self._variables[name],
                value,
            )
        for name, value, setting_dtype in self._setting_values(settings):
            update = stored(tf.constant(value, setting_dtype))
            self._settings[name].scatter_nd_update(rows, update)
        if gradient_mask is not None:
            self._gradient_mask.scatter_nd_update(rows, stored(tf.constant(gradient_mask)))
        arrays = {}
        for name in TrainerSettings.member_axis.arrays:
            merged = getattr(self.settings, name).copy()
            merged[members] = getattr(settings, name)
            arrays[name] = merged
        self.settings = self._batch_settings = dataclasses.replace(self.settings, **arrays)

    def retire(self, members: np.ndarray) -> None:
        """Freeze `members` where they are (FINISHED if still running): a trial batch frees a
        pruned trial's slot this way, its outcome taken first."""
        status = self._variables["status"]
        current = status.numpy()[members]
        finished = np.where(current == RUNNING, FINISHED, current)
        status.scatter_nd_update(tf.constant(members[:, None], tf.int64), finished)

    def full_state(self) -> dict:
        """The state of all members, in the model's order, as numpy; the optimiser's by kind."""
        state = self._all_members()
        if len(self._optimizers) == 1:
            state["optimizer"] = {self.kinds[0]: state["optimizer"]}
        return state

    def load_state(self, state: dict) -> None:
        """Set the state of all members from a nest shaped as `full_state` gives it; not
        after `compact`."""
        if self._left is not None:
            raise ValueError("the state of a compacted batch cannot be set")
        state = dict(state)
        if len(self._optimizers) == 1:
            state["optimizer"] = state["optimizer"][self.kinds[0]]
        tf.nest.map_structure(
            lambda variable, value: variable.assign(
                tf.cast(stored(tf.constant(value)), variable.dtype)
            ),
            self._variables,
            state,
        )

    def carry_over(self, old: MemberRows, rows: np.ndarray) -> None:
        """Take the state of `rows` from `old`, a model at most as wide with at most this
        one's optimiser kinds: each member's own weights, and their optimiser moments, move to
        their places in this flat layout (its padding stays zero); the rest row for row. A
        trial batch whose model is rebuilt carries its trials in flight over so."""
        before, after = old.full_state(), self.full_state()
        old_mask = old.model.shapes.gradient_mask
        new_mask = self.model.shapes.gradient_mask

        def moved(value: np.ndarray, into: np.ndarray) -> np.ndarray:
            if value.ndim == 0:  # the batch's step
                return value
            into = into.copy()
            if value.ndim == 2 and value.shape[1] == old_mask.shape[1]:  # the flat weights
                for row in rows:
                    into[row, new_mask[row]] = value[row, old_mask[row]]
            else:
                into[rows] = value[rows]
            return into

        optimizer = after.pop("optimizer")
        for kind in before["optimizer"]:
            optimizer[kind] = tf.nest.map_structure(
                moved, before["optimizer"][kind], optimizer[kind]
            )
        before.pop("optimizer")
        state = tf.nest.map_structure(moved, before, after)
        self.load_state(state | {"optimizer": optimizer})


class RefillableModel(EnsembleModel):
    """A padded model whose rows new members can take without the training loop being traced
    again: what differs between members of one split (pseudodata, preprocessing, activations
    and skipped layers) is held in variables, which `assign_members` writes. A trial batch
    refills its slots so (fit/_slots.py). A subclass, as it holds the model's own per-member
    tensors, which only the model computes (`_constant`, `_member_preprocessing`)."""

    def __init__(
        self,
        problem: Problem,
        members: MemberInputs,
        activations: Sequence[str],
        dtype: tf.DType,
        shapes: MemberShapes,
    ) -> None:
        super().__init__(problem, members, activations, dtype=dtype, shapes=shapes)
        self._data = tf.Variable(self._data, trainable=False)
        self._preprocessing = tf.Variable(self._preprocessing, trainable=False)
        self.shapes = dataclasses.replace(
            self.shapes,
            activation=tf.Variable(self.shapes.activation, dtype=tf.int64, trainable=False),
            skip=tf.Variable(self.shapes.skip, dtype=tf.int64, trainable=False),
        )

    def assign_members(self, rows: np.ndarray, members: MemberInputs, shapes: MemberShapes) -> None:
        """Give `rows` to new members, whose χ² split must be the rows' own (the χ² plan is
        fixed); `shapes` in this model's widths and activation names."""
        if not np.array_equal(self._categories[rows], members.categories):
            raise ValueError("new members must have the training/validation split of the rows")
        if (shapes.widths, shapes.names) != (self.shapes.widths, self.shapes.names):
            raise ValueError("new members must be padded to the model's widths and activations")
        indices = tf.constant(rows[:, None], tf.int64)
        self._data.scatter_nd_update(indices, self._constant(members.data))
        self._preprocessing.scatter_nd_update(indices, self._member_preprocessing(members))
        self.shapes.activation.scatter_nd_update(indices, shapes.activation)
        self.shapes.skip.scatter_nd_update(indices, shapes.skip.astype(np.int64))
        mask = self.shapes.gradient_mask.copy()
        mask[rows] = shapes.gradient_mask
        self.alpha, self.beta = self.alpha.copy(), self.beta.copy()
        self.alpha[rows], self.beta[rows] = members.alpha, members.beta
        self.shapes = dataclasses.replace(self.shapes, gradient_mask=mask)


def _steps_run(state: dict, members: np.ndarray, epochs: np.ndarray) -> int:
    """The steps `members` ran, until the last of them left (stopped, diverged, ran out of
    its epochs) or until now: what their fit alone would count, whatever else the batch
    holds."""
    now = state["step"] - state["start"][members]
    stop = state["stop_step"][members]
    left = np.where(
        stop >= 0, stop + 1, np.where(state["status"][members] == FINISHED, epochs, now)
    )
    return int(left.max())


def batch_size(running: int) -> int:
    """The batch that holds `running` members after a compaction: the next power of two, so
    that fits meet the same few shapes and find their compiled loops in XLA's cache."""
    return 1 << max(running - 1, 0).bit_length()
