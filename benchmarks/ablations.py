# SPDX-License-Identifier: GPL-3.0-or-later
"""What each design choice of the fit engine buys: one training step with it and without it.

    python benchmarks/ablations.py [--replicas 100] [--size nnpdf40] [--rounds 5]

Every row is a whole training step (forward, backward, Nadam, clipping, stopping) of the same
ensemble in hyperscan's compiled loop, with one choice swapped for the alternative; the ratio
is the alternative's time over hyperscan's, in one run, rounds interleaved so that a noisy spell
hits every row. The alternatives are written here as subclasses of ``EnsembleModel`` (the
trainer sees only ``observables``), each doing the same math as the engine:

* XLA: the same loop as a ``tf.function`` without XLA compilation;
* precision: float64 throughout (and what float32 costs in accuracy: χ² differences at the
  initial weights and after a short fit, where training's chaos takes over);
* FK layout: one product per dataset on its own x grid, or the 14-flavour FK basis padded with
  zeros (n3fit's layout), instead of one product on the union grid in the 8 fitted flavours;
* covariance: the blocks as dense matrices only (the shared/complement scheme of
  ``model/_chi2.py``, without the systematics), per-member dense whitening factors (the scheme
  before it), or per-member Cholesky solves every step, instead of the nuisance way over the
  systematics;
* integration grid: 32 or 192 Gauss-Legendre nodes instead of 64, with the sum-rule error;
* validation pass: a second forward pass for validation (n3fit's separate validation model)
  instead of reading every category's χ² off the training pass.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fit_engine import NNPDF40_NODES, Samples, machine_info  # noqa: E402

from hyperscan.data import FIT_BASIS, fit_to_fk_rotation, load_problem  # noqa: E402
from hyperscan.fit import (  # noqa: E402
    Trainer,
    build_members,
    member_specs,
    trainer_settings,
)
from hyperscan.model import TRAINING, EnsembleModel, sum_rule_quadrature  # noqa: E402
from hyperscan.model._ensemble import Observables  # noqa: E402
from hyperscan.model._network import forward  # noqa: E402
from hyperscan.runcard import FitRuncard  # noqa: E402

N_CATEGORIES = 3


# ------------------------------------------------------------------------------------------
# The alternatives


class PerDatasetFK(EnsembleModel):
    """One product per dataset on its own x grid and the 8 fitted flavours."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        rotation = fit_to_fk_rotation()
        self._tables = []
        for d in self.problem.datasets:
            index = np.searchsorted(self.xgrid, d.xgrid)
            table = np.einsum("nka,kf->afn", d.table.fk, rotation).reshape(-1, d.n_data)
            self._tables.append((tf.constant(index), self._constant(table)))

    def _predict(self, pdf: tf.Tensor) -> tf.Tensor:
        parts = [
            tf.reshape(tf.gather(pdf, index, axis=1), (self.n_members, -1)) @ table
            for index, table in self._tables
        ]
        return tf.concat(parts, axis=1)

    def observables(self, params, multiplier=1.0):
        pdf = self._normalised_pdf(params)
        residuals = self._data - self._predict(pdf)
        return Observables(
            self.chi2_from_residuals(residuals), self.positivity_penalty(pdf, multiplier)
        )


