# SPDX-License-Identifier: GPL-3.0-or-later
"""Time per member-step of hyperscan's compiled loop against the Keras ways of fitting replicas.

Run as ``python benchmarks/fit_engine.py [--quick] [--size small]``. Every variant trains the
same closure problem with the same member count and the same loss (hyperscan's own pure
functions), 2-25-20-8 tanh, Nadam, float32:

1. hyperscan: ``Trainer`` with K steps per compiled call and all stopping bookkeeping active,
   each sample at least 1000 steps in back-to-back calls, as ``Trainer.run`` makes them (a
   single call timed just after the Keras variants pays their cold caches);
2. R sequential single-replica Keras ``model.fit`` runs, one step per epoch;
3. one Keras model holding all R replicas, one step per epoch;
4. the same batched model with n3fit's trick: the input repeated 100 times with batch size 1,
   so one Keras epoch is 100 optimiser steps.

Times are medians over repeats after a warm-up call (tracing and XLA compilation excluded),
Keras epochs timed one by one by a callback so that `fit`'s own set-up is not charged to them.
The variants are timed in interleaved rounds: the machine is shared and noisy, so compare
ratios within one run rather than absolute times across runs. A one-step check confirms that
the Keras models do hyperscan's math. A second section times the per-step overhead on a tiny
problem with a minimal network, and a breakdown (``--breakdown``, on by default without
``--quick``) times the stages of one step to show where hyperscan's time goes. ``--threads N``
sets TensorFlow's intra-op threads, to see what the second core buys at each R.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import datetime
import os
import platform
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from hyperscan.data import CLOSURE_SIZES  # noqa: E402
from hyperscan.fit import (  # noqa: E402
    DIVERGED,
    RUNNING,
    STOPPED,
    Trainer,
    TrainerSettings,
    build_ensemble,
    trainer_settings,
)
from hyperscan.fit._optimizers import per_member  # noqa: E402
from hyperscan.model import TRAINING, EnsembleModel  # noqa: E402
from hyperscan.model._network import N_OUTPUTS, forward  # noqa: E402
from hyperscan.runcard import FitRuncard  # noqa: E402

NNPDF40_NODES = (25, 20)
TINY_NODES = (4,)
TINY_STEPS_PER_CALL = (100, 1000)
# Steps per hyperscan sample, in calls of K.
STEPS_PER_SAMPLE = 1000
# Epochs large enough that λ barely grows and patience (1.0 × epochs) never runs out while timing.
EPOCHS = 10**8
# n3fit's trick: one Keras epoch is this many optimiser steps (the input repeated, batch size 1).
TRICK_STEPS_PER_EPOCH = 100
# Measured earlier on this kind of machine (shared/README.md "Measured reference points").
REFERENCE_TRICK_STEP = 1.4e-3
REFERENCE_XLA_LOOP_STEP = 34e-6
TARGET_OVERHEAD = 50e-6
TARGET_SPEEDUP_R100 = 1.3
TARGET_PEAK_SHARE = 0.5  # of the measured matmul peak, R = 100 on the nnpdf40 problem
EPOCHS_PER_FIT_REFERENCE = 17000  # NNPDF4.0's maximum number of epochs
# The breakdown's whole training step, and the same with the nuisance fits skipped (its floor).
WHOLE_STEP = "+ Nadam, clipping, stopping"
FLOOR_STEP = "the same, nuisance fits skipped"


@dataclass(frozen=True)
class Plan:
    """How much to time: the full run fits in ~10 minutes on 2 cores, --quick in ~2."""

    size: str
    replicas: tuple[int, ...]
    steps_per_call: tuple[int, ...]
    repeats: int
    keras_epochs: int  # epochs per repeat with one step per epoch (each epoch timed)
    trick_epochs: int  # epochs per repeat of the steps-as-batch trick
    sequential_fits: int  # sequential fits actually timed; larger R is extrapolated
    breakdown: bool


@dataclass
class Setup:
    """One ensemble of the benchmark problem, built the way `run_fit` builds it."""

    model: EnsembleModel
    params: list[np.ndarray]
    settings: TrainerSettings


def build_setup(size: str, replicas: int | Sequence[int], nodes: Sequence[int]) -> Setup:
    """A float32 ensemble with patience 1.0, so that no member stops while it is timed."""
    card = FitRuncard.model_validate(
        {
            "data": {"closure": {"size": size}},
            "replicas": replicas if isinstance(replicas, int) else list(replicas),
            "architecture": {"nodes": list(nodes)},
            "epochs": EPOCHS,
            "stopping": {"patience": 1.0},
            "training": {"precision": "float32", "jit": True},
        }
    )
    model, specs, params = build_ensemble(card)
    return Setup(model, params, trainer_settings(card, len(specs)))


def median_seconds(call: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


class Samples:
    """Wall and CPU time of repeated calls, by name; CPU/wall says how many cores worked."""

    def __init__(self) -> None:
        self.wall: dict[str, list[float]] = {}
        self.cpu: dict[str, list[float]] = {}

    def time(self, name: str, call: Callable[[], object], per: float = 1.0) -> None:
        wall, cpu = time.perf_counter(), time.process_time()
        call()
        self.wall.setdefault(name, []).append((time.perf_counter() - wall) / per)
        self.cpu.setdefault(name, []).append((time.process_time() - cpu) / per)

    def median(self, name: str) -> float:
        return float(np.median(self.wall[name]))

    def median_cpu(self, name: str) -> float:
        return float(np.median(self.cpu[name]))

    def cores(self, name: str) -> float:
        return float(np.median(np.array(self.cpu[name]) / np.array(self.wall[name])))


# ------------------------------------------------------------------------------------------
# hyperscan's loop


class Loop:
    """`Trainer.advance` called as `Trainer.run` calls it: K steps per call, then χ² and status
    fetched. The first call (one step) compiles.
    """

    def __init__(self, setup: Setup, jit: bool = True) -> None:
        settings = dataclasses.replace(setup.settings, jit=jit)
        self.trainer = Trainer(setup.model, settings, setup.params)
        self.report = self.trainer.advance(1)
        self.first_step_params = self.trainer.parameters()
        self.first_step_running = self.report.status == RUNNING

    def call(self, steps: int) -> None:
        self.report = self.trainer.advance(steps)

    def calls(self, steps: int, count: int) -> None:
        for _ in range(count):
            self.call(steps)

    def diverged(self) -> int:
        """Members frozen by divergence: still computed, so the timing holds, unless all are."""
        status = self.report.status
        if np.any(status == STOPPED):
            raise RuntimeError("a member stopped while timing: patience should prevent that")
        if not np.any(status == RUNNING):
            raise RuntimeError("every member diverged: the loop exited early, timing is void")
        return int(np.sum(status == DIVERGED))


# ------------------------------------------------------------------------------------------
# The Keras model: the same loss, with the member-axis weights as Keras variables


def _passthrough(y_true: tf.Tensor, y_pred: tf.Tensor) -> tf.Tensor:
    """The model outputs its loss already (n3fit does the same)."""
    return y_pred


def clip_by_member_norm(grad: tf.Tensor, clipnorm: tf.Tensor) -> tf.Tensor:
    """Scale each member's slice of one variable's gradient to norm ≤ clipnorm (M,)."""
    norm = tf.norm(tf.reshape(grad, [grad.shape[0], -1]), axis=1)
    scale = tf.where(norm > clipnorm, clipnorm / norm, tf.ones_like(norm))
    return grad * per_member(scale, grad)


def _per_member_clip(clipnorm: tf.Tensor) -> Callable[..., list[tf.Tensor]]:
    """Identity whose gradient is clipped per variable and member, as hyperscan clips.

    Keras' `clipnorm` clips each variable, so with several members in one variable it would
    clip them together; a batched Keras model needs the per-member clip in the graph to do
    the same math.
    """

    @tf.custom_gradient
    def clip(*params: tf.Tensor):
        def grad(*upstream: tf.Tensor) -> list[tf.Tensor]:
            return [clip_by_member_norm(g, clipnorm) for g in upstream]

        return [tf.identity(p) for p in params], grad

    return clip


class KerasReplicas(keras.Model):
    """M replicas as one Keras model whose output is Σ_m (χ²_train + λ·positivity)_m.

    The trainable weights are the (M, ...) kernels and biases of `EnsembleModel`, and the loss
    is `EnsembleModel.observables`: the math is hyperscan's, only the training loop is Keras'.
    λ stays at its initial value (n3fit grows it from a callback every 100 epochs).
    """

    def __init__(self, setup: Setup) -> None:
        super().__init__()
        self.ensemble = setup.model
        self.lam = float(setup.settings.lambda_initial[0])
        self.member_weights = []
        for index, value in enumerate(setup.params):
            weight = self.add_weight(shape=value.shape, initializer="zeros", name=f"w{index}")
            weight.assign(value.astype(np.float32))
            self.member_weights.append(weight)
        clipnorm = setup.settings.clipnorm
        # One member: Keras' own clipnorm is exactly the per-member clip.
        self.clip = (
            None
            if self.ensemble.n_members == 1 or not np.all(np.isfinite(clipnorm))
            else _per_member_clip(tf.constant(clipnorm, tf.float32))
        )
        self.built = True

    def call(self, inputs: tf.Tensor) -> tf.Tensor:
        params = [weight.value for weight in self.member_weights]
        if self.clip is not None:
            params = self.clip(*params)
        loss = tf.reduce_sum(self.ensemble.observables(params, self.lam).loss)
        return tf.zeros_like(inputs) + loss  # (batch, 1)


def keras_model(setup: Setup) -> KerasReplicas:
    model = KerasReplicas(setup)
    settings = setup.settings
    clipnorm = float(settings.clipnorm[0])
    one_member = setup.model.n_members == 1 and np.isfinite(clipnorm)
    optimizer = keras.optimizers.Nadam(
        learning_rate=float(settings.learning_rate[0]),
        clipnorm=clipnorm if one_member else None,
    )
    model.compile(optimizer=optimizer, loss=_passthrough)  # jit_compile "auto"
    return model


def dummy_inputs(samples: int) -> np.ndarray:
    return np.zeros((samples, 1), np.float32)


class EpochClock(keras.callbacks.Callback):
    """Wall and CPU time of each epoch, from its start to the next's (or the end of training).

    A real fit calls `fit` once for thousands of epochs, so what `fit` spends setting itself
    up (data adapter, callbacks: ~0.1 s) must not be charged to the few epochs timed here.
    """

    def __init__(self) -> None:
        super().__init__()
        self.marks: list[tuple[float, float]] = []

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self.marks.append((time.perf_counter(), time.process_time()))

    def on_train_end(self, logs: dict | None = None) -> None:
        self.marks.append((time.perf_counter(), time.process_time()))

    def epochs(self) -> tuple[list[float], list[float]]:
        wall, cpu = np.diff(np.array(self.marks), axis=0).T
        return list(wall), list(cpu)


def keras_fit(model: KerasReplicas, samples: int, epochs: int) -> tuple[list[float], list[float]]:
    """`samples` identical one-sample batches per epoch (one optimiser step each); returns
    the wall and CPU time of each epoch."""
    x = dummy_inputs(samples)
    clock = EpochClock()
    model.fit(x, x, batch_size=1, epochs=epochs, verbose=0, shuffle=False, callbacks=[clock])
    return clock.epochs()


def hyperscan_loss(setup: Setup) -> float:
    params = [tf.constant(p, tf.float32) for p in setup.params]
    lam = setup.settings.lambda_initial
    return float(tf.reduce_sum(setup.model.observables(params, lam).loss))


def step_difference(loop: Loop, params: Sequence[np.ndarray], learning_rate: float) -> float:
    """max |θ - θ_hyperscan| after one step over the members that took it, in learning rates."""
    running = loop.first_step_running
    difference = max(
        float(np.max(np.abs(np.asarray(p)[running] - reference[running])))
        for p, reference in zip(params, loop.first_step_params, strict=True)
    )
    return difference / learning_rate


@dataclass
class EquivalenceCheck:
    """Keras vs hyperscan: the loss at the initial weights and the weights after one step.

    The weights are also compared between hyperscan with and without XLA: that is the
    float32 noise floor. tf.keras 2's Nadam schedule, 0.96^(0.004·t) instead of Keras 3's
    0.96^t, misses by ~6e-3 lr, so the bound is tight.
    """

    loss_relative: float
    step_keras: float
    step_floor: float

    @property
    def ok(self) -> bool:
        return self.loss_relative < 1e-5 and self.step_keras < max(1e-4, 10 * self.step_floor)


# ------------------------------------------------------------------------------------------
# The Keras variants


@dataclass
class EnsembleTiming:
    """Seconds per (ensemble) step of each variant at one R, measured in interleaved rounds."""

    hyperscan: dict[int, float]  # K → s per step
    hyperscan_cpu: float  # CPU seconds per step (K = the first one): robust to other load
    hyperscan_cores: float  # CPU time / wall time of those calls
    keras_epoch: float  # batched Keras, one step per epoch
    keras_trick: float  # batched Keras, steps as batch
    keras_trick_cpu: float  # its CPU seconds per step
    check: EquivalenceCheck
    diverged: int
    keras_jit: bool


def time_ensemble(
    setup: Setup, plan: Plan, steps_per_call: Sequence[int] | None = None
) -> EnsembleTiming:
    """hyperscan and the batched Keras model (variants 3 and 4 share its `train_function`).

    Each round times every variant once, so a noisy spell on the shared machine hits all
    of them rather than one, and the ratios stay meaningful.
    """
    loop = Loop(setup)
    floor = step_difference(
        loop, Loop(setup, jit=False).first_step_params, float(setup.settings.learning_rate[0])
    )
    model = keras_model(setup)
    x = dummy_inputs(1)
    initial = float(model.evaluate(x, x, batch_size=1, verbose=0))
    keras_fit(model, 1, 1)  # one step: warm-up (traces train_function) and the check below
    check = EquivalenceCheck(
        abs(initial - hyperscan_loss(setup)) / abs(hyperscan_loss(setup)),
        step_difference(
            loop,
            [w.numpy() for w in model.member_weights],
            float(setup.settings.learning_rate[0]),
        ),
        floor,
    )
    keras_fit(model, TRICK_STEPS_PER_EPOCH, 1)  # warm-up of the 100-sample data pipeline
    samples = Samples()
    steps_per_call = steps_per_call or plan.steps_per_call
    epochs, tricks, tricks_cpu = [], [], []
    for _ in range(plan.repeats):
        for k in steps_per_call:
            calls = max(1, STEPS_PER_SAMPLE // k)
            samples.time(f"K={k}", lambda k=k, n=calls: loop.calls(k, n), per=k * calls)
        epochs += keras_fit(model, 1, plan.keras_epochs)[0]
        wall, cpu = keras_fit(model, TRICK_STEPS_PER_EPOCH, plan.trick_epochs)
        tricks += wall
        tricks_cpu += cpu
    return EnsembleTiming(
        hyperscan={k: samples.median(f"K={k}") for k in steps_per_call},
        hyperscan_cpu=samples.median_cpu(f"K={steps_per_call[0]}"),
        hyperscan_cores=samples.cores(f"K={steps_per_call[0]}"),
        keras_epoch=float(np.median(epochs)),
        keras_trick=float(np.median(tricks)) / TRICK_STEPS_PER_EPOCH,
        keras_trick_cpu=float(np.median(tricks_cpu)) / TRICK_STEPS_PER_EPOCH,
        check=check,
        diverged=loop.diverged(),
        keras_jit=bool(model.jit_compile),
    )


@dataclass
class SequentialKeras:
    per_step: list[float]  # seconds per step of each timed single-replica fit
    setup_seconds: list[float]  # build, compile and first (tracing) epoch of each fit


def time_sequential_keras(size: str, fits: int, plan: Plan) -> SequentialKeras:
    """Replicas 1..fits, each its own Keras model, fitted one after another."""
    per_step, setup_seconds = [], []
    for replica in range(1, fits + 1):
        start = time.perf_counter()
        model = keras_model(build_setup(size, [replica], NNPDF40_NODES))
        keras_fit(model, 1, 1)
        setup_seconds.append(time.perf_counter() - start)
        epochs = [t for _ in range(plan.repeats) for t in keras_fit(model, 1, plan.keras_epochs)[0]]
        per_step.append(float(np.median(epochs)))
    return SequentialKeras(per_step, setup_seconds)


# ------------------------------------------------------------------------------------------
# Where hyperscan's time goes


def _compiled_loop(update: Callable[[object], object], carry: object, steps: int) -> Callable:
    """`update` applied `steps` times in one XLA while loop (compiled here); returns a runner.

    Each iteration feeds its result into the next, so XLA cannot hoist the work out.
    """

    @tf.function(jit_compile=True, autograph=False)  # as the trainer traces its loop
    def run(c, n):
        return tf.while_loop(lambda i, c: i < n, lambda i, c: (i + 1, update(c)), (0, c))[1]

    run(carry, tf.constant(2))

    def runner() -> None:
        tf.nest.map_structure(lambda t: t.numpy(), run(carry, tf.constant(steps)))

    return runner


def _descend(loss: Callable[[list[tf.Tensor]], tf.Tensor]) -> Callable[[list], list]:
    """One forward+backward pass of `loss` and a tiny step, so iterations depend on each other."""

    def update(params: list[tf.Tensor]) -> list[tf.Tensor]:
        with tf.GradientTape() as tape:
            tape.watch(params)
            value = loss(params)
        grads = tape.gradient(value, params)
        return [p - 1e-9 * g for p, g in zip(params, grads, strict=True)]

    return update


def breakdown_runners(setup: Setup, steps: int) -> dict[str, Callable[[], None]]:
    """Forward+backward of each stage of the loss, nested so that differences are stages."""
    model = setup.model
    members = model.n_members
    params = [tf.constant(p, tf.float32) for p in setup.params]
    linear = ["linear"] * len(model.activations)

    def network(activations: Sequence[str]) -> Callable[[list[tf.Tensor]], tf.Tensor]:
        return lambda ps: tf.reduce_sum(forward(ps, model._features, activations))

    def pdf(ps: list[tf.Tensor]) -> tf.Tensor:
        return tf.reduce_sum(model._normalised_pdf(ps))

    positivity_products = model._positivity_products or (lambda pdf: 0.0)

    def fk(ps: list[tf.Tensor]) -> tf.Tensor:
        pdf = model._normalised_pdf(ps)
        residuals = model._data - model._data_products(pdf)
        return tf.reduce_sum(tf.square(residuals)) + tf.reduce_sum(positivity_products(pdf))

    def full(ps: list[tf.Tensor]) -> tf.Tensor:
        return tf.reduce_sum(model.observables(ps, 100.0).loss)

    rng = np.random.default_rng(0)
    residuals = tf.constant(rng.standard_normal((members, model._data.shape[1])), tf.float32)

    def whitening(r: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            tape.watch(r)
            value = tf.reduce_sum(model.chi2_from_residuals(r)[:, TRAINING])
        return r - 1e-9 * tape.gradient(value, r)

    flat = tf.constant(rng.standard_normal((members, model.xgrid.size, N_OUTPUTS)), tf.float32)

    def fk_alone(x: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            tape.watch(x)
            value = tf.reduce_sum(tf.square(model._data_products(x)))
            value += tf.reduce_sum(positivity_products(x))
        return x - 1e-9 * tape.gradient(value, x)

    grid_only = model._features[: model.xgrid.size]

    def network_on_grid(ps: list[tf.Tensor]) -> tf.Tensor:
        return tf.reduce_sum(forward(ps, grid_only, model.activations))

    trainer = Trainer(model, setup.settings, setup.params)
    floor = Trainer(_without_nuisance_fits(model), setup.settings, setup.params)
    return {
        "network (tanh), x-grid points only": _compiled_loop(
            _descend(network_on_grid), params, steps
        ),
        "network, linear activations": _compiled_loop(_descend(network(linear)), params, steps),
        "network (tanh)": _compiled_loop(_descend(network(model.activations)), params, steps),
        "+ preprocessing, sum rules": _compiled_loop(_descend(pdf), params, steps),
        "+ FK contraction": _compiled_loop(_descend(fk), params, steps),
        "+ whitening, chi2, positivity": _compiled_loop(_descend(full), params, steps),
        WHOLE_STEP: _compiled_loop(trainer._step, trainer.state, steps),
        FLOOR_STEP: _compiled_loop(floor._step, floor.state, steps),
        "FK contraction alone": _compiled_loop(fk_alone, flat, steps),
        "whitening + chi2 alone": _compiled_loop(whitening, residuals, steps),
    }


def _without_nuisance_fits(model: EnsembleModel) -> EnsembleModel:
    """The model with the χ² of its nuisance blocks reduced to their uncorrelated errors.

    Not a fit anyone should run: the floor of the whole step that any faster way of fitting
    the nuisances could reach, which says how much of the step the χ² structure can still win.
    """
    chi2 = copy.copy(model._chi2)
    chi2._nuisance = []
    bare = copy.copy(model)
    bare._chi2 = chi2
    return bare


def run_breakdown(plan: Plan, setups: dict[str, Setup], peak: float) -> None:
    steps = 200
    rounds = max(plan.repeats, 5)
    runners = {label: breakdown_runners(setup, steps) for label, setup in setups.items()}
    samples = Samples()
    # Round-robin, so that a noisy spell hits every entry rather than one column.
    for _ in range(rounds):
        for label, stages in runners.items():
            for name, runner in stages.items():
                samples.time(f"{label}/{name}", runner, per=steps)
    names = list(next(iter(runners.values())))

    def row(title: str, name: str, value: Callable[[str], float], scale: bool = True) -> None:
        cells = "".join(
            f"{value(f'{label}/{name}') * (1e6 / setup.model.n_members if scale else 1):14.2f}"
            for label, setup in setups.items()
        )
        print(f"  {title:38}{cells}")

    print(
        f"\nWhere hyperscan's time goes: forward+backward of each stage in an XLA loop of {steps}"
    )
    print(f"iterations, median of {rounds} interleaved rounds. Rows from 'network (tanh)' down")
    print("add one stage each (the last is the whole training step). CPU time of all threads:")
    print("other load on the machine inflates it less than wall time (wall = CPU / cores busy).")
    print(f"  {'CPU µs per member-step':38}" + "".join(f"{label:>14}" for label in setups))
    for name in names:
        row(name, name, samples.median_cpu)
    row("wall µs per member-step, whole step", WHOLE_STEP, samples.median)
    row(FLOOR_STEP, FLOOR_STEP, samples.median)
    row("cores busy in the whole step", WHOLE_STEP, samples.cores, scale=False)
    print("  share of the matmul peak (the step's FLOPs over its wall time; skipping the nuisance")
    print("  fits keeps the FLOP count: the share a free nuisance fit would give)")
    for title, name in (("whole step", WHOLE_STEP), ("nuisance fits skipped", FLOOR_STEP)):
        shares = (
            member_step_flops(setup) * setup.model.n_members / samples.median(f"{label}/{name}")
            for label, setup in setups.items()
        )
        print(f"  {title:38}" + "".join(f"{rate / peak:14.0%}" for rate in shares))


def loop_kernels(loop: Loop) -> int | None:
    """Kernels XLA launches per step: instructions of the while body that do work."""
    try:
        hlo = loop.trainer.steps_function.experimental_get_compiler_ir(tf.constant(1, tf.int32))(
            stage="optimized_hlo"
        )
    except Exception:  # informational only: the IR API is experimental
        return None
    bodies = [c for c in re.split(r"\n(?=\S)", hlo) if "body" in c.split("\n", 1)[0]]
    if not bodies:
        return None
    body = max(bodies, key=len)
    opcodes = re.findall(r"= \S+ ([a-z][\w-]*)\(", body)
    bookkeeping = {"parameter", "get-tuple-element", "bitcast", "constant", "tuple"}
    return sum(opcode not in bookkeeping for opcode in opcodes)


# ------------------------------------------------------------------------------------------
# Reporting


def matmul_peak(compiled: bool = False) -> float:
    """FLOP/s of a 1024³ float32 matmul: the machine's practical peak, for the ratios.

    compiled: the same product compiled by XLA, as hyperscan's loop is, instead of TensorFlow's
    own kernel (oneDNN): the ceiling for any XLA-compiled step on this machine.
    """
    a = tf.random.normal((1024, 1024))
    product = tf.function(tf.linalg.matmul, jit_compile=True) if compiled else tf.linalg.matmul
    product(a, a).numpy()
    samples = Samples()
    for _ in range(10):
        samples.time("matmul", lambda: product(a, a).numpy())
    return 2 * 1024**3 / min(samples.wall["matmul"])  # the best: a peak, not a typical time


def member_step_flops(setup: Setup) -> float:
    """Matmul FLOPs of one member-step (forward + backward); elementwise work left out."""
    model = setup.model
    points = model._features.shape[0]
    sizes = [p.shape[1:] for p in setup.params[0::2]]
    products = [fan_in * fan_out for fan_in, fan_out in sizes]
    # Backward: one product for the weight gradients, one for the inputs (not the first layer).
    network = 2 * points * (3 * sum(products) - products[0])
    # The FK matrices as multiplied: without the PDF rows no point uses.
    fk = model._data_products.flops()
    if model._positivity_products is not None:
        fk += model._positivity_products.flops()
    return float(network + fk + model.whitening_flops())


def vector_extensions(flags: set[str]) -> str:
    """The CPU's widest float vector units, from its /proc/cpuinfo flags.

    They decide how far the step can get towards the matmul peak: AVX-512 doubles the peak
    that the FK products can use but not the speed of the step's small kernels
    (docs/performance.md).
    """
    if "avx512f" in flags:
        widest = "AVX-512"
    elif "avx2" in flags:
        widest = "AVX2"
    elif "avx" in flags:
        widest = "AVX"
    else:
        return "no AVX"
    return f"{widest} with AMX" if "amx_tile" in flags else widest


def machine_info() -> str:
    model_name = platform.processor() or "?"
    extensions = "?"
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            lines = cpuinfo.read().splitlines()
        names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
        model_name = names[0] if names else model_name
        flags = next((line.split(":", 1)[1] for line in lines if line.startswith("flags")), "")
        extensions = vector_extensions(set(flags.split())) if flags else extensions
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    threads = tf.config.threading.get_intra_op_parallelism_threads() or "default"
    devices = ", ".join(d.device_type for d in tf.config.list_physical_devices())
    return "\n".join(
        [
            f"date: {datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}",
            f"machine: {cores} cores ({model_name}; {extensions}), load average at start {load}",
            f"TensorFlow {tf.__version__}, Keras {keras.__version__}, numpy {np.__version__}, "
            f"Python {platform.python_version()}; devices: {devices}; "
            f"intra-op threads: {threads}",
        ]
    )


def fmt_time(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def met(ok: bool) -> str:
    return "MET" if ok else "NOT MET"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="~2 minutes: fewer steps/repeats")
    parser.add_argument(
        "--size", default="small", choices=CLOSURE_SIZES, help="closure problem (default small)"
    )
    parser.add_argument(
        "--breakdown",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="time the stages of one step (default: on, off with --quick)",
    )
    parser.add_argument("--threads", type=int, default=0, help="intra-op threads (0: TF default)")
    return parser.parse_args()


def make_plan(args: argparse.Namespace) -> Plan:
    breakdown = (not args.quick) if args.breakdown is None else args.breakdown
    if args.quick:
        return Plan(args.size, (1, 10, 100), (100,), 3, 5, 1, 2, breakdown)
    return Plan(args.size, (1, 10, 100), (100, 1000), 5, 15, 2, 10, breakdown)


def main() -> None:
    args = parse_args()
    if args.threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    plan = make_plan(args)
    tf.get_logger().setLevel("ERROR")  # each Trainer traces once; TF warns across instances
    started = time.perf_counter()
    print("hyperscan fit-engine benchmark" + (" (--quick)" if args.quick else ""))
    print(machine_info())
    print(
        f"problem: closure '{plan.size}', 2-{'-'.join(map(str, NNPDF40_NODES))}-8 tanh, Nadam "
        "with clipnorm, float32, positivity on, patience 1.0 (no member stops while timed)"
    )
    setups = {r: build_setup(plan.size, r, NNPDF40_NODES) for r in plan.replicas}
    model = setups[plan.replicas[0]].model
    products = model._positivity_products
    positivity = 0 if products is None else products.n_points
    print(
        f"sizes: {model._data.shape[1]} data points, {positivity} positivity points; the network "
        f"runs on {model._features.shape[0]} points ({model.xgrid.size} x-grid + "
        f"{model._features.shape[0] - model.xgrid.size} sum-rule nodes)"
    )

    timings: dict[int, EnsembleTiming] = {}
    for r in plan.replicas:
        timings[r] = time_ensemble(setups[r], plan)
        print(f"  ... R={r} timed ({time.perf_counter() - started:.0f} s)", flush=True)
    fits = min(plan.sequential_fits, max(plan.replicas))
    sequential = time_sequential_keras(plan.size, fits, plan)
    print(f"  ... {fits} sequential fits timed ({time.perf_counter() - started:.0f} s)")

    k_ref = plan.steps_per_call[0]
    reference = f"hyperscan loop, K={k_ref}"
    rows: dict[str, dict[int, float]] = {f"hyperscan loop, K={k}": {} for k in plan.steps_per_call}
    sequential_name = "Keras sequential fits, 1 step/epoch"
    epoch_name = "Keras batched, 1 step/epoch"
    trick_name = f"Keras batched, steps as batch ({TRICK_STEPS_PER_EPOCH}/ep.)"
    rows.update({sequential_name: {}, epoch_name: {}, trick_name: {}})
    notes = []
    for r, timing in timings.items():
        for k, seconds in timing.hyperscan.items():
            rows[f"hyperscan loop, K={k}"][r] = seconds / r
        timed = min(r, fits)
        rows[sequential_name][r] = float(np.mean(sequential.per_step[:timed]))
        if timed < r:
            notes.append(f"sequential R={r}: {timed} fits timed, extrapolated linearly to {r}")
        rows[epoch_name][r] = timing.keras_epoch / r
        rows[trick_name][r] = timing.keras_trick / r

    print(
        f"\nTime per member-step, median of {plan.repeats} repeats after a warm-up call "
        f"(in brackets: ÷ {reference}; >1 means hyperscan is faster)"
    )
    print(f"  {'':42}" + "".join(f"{f'R={r}':>22}" for r in plan.replicas))
    for name, values in rows.items():
        cells = "".join(
            f"{fmt_time(values[r]):>12} ({values[r] / rows[reference][r]:5.1f}×)"
            for r in plan.replicas
        )
        print(f"  {name:42}{cells}")
    cpu = "".join(f"{fmt_time(timings[r].hyperscan_cpu / r):>22}" for r in plan.replicas)
    print(f"  {f'hyperscan K={k_ref}, CPU time (all threads)':42}{cpu}")
    cores = "".join(f"{timings[r].hyperscan_cores:22.2f}" for r in plan.replicas)
    print(f"  {f'hyperscan K={k_ref}, cores busy (CPU/wall)':42}{cores}")
    for note in notes:
        print(f"  note: {note}")
    fit_seconds = ", ".join(
        f"R={r}: {fmt_time(rows[sequential_name][r] * r * EPOCHS_PER_FIT_REFERENCE)}"
        for r in plan.replicas
    )
    print(
        f"  note: each sequential fit also spends {np.median(sequential.setup_seconds):.1f} s "
        "building, compiling and tracing (not in the table);"
    )
    print(f"        {EPOCHS_PER_FIT_REFERENCE} steps of R sequential fits: {fit_seconds}")
    jit = timings[plan.replicas[0]].keras_jit
    print(f"  note: Keras jit_compile='auto' resolved to {jit} (Keras turns XLA off on CPU-only)")
    diverged = {r: t.diverged for r, t in timings.items() if t.diverged}
    if diverged:
        counts = ", ".join(f"R={r}: {n}" for r, n in diverged.items())
        print(
            f"  note: members diverged while timed ({counts}); hyperscan freezes them with "
            "tf.where but still computes them, so the time per member-step holds"
        )

    peak, xla_peak = matmul_peak(), matmul_peak(compiled=True)
    flops = member_step_flops(setups[plan.replicas[0]])
    rates = {r: flops / rows[reference][r] for r in plan.replicas}  # FLOP/s achieved
    achieved = ", ".join(
        f"R={r}: {rate / 1e9:.1f} ({rate / peak:.0%})" for r, rate in rates.items()
    )
    print(
        f"\nThroughput: {flops / 1e6:.2f} MFLOP of matmuls per member-step (forward+backward); "
        f"matmul peak (1024³ float32) {peak / 1e9:.0f} GFLOP/s"
    )
    print(f"  hyperscan K={k_ref}, GFLOP/s (of peak): {achieved}")
    print(
        f"  the same 1024³ product compiled by XLA: {xla_peak / 1e9:.0f} GFLOP/s; of that, "
        f"R={plan.replicas[-1]} reaches {rates[plan.replicas[-1]] / xla_peak:.0%}"
    )

    print("\nSanity check, Keras vs hyperscan (same loss, same first Nadam step):")
    for r, timing in timings.items():
        check = timing.check
        print(
            f"  R={r}: loss at the initial weights, relative difference {check.loss_relative:.1e};"
            f" weights after one step, max |Δθ| = {check.step_keras:.1e} lr (hyperscan with vs "
            f"without XLA: {check.step_floor:.1e} lr)"
        )
    ok = all(t.check.ok for t in timings.values())
    print(f"  {'OK' if ok else 'MISMATCH'} (loss to 1e-5; θ to 1e-4 lr or 10× the XLA floor)")

    print("\nPer-step overhead on a tiny problem (closure 'tiny', R=1, nodes [4]):")
    tiny = build_setup("tiny", 1, TINY_NODES)
    tiny_timing = time_ensemble(tiny, plan, TINY_STEPS_PER_CALL)
    tiny_step = tiny_timing.hyperscan[TINY_STEPS_PER_CALL[0]]  # K=100, as the reference
    for k, seconds in tiny_timing.hyperscan.items():
        print(f"  hyperscan loop, K={k}: {fmt_time(seconds)} per step")
    idle = Loop(tiny)
    call = median_seconds(lambda: idle.call(0), 10 * plan.repeats)
    print(
        f"    of which the host's share: a call running no step (dispatch, sync) "
        f"takes {fmt_time(call)}, i.e. {fmt_time(call / TINY_STEPS_PER_CALL[0])} per step at "
        f"K={TINY_STEPS_PER_CALL[0]}"
    )
    kernels = loop_kernels(idle)
    if kernels is not None:
        longest = TINY_STEPS_PER_CALL[-1]
        print(
            f"    XLA runs {kernels} kernels per step: "
            f"{fmt_time(tiny_timing.hyperscan[longest] / kernels)} per kernel at K={longest}"
        )
    print(
        f"  Keras steps as batch: {fmt_time(tiny_timing.keras_trick)} per step (measured earlier: "
        f"{fmt_time(REFERENCE_TRICK_STEP)}); one step per epoch "
        f"{fmt_time(tiny_timing.keras_epoch)}"
    )
    print(
        "  measured earlier: a tf.function running 100 steps with XLA, "
        f"{fmt_time(REFERENCE_XLA_LOOP_STEP)}"
    )

    speedup = rows[trick_name][100] / rows[reference][100]
    speedup_cpu = timings[100].keras_trick_cpu / timings[100].hyperscan_cpu
    print("\nTargets:")
    print(
        f"  per-step overhead ≤ {fmt_time(TARGET_OVERHEAD)}: {fmt_time(tiny_step)} "
        f"→ {met(tiny_step <= TARGET_OVERHEAD)}"
    )
    print(
        f"  R=100: hyperscan (K={k_ref}) ≥ {TARGET_SPEEDUP_R100}× faster than steps as batch: "
        f"{speedup:.2f}× → {met(speedup >= TARGET_SPEEDUP_R100)}"
    )
    print(
        f"    by CPU time instead (all threads; less sensitive to other load): {speedup_cpu:.2f}×"
    )

    if plan.size == "nnpdf40":
        share = rates[100] / peak
        print(
            f"  R=100 on the NNPDF4.0-shaped problem ≥ {TARGET_PEAK_SHARE:.0%} of the matmul "
            f"peak: {share:.0%} → {met(share >= TARGET_PEAK_SHARE)}"
        )

    if plan.breakdown:
        labelled = {f"R={r}": setup for r, setup in setups.items()}
        labelled["tiny,R=1,[4]"] = tiny
        run_breakdown(plan, labelled, peak)
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    print(
        f"\ntotal wall time {time.perf_counter() - started:.0f} s; load average at the end {load}"
    )
    if os.getloadavg()[0] > (os.cpu_count() or 1):
        print("warning: the machine was busy with other work; compare ratios, not absolute times")


if __name__ == "__main__":
    main()
