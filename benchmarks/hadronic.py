# SPDX-License-Identifier: GPL-3.0-or-later
"""What a hadronic (two-PDF) data point costs the engine (issue #50), in one run.

    python benchmarks/hadronic.py [--quick] [--points 500] [--pairs 40] [--nx 40]

First the machine's ceilings: the 1024³ float32 matmul (TensorFlow's kernel and XLA's) and
the memory bandwidth (an XLA sum over 512 MiB), as the product of a table with few members
streams the table and does little else.

1. Bytes per hadronic point: a dense table holds (14·n_x)² entries per point, all 196 flavour
   pairs of FK_BASIS; the masked table hyperscan keeps (as n3fit's luminosity mask) P·n_x², its
   P non-zero pairs only. In float64 (8 bytes, as the host holds tables; the model's float32
   constant is half) for n_x = 30, 40, 50 and P = 20, 40, 60, 81. The assumption: with 9
   non-zero flavours at Q0 (Σ, g, V, V3, V8, V15, T3, T8, T15; the photon is zero and T24,
   T35, V24, V35 are folded in), at most 81 pairs are non-zero, and an NNPDF Drell–Yan table in
   the evolution basis uses ~20 (fixed-target) to ~60 (collider W/Z) of them; 40 is the
   default below.
2. The training step with N DIS-like points against N hadronic points, at R = 1, 16, 100
   members: two made-up problems of the same N (`--points`, in tables of `--table-points`),
   the same x grids (`--nx` nodes each, on the standard 50-node grid) and the same diagonal
   covariance (5% errors, no positivity), one with (n, 14, n_x) tables on the 9 non-zero
   flavours, one with (n, P, n_x, n_x) tables on P (`--pairs`) pairs drawn from the 81; each
   built by `build_ensemble` as a fit builds it (2-25-20-8 tanh, Nadam with clipnorm,
   float32, XLA, patience 1.0 so that no member stops while timed) and timed in
   `Trainer.advance` calls of K steps, K chosen per ensemble so that a call takes ~0.3 s, the
   two kinds in interleaved rounds, medians over `--repeats`. Also the data tables alone
   (`TableProducts`, forward + backward on a fixed PDF, in an XLA loop), with the FLOP/s and
   the table bytes/s they reach. Same N, so the ratios hadronic/DIS are per point.
3. Contraction order, forward + gradient with respect to the PDF (M, n_x, 8), at M = 1, 16,
   100, in a tf.function with XLA (jit_compile=True) and without, for one table of
   `--table-points` points (P pairs, n_x nodes; ~24 MiB, which a large L3 may hold) and for as
   many tables as part 2's problem has (what a fit streams each step):
   (a) luminosity first: L = left ⊗ right (M, P·n_x²) @ FK (P·n_x², n);
   (a') the same order with the table held transposed, (n, P·n_x²), and L @ FKᵀ, as the
   engine holds it since this benchmark's first run (3× faster at M = 1 with XLA);
   (b) table × PDF first, as einsums: T = einsum('mpa,npab->mnpb', left, FK), then
       einsum('mnpb,mpb->mn', T, right);
   (c) table × PDF first as one batched matmul over the pairs: FK laid out (P, n_x, n·n_x)
       once, T = left (P, M, n_x) @ FK → (P, M, n, n_x), then Σ_pb T·right.
   All are checked against the host's `FkTable.predictions` in float64 first.

Times are medians of repeats after a warm-up (tracing and compilation excluded); the machine
is shared, so compare the ratios within one run. The default run takes ~4 minutes on 2 cores,
`--quick` (small sizes, for the smoke test) well under one.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from fit_engine import (  # noqa: E402
    EPOCHS,
    NNPDF40_NODES,
    Loop,
    Samples,
    Setup,
    fmt_time,
    machine_info,
    matmul_peak,
)

from hyperscan.data import (  # noqa: E402
    FK_BASIS,
    STANDARD_XGRID,
    Dataset,
    FkTable,
    Problem,
    fit_to_fk_rotation,
    toy_pdf,
)
from hyperscan.fit import build_ensemble, trainer_settings  # noqa: E402
from hyperscan.runcard import FitRuncard  # noqa: E402

#: The flavours of FK_BASIS that are non-zero at Q0 (the photon is zero; T24, T35, V24 and V35
#: are folded into Σ and V): a hadronic table has at most 9² = 81 non-zero pairs.
ACTIVE_FLAVOURS = ("Sigma", "g", "V", "V3", "V8", "V15", "T3", "T8", "T15")
MAX_PAIRS = len(ACTIVE_FLAVOURS) ** 2
DENSE_PAIRS = len(FK_BASIS) ** 2
BYTES_NX = (30, 40, 50)
BYTES_PAIRS = (20, 40, 60, MAX_PAIRS)
REPLICAS = (1, 16, 100)
MEMBERS = (1, 16, 100)
FLOAT64 = 8
#: An order beats (a) when it takes less than this share of (a)'s time (noise aside).
WIN = 0.95
#: What one timed call of K steps should take: K = this / the step's time, within [1, 1000].
CALL_SECONDS = 0.3
ORDERS = {
    "a": "(a) luminosity first, FK (P·n_x², n)",
    "a'": "(a') luminosity first, FK held transposed (n, P·n_x²), as the engine holds it",
    "b": "(b) table × PDF first, two einsums",
    "c": "(c) table × PDF first, one batched matmul over the pairs",
}


@dataclass(frozen=True)
class Plan:
    """How much to time: the default takes ~3–4 minutes on 2 cores, --quick under one."""

    points: int
    table_points: int
    pairs: int
    nx: int
    replicas: tuple[int, ...]
    repeats: int
    call_seconds: float
    members: tuple[int, ...]
    contraction_tables: tuple[int, ...]  # working sets of part 3, in tables of table_points


# ------------------------------------------------------------------------------------------
# 1. Bytes per point


def dense_bytes(nx: int, itemsize: int = FLOAT64) -> int:
    """One point of a dense hadronic table: all 14 × 14 flavour pairs on n_x × n_x nodes."""
    return (len(FK_BASIS) * nx) ** 2 * itemsize


def masked_bytes(pairs: int, nx: int, itemsize: int = FLOAT64) -> int:
    """One point of the masked table hyperscan keeps: its P non-zero pairs only."""
    return pairs * nx**2 * itemsize


def dis_bytes(nx: int, itemsize: int = FLOAT64) -> int:
    """One DIS point, for scale: 14 flavours on n_x nodes."""
    return len(FK_BASIS) * nx * itemsize


def fmt_bytes(count: float) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count:.0f} B"


def print_bytes(points: int) -> None:
    print(
        f"\n1. Bytes per hadronic point, float64 (the model's float32 constant is half); dense: "
        f"all {DENSE_PAIRS} pairs, masked: P non-zero pairs (≤ {MAX_PAIRS}: 9 non-zero "
        "flavours at Q0)"
    )
    header = "".join(f"{f'P={p}':>22}" for p in BYTES_PAIRS)
    print(f"  {'n_x':>4} {'DIS':>10} {'dense':>11}{header}")
    for nx in BYTES_NX:
        cells = "".join(
            f"{fmt_bytes(masked_bytes(p, nx)):>11} ({dense_bytes(nx) / masked_bytes(p, nx):5.1f}×)"
            for p in BYTES_PAIRS
        )
        print(f"  {nx:4d} {fmt_bytes(dis_bytes(nx)):>10} {fmt_bytes(dense_bytes(nx)):>11}{cells}")
    print("  (in brackets: dense ÷ masked)")
    for nx in BYTES_NX:
        print(
            f"  {points} points, n_x={nx}: dense {fmt_bytes(points * dense_bytes(nx))}, masked "
            f"P=40 {fmt_bytes(points * masked_bytes(40, nx))}, DIS "
            f"{fmt_bytes(points * dis_bytes(nx))}"
        )


# ------------------------------------------------------------------------------------------
# The machine's ceilings


@dataclass(frozen=True)
class Peaks:
    """FLOP/s of a 1024³ float32 matmul (TensorFlow's kernel and XLA's) and bytes/s of an
    XLA-compiled sum over 512 MiB: what the table products can reach on this machine."""

    matmul: float
    xla_matmul: float
    bandwidth: float


def memory_bandwidth(mib: int = 512) -> float:
    """Bytes/s of an XLA-compiled sum over ``mib`` MiB of float32, the best of 10: the rate
    at which a step can stream tables that no cache holds."""
    x = tf.ones([mib * 2**20 // 4], tf.float32)
    total = tf.function(tf.reduce_sum, jit_compile=True)
    total(x).numpy()
    samples = Samples()
    for _ in range(10):
        samples.time("sum", lambda: total(x).numpy())
    return mib * 2**20 / min(samples.wall["sum"])


def measure_peaks() -> Peaks:
    return Peaks(matmul_peak(), matmul_peak(compiled=True), memory_bandwidth())


# ------------------------------------------------------------------------------------------
# 2. Made-up problems: N DIS-like or N hadronic points on the same grids and covariance


def table_grids(tables: int, nx: int) -> list[np.ndarray]:
    """Each table's x grid: nx consecutive nodes of the standard grid, ending at x = 1 or a few
    nodes below (real tables start a few nodes below their smallest data x)."""
    size = STANDARD_XGRID.size
    if not 2 <= nx <= size:
        raise ValueError(f"n_x must lie in [2, {size}], got {nx}")
    ends = [size - min(2 * i, size - nx) for i in range(tables)]
    return [STANDARD_XGRID[end - nx : end] for end in ends]


def active_pairs(count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` distinct (a, b) FK_BASIS index pairs among the non-zero flavours, sorted."""
    if not 1 <= count <= MAX_PAIRS:
        raise ValueError(f"pairs must lie in [1, {MAX_PAIRS}], got {count}")
    active = [FK_BASIS.index(f) for f in ACTIVE_FLAVOURS]
    every = np.array([(a, b) for a in active for b in active])
    return every[np.sort(rng.choice(len(every), count, replace=False))]


