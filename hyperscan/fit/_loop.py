"""The compiled training loop: K steps per device call, all bookkeeping per member on device."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import tensorflow as tf

from hyperscan.fit._compiled import shared_function
from hyperscan.fit._format import DIVERGED, FINISHED, RUNNING, STOPPED
from hyperscan.fit._optimizers import (
    OPTIMIZERS,
    clip_per_variable,
    make_optimizer,
    per_member,
    variable_columns,
    variable_norms,
)
from hyperscan.model import TRAINING, VALIDATION, EnsembleModel, MemberAxis, take_members
from hyperscan.runcard import LAMBDA_UPDATE_INTERVAL

# Why a member diverged, recorded on device with its status.
DIVERGENCE_REASONS = {
    1: "non-finite loss",
    2: "loss above divergence.max_loss",
    3: "non-finite gradient",
    4: "non-finite parameters after the update",
}


@dataclass(frozen=True)
class TrainerSettings:
    """Per-member hyperparameters are (M,) arrays so that members may differ (packed trials,
    an ensemble of a scan's best trials); a scalar given for one (`dataclasses.replace`)
    stands for all members. What the compiled loop's shape depends on is shared."""

    member_axis: ClassVar[MemberAxis] = MemberAxis(
        {
            "optimizer": 0,
            "learning_rate": 0,
            "clipnorm": 0,
            "epochs": 0,
            "patience_steps": 0,
            "threshold_chi2": 0,
            "positivity_threshold": 0,
            "lambda_initial": 0,
            "lambda_factor": 0,
        }
    )

    optimizer: np.ndarray  # (M,) names, OPTIMIZERS
    learning_rate: np.ndarray  # (M,)
    clipnorm: np.ndarray  # (M,), inf for no clipping
    epochs: np.ndarray  # (M,) a member's last step is its epochs - 1; the loop runs to the max
    patience_steps: np.ndarray  # (M,)
    threshold_chi2: np.ndarray  # (M,) validation χ²/point to reach before any best step
    positivity_threshold: np.ndarray  # (M,)
    lambda_initial: np.ndarray  # (M,)
    lambda_factor: np.ndarray  # (M,) λ multiplied by this every LAMBDA_UPDATE_INTERVAL steps
    max_loss: float
    steps_per_call: int = 100
    jit: bool = True
    # Drop stopped members from the batch at a sync (`MemberRows.compact`) when the
    # member-steps it saves, epochs left (the running members' longest) × members dropped,
    # reach compaction_cost steps of the batch: what
    # tracing and compiling the smaller loop costs (real DIS, R = 100: 6–8 s, ~500 steps; with
    # the loop in XLA's disk cache, 0.5–0.7 s). A rule of counts, not of timings, so that a
    # fit compacts at the same syncs, and rounds the same, every time it runs.
    compact: bool = True
    compaction_cost: float = 500.0

    def for_members(self, members: int) -> TrainerSettings:
        """These settings with every per-member field an (M,) array."""
        return dataclasses.replace(
            self,
            **{
                name: np.broadcast_to(getattr(self, name), (members,)).copy()
                for name in self.member_axis.arrays
            },
        )


@dataclass(frozen=True)
class SyncReport:
    """What the host sees every K steps."""

    step: int
    chi2: np.ndarray  # (M, 3) training, validation, held-out at the last step's weights
    chi2_per_point: np.ndarray  # (M, 3)
    status: np.ndarray  # (M,) RUNNING, STOPPED, DIVERGED, FINISHED
    batch: int | None = None  # members in the device batch that ran these steps (≤ M)

    @classmethod
    def of(
        cls, step: int, chi2: np.ndarray, status: np.ndarray, points: np.ndarray, batch: int
    ) -> SyncReport:
        """The report of members with `points` (M, 3) per category: their χ² per point is
        NaN for a category a member has no point in (held-out without folds), as the fit's
        results say null there, not 0."""
        return cls(
            step=step,
            chi2=chi2,
            chi2_per_point=np.where(points > 0, chi2 / np.maximum(points, 1), np.nan),
            status=status,
            batch=batch,
        )

    @property
    def n_running(self) -> int:
        return int((self.status == RUNNING).sum())


class TrainingLoop:
    """The compiled step of a batch of an EnsembleModel's members, K steps per device call.

    The state (parameters, optimiser moments, λ, stopping counters, best-weight snapshots)
    is a nest of (M, ...) tensors threaded through a `tf.while_loop`; frozen members (stopped
    or diverged) keep their values through `tf.where`, so a member's trajectory is exactly
    what it would be if it were fitted alone. The parameters are one flat (M, P) tensor, split
    into the network's kernels and biases where the model reads them, so the optimiser,
    clipping and bookkeeping are a few kernels over all parameters, not a few per tensor.
    Between calls the state stays on the device in variables updated in place: a call passes
    only K in and the sync's χ² and status out, not the ~40 tensors of the state both ways.
    What the batch's rows mean for the model's members is fit/_rows.py's.
    """

    def __init__(
        self,
        model: EnsembleModel,
        settings: TrainerSettings,
        initial_params: Sequence[np.ndarray],
        kinds: Sequence[str] = (),
    ) -> None:
        self.model = model
        self.settings = settings = settings.for_members(model.n_members)
        dtype = model.dtype
        # The optimiser kinds of all members and `kinds` (those members that a restart may
        # bring), fixed for the fit so that the state's structure stays the same when the
        # batch shrinks; one kind's state is that optimiser's, as before members could
        # differ, several kinds' a dict of them by kind.
        present = set(settings.optimizer.tolist()) | set(kinds)
        self._optimizers = {kind: make_optimizer(kind) for kind in OPTIMIZERS if kind in present}
        self._shapes = [p.shape[1:] for p in initial_params]
        self._sizes = [int(np.prod(shape)) for shape in self._shapes]
        self._columns = variable_columns(self._sizes, dtype)
        members = model.n_members
        initial_state = {
            "step": tf.constant(0, tf.int32),
            **self._fresh(initial_params, settings.lambda_initial, 0),
        }
        self._dtypes = tf.nest.map_structure(lambda value: value.dtype, initial_state)
        self._load(np.arange(members), initial_state)

    def _fresh(self, params: Sequence[np.ndarray], lambda_initial: np.ndarray, start: int) -> dict:
        """The state of members that start at step `start` from weights `params` (M, ...):
        each counts its own steps from its start, so that a trial batch (fit/_slots.py) can
        start a refilled slot's members mid-loop."""
        dtype = self.model.dtype
        flat = tf.constant(
            np.concatenate([np.reshape(p, (p.shape[0], -1)) for p in params], axis=1), dtype
        )
        members = flat.shape[0]
        return {
            "start": tf.fill([members], start),
            "params": flat,
            "optimizer": self._optimizer_init(flat),
            "member_steps": tf.zeros([members], tf.int32),
            "lam": tf.constant(lambda_initial, dtype),
            "status": tf.fill([members], RUNNING),
            "best_val": tf.fill([members], tf.constant(np.inf, dtype)),
            "best_step": tf.fill([members], -1),
            "since_best": tf.zeros([members], tf.int32),
            "stop_step": tf.fill([members], -1),
            "divergence": tf.zeros([members], tf.int32),
            "best_params": flat,
            "chi2": tf.zeros([members, 3], dtype),
        }

    def _load(self, members: np.ndarray, state: dict) -> None:
        """Make `members` (indices into the model's) the batch, with `state` their state:
        their rows of the model and the settings, the state's variables, the compiled loop."""
        everyone = np.array_equal(members, np.arange(self.model.n_members))
        self._members = members
        self._batch_model = self.model if everyone else self.model.select(members)
        self._batch_settings = self.settings if everyone else take_members(self.settings, members)
        # The per-member settings are variables, as the state is: a trial batch gives a
        # refilled slot's members their own without tracing the loop again.
        self._settings = {
            name: tf.Variable(stored(tf.constant(value, kind)), trainable=False)
            for name, value, kind in self._setting_values(self._batch_settings)
        }
        # Members of different architectures: their padded and skipped parameters' gradients
        # are masked to exactly zero before clipping, so each member's clipping norm is its
        # unpadded one and, from zero gradients, every optimiser keeps those weights at zero.
        shapes = self._batch_model.shapes
        self._gradient_mask = (
            None
            if shapes is None
            else tf.Variable(stored(tf.constant(shapes.gradient_mask)), trainable=False)
        )
        dtype = self.model.dtype
        counts = self._batch_model.points_per_category
        self._has_validation = tf.constant(counts[:, VALIDATION] > 0)
        self._stopping_points = tf.constant(
            np.where(counts[:, VALIDATION] > 0, counts[:, VALIDATION], counts[:, TRAINING]),
            dtype,
        )
        self._variables = tf.nest.map_structure(
            lambda value: tf.Variable(stored(tf.convert_to_tensor(value)), trainable=False),
            state,
        )
        # Calls go through the concrete function: a tf.function call matches its arguments and
        # captured variables against its traces first, which cost more host time than the call
        # itself; and through the one compiled for an earlier fit of the same definition in
        # this process, if there was one (fit/_compiled.py). The tf.function stays public so
        # its compiled HLO can be inspected. The loop is written in TensorFlow's own control
        # flow, so AutoGraph, which would rewrite the source of every function it calls, is
        # off: it took seconds of every worker's start.
        self.steps_function = tf.function(
            self._steps, jit_compile=self.settings.jit, autograph=False
        )
        self._run_steps = shared_function(
            lambda: self.steps_function.get_concrete_function(tf.TensorSpec([], tf.int32))
        )

    def _setting_values(self, settings: TrainerSettings) -> list[tuple[str, np.ndarray, tf.DType]]:
        """The loop's per-member settings: name, (M,) values, dtype in the loop."""
        dtype = self.model.dtype
        return [
            ("learning_rate", settings.learning_rate, dtype),
            ("clipnorm", settings.clipnorm, dtype),
            ("epochs", settings.epochs, tf.int32),
            ("patience_steps", settings.patience_steps, tf.int32),
            ("threshold_chi2", settings.threshold_chi2, dtype),
            ("positivity_threshold", settings.positivity_threshold, dtype),
            ("lambda_factor", settings.lambda_factor, dtype),
            *((kind, settings.optimizer == kind, tf.bool) for kind in self._optimizers),
        ]

    def _setting(self, name: str) -> tf.Tensor:
        """A per-member setting as the loop reads it (counters and flags are stored int64)."""
        value = self._settings[name]
        if value.dtype != tf.int64:
            return tf.convert_to_tensor(value)
        return value != 0 if name in self._optimizers else tf.cast(value, tf.int32)

    def _split(self, flat: tf.Tensor) -> list[tf.Tensor]:
        """(M, P) → the model's [kernel, bias, ...], (M, ...) each."""
        pieces = tf.split(flat, self._sizes, axis=1)
        return [
            tf.reshape(piece, [-1, *shape])
            for piece, shape in zip(pieces, self._shapes, strict=True)
        ]

    @property
    def members(self) -> np.ndarray:
        """The batch's members, as indices into the model's: all of them until a compaction."""
        return self._members

    @property
    def variables(self) -> dict:
        """The batch's state as device variables by name, as the compiled loop reads and
        updates them (benchmarks/xla_bundle.py exports them with the loop)."""
        return self._variables

    @property
    def read_only_variables(self) -> list[tf.Variable]:
        """The variables the compiled loop reads and never updates: the per-member settings
        and the gradient mask, which only a restart changes between calls."""
        mask = [] if self._gradient_mask is None else [self._gradient_mask]
        return [*self._settings.values(), *mask]

    @property
    def state(self) -> dict:
        """The batch's current state as a nest of tensors (a snapshot, not the variables)."""
        return tf.nest.map_structure(tf.cast, self._variables, self._dtypes)

    @property
    def kinds(self) -> tuple[str, ...]:
        """The optimiser kinds the loop has."""
        return tuple(self._optimizers)

    def _optimizer_init(self, params: tf.Tensor) -> dict:
        if len(self._optimizers) == 1:
            return next(iter(self._optimizers.values())).init([params])
        return {kind: optimizer.init([params]) for kind, optimizer in self._optimizers.items()}

    def _update(
        self, params: tf.Tensor, grads: tf.Tensor, state: dict, steps: tf.Tensor
    ) -> tuple[tf.Tensor, dict]:
        """Each member's parameters after its own optimiser's update, and the new state.

        Members of several kinds: every kind present updates all members, and each member
        takes its own kind's parameters (tf.where); a kind's state rows of the other kinds'
        members are never read. Measured faster than updating each kind's members alone
        (gathered, then put back in order): docs/architecture.md.
        """
        if len(self._optimizers) == 1:
            optimizer = next(iter(self._optimizers.values()))
            (new_params,), new_state = optimizer.update(
                [params], [grads], state, steps, self._setting("learning_rate")
            )
            return new_params, new_state
        new_params, new_state = params, dict(state)
        for kind, optimizer in self._optimizers.items():
            (updated,), new_state[kind] = optimizer.update(
                [params], [grads], state[kind], steps, self._setting("learning_rate")
            )
            new_params = tf.where(self._setting(kind)[:, None], updated, new_params)
        return new_params, new_state

    def _steps(self, n_steps: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        def running(i, s):
            return tf.logical_and(i < n_steps, tf.reduce_any(s["status"] == RUNNING))

        def body(i, s):
            return i + 1, self._step(s)

        _, state = tf.while_loop(running, body, (tf.constant(0), self.state))
        tf.nest.map_structure(
            lambda variable, value: variable.assign(stored(value)), self._variables, state
        )
        return state["step"], state["chi2"], state["status"]

    def advance(self, n_steps: int) -> SyncReport:
        """Run up to `n_steps` steps in one device call (fewer if every member stops); the
        report is of the batch's members, in the batch's order."""
        # The concrete function ignores tf.config.run_functions_eagerly(True): honour it here,
        # for debugging and for the test that the compiled loop equals the eager one.
        run = self._steps if tf.config.functions_run_eagerly() else self._run_steps
        step, chi2, status = run(tf.constant(n_steps, tf.int32))
        points = self._batch_model.points_per_category
        return SyncReport.of(int(step), chi2.numpy(), status.numpy(), points, len(self._members))

    def _step(self, s: dict) -> dict:
        cfg = self._batch_settings
        params = s["params"]
        active = s["status"] == RUNNING
        with tf.GradientTape() as tape:
            tape.watch(params)
            observables = self._batch_model.observables(self._split(params), s["lam"])
            loss = observables.loss
            # Members' parameters are disjoint, so d(Σ loss)/dθ_m = dloss_m/dθ_m, and a
            # non-finite member cannot leak into the others' gradients.
            total = tf.reduce_sum(loss)
        grad = tape.gradient(total, params)
        if self._gradient_mask is not None:
            grad = tf.where(self._gradient_mask != 0, grad, tf.zeros_like(grad))
        norms = variable_norms(grad, self._columns)
        grad_finite = tf.reduce_all(tf.math.is_finite(norms), axis=1)

        reason = tf.where(
            ~tf.math.is_finite(loss),
            1,
            tf.where(loss > cfg.max_loss, 2, tf.where(grad_finite, 0, 3)),
        )
        diverged = active & (reason > 0)
        alive = active & ~diverged

        # Stopping as n3fit's, on the weights this step started from: a best step improves the
        # validation χ², passes positivity and comes once χ²/point was below the threshold;
        # patience counts from there (docs/methods.md#stopping).
        chi2 = observables.chi2
        validation = tf.where(self._has_validation, chi2[:, VALIDATION], chi2[:, TRAINING])
        positivity_ok = tf.reduce_all(
            observables.positivity < self._setting("positivity_threshold")[:, None], axis=1
        )
        below_threshold = validation / self._stopping_points < self._setting("threshold_chi2")
        has_best = s["best_step"] >= 0  # once it has one, a member counts towards stopping
        improved = (
            alive & positivity_ok & (has_best | below_threshold) & (validation < s["best_val"])
        )
        since_best = tf.where(
            improved,
            0,
            tf.where(alive & has_best, s["since_best"] + 1, s["since_best"]),
        )
        stopped = alive & (since_best > self._setting("patience_steps"))

        clipped = clip_per_variable(grad, norms, self._columns, self._setting("clipnorm"))
        new_params, new_optimizer = self._update(params, clipped, s["optimizer"], s["member_steps"])
        finite = tf.reduce_all(tf.math.is_finite(new_params), axis=1)
        reason = tf.where(alive & ~stopped & ~finite, 4, reason)
        diverged = diverged | (alive & ~stopped & ~finite)
        apply = alive & ~stopped & finite

        def keep(new, old):
            return tf.where(per_member(apply, new), new, old)

        local = s["step"] - s["start"]  # each member's own step
        lambda_due = (local + 1) % LAMBDA_UPDATE_INTERVAL == 0
        status = tf.where(diverged, DIVERGED, tf.where(stopped, STOPPED, s["status"]))
        # A member whose own epochs ran out is frozen as it would end fitted alone.
        status = tf.where(
            (status == RUNNING) & (local + 1 >= self._setting("epochs")), FINISHED, status
        )
        return {
            "step": s["step"] + 1,
            "start": s["start"],
            "params": keep(new_params, params),
            "optimizer": tf.nest.map_structure(keep, new_optimizer, s["optimizer"]),
            "member_steps": s["member_steps"] + tf.cast(apply, tf.int32),
            "lam": tf.where(
                apply & lambda_due, s["lam"] * self._setting("lambda_factor"), s["lam"]
            ),
            "status": status,
            "best_val": tf.where(improved, validation, s["best_val"]),
            "best_step": tf.where(improved, local, s["best_step"]),
            "since_best": since_best,
            "stop_step": tf.where(diverged | stopped, local, s["stop_step"]),
            "divergence": tf.where(diverged, reason, s["divergence"]),
            "best_params": tf.where(improved[:, None], params, s["best_params"]),
            "chi2": tf.where(active[:, None], chi2, s["chi2"]),
        }


def stored(value: tf.Tensor) -> tf.Tensor:
    """Counters and flags as int64 variables: TensorFlow keeps int32 variables on the host,
    out of reach of a loop compiled for a GPU."""
    return tf.cast(value, tf.int64) if value.dtype in (tf.int32, tf.bool) else value
