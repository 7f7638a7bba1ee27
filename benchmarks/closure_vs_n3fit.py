# SPDX-License-Identifier: GPL-3.0-or-later
"""hyperscan's closure estimators anchored on n3fit 4.1.5: one closure test, both fitters.

    python benchmarks/closure_vs_n3fit.py [--replicas 25] [--fits 3] [--epochs 2000]
                                          [--save-dir DIR | --from-dir DIR] [--peer DIR]

The closure problem is ``studies/dis-nlo-closure.yml``: 7 NLO DIS datasets (976 points after
cuts), truth = the Les Houches toy PDF, level-1 data = its predictions plus one fluctuation
drawn from the t0 covariance (t0 = toy = truth). Each code makes its own level-1 data, F of
them (hyperscan: ``closure.seed`` 0..F-1; n3fit: ``closuretest.filterseed`` 0..F-1 with
``fakepdf: HyperscanToyLH``, the toy written as an LHAPDF set by the peer kit), and fits each
with R replicas, the same architecture, preprocessing, training fraction, stopping and at most
E epochs (n3fit: the kit's ``multi.yml`` card, R replicas in one model; hyperscan:
``benchmarks/closure_real.py``'s fit).

Both codes' replicas are then scored by the same code: their PDFs through hyperscan's FK tables
(n3fit's exportgrid at Q0 interpolated as in ``benchmarks/vs_n3fit.py``), hyperscan's
closure estimators (bias, variance, R_bv, ξ₁σ against the toy truth with the t0 covariance),
aggregated over the F level-1 fits as validphys' multiclosure does. The two codes' level-1
draws differ, so single fits differ by their spread; the aggregates are what to compare.
``--save-dir`` keeps n3fit's fit folders (and hyperscan's member predictions) there;
``--from-dir`` reads n3fit's fits from such a folder instead of running n3fit again.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import closure_real  # noqa: E402
import vs_n3fit  # noqa: E402

from hyperscan.cli import configure_tensorflow  # noqa: E402
from hyperscan.data import Problem, grid_predictions, load_problem  # noqa: E402

STUDY = closure_real.STUDY
TOY_SET = "HyperscanToyLH"  # the toy PDF as an LHAPDF set, written by the kit's setup.sh
MANIFEST = "n3fit-closure.json"


# ------------------------------------------------------------------------------------------
# n3fit's closure runcard


def n3fit_closure_card(kit: Path, filterseed: int, epochs: int) -> dict:
    """The kit's batched card (same data, cuts, architecture, preprocessing as the study) made
    a level-1 closure test: fake data from the toy PDF, shifted by noise seeded ``filterseed``."""
    card = yaml.safe_load((kit / "runcards" / "multi.yml").read_text())
    card["description"] = f"hyperscan closure anchor: level-1 fit, filterseed {filterseed}"
    card["parameters"]["epochs"] = epochs
    card["closuretest"] = {
        "filterseed": filterseed,
        "fakedata": True,  # fit the filter folder's fake data, not the measurements
        "fakepdf": TOY_SET,  # truth
        "fakenoise": True,  # level 1: one fluctuation of the truth's predictions
    }
    return card


def card_mismatches(card: dict, study: dict) -> list[str]:
    """Settings in which the n3fit card and the hyperscan study differ (empty: same problem)."""
    real = study["data"]["real"]
    found = []

    def compare(what: str, n3fit, hyperscan) -> None:
        if n3fit != hyperscan:
            found.append(f"{what}: n3fit {n3fit!r}, hyperscan {hyperscan!r}")

    compare(
        "datasets",
        [(d["dataset"], d.get("variant")) for d in card["dataset_inputs"]],
        [(d["dataset"], d.get("variant")) for d in real["datasets"]],
    )
    compare(
        "training fraction",
        sorted({d["frac"] for d in card["dataset_inputs"]}),
        [study["data"]["training_fraction"]],
    )
    compare("q2min", card["datacuts"]["q2min"], real["q2min"])
    compare("w2min", card["datacuts"]["w2min"], real["w2min"])
    parameters = card["parameters"]
    compare("nodes", parameters["nodes_per_layer"][:-1], study["architecture"]["nodes"])
    compare(
        "activations",
        parameters["activation_per_layer"][:-1],
        study["architecture"]["activations"],
    )
    compare("initializer", parameters["initializer"], study["architecture"]["initializer"])
    optimizer = parameters["optimizer"]
    compare("optimizer", optimizer["optimizer_name"].lower(), study["optimizer"]["name"])
    compare("learning rate", optimizer["learning_rate"], study["optimizer"]["learning_rate"])
    compare("clipnorm", optimizer["clipnorm"], study["optimizer"]["clipnorm"])
    compare("patience", parameters["stopping_patience"], study["stopping"]["patience"])
    compare("threshold χ²", parameters["threshold_chi2"], study["stopping"]["threshold_chi2"])
    names = {"sng": "Sigma", "g": "g", "v": "V", "v3": "V3", "v8": "V8"}
    names |= {"t3": "T3", "t8": "T8", "t15": "T15"}
    compare(
        "preprocessing",
        {names[b["fl"]]: (b["smallx"], b["largex"]) for b in card["fitting"]["basis"]},
        {k: (v["alpha"], v["beta"]) for k, v in study["preprocessing"].items()},
    )
    compare(
        "fitted preprocessing",
        sorted({b.get("trainable", True) for b in card["fitting"]["basis"]}),
        [False],
    )
    compare("t0 PDF = truth", card["datacuts"]["t0pdfset"], TOY_SET)
    compare("t0 covariance", real["t0"], True)
    return found


def level1_data(fit: Path, problem: Problem) -> np.ndarray:
    """n3fit's level-1 data (the filter folder's fake central values after cuts), in the
    order of ``problem``'s points."""
    parts = []
    for name in problem.names:
        folder = fit / "filter" / name
        central = yaml.safe_load((folder / f"filtered_data_{name}.yaml").read_text())
        mask = np.loadtxt(folder / f"FKMASK_{name}.dat", dtype=int, ndmin=1)
        parts.append(np.asarray(central["data_central"], dtype=float)[mask])
    return np.concatenate(parts)


