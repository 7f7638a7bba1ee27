# SPDX-License-Identifier: GPL-3.0-or-later
"""Closure test on the real NLO DIS FK tables: truth = toy PDF, level-1 data, N replicas.

    python benchmarks/closure_real.py [--replicas 100] [--epochs 5000] [--seed 0]

Fits ``studies/dis-nlo.yml`` with ``data.real.closure = {level: 1, seed}`` (one fluctuation of
the toy-PDF predictions) and reports the standard closure estimators (NNPDF, arXiv:2111.05787),
in data space with the fit covariance C over all points after cuts:

* bias     = (E[T] - T_true)^T C^-1 (E[T] - T_true) / N
* variance = E_r[(T_r - E[T])^T C^-1 (T_r - E[T])] / N
* R_bv     = sqrt(bias / variance)                         ideal ~ 1
* xi_1sigma = fraction of points with |E[T]_i - T_true_i| < std_r(T_r)_i   ideal ~ 0.68
(one level-1 fit: single draws of estimators whose ideal values are expectations).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import tensorflow as tf

from hyperscan.data import fit_to_fk_rotation
from hyperscan.fit._fit import run_fit
from hyperscan.fit._members import build_members, load_problem, replica_specs
from hyperscan.model import EnsembleModel
from hyperscan.runcard import load_fit_runcard

STUDY = Path(__file__).resolve().parents[1] / "studies" / "dis-nlo.yml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, default=100)
    parser.add_argument("--epochs", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-o", "--output", type=Path, default=None, help="write a JSON summary")
    args = parser.parse_args()

    base = load_fit_runcard(STUDY)
    real = base.data.real.model_copy(update={"closure": {"level": 1, "seed": args.seed}})
    real = type(base.data.real).model_validate(real.model_dump())
    card = base.model_copy(
        update={
            "data": base.data.model_copy(update={"real": real}),
            "replicas": args.replicas,
            "epochs": args.epochs,
        }
    )
    card = type(base).model_validate(card.model_dump())
    problem = load_problem(card)
    started = time.perf_counter()
    result = run_fit(card, problem=problem)
    seconds = time.perf_counter() - started

    # member predictions on every dataset's own x grid
    inputs, _ = build_members(card, problem, replica_specs(card))
    model = EnsembleModel(problem, inputs, card.architecture.activations, dtype=tf.float32)
    params = [tf.constant(p, tf.float32) for p in result.params]
    rotation = fit_to_fk_rotation()
    preds = []
    for d in problem.datasets:
        xf = np.asarray(model.pdf(params, d.xgrid), dtype=np.float64)  # (M, n_x, 8)
        preds.append(d.predictions(np.einsum("fk,mxk->mfx", rotation, xf)))
    t = np.concatenate(preds, axis=1)  # (M, N)
    ok = np.array([s == "ok" for s in result.status])
    t = t[ok]
    truth = problem.truth
    mean = t.mean(axis=0)
    lower = problem.cholesky

    def chi2(r: np.ndarray) -> np.ndarray:
        z = np.linalg.solve(lower, r.T)
        return (z * z).sum(axis=0) / problem.n_data

    bias = float(chi2(mean - truth))
    variance = float(np.mean(chi2(t - mean)))
    xi = float(np.mean(np.abs(mean - truth) < t.std(axis=0)))
    summary = {
        "replicas": int(ok.sum()),
        "members": int(len(ok)),
        "epochs": args.epochs,
        "seed": args.seed,
        "n_data": problem.n_data,
        "bias": bias,
        "variance": variance,
        "R_bv": float(np.sqrt(bias / variance)),
        "xi_1sigma": xi,
        "fit_seconds": round(seconds, 1),
        "experimental_chi2_mean": float(np.nanmean(result.chi2_per_point["experimental"][ok])),
        # same chi2 from the predictions above: checks the prediction path
        "chi2_check": float(np.mean(chi2(t - problem.central))),
    }
    print(json.dumps(summary, indent=2))
    if args.output:
        args.output.write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