def _bumps(n: int, logs: np.ndarray, rng: np.random.Generator, dims: int) -> np.ndarray:
    """(n, n_x[, n_x]) smooth positive entries, each point peaked at its own x (x1, x2)."""
    centres = rng.uniform(logs[1], logs[-2], size=(n, dims))
    out = np.exp(-0.5 * (logs[None, :] - centres[:, 0, None]) ** 2)
    if dims == 2:
        out = out[:, :, None] * np.exp(-0.5 * (logs[None, :] - centres[:, 1, None]) ** 2)[:, None]
    return out


def made_up_table(
    n: int, xgrid: np.ndarray, pairs: np.ndarray | None, rng: np.random.Generator
) -> FkTable:
    """A table of n points, DIS-like (pairs None: the 9 non-zero flavours) or hadronic, with
    smooth positive made-up entries scaled so that the toy PDF predicts values of order 1."""
    logs = np.log(xgrid)
    if pairs is None:
        fk = np.zeros((n, len(FK_BASIS), xgrid.size))
        rows = [FK_BASIS.index(f) for f in ACTIVE_FLAVOURS]
        weights = rng.uniform(0.5, 1.5, size=(n, len(rows), 1))
        fk[:, rows] = weights * _bumps(n, logs, rng, 1)[:, None]
        table = FkTable(fk, xgrid)
    else:
        weights = rng.uniform(0.5, 1.5, size=(n, len(pairs), 1, 1))
        table = FkTable(weights * _bumps(n, logs, rng, 2)[:, None], xgrid, pairs)
    xf14 = fit_to_fk_rotation() @ toy_pdf(xgrid).T
    scale = np.abs(table.predictions(xf14))
    scale = np.maximum(scale, 0.1 * np.median(scale))
    shape = (-1,) + (1,) * (table.fk.ndim - 1)
    return FkTable(table.fk / scale.reshape(shape), xgrid, pairs)