class FourteenFlavourFK(EnsembleModel):
    """The PDF rotated to the 14-flavour FK basis every step, FK tables padded with zeros."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._rotation = self._constant(fit_to_fk_rotation().T)  # (8, 14)
        columns = []
        for d in self.problem.datasets:
            fk = d.table.fk
            padded = np.zeros((d.n_data, self.xgrid.size, fk.shape[1]))
            padded[:, np.searchsorted(self.xgrid, d.xgrid), :] = np.transpose(fk, (0, 2, 1))
            columns.append(padded.reshape(d.n_data, -1))
        self._fk14 = self._constant(np.concatenate(columns).T)

    def observables(self, params, multiplier=1.0):
        pdf = self._normalised_pdf(params)
        pdf14 = tf.reshape(pdf @ self._rotation, (self.n_members, -1))  # (M, P·14)
        residuals = self._data - pdf14 @ self._fk14
        return Observables(
            self.chi2_from_residuals(residuals), self.positivity_penalty(pdf, multiplier)
        )


def _member_factors(model: EnsembleModel, categories: np.ndarray, solve_each_step: bool):
    """Per member and covariance block, the stacked per-category factors (the old scheme)."""
    problem = model.problem
    blocks = []
    for block in problem.blocks():
        cov = problem.covmat[block, block]
        n = cov.shape[0]
        factors = np.zeros((model.n_members, n, n))
        onehot = np.zeros((model.n_members, n, N_CATEGORIES))
        for m, member_categories in enumerate(categories[:, block]):
            row = 0
            for c in range(N_CATEGORIES):
                points = np.flatnonzero(member_categories == c)
                if points.size == 0:
                    continue
                chol = np.linalg.cholesky(cov[np.ix_(points, points)])
                rows = slice(row, row + points.size)
                if solve_each_step:
                    # the permuted, block-diagonal lower factor: solved against every step
                    factors[m][rows, row : row + points.size] = chol
                    onehot[m, rows, c] = 1.0
                else:
                    factors[m][rows, points] = np.linalg.solve(chol, np.eye(points.size))
                    onehot[m, rows, c] = 1.0
                row += points.size
        permutation = np.argsort(categories[:, block], axis=1, kind="stable")
        blocks.append((block, factors, onehot, permutation))
    return blocks


class DenseMemberFactors(EnsembleModel):
    """Each member's own (n, n) factor per block: every step streams M·Σn² numbers."""

    solve_each_step = False

    def __init__(self, problem, members, *args, **kwargs) -> None:
        super().__init__(problem, members, *args, **kwargs)
        factors = _member_factors(self, members.categories, self.solve_each_step)
        self._blocks = [
            (
                block,
                self._constant(factors),
                self._constant(onehot),
                tf.constant(permutation),
            )
            for block, factors, onehot, permutation in factors
        ]

    def observables(self, params, multiplier=1.0):
        pdf = self._normalised_pdf(params)
        residuals = self._data - self._data_products(pdf)
        chi2 = 0.0
        for block, factors, onehot, permutation in self._blocks:
            part = residuals[:, block.start : block.stop]
            if self.solve_each_step:
                ordered = tf.gather(part, permutation, batch_dims=1)
                z = tf.linalg.triangular_solve(factors, ordered[:, :, None], lower=True)[..., 0]
            else:
                z = tf.einsum("mij,mj->mi", factors, part)
            chi2 += tf.einsum("mn,mnc->mc", tf.square(z), onehot)
        return Observables(chi2, self.positivity_penalty(pdf, multiplier))


class CholeskySolves(DenseMemberFactors):
    """Per-member triangular solves with the Cholesky factors, every step."""

    solve_each_step = True


class SeparateValidationPass(EnsembleModel):
    """Validation χ² from a second forward pass, outside the gradient (n3fit's pattern)."""

    def observables(self, params, multiplier=1.0):
        training = super().observables(params, multiplier)
        validation = super().observables([tf.stop_gradient(p) for p in params], multiplier)
        mask = tf.one_hot(TRAINING, N_CATEGORIES, dtype=self.dtype)
        chi2 = training.chi2 * mask + validation.chi2 * (1.0 - mask)
        return Observables(chi2, training.positivity)


# ------------------------------------------------------------------------------------------
# Timing


@dataclasses.dataclass
class Ensemble:
    card: FitRuncard
    problem: object
    inputs: object
    params: list[np.ndarray]


def build(size: str, replicas: int) -> Ensemble:
    card = FitRuncard.model_validate(
        {
            "data": {"closure": {"size": size}},
            "replicas": replicas,
            "architecture": {"nodes": list(NNPDF40_NODES)},
            "epochs": 10**8,
            "stopping": {"patience": 1.0},
            "training": {"precision": "float32"},
        }
    )
    problem = load_problem(card)
    specs = member_specs(card.replica_ids)
    inputs, params = build_members(card, problem, specs)
    return Ensemble(card, problem, inputs, params)


class Loop:
    """A trainer's compiled loop, called K steps at a time with the host sync of Trainer.run."""

    def __init__(self, model: EnsembleModel, ensemble: Ensemble, jit: bool = True) -> None:
        settings = trainer_settings(ensemble.card, model.n_members)
        self.trainer = Trainer(model, dataclasses.replace(settings, jit=jit), ensemble.params)
        self.call(1)

    def call(self, steps: int) -> None:
        self.report = self.trainer.advance(steps)


def make_model(
    cls, ensemble: Ensemble, dtype=tf.float32, quadrature=None, systematics: bool = True
) -> EnsembleModel:
    problem = ensemble.problem
    if not systematics:  # the covariance as dense blocks only
        problem = dataclasses.replace(problem, systematics=None)
    return cls(
        problem,
        ensemble.inputs,
        ensemble.card.architecture.activations,
        dtype=dtype,
        quadrature=quadrature,
    )


