# SPDX-License-Identifier: GPL-3.0-or-later
"""Closure test on the real NLO DIS FK tables: truth = toy PDF, level-1 data, N replicas.

    python benchmarks/closure_real.py [--seeds 0 1 2 3 4] [--replicas 100] [--epochs 10000]

Fits ``studies/dis-nlo-closure.yml`` once per level-1 seed (``data.real.closure = {level: 1,
seed}``: one fluctuation of the toy-PDF predictions, drawn from the t0 covariance with t0 = toy
PDF = truth, the covariance the replicas are drawn from and fitted with) and reports the closure
estimators of NNPDF (arXiv:2111.05787; validphys ``closuretest``) in data space over all points
after cuts, with C = that covariance:

* bias      = (E[T] - T_true)^T C^-1 (E[T] - T_true) / N
* variance  = E_r[(T_r - E[T])^T C^-1 (T_r - E[T])] / N
* R_bv      = sqrt(bias / variance)                                     ideal ~ 1
* xi_1sigma = fraction of the eigenvectors v_k of C with |v_k . (E[T] - T_true)| below the
  replicas' standard deviation of v_k . T_r (validphys ``dataset_xi``)     ideal ~ 0.68
* xi_1sigma_expected = erf(1 / (sqrt(2) R_bv)), what R_bv implies for Gaussian fluctuations

E[T] is the mean over the replicas that ended ``ok``. The ideal values are expectations over
level-1 shifts, and a single fit's bias is a noisy draw (R_bv of 0.46 to 0.81 between seeds), so
several seeds are fitted and combined as validphys' multiclosure does: R_bv = sqrt(mean bias /
mean variance), xi_1sigma = mean over fits. ``xi_1sigma_points`` is the per-point coverage
(|E[T]_i - T_true_i| < std_r(T_r)_i): with correlated normalisation uncertainties all points of
an experiment move together, so for one fit it is close to 0 or 1 (not an estimator to quote).
``--save-dir`` keeps each fit's member predictions and training history (npz).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np

from hyperscan.cli import configure_tensorflow
from hyperscan.runcard import FitRuncard, load_fit_runcard
from hyperscan.score import closure_estimators as shared_estimators
from hyperscan.score import multiclosure_record

STUDY = Path(__file__).resolve().parents[1] / "studies" / "dis-nlo-closure.yml"


def closure_estimators(
    predictions: np.ndarray, truth: np.ndarray, covmat: np.ndarray
) -> dict[str, float]:
    """NNPDF closure estimators of one fit (hyperscan.scan's, which a scan's trials store):
    predictions (replicas, N), truth (N,), C (N, N)."""
    found = shared_estimators(predictions, truth, covmat)
    return {
        "bias": found.bias,
        "variance": found.variance,
        "R_bv": found.rbv,
        "xi_1sigma": found.xi1sigma,
        "xi_1sigma_expected": found.xi1sigma_expected,
        "xi_1sigma_points": found.xi1sigma_points,
    }


def fit_runcard(args: argparse.Namespace, seed: int) -> FitRuncard:
    """The runcard with the command line's overrides and level-1 seed ``seed`` (one level-1
    fit: a scan's exported multiclosure runcard is refitted seed by seed)."""
    card = load_fit_runcard(args.runcard)
    closure = card.data.real.closure.model_copy(update={"seed": seed, "fits": 1})
    real = card.data.real.model_copy(update={"closure": closure})
    data = {"real": real}
    if args.training_fraction is not None:
        data["training_fraction"] = args.training_fraction
    update: dict = {"data": card.data.model_copy(update=data)}
    for key in ("replicas", "epochs"):
        if getattr(args, key) is not None:
            update[key] = getattr(args, key)
    if args.data_seed is not None:
        update["seeds"] = card.seeds.model_copy(update={"data": args.data_seed})
    if args.patience is not None:
        update["stopping"] = card.stopping.model_copy(update={"patience": args.patience})
    card = card.model_copy(update=update)
    return type(card).model_validate(card.model_dump())


def closure_fit(args: argparse.Namespace, seed: int) -> dict:
    """One level-1 closure fit: its estimators (total and per dataset) and diagnostics."""
    from hyperscan.data import load_problem
    from hyperscan.fit._fit import run_fit

    card = fit_runcard(args, seed)
    problem = load_problem(card)
    started = time.perf_counter()
    result = run_fit(card, problem=problem)
    seconds = time.perf_counter() - started

    t = _member_predictions(card, problem, result)
    ok = np.array([s == "ok" for s in result.status])
    truth, covmat = problem.truth, np.asarray(problem.covmat)
    mean = t[ok].mean(axis=0)
    summary = {
        "seed": seed,
        "replicas": int(ok.sum()),
        **closure_estimators(t[ok], truth, covmat),
        "fit_seconds": round(seconds, 1),
        # convergence: best epochs (quantiles), members that never stopped, final chi2
        "best_epoch_quantiles": np.quantile(result.best_epoch[ok], [0, 0.25, 0.5, 0.75, 1])
        .astype(int)
        .tolist(),
        "ran_out_of_epochs": int((result.stop_epoch[ok] < 0).sum()),
        "chi2_training": _mean(result.chi2_per_point["training"][ok]),
        "chi2_validation": _mean(result.chi2_per_point["validation"][ok]),
        # chi2 per point with C: level-1 data to truth, central fit to data and to truth
        "chi2_data_truth": _chi2(problem, np.asarray(problem.central), truth),
        "chi2_central_data": _chi2(problem, mean, problem.central),
        "chi2_central_truth": _chi2(problem, mean, truth),
        "per_dataset": {
            d.name: {
                k: round(v, 4)
                for k, v in closure_estimators(t[ok][:, s], truth[s], covmat[s, s]).items()
            }
            for d, s in zip(problem.datasets, problem.dataset_slices(), strict=True)
        },
    }
    if args.save_dir is not None:
        args.save_dir.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(
            args.save_dir / f"closure-seed{seed}.npz",
            predictions=t,
            ok=ok,
            truth=truth,
            central=problem.central,
            covmat=covmat,
            best_epoch=result.best_epoch,
            stop_epoch=result.stop_epoch,
            history_step=np.array([h.step for h in result.history]),
            history_chi2=np.array([h.chi2_per_point for h in result.history]),
            history_status=np.array([h.status for h in result.history]),
            dataset_slices=np.array([[s.start, s.stop] for s in problem.dataset_slices()]),
            dataset_names=np.array(problem.names),
        )
    return summary