def made_up_problem(
    kind: str, points: int, table_points: int, nx: int, pairs: int, seed: int = 0
) -> Problem:
    """``points`` points in tables of ``table_points``: kind "dis" or "hadronic" (P =
    ``pairs``); central = the toy PDF's predictions, diagonal covariance with 5% errors. The
    two kinds with one seed share their x grids and their covariance's structure."""
    rng = np.random.default_rng(seed)
    sizes = [table_points] * (points // table_points)
    if points % table_points:
        sizes.append(points % table_points)
    datasets = []
    for index, (n, xgrid) in enumerate(zip(sizes, table_grids(len(sizes), nx), strict=True)):
        table_pairs = active_pairs(pairs, rng) if kind == "hadronic" else None
        table = made_up_table(n, xgrid, table_pairs, rng)
        central = table.predictions(fit_to_fk_rotation() @ toy_pdf(xgrid).T)
        process = "DY" if kind == "hadronic" else "DIS_NC"
        kinematics = np.zeros((n, 3))
        datasets.append(Dataset(f"{kind.upper()}_{index}", process, (table,), central, kinematics))
    central = np.concatenate([d.central for d in datasets])
    sigma = 0.05 * np.maximum(np.abs(central), 0.1)
    return Problem(tuple(datasets), np.diag(sigma**2))


def build_problem_setup(problem: Problem, replicas: int, nodes: Sequence[int]) -> Setup:
    """`problem` as `build_ensemble` builds a fit of it: float32, XLA, patience 1.0."""
    card = FitRuncard.model_validate(
        {
            "replicas": replicas,
            "architecture": {"nodes": list(nodes)},
            "epochs": EPOCHS,
            "stopping": {"patience": 1.0},
            "training": {"precision": "float32", "jit": True},
        }
    )
    model, specs, params = build_ensemble(card, problem=problem)
    return Setup(model, params, trainer_settings(card, len(specs)))


def steps_per_call(loop: Loop, call_seconds: float) -> int:
    """K such that a call of K steps takes about ``call_seconds`` (a few steps timed)."""
    loop.call(1)
    start = time.perf_counter()
    loop.call(2)
    step = (time.perf_counter() - start) / 2
    return int(np.clip(round(call_seconds / step), 1, 1000))


def fk_runner(setup: Setup) -> Callable[[int], None]:
    """Forward + backward of the data tables alone on a fixed PDF, in an XLA loop: runner(n)
    runs n iterations."""
    model = setup.model
    rng = np.random.default_rng(1)
    shape = (model.n_members, model.xgrid.size, 8)
    pdf = tf.constant(rng.uniform(0.1, 1.0, shape), tf.float32)

    return compiled_loop(descend(model._data_products), pdf, jit=True)


@dataclass
class StepTiming:
    """Seconds per step of the whole training step and of the FK contraction alone."""

    step: dict[str, float]  # kind → s per step
    cpu: dict[str, float]  # kind → CPU s per step
    fk: dict[str, float]  # kind → s per forward + backward of the tables alone
    k: dict[str, int]  # kind → steps per call
    fk_flops: dict[str, float]  # kind → matmul FLOPs of the tables per step, all members
    fk_bytes: dict[str, int]  # kind → bytes of the model's table constants


def table_bytes(setup: Setup) -> int:
    """Bytes of the model's data-table constants (the DIS matrix and every hadronic table)."""
    products = setup.model._data_products
    tables = [t.fk for t in products._hadronic]
    if products._linear is not None:
        tables.append(products._linear)
    return sum(int(t.shape.num_elements()) * t.dtype.size for t in tables)


def time_steps(problems: dict[str, Problem], replicas: int, plan: Plan) -> StepTiming:
    """Each kind's training step at R = ``replicas``, the kinds in interleaved rounds."""
    setups = {kind: build_problem_setup(p, replicas, NNPDF40_NODES) for kind, p in problems.items()}
    loops = {kind: Loop(setup) for kind, setup in setups.items()}
    ks = {kind: steps_per_call(loop, plan.call_seconds) for kind, loop in loops.items()}
    fk_steps = {kind: max(1, k // 2) for kind, k in ks.items()}
    fks = {kind: fk_runner(setups[kind]) for kind in problems}
    samples = Samples()
    for _ in range(plan.repeats):
        for kind, loop in loops.items():
            samples.time(f"step/{kind}", lambda loop=loop, k=ks[kind]: loop.call(k), per=ks[kind])
            samples.time(
                f"fk/{kind}", lambda r=fks[kind], s=fk_steps[kind]: r(s), per=fk_steps[kind]
            )
    for loop in loops.values():
        loop.diverged()  # raises if a member stopped or all diverged: the timing would be void
    return StepTiming(
        step={kind: samples.median(f"step/{kind}") for kind in problems},
        cpu={kind: samples.median_cpu(f"step/{kind}") for kind in problems},
        fk={kind: samples.median(f"fk/{kind}") for kind in problems},
        k=ks,
        fk_flops={k: s.model._data_products.flops() * replicas for k, s in setups.items()},
        fk_bytes={kind: table_bytes(setup) for kind, setup in setups.items()},
    )


def print_steps(timings: dict[int, StepTiming], plan: Plan, peaks: Peaks) -> None:
    print(
        f"\n2. Training step, {plan.points} DIS-like points against {plan.points} hadronic points "
        f"(P={plan.pairs}, n_x={plan.nx}), median of {plan.repeats} interleaved rounds"
    )
    print(
        f"  {'R':>4} {'DIS step':>11} {'hadr. step':>11} {'hadr./DIS':>10} {'µs/member-pt':>14}"
        f" {'FK DIS':>11} {'FK hadr.':>11} {'hadr./DIS':>10} {'K DIS/hadr.':>12}"
    )
    for r, t in timings.items():
        per_point = t.step["hadronic"] / (r * plan.points)
        print(
            f"  {r:4d} {fmt_time(t.step['dis']):>11} {fmt_time(t.step['hadronic']):>11} "
            f"{t.step['hadronic'] / t.step['dis']:9.1f}× {per_point * 1e6:14.3f} "
            f"{fmt_time(t.fk['dis']):>11} {fmt_time(t.fk['hadronic']):>11} "
            f"{t.fk['hadronic'] / t.fk['dis']:9.1f}× {t.k['dis']:>6}/{t.k['hadronic']:<5}"
        )
    print(
        "  step: the whole training step (Trainer.advance, K steps per call); FK: forward + "
        "backward of the data tables alone on a fixed PDF; µs/member-pt: the hadronic step ÷ "
        "(R × N); same N, so hadr./DIS is the ratio per point"
    )
    for r, t in timings.items():
        cores = t.cpu["hadronic"] / t.step["hadronic"]
        extra = (t.step["hadronic"] - t.step["dis"]) / (r * plan.points)
        print(
            f"  R={r}: a hadronic point adds {extra * 1e6:.3f} µs per member-step over a DIS one"
            f" (hadronic step {cores:.2f} cores busy)"
        )
    first = next(iter(timings.values()))
    print(
        f"  the hadronic tables alone, {fmt_bytes(first.fk_bytes['hadronic'])} of float32 (DIS: "
        f"{fmt_bytes(first.fk_bytes['dis'])}), streamed twice a step (forward, backward):"
    )
    for r, t in timings.items():
        rate = t.fk_flops["hadronic"] / t.fk["hadronic"]
        stream = 2 * t.fk_bytes["hadronic"] / t.fk["hadronic"]
        print(
            f"    R={r}: {rate / 1e9:.1f} GFLOP/s ({rate / peaks.xla_matmul:.0%} of the XLA "
            f"matmul peak), {stream / 1e9:.1f} GB/s of table ({stream / peaks.bandwidth:.0%} "
            "of the bandwidth measured)"
        )


# ------------------------------------------------------------------------------------------
# 3. Contraction order


@dataclass(frozen=True)
class Contraction:
    """One hadronic table's constants in each order's layout, and its pairs' rotation rows."""

    left_rows: tf.Tensor  # (P, 8) fitted → FK row of each pair's first flavour
    right_rows: tf.Tensor  # (P, 8) ... and of its second
    fk_flat: tf.Tensor  # (P·n_x·n_x, n): (a)
    fk_rows: tf.Tensor  # (n, P·n_x·n_x): (a'), the same matrix transposed, as the engine
    fk: tf.Tensor  # (n, P, n_x, n_x): (b)
    fk_pairs: tf.Tensor  # (P, n_x, n·n_x): (c)

    @classmethod
    def of(cls, table: FkTable, dtype: tf.DType) -> Contraction:
        rotation = fit_to_fk_rotation()
        fk = table.fk
        n, pairs, nx, _ = fk.shape
        return cls(
            tf.constant(rotation[table.pairs[:, 0]], dtype),
            tf.constant(rotation[table.pairs[:, 1]], dtype),
            tf.constant(fk.reshape(n, -1).T, dtype),
            tf.constant(fk.reshape(n, -1), dtype),
            tf.constant(fk, dtype),
            tf.constant(fk.transpose(1, 2, 0, 3).reshape(pairs, nx, n * nx), dtype),
        )

    def sides(self, pdf: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """pdf (M, n_x, 8) in the fitted basis → each pair's two flavours, (M, P, n_x) each."""
        left = tf.einsum("mxk,pk->mpx", pdf, self.left_rows)
        right = tf.einsum("mxk,pk->mpx", pdf, self.right_rows)
        return left, right

    def luminosity(self, pdf: tf.Tensor) -> tf.Tensor:
        left, right = self.sides(pdf)
        return tf.reshape(left[:, :, :, None] * right[:, :, None, :], [tf.shape(pdf)[0], -1])

    def luminosity_first(self, pdf: tf.Tensor) -> tf.Tensor:
        return self.luminosity(pdf) @ self.fk_flat

    def luminosity_first_rows(self, pdf: tf.Tensor) -> tf.Tensor:
        return tf.linalg.matmul(self.luminosity(pdf), self.fk_rows, transpose_b=True)

    def table_first(self, pdf: tf.Tensor) -> tf.Tensor:
        left, right = self.sides(pdf)
        half = tf.einsum("mpa,npab->mnpb", left, self.fk)
        return tf.einsum("mnpb,mpb->mn", half, right)

    def table_first_batched(self, pdf: tf.Tensor) -> tf.Tensor:
        left, right = self.sides(pdf)
        members = tf.shape(pdf)[0]
        pairs, nx = self.fk_pairs.shape[0], self.fk_pairs.shape[1]
        half = tf.transpose(left, [1, 0, 2]) @ self.fk_pairs  # (P, M, n·n_x)
        half = tf.reshape(half, [pairs, members, -1, nx])
        return tf.einsum("pmnb,pmb->mn", half, tf.transpose(right, [1, 0, 2]))

    def order(self, key: str) -> Callable[[tf.Tensor], tf.Tensor]:
        return {
            "a": self.luminosity_first,
            "a'": self.luminosity_first_rows,
            "b": self.table_first,
            "c": self.table_first_batched,
        }[key]


def contraction_tables(tables: int, points: int, pairs: int, nx: int) -> list[FkTable]:
    """``tables`` hadronic tables of ``points`` points on one grid of ``nx`` nodes."""
    rng = np.random.default_rng(2)
    grid = table_grids(1, nx)[0]
    return [made_up_table(points, grid, active_pairs(pairs, rng), rng) for _ in range(tables)]


def observables(contractions: Sequence[Contraction], key: str) -> Callable[[tf.Tensor], tf.Tensor]:
    """pdf (M, n_x, 8) → (M, Σ n) every table's points, each contracted in order ``key``."""

    def forward(pdf: tf.Tensor) -> tf.Tensor:
        parts = [c.order(key)(pdf) for c in contractions]
        return parts[0] if len(parts) == 1 else tf.concat(parts, axis=1)

    return forward


def member_pdf(members: int, nx: int, seed: int = 3) -> np.ndarray:
    """(M, n_x, 8) the toy PDF on the tables' nodes, each member scaled a little differently."""
    rng = np.random.default_rng(seed)
    grid = table_grids(1, nx)[0]
    return toy_pdf(grid)[None] * rng.uniform(0.8, 1.2, size=(members, 1, 8))


def contraction_check(
    tables: Sequence[FkTable], members: int = 3
) -> dict[str, tuple[float, float]]:
    """Each order in float64 against the host: max |Δ| of the predictions relative to the
    largest, and of the gradient of Σ obs² with respect to the PDF against order (a)'s."""
    contractions = [Contraction.of(t, tf.float64) for t in tables]
    pdf = member_pdf(members, tables[0].xgrid.size)
    xf14 = np.einsum("kf,mxf->mkx", fit_to_fk_rotation(), pdf)
    host = np.concatenate([t.predictions(xf14) for t in tables], axis=1)
    x = tf.constant(pdf)
    predictions, grads = {}, {}
    for key in ORDERS:
        with tf.GradientTape() as tape:
            tape.watch(x)
            obs = observables(contractions, key)(x)
            value = tf.reduce_sum(tf.square(obs))
        grads[key] = tape.gradient(value, x).numpy()
        predictions[key] = float(np.max(np.abs(obs.numpy() - host)) / np.max(np.abs(host)))
    scale = np.max(np.abs(grads["a"]))
    return {
        key: (predictions[key], float(np.max(np.abs(grads[key] - grads["a"])) / scale))
        for key in ORDERS
    }


def compiled_loop(
    update: Callable[[tf.Tensor], tf.Tensor], carry: tf.Tensor, jit: bool
) -> Callable[[int], None]:
    """`update` applied n times in one graph while loop, with XLA or without (traced and
    compiled here); returns runner(n). Each iteration feeds the next: nothing is hoisted."""

    @tf.function(jit_compile=jit, autograph=False)
    def run(c, n):
        return tf.while_loop(lambda i, c: i < n, lambda i, c: (i + 1, update(c)), (0, c))[1]

    run(carry, tf.constant(1))

    def runner(steps: int) -> None:
        run(carry, tf.constant(steps)).numpy()

    return runner


def descend(forward: Callable[[tf.Tensor], tf.Tensor]) -> Callable[[tf.Tensor], tf.Tensor]:
    """One forward + backward (gradient of Σ obs² with respect to the PDF) and a tiny step."""

    def update(pdf: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            tape.watch(pdf)
            value = tf.reduce_sum(tf.square(forward(pdf)))
        return pdf - 1e-9 * tape.gradient(value, pdf)

    return update


def time_contractions(tables: Sequence[FkTable], plan: Plan) -> dict[tuple[int, bool, str], float]:
    """(M, jit, order) → seconds per forward + backward of all ``tables``, the orders timed in
    interleaved rounds of calls that take ~``plan.call_seconds`` each."""
    contractions = [Contraction.of(t, tf.float32) for t in tables]
    out = {}
    for members in plan.members:
        pdf = tf.constant(member_pdf(members, tables[0].xgrid.size), tf.float32)
        for jit in (True, False):
            runners = {
                key: compiled_loop(descend(observables(contractions, key)), pdf, jit)
                for key in ORDERS
            }
            start = time.perf_counter()
            runners["a"](1)
            once = time.perf_counter() - start
            steps = int(np.clip(round(plan.call_seconds / once), 1, 100))
            samples = Samples()
            for _ in range(plan.repeats):
                for key, runner in runners.items():
                    samples.time(key, lambda r=runner, s=steps: r(s), per=steps)
            out.update({(members, jit, key): samples.median(key) for key in ORDERS})
    return out


def print_contractions(
    tables: Sequence[FkTable],
    checks: dict[str, tuple[float, float]],
    times: dict[tuple[int, bool, str], float],
    plan: Plan,
) -> None:
    n, pairs, nx, _ = tables[0].fk.shape
    constant = 4 * sum(t.fk.size for t in tables)
    flops = 2 * 2 * pairs * nx * nx * n * len(tables)  # per member: the product and its backward
    print(
        f"\n3. Contraction order, {len(tables)} table{'s' if len(tables) > 1 else ''} of {n} "
        f"points, P={pairs}, n_x={nx} "
        f"({fmt_bytes(constant)} of float32 table): forward + gradient with respect to the "
        f"PDF, median of {plan.repeats} interleaved rounds"
    )
    for key, label in ORDERS.items():
        prediction, grad = checks[key]
        print(
            f"  {label}: float64, predictions within {prediction:.1e} of the host's "
            f"(relative), gradient within {grad:.1e} of (a)'s"
        )
    print(f"  {'M':>4} {'XLA':>4} " + "".join(f"{f'({key})':>11}" for key in ORDERS))
    for members in plan.members:
        for jit in (True, False):
            row = {key: times[(members, jit, key)] for key in ORDERS}
            best = min(row, key=row.get)
            cells = "".join(f"{fmt_time(row[key]):>11}" for key in ORDERS)
            ratios = " ".join(f"{row[key] / row['a']:5.2f}" for key in ORDERS if key != "a")
            rate = flops * members / row["a"] / 1e9
            print(
                f"  {members:4d} {'on' if jit else 'off':>4} {cells}   ÷(a): {ratios}; "
                f"fastest ({best}); (a) {rate:.1f} GFLOP/s"
            )
    for members in plan.members:
        jit_gain = times[(members, False, "a")] / times[(members, True, "a")]
        print(f"  M={members}: (a) without XLA ÷ with: {jit_gain:.2f}")
    wins = [
        (members, jit, key, times[(members, jit, key)] / times[(members, jit, "a")])
        for members in plan.members
        for jit in (True, False)
        for key in ORDERS
        if key != "a" and times[(members, jit, key)] < WIN * times[(members, jit, "a")]
    ]
    if not wins:
        print(f"  nothing beats (a) by more than {1 - WIN:.0%}")
    for members, jit, key, ratio in wins:
        print(
            f"  ({key}) beats (a) at M={members}, XLA {'on' if jit else 'off'}: {ratio:.2f}× "
            "its time"
        )


# ------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="~1 minute: small sizes")
    parser.add_argument("--points", type=int, help="points of each problem (default 500)")
    parser.add_argument("--table-points", type=int, help="points per table (default 100)")
    parser.add_argument("--pairs", type=int, help="non-zero flavour pairs P (default 40)")
    parser.add_argument("--nx", type=int, help="x nodes per table (default 40)")
    parser.add_argument("--replicas", type=int, nargs="+", help="R (default 1 16 100)")
    parser.add_argument("--members", type=int, nargs="+", help="M of part 3 (default 1 16 100)")
    parser.add_argument("--repeats", type=int, help="timed rounds (default 5)")
    parser.add_argument(
        "--contraction-tables",
        type=int,
        nargs="+",
        help="part 3's working sets, in tables of --table-points (default 1 and all of part 2's)",
    )
    parser.add_argument(
        "--skip", choices=("steps", "contraction"), nargs="*", default=[], help="parts to skip"
    )
    return parser.parse_args(argv)


def make_plan(args: argparse.Namespace) -> Plan:
    if args.quick:
        base = Plan(40, 20, 6, 12, (1, 4), 3, 0.05, (1, 4), (1, 2))
    else:
        base = Plan(500, 100, 40, 40, REPLICAS, 5, CALL_SECONDS, MEMBERS, (1, 5))
    given = {
        "points": args.points,
        "table_points": args.table_points,
        "pairs": args.pairs,
        "nx": args.nx,
        "replicas": None if args.replicas is None else tuple(args.replicas),
        "members": None if args.members is None else tuple(args.members),
        "repeats": args.repeats,
        "contraction_tables": None
        if args.contraction_tables is None
        else tuple(args.contraction_tables),
    }
    plan = dataclasses.replace(base, **{k: v for k, v in given.items() if v is not None})
    if args.contraction_tables is None and not args.quick:
        whole = -(-plan.points // plan.table_points)  # part 2's tables, however many
        plan = dataclasses.replace(plan, contraction_tables=tuple(sorted({1, whole})))
    return plan


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    plan = make_plan(args)
    tf.get_logger().setLevel("ERROR")
    started = time.perf_counter()
    print(
        "hyperscan hadronic-observables benchmark (issue #50)"
        + (" (--quick)" if args.quick else "")
    )
    print(machine_info())
    peaks = measure_peaks()
    print(
        f"peaks: 1024³ float32 matmul {peaks.matmul / 1e9:.0f} GFLOP/s (XLA-compiled "
        f"{peaks.xla_matmul / 1e9:.0f}); memory bandwidth (XLA sum over 512 MiB) "
        f"{peaks.bandwidth / 1e9:.1f} GB/s"
    )
    print_bytes(plan.points)

    if "steps" not in args.skip:
        problems = {
            kind: made_up_problem(kind, plan.points, plan.table_points, plan.nx, plan.pairs)
            for kind in ("dis", "hadronic")
        }
        print(
            f"\nproblems: {plan.points} points each in tables of {plan.table_points}, n_x="
            f"{plan.nx} per table; hadronic P={plan.pairs}; made-up smooth entries, the toy PDF's"
            " predictions as data, diagonal covariance (5%), no positivity; 2-"
            f"{'-'.join(map(str, NNPDF40_NODES))}-8 tanh, Nadam, float32, XLA"
        )
        timings = {}
        for r in plan.replicas:
            timings[r] = time_steps(problems, r, plan)
            print(f"  ... R={r} timed ({time.perf_counter() - started:.0f} s)", flush=True)
        print_steps(timings, plan, peaks)

    if "contraction" not in args.skip:
        for count in plan.contraction_tables:
            tables = contraction_tables(count, plan.table_points, plan.pairs, plan.nx)
            checks = contraction_check(tables)
            times = time_contractions(tables, plan)
            print_contractions(tables, checks, times, plan)
            print(f"  ... timed ({time.perf_counter() - started:.0f} s)", flush=True)

    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    print(
        f"\ntotal wall time {time.perf_counter() - started:.0f} s; load average at the end {load}"
    )


if __name__ == "__main__":
    main()