def n3fit_predictions(problem: Problem, replicas: list[dict]) -> np.ndarray:
    """(R, N) predictions of n3fit's replicas: their exportgrids through hyperscan's FK tables."""
    grid = np.unique(np.concatenate([d.xgrid for d in problem.datasets]))
    xf = np.stack([vs_n3fit.exportgrid_on(grid, r["x"], r["xf"], r["labels"]) for r in replicas])
    return grid_predictions(problem, grid, xf)


# ------------------------------------------------------------------------------------------
# The two sides


def n3fit_side(args: argparse.Namespace, work: Path, problem: Problem) -> list[dict]:
    """Runs (or, with --from-dir, reads) n3fit's F level-1 fits; each fit's estimators."""
    manifest = {
        "fits": args.fits,
        "replicas": args.replicas,
        "epochs": args.epochs,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": vs_n3fit.machine(),
        "wall_s": [],
    }
    cards = work / "cards"
    cards.mkdir(exist_ok=True)
    fits = []
    for seed in range(args.fits):
        card_path = cards / f"closure_fit{seed}.yml"
        if args.from_dir is None:
            card = n3fit_closure_card(args.kit, seed, args.epochs)
            card_path.write_text(yaml.safe_dump(card, sort_keys=False))
            steps = vs_n3fit.run_peer(card_path, f"1 -r {args.replicas}", args.peer, args.kit, work)
            wall = steps["vp-setupfit"].wall + steps["n3fit"].wall
            manifest["wall_s"].append(round(wall, 1))
            (work / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
            print(f"  n3fit level-1 fit {seed}: {wall:.0f} s", flush=True)
        replicas = vs_n3fit.n3fit_replicas(work, card_path)
        t = n3fit_predictions(problem, replicas)
        data = level1_data(work / card_path.stem, problem)
        mean = t.mean(axis=0)
        fits.append(
            {
                "seed": seed,
                "replicas": len(replicas),
                **closure_real.closure_estimators(t, problem.truth, np.asarray(problem.covmat)),
                "best_epoch_quantiles": np.quantile(
                    [r["best_epoch"] for r in replicas], [0, 0.25, 0.5, 0.75, 1]
                )
                .astype(int)
                .tolist(),
                "ran_out_of_epochs": sum(r["stop_epoch"] >= args.epochs - 1 for r in replicas),
                "chi2_training": float(np.mean([r["erf_tr"] for r in replicas])),
                "chi2_validation": float(np.mean([r["erf_vl"] for r in replicas])),
                "chi2_data_truth": closure_real._chi2(problem, data, problem.truth),
                "chi2_central_data": closure_real._chi2(problem, mean, data),
                "chi2_central_truth": closure_real._chi2(problem, mean, problem.truth),
            }
        )
    return fits


def closure_options(args: argparse.Namespace) -> argparse.Namespace:
    """closure_real.py's options for this run's study, replicas and epochs."""
    return argparse.Namespace(
        runcard=STUDY,
        replicas=args.replicas,
        epochs=args.epochs,
        patience=None,
        training_fraction=None,
        data_seed=None,
        save_dir=args.save_dir,
    )


def hyperscan_side(args: argparse.Namespace) -> list[dict]:
    """hyperscan's F level-1 fits (level-1 seeds 0..F-1), as closure_real.py fits them."""
    options = closure_options(args)
    fits = []
    for seed in range(args.fits):
        started = time.perf_counter()
        fit = closure_real.closure_fit(options, seed)
        fit.pop("per_dataset")
        fits.append(fit)
        print(f"  hyperscan level-1 fit {seed}: {time.perf_counter() - started:.0f} s", flush=True)
    return fits


# ------------------------------------------------------------------------------------------
# Report


def report(n3fit: list[dict], hyperscan: list[dict]) -> dict:
    """Prints both codes' aggregated estimators and per-fit values side by side."""
    sides = {"n3fit 4.1.5": n3fit, "hyperscan": hyperscan}
    combined = {name: closure_real.combine(fits) for name, fits in sides.items()}
    print(f"\n  {'':34}" + "".join(f"{name:>26}" for name in sides))
    rows = [
        ("bias", "bias", "{:.4f}"),
        ("variance", "variance", "{:.4f}"),
        ("R_bv = √(bias / variance)  [~1]", "R_bv", "{:.3f}"),
        ("ξ₁σ, covariance eigenbasis [~0.68]", "xi_1sigma", "{:.3f}"),
        ("ξ₁σ implied by R_bv", "xi_1sigma_expected", "{:.3f}"),
    ]
    for label, key, form in rows:
        cells = []
        for name, fits in sides.items():
            per_fit = [f[key] for f in fits]
            if key == "xi_1sigma_expected":
                cells.append(form.format(combined[name][key]))
                continue
            spread = f" ± {np.std(per_fit, ddof=1):.3f}" if len(fits) > 1 else ""
            cells.append(form.format(combined[name][key]) + spread)
        print(f"  {label:34}" + "".join(f"{c:>26}" for c in cells))
    print("  (aggregate over the level-1 fits ± the standard deviation of the single-fit values)")
    per_fit_rows = [
        ("R_bv", "{:.3f}"),
        ("xi_1sigma", "{:.3f}"),
        ("bias", "{:.4f}"),
        ("variance", "{:.4f}"),
        ("chi2_data_truth", "{:.3f}"),
        ("chi2_central_data", "{:.3f}"),
        ("chi2_training", "{:.3f}"),
        ("chi2_validation", "{:.3f}"),
        ("replicas", "{}"),
        ("ran_out_of_epochs", "{}"),
    ]
    print("\n  per level-1 fit:")
    for key, form in per_fit_rows:
        cells = [", ".join(form.format(f[key]) for f in fits) for fits in sides.values()]
        print(f"  {key:34}" + "".join(f"{c:>26}" for c in cells))
    print(
        "  (n3fit trains its replicas in one model until the last one has stopped: its stop "
        "epoch, and so ran_out_of_epochs, is the model's; the best epochs are each replica's)"
    )
    for name, fits in sides.items():
        quantiles = "; ".join(str(f["best_epoch_quantiles"]) for f in fits)
        print(f"  best epochs (0/25/50/75/100 %), {name}: {quantiles}")
    return {name: {"combined": combined[name], "fits": sides[name]} for name in sides}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, default=25, help="replicas per level-1 fit")
    parser.add_argument("--fits", type=int, default=3, help="level-1 fits per code")
    parser.add_argument("--epochs", type=int, default=2000, help="most epochs, both codes")
    parser.add_argument("--threads", type=int, default=1, help="hyperscan's CPU threads")
    parser.add_argument("--peer", type=Path, default=Path("/tmp/n3fit-peer"), help="n3fit venv")
    parser.add_argument("--kit", type=Path, default=vs_n3fit.KIT, help="the n3fit peer kit")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--save-dir", type=Path, help="keep n3fit's fits (and hyperscan's) here")
    where.add_argument("--from-dir", type=Path, help="read n3fit's fits from a --save-dir")
    parser.add_argument("-o", "--output", type=Path, help="write a JSON summary")
    args = parser.parse_args()
    if not (args.kit / "run.sh").exists():
        sys.exit(f"no n3fit peer kit at {args.kit} (--kit)")
    study = yaml.safe_load(STUDY.read_text())
    mismatches = card_mismatches(n3fit_closure_card(args.kit, 0, args.epochs), study)
    if mismatches:
        sys.exit("the n3fit card and the study differ:\n  " + "\n  ".join(mismatches))
    if args.from_dir is None:
        vs_n3fit.ensure_peer(args.peer, args.kit)
    else:  # hyperscan fits what n3fit fitted there
        run = json.loads((args.from_dir / MANIFEST).read_text())
        args.fits, args.replicas, args.epochs = run["fits"], run["replicas"], run["epochs"]
        print(f"n3fit's fits read from {args.from_dir}, run {run['date']}: {run['machine']}")
    work = args.from_dir or args.save_dir or Path(tempfile.mkdtemp(prefix="closure-vs-n3fit-"))
    work.mkdir(parents=True, exist_ok=True)
    configure_tensorflow("cpu", args.threads)
    started = time.perf_counter()
    print("closure estimators, n3fit 4.1.5 and hyperscan on the same closure test, one run")
    print(vs_n3fit.machine())
    print(
        f"  {args.fits} level-1 fits × {args.replicas} replicas per code, ≤ {args.epochs} "
        f"epochs; work folder {work}"
    )
    # the truth and the t0 covariance
    problem = load_problem(closure_real.fit_runcard(closure_options(args), 0))
    n3fit = n3fit_side(args, work, problem)
    hyperscan = hyperscan_side(args)
    summary = report(n3fit, hyperscan)
    print(f"\n(total {time.perf_counter() - started:.0f} s)")
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