def combine(fits: list[dict]) -> dict:
    """Estimators over several level-1 fits, as validphys' multiclosure (the aggregate a scan
    trial over several fits stores): the ratio of the mean bias to the mean variance, the mean
    coverage."""
    names = {"bias": "bias", "variance": "variance", "rbv": "R_bv", "xi1sigma": "xi_1sigma"}
    aggregate = multiclosure_record(
        [{key: f[name] for key, name in names.items()} | {"replicas": f["replicas"]} for f in fits]
    )
    ratio = aggregate["rbv"]
    out = {
        "fits": len(fits),
        "bias": aggregate["bias"],
        "variance": aggregate["variance"],
        "R_bv": ratio,
        "xi_1sigma": aggregate["xi1sigma"],
        "xi_1sigma_expected": math.erf(1.0 / (math.sqrt(2.0) * ratio)),
        "xi_1sigma_points": float(np.mean([f["xi_1sigma_points"] for f in fits])),
    }
    if len(fits) > 1:  # spread of the single-fit values
        out["R_bv_per_fit"] = [round(f["R_bv"], 3) for f in fits]
        out["xi_1sigma_per_fit"] = [round(f["xi_1sigma"], 3) for f in fits]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runcard", type=Path, default=STUDY)
    parser.add_argument("--replicas", type=int, default=None, help="default: the runcard's")
    parser.add_argument("--epochs", type=int, default=None, help="default: the runcard's")
    parser.add_argument("--patience", type=float, default=None, help="default: the runcard's")
    parser.add_argument("--training-fraction", type=float, default=None)
    parser.add_argument(
        "--seeds", type=int, nargs="+", default=[0], help="level-1 seeds: one fit each"
    )
    parser.add_argument("--data-seed", type=int, default=None, help="seeds.data (replicas)")
    parser.add_argument("--threads", type=int, default=1, help="TensorFlow CPU threads")
    parser.add_argument("-o", "--output", type=Path, default=None, help="write a JSON summary")
    parser.add_argument("--save-dir", type=Path, default=None, help="predictions per fit (npz)")
    args = parser.parse_args()

    configure_tensorflow("cpu", args.threads)
    card = fit_runcard(args, args.seeds[0])
    settings = {
        "epochs": card.epochs,
        "replicas": len(card.replica_ids),
        "patience": card.stopping.patience,
        "training_fraction": card.data.training_fraction,
        "data_seed": card.seeds.data,
        "threads": args.threads,
    }
    fits = []
    for seed in args.seeds:
        fits.append(closure_fit(args, seed))
        print(json.dumps({k: v for k, v in fits[-1].items() if k != "per_dataset"}), flush=True)
    summary = {"settings": settings, "combined": combine(fits), "fits": fits}
    print(json.dumps(summary["combined"], indent=2))
    if args.output:  # after minutes of fits: a missing folder is made, not a traceback
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(summary, indent=2) + "\n")


def _mean(values: np.ndarray) -> float | None:
    """Mean of the finite values; None when there is none (no validation points)."""
    finite = values[np.isfinite(values)]
    return float(finite.mean()) if finite.size else None


def _chi2(problem, a: np.ndarray, b: np.ndarray) -> float:
    z = np.linalg.solve(problem.cholesky, a - b)
    return float(z @ z / problem.n_data)


def _member_predictions(card, problem, result) -> np.ndarray:
    """(M, N) predictions of every member, float64 on the host, from its fitted PDF."""
    import tensorflow as tf

    from hyperscan.data import fit_to_fk_rotation
    from hyperscan.fit._members import build_members, member_specs
    from hyperscan.model import EnsembleModel

    inputs, _ = build_members(card, problem, member_specs(card.replica_ids))
    dtype = tf.float64 if card.training.precision == "float64" else tf.float32
    model = EnsembleModel(problem, inputs, card.architecture.activations, dtype=dtype)
    params = [tf.constant(p, dtype) for p in result.params]
    rotation = fit_to_fk_rotation()
    preds = []
    for d in problem.datasets:
        xf = np.asarray(model.pdf(params, d.xgrid), dtype=np.float64)  # (M, n_x, 8)
        preds.append(d.predictions(np.einsum("fk,mxk->mfx", rotation, xf)))
    return np.concatenate(preds, axis=1)


if __name__ == "__main__":
    main()