def sum_rule_error(ensemble: Ensemble, nodes: int) -> float:
    """Max relative error of the sum-rule factors at the initial weights vs 4,000 nodes."""

    def factors(points: int) -> np.ndarray:
        quadrature = sum_rule_quadrature(points // 2)
        model = make_model(EnsembleModel, ensemble, tf.float64, quadrature)
        params = [tf.constant(p, tf.float64) for p in ensemble.params]
        raw = forward(params, model._features, model.activations) * model._preprocessing
        return model._sum_rule_factors(raw[:, model.xgrid.size :, :]).numpy()

    reference = factors(4000)
    fitted = [FIT_BASIS.index(n) for n in ("g", "V", "V3", "V8")]
    return float(np.max(np.abs(factors(nodes)[:, fitted] / reference[:, fitted] - 1.0)))


def precision_cost(ensemble: Ensemble, steps: int) -> tuple[float, float, float]:
    """float32 vs float64: χ² at the initial weights, after one step and after `steps`."""
    runs = {}
    for dtype in (tf.float32, tf.float64):
        loop = Loop(make_model(EnsembleModel, ensemble, dtype), ensemble)
        first = loop.report.chi2[:, TRAINING]  # chi2 at the initial weights
        loop.call(1)
        second = loop.report.chi2[:, TRAINING]
        loop.call(steps - 2)
        runs[dtype] = (first, second, loop.report.chi2[:, TRAINING])
    return tuple(
        float(np.median(np.abs(a / b - 1.0)))
        for a, b in zip(runs[tf.float32], runs[tf.float64], strict=True)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, default=100)
    parser.add_argument("--size", default="nnpdf40")
    parser.add_argument("--steps", type=int, default=20, help="steps per timed call")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    tf.get_logger().setLevel("ERROR")
    started = time.perf_counter()
    print("hyperscan fit-engine ablations")
    print(machine_info())
    ensemble = build(args.size, args.replicas)
    print(
        f"problem: closure '{args.size}', {ensemble.problem.n_data} points, R={args.replicas}, "
        f"2-{'-'.join(map(str, NNPDF40_NODES))}-8 tanh, Nadam, float32 unless stated"
    )
    hyperscan = "hyperscan as is"

    def variant(choice: str, model=EnsembleModel, jit: bool = True, **options):
        return choice, lambda: Loop(make_model(model, ensemble, **options), ensemble, jit=jit)

    variants: dict[str, tuple[str, Callable[[], Loop]]] = {
        hyperscan: variant(""),
        "no XLA (tf.function only)": variant("XLA", jit=False),
        "float64": variant("precision", dtype=tf.float64),
        "one product per dataset grid": variant("FK layout", PerDatasetFK),
        "14 flavours, zero-padded": variant("FK layout", FourteenFlavourFK),
        "dense blocks, no systematics": variant("covariance", systematics=False),
        "per-member dense factors": variant("covariance", DenseMemberFactors),
        "Cholesky solves every step": variant("covariance", CholeskySolves),
        "32 quadrature nodes": variant("integration grid", quadrature=sum_rule_quadrature(16)),
        "192 quadrature nodes (before)": variant(
            "integration grid", quadrature=sum_rule_quadrature(96)
        ),
        "separate validation pass": variant("validation pass", SeparateValidationPass),
    }
    loops = {}
    for name, (_, make) in variants.items():
        loops[name] = make()
        print(f"  ... {name} compiled ({time.perf_counter() - started:.0f} s)", flush=True)
    samples = Samples()
    for _ in range(args.rounds):
        for name, loop in loops.items():
            samples.time(name, lambda loop=loop: loop.call(args.steps), per=args.steps)
    base = samples.median(hyperscan)
    print(f"\nTime per training step, median of {args.rounds} interleaved rounds of {args.steps}:")
    print(f"  {'choice':18}{'alternative':34}{'ms/step':>10}{'÷ hyperscan':>14}")
    for name, (choice, _) in variants.items():
        t = samples.median(name)
        print(f"  {choice:18}{name:34}{t * 1e3:10.2f}{t / base:13.2f}×")

    print("\nAccuracy:")
    for nodes in (32, 64, 192):
        error = sum_rule_error(ensemble, nodes)
        print(f"  sum rules, {nodes} nodes: max relative error {error:.1e} (vs 4,000 nodes)")
    initial, one, many = precision_cost(ensemble, 200)
    print(
        "  float32 vs float64, median relative χ² difference over members: "
        f"{initial:.1e} at the initial weights, {one:.1e} after 1 step, {many:.1e} after 200 "
        "(chaos: differences grow with training, statistics over replicas do not)"
    )
    print(f"\n(total {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
