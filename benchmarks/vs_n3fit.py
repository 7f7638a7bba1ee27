# SPDX-License-Identifier: GPL-3.0-or-later
"""hyperscan side by side with n3fit 4.1.5 on the same real data, in one run.

    python benchmarks/vs_n3fit.py [--data dis|dis+hadronic] [--replicas 16] [--epochs 2000]
                                  [--trials 4] [--peer DIR]

n3fit runs through the offline kit in ../shared/peer (installed into ``--peer`` by its
``setup.sh`` when missing: ~3.1 GB, PyPI needed once). Both codes fit the shipped datasets of
``--data`` (a preset of ``data.real.datasets``: the 7 NLO DIS datasets, 976 points after cuts,
or those and the 5 LO hadronic ones, 1145) with the same architecture (2-25-20-8 tanh,
glorot_normal, Nadam lr 1e-3, clipnorm 1), preprocessing ranges, training fraction 0.75,
patience 0.3, t0 covariance from the toy PDF, R replicas in one batched model, at most E
epochs. The kit installs only the DIS tables: for the hadronic ones the script writes the
shipped arrays into the peer's theory folder (tools/hadronic_theory_folder.py), then checks that
validphys predicts, from the toy PDF set, what hyperscan predicts from the same PDF values
(1e-10, every dataset) and keeps the same points. Printed:

* fit: wall time as a user sees it (n3fit: ``vp-setupfit`` + ``n3fit``; hyperscan:
  ``hyperscan fit`` with an empty compilation cache), training-loop time, time per
  replica-epoch, peak RSS, and χ² per point, in all and per dataset;
* scan: n trials of ``n3fit --hyperopt`` (the kit's 2-dataset, 2-fold card) against n trials of
  ``hyperscan scan`` with the same space, folds and single thread, wall time per trial.

χ² on one yardstick: each code's fitted PDF at Q0 goes through hyperscan's FK tables and is
compared with the central data, with the t0 covariance both codes train with (n3fit's own
``chi2`` definition, hyperscan's ``experimental``) and with the experimental covariance.
hyperscan's PDF is taken on its own x grid (exact); n3fit's exportgrid is interpolated (cubic
in ln x) from its 196 nodes, which the script checks by recomputing n3fit's reported χ².
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from hyperscan.data import (
    FK_BASIS,
    REAL_DATASETS,
    Problem,
    experimental_chi2,
    grid_predictions,
    real_problem,
)
from hyperscan.data._flavours import _physical_to_evolution
from hyperscan.data._tables import on_grid
from hyperscan.runcard.real_datasets import PRESETS

ROOT = Path(__file__).resolve().parents[1]
KIT = ROOT.parent / "shared" / "peer"
FIT_STUDY = ROOT / "studies" / "dis-nlo.yml"
HYPERSCAN = Path(sys.executable).parent / "hyperscan"
THEORY_FOLDER_TOOL = ROOT / "tools" / "hadronic_theory_folder.py"
VALIDPHYS_TOOL = ROOT / "tools" / "validphys_predictions.py"
THEORY_ID = 99000001
#: The kit's toy LHAPDF set (setup.sh): the PDF of the prediction check.
TOY_SET = "HyperscanToyLH"
#: Predictions of the same PDF by validphys and hyperscan agree to this (relative).
SAME_PREDICTIONS = 1e-10
# hyperscan's 9 evolution functions (_physical_to_evolution rows) and their FK-basis rows.
EVOLUTION_9 = ("Sigma", "g", "V", "V3", "V8", "V15", "T3", "T8", "T15")
PHYSICAL = ("U", "UBAR", "D", "DBAR", "S", "SBAR", "C", "CBAR", "GLUON")


@dataclass
class Measured:
    """One command: wall time, peak RSS of its process tree, exit status."""

    wall: float
    rss_mib: float
    rc: int


def measure(command: list[str], log: Path, env: dict[str, str] | None = None) -> Measured:
    """Run ``command`` in a fresh wrapper process, so that the peak RSS is this command's only."""
    wrapper = (
        "import resource, subprocess, sys, time\n"
        "t = time.perf_counter()\n"
        "rc = subprocess.call(sys.argv[1:])\n"
        "rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024\n"
        "print(f'@@ {time.perf_counter() - t} {rss} {rc}')\n"
    )
    with log.open("w") as out:
        subprocess.run(
            [sys.executable, "-c", wrapper, *command],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            check=False,
        )
    last = [line for line in log.read_text().splitlines() if line.startswith("@@ ")][-1]
    wall, rss, rc = last.split()[1:]
    measured = Measured(float(wall), float(rss), int(rc))
    if measured.rc != 0:
        tail = "\n".join(log.read_text().splitlines()[-25:])
        sys.exit(f"{' '.join(command[:3])} ... failed (rc={measured.rc}), see {log}:\n{tail}")
    return measured


def cold_cache(work: Path) -> dict[str, str]:
    """An empty cache folder: hyperscan compiles its loops as on a first run, no XLA cache hit."""
    cache = Path(tempfile.mkdtemp(prefix="cache-", dir=work))
    return {"XDG_CACHE_HOME": str(cache)}


# ------------------------------------------------------------------------------------------
# n3fit through the kit


def ensure_peer(peer: Path, kit: Path) -> None:
    if (peer / "bin" / "n3fit").exists():
        return
    print(f"installing n3fit 4.1.5 into {peer} with {kit / 'setup.sh'} (~3.1 GB, once)")
    subprocess.run([str(kit / "setup.sh"), str(peer)], check=True)


def run_peer(card: Path, args: str, peer: Path, kit: Path, work: Path) -> dict[str, Measured]:
    """The kit's run.sh: vp-setupfit then n3fit, each timed with its peak RSS."""
    log = work / f"{card.stem}.run.log"
    env = {"WORKDIR": str(work), "N3FIT_ARGS": args}
    with log.open("w") as out:
        subprocess.run(
            [str(kit / "run.sh"), str(card), str(peer), "3600"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **env},
            check=False,
            cwd=work,
        )
    timings = work / f"{card.stem}.timings.tsv"
    if not timings.exists():
        sys.exit(f"n3fit run failed, see {log}:\n" + "\n".join(log.read_text().splitlines()[-25:]))
    steps = {}
    for line in timings.read_text().splitlines():
        label, rc, wall, rss = line.split("\t")
        steps[label.split(":")[1].split()[0]] = Measured(
            float(wall.split("=")[1]), float(rss.split("=")[1]), int(rc.split("=")[1])
        )
    return steps


def peer_card(
    kit: Path, name: str, work: Path, epochs: int | None = None, more: tuple[str, ...] = ()
) -> Path:
    """The kit's card ``name``, with ``epochs`` and the shipped datasets ``more`` added to its
    ``dataset_inputs`` (at its training fraction, in their shipped variants)."""
    text = (kit / "runcards" / f"{name}.yml").read_text()
    if epochs is not None:
        text, count = re.subn(r"(?m)^(  epochs:) \d+", rf"\1 {epochs}", text)
        if count != 1:
            sys.exit(f"cannot set the epochs of {name}.yml: the kit's card changed")
    if more:
        lines = "".join(
            f"- {{dataset: {n}"
            + ("" if REAL_DATASETS[n] is None else f", variant: {REAL_DATASETS[n]}")
            + ", frac: 0.75}\n"
            for n in more
        )
        text, count = re.subn(r"(?m)^(?=genrep:)", lines, text)
        if count != 1:
            sys.exit(f"cannot add datasets to {name}.yml: the kit's card changed")
    cards = work / "cards"  # run.sh copies the card into the work folder itself
    cards.mkdir(exist_ok=True)
    card = cards / f"n3fit_{name}.yml"
    card.write_text(text)
    return card


def peer_theory_folder(peer: Path) -> Path:
    """theory_<ID> in the peer's share folder, where validphys and n3fit look for tables."""
    profile = yaml.safe_load((peer / "nnprofile.yaml").read_text())
    return Path(profile["nnpdf_share"]) / profile["theories_path"] / f"theory_{THEORY_ID}"


def install_hadronic(peer: Path, work: Path) -> None:
    """The shipped hadronic tables, written into the peer's theory folder (the kit's setup.sh
    installs the DIS ones only); written afresh each run, so they are the shipped arrays."""
    log = work / "hadronic_theory_folder.log"
    with log.open("w") as out:
        run = subprocess.run(
            [sys.executable, str(THEORY_FOLDER_TOOL), str(peer_theory_folder(peer))],
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        )
    if run.returncode != 0:
        sys.exit(f"writing the hadronic tables failed, see {log}:\n{log.read_text()[-2000:]}")


def check_predictions(
    peer: Path, work: Path, specs: list[tuple[str, str | None]], problem: Problem
) -> None:
    """validphys (in the peer venv) and hyperscan (``problem``, the datasets of ``specs``
    after cuts) predict the same from the same PDF values: the kit's toy set, as validphys
    evaluates it on each table's x grid at Q0; and they keep the same points. Exits when a
    dataset differs by more than SAME_PREDICTIONS."""
    target = work / "validphys.npz"
    names = [n if v is None else f"{n}:{v}" for n, v in specs]
    command = (
        f"source {peer / 'peer.env'} && python {VALIDPHYS_TOOL} {TOY_SET} {target} "
        f"--theories {THEORY_ID} --datasets {' '.join(names)}"
    )
    log = work / "validphys.log"
    with log.open("w") as out:
        run = subprocess.run(
            ["bash", "-c", command], stdout=out, stderr=subprocess.STDOUT, check=False
        )
    if run.returncode != 0:
        sys.exit(f"validphys failed, see {log}:\n{log.read_text()[-2000:]}")
    answers = dict(np.load(target))
    print(f"  same PDF, same predictions (validphys 4.1.5 from {TOY_SET}, theory {THEORY_ID}):")
    worst = 0.0
    ours_by_name = {d.name: d for d in problem.datasets}  # the problem may reorder them
    for i, (name, _) in enumerate(specs):
        prefix = f"{THEORY_ID}_{i}_"
        answer = {k.removeprefix(prefix): v for k, v in answers.items() if k.startswith(prefix)}
        dataset = ours_by_name[name]
        if dataset.n_data != answer["cuts"].size:
            sys.exit(
                f"{name}: hyperscan keeps {dataset.n_data} points, validphys {answer['cuts'].size}"
            )
        xf = np.zeros((len(FK_BASIS), dataset.xgrid.size))
        for j in range(int(answer["operands"])):
            xf[:, on_grid(dataset.xgrid, answer[f"xgrid_{j}"], name)] = answer[f"xf_{j}"]
        ours, theirs = dataset.predictions(xf), answer["predictions"]
        difference = float(np.max(np.abs(ours / theirs - 1.0)))
        worst = max(worst, difference)
        print(f"    {name:45}{dataset.n_data:>5} points   max |ratio - 1| {difference:.1e}")
    if worst > SAME_PREDICTIONS:
        sys.exit(f"the predictions differ by {worst:.1e} > {SAME_PREDICTIONS:.0e}")


def n3fit_replicas(work: Path, card: Path) -> list[dict]:
    folders = sorted(
        (work / card.stem / "nnfit").glob("replica_*"), key=lambda p: int(p.name.split("_")[1])
    )
    replicas = []
    for folder in folders:
        result = json.loads((folder / f"{card.stem}.json").read_text())
        grid = yaml.safe_load((folder / f"{card.stem}.exportgrid").read_text())
        result["x"] = np.array(grid["xgrid"], dtype=float)
        result["xf"] = np.array(grid["pdfgrid"], dtype=float)
        result["labels"] = grid["labels"]
        replicas.append(result)
    return replicas


def exportgrid_on(
    grid_x: np.ndarray, x: np.ndarray, xf: np.ndarray, labels: list[str]
) -> np.ndarray:
    """n3fit's x·f (flavour basis, its nodes) → (n_grid, 14) FK evolution basis on grid_x."""
    columns = [labels.index(name) for name in PHYSICAL]
    physical = np.stack([_cubic_in_log_x(x, xf[:, c], grid_x) for c in columns], axis=1)
    evolution = physical @ _physical_to_evolution().T  # (n_grid, 9)
    out = np.zeros((grid_x.size, len(FK_BASIS)))
    for j, name in enumerate(EVOLUTION_9):
        out[:, FK_BASIS.index(name)] = evolution[:, j]
    return out


def _cubic_in_log_x(nodes: np.ndarray, values: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Local cubic Lagrange interpolation in ln x (4 nodes around each point)."""
    t, tn = np.log(x), np.log(nodes)
    first = np.clip(np.searchsorted(tn, t) - 2, 0, tn.size - 4)
    out = np.zeros_like(t)
    for j in range(4):
        weight = np.ones_like(t)
        for k in range(4):
            if k != j:
                weight *= (t - tn[first + k]) / (tn[first + j] - tn[first + k])
        out += weight * values[first + j]
    return out


# ------------------------------------------------------------------------------------------
# χ² on one yardstick


def yardstick(
    problems: dict[str, Problem], grid_x: np.ndarray, xf14: np.ndarray
) -> dict[str, np.ndarray]:
    """χ²/pt per member under each covariance, in all (key) and per dataset (key + "/")."""
    values = {}
    for name, problem in problems.items():
        total, per_dataset = experimental_chi2(problem, grid_predictions(problem, grid_x, xf14))
        values[name], values[name + "/"] = total, per_dataset
    return values


# ------------------------------------------------------------------------------------------
# The fit comparison


def hyperscan_fit_card(work: Path, replicas: int, epochs: int, data: str) -> Path:
    card = yaml.safe_load(FIT_STUDY.read_text())
    card["replicas"], card["epochs"] = replicas, epochs
    card["data"]["real"]["datasets"] = data
    if data != "dis":
        # n3fit has no divergence cut, and a hadronic replica's loss can pass hyperscan's
        # default 1e10 early on and train down (docs/hadronic.md): the hadronic study's 1e14
        card["divergence"] = {"max_loss": 1.0e14}
    path = work / "hyperscan_fit.yml"
    path.write_text(yaml.safe_dump(card, sort_keys=False))
    return path


def compare_fits(args: argparse.Namespace, work: Path) -> None:
    r, e = args.replicas, args.epochs
    specs = [(name, REAL_DATASETS[name]) for name in PRESETS[args.data]]
    datasets = [{"dataset": name, "variant": variant} for name, variant in specs]
    problems = {
        "t0": real_problem(datasets, t0=True),  # what both train with, n3fit's reported "chi2"
        "exp": real_problem(datasets, t0=False),
    }
    print(
        f"\n== Fit: {len(specs)} datasets ({args.data}), {problems['t0'].n_data} points, "
        f"R = {r}, ≤ {e} epochs"
    )
    hadronic = tuple(name for name in PRESETS[args.data] if name not in PRESETS["dis"])
    if hadronic:
        install_hadronic(args.peer, work)
    check_predictions(args.peer, work, specs, problems["exp"])

    card = hyperscan_fit_card(work, r, e, args.data)
    out = work / "hyperscan_fit"
    hs = measure(
        [str(HYPERSCAN), "fit", str(card), "-o", str(out), "--no-progress"],
        work / "hs.log",
        cold_cache(work),
    )
    document = json.loads((out / "results.json").read_text())
    pdfs = np.load(out / "pdfs.npz")
    hs_chi2 = yardstick(problems, pdfs["grid_x"], pdfs["grid_xf_flavour_basis"])
    hs_members = document["members"]
    hs_train = np.array([m["chi2_per_point"]["training"] for m in hs_members])
    hs_valid = np.array([m["chi2_per_point"]["validation"] for m in hs_members])
    hs_epochs = document["steps"]
    diverged = sum(m["status"] == "diverged" for m in hs_members)
    print(f"  hyperscan done: {hs.wall:.0f} s, {diverged} of {r} members diverged", flush=True)

    n3_card = peer_card(args.kit, "multi", work, epochs=e, more=hadronic)
    n3 = run_peer(n3_card, "1" if r == 1 else f"1 -r {r}", args.peer, args.kit, work)
    replicas = n3fit_replicas(work, n3_card)
    grid_x = pdfs["grid_x"]
    n3_xf = np.stack([exportgrid_on(grid_x, p["x"], p["xf"], p["labels"]) for p in replicas])
    n3_chi2 = yardstick(problems, grid_x, n3_xf)
    n3_reported = np.array([p["chi2"] for p in replicas])
    n3_train = np.array([p["erf_tr"] for p in replicas])
    n3_valid = np.array([p["erf_vl"] for p in replicas])
    n3_training = max(p["timing"]["walltime"]["replica_set_to_replica_fitted"] for p in replicas)
    n3_epochs = max(p["stop_epoch"] for p in replicas)
    n3_wall = n3["vp-setupfit"].wall + n3["n3fit"].wall
    print(f"  n3fit done: {n3_wall:.0f} s", flush=True)

    hs_per = document["training_seconds"] / (r * hs_epochs)
    n3_per = n3_training / (r * n3_epochs)
    rows = [
        ("wall time, whole command(s)", f"{n3_wall:.1f} s", f"{hs.wall:.1f} s", n3_wall / hs.wall),
        (
            "  of which training loop",
            f"{n3_training:.1f} s",
            f"{document['training_seconds']:.1f} s",
            n3_training / document["training_seconds"],
        ),
        ("epochs run (longest replica)", f"{n3_epochs}", f"{hs_epochs}", None),
        (
            "time per replica-epoch",
            f"{n3_per * 1e6:.0f} µs",
            f"{hs_per * 1e6:.0f} µs",
            n3_per / hs_per,
        ),
        (
            "peak RSS",
            f"{max(m.rss_mib for m in n3.values()):.0f} MiB",
            f"{hs.rss_mib:.0f} MiB",
            max(m.rss_mib for m in n3.values()) / hs.rss_mib,
        ),
    ]

    def stats(values: np.ndarray) -> str:
        return f"{np.mean(values):.3f} ± {np.std(values):.3f}"

    rows += [
        ("χ²/pt to data, t0 cov. (n3fit's chi2)", stats(n3_chi2["t0"]), stats(hs_chi2["t0"]), None),
        ("χ²/pt to data, experimental cov.", stats(n3_chi2["exp"]), stats(hs_chi2["exp"]), None),
        ("training χ²/pt to own pseudodata", stats(n3_train), stats(hs_train), None),
        ("validation χ²/pt to own pseudodata", stats(n3_valid), stats(hs_valid), None),
    ]
    print(f"  {'':38}{'n3fit 4.1.5':>22}{'hyperscan':>22}{'n3fit ÷ hyperscan':>20}")
    for name, a, b, ratio in rows:
        print(f"  {name:38}{a:>22}{b:>22}{'' if ratio is None else f'{ratio:.1f}×':>20}")
    print("\n  χ²/pt to the data per dataset, experimental covariance:")
    print(f"  {'':38}{'points':>8}{'n3fit 4.1.5':>22}{'hyperscan':>22}")
    for d, dataset in enumerate(problems["exp"].datasets):
        n3, hs_d = stats(n3_chi2["exp/"][:, d]), stats(hs_chi2["exp/"][:, d])
        print(f"  {dataset.name:38}{dataset.n_data:>8}{n3:>22}{hs_d:>22}")
    check = np.max(np.abs(n3_chi2["t0"] / n3_reported - 1.0))
    print(
        f"  check: n3fit's own chi2 per replica recomputed here from its exportgrid through "
        f"hyperscan's FK tables and t0 covariance: max relative difference {check:.1e}"
    )


# ------------------------------------------------------------------------------------------
# The scan comparison


def hyperscan_scan_card(work: Path, kit: Path, trials: int) -> Path:
    """The kit's hyperopt card as a hyperscan scan: same data, folds, space; one thread."""
    n3 = yaml.safe_load((kit / "runcards" / "hyperopt.yml").read_text())
    base = yaml.safe_load(FIT_STUDY.read_text())
    names = [d["dataset"] for d in n3["dataset_inputs"]]
    base["data"]["real"]["datasets"] = [{"dataset": n} for n in names]
    base.pop("replicas", None)  # a scan takes them from scan.replicas
    base["epochs"] = 600
    base["training"]["threads"] = 1  # n3fit's hyperopt card has debug: true (one thread)
    space = n3["hyperscan_config"]
    optimizer = space["optimizer"][0]
    base["scan"] = {
        "trials": trials,
        "replicas": 1,
        "folds": [p["datasets"] for p in n3["kfold"]["partitions"]],
        "objective": {"chi2": "held_out", "statistic": "mean", "fold_statistic": "mean"},
        "sampler": {"name": "tpe", "seed": 0},
        "pruner": {"name": "none"},
        "space": {
            "optimizer": {
                "nadam": {
                    "learning_rate": {
                        "low": optimizer["learning_rate"]["min"],
                        "high": optimizer["learning_rate"]["max"],
                        "log": True,
                    },
                    "clipnorm": {
                        "low": optimizer["clipnorm"]["min"],
                        "high": optimizer["clipnorm"]["max"],
                    },
                }
            },
            # n3fit's n_layers counts the output layer: [2, 3] = 1 or 2 hidden layers.
            "layers": {
                "low": min(space["architecture"]["n_layers"]) - 1,
                "high": max(space["architecture"]["n_layers"]) - 1,
            },
            "units": {
                "low": space["architecture"]["min_units"],
                "high": space["architecture"]["max_units"],
            },
            "activation": space["architecture"]["activations"],
            "parameters": {
                "epochs": {
                    "low": int(float(space["stopping"]["min_epochs"])),
                    "high": int(float(space["stopping"]["max_epochs"])),
                },
                "stopping.patience": {
                    "low": space["stopping"]["min_patience"],
                    "high": space["stopping"]["max_patience"],
                },
                "architecture.initializer": {"choices": space["architecture"]["initializers"]},
            },
        },
    }
    path = work / "hyperscan_scan.yml"
    path.write_text(yaml.safe_dump(base, sort_keys=False))
    return path


def compare_scans(args: argparse.Namespace, work: Path) -> None:
    n = args.trials
    print(f"\n== Scan: {n} trials, 2 datasets (317 points), 2 folds, 1 replica, 1 thread")
    card = hyperscan_scan_card(work, args.kit, n)
    hs = measure(
        [
            str(HYPERSCAN),
            "scan",
            str(card),
            "--workers",
            "1",
            "--storage",
            str(work / "scan.journal"),
            "-o",
            str(work / "scan-best.yml"),
        ],
        work / "hs-scan.log",
        cold_cache(work),
    )
    print(f"  hyperscan done: {hs.wall:.0f} s", flush=True)
    n3_card = peer_card(args.kit, "hyperopt", work)
    n3 = run_peer(n3_card, f"1 --hyperopt {n}", args.peer, args.kit, work)
    tries = json.loads((work / n3_card.stem / "nnfit" / "replica_1" / "tries.json").read_text())
    finished = [t for t in tries if isinstance(t, dict) and t.get("result", {}).get("loss")]
    if len(finished) != n:
        sys.exit(f"n3fit finished {len(finished)} of {n} hyperopt trials, see {work}")
    n3_wall = n3["vp-setupfit"].wall + n3["n3fit"].wall
    rows = [
        ("wall time, whole command(s)", n3_wall, hs.wall),
        ("wall time per trial", n3_wall / n, hs.wall / n),
        ("n3fit step alone, per trial", n3["n3fit"].wall / n, None),
    ]
    print(f"  {'':38}{'n3fit --hyperopt':>22}{'hyperscan scan':>22}{'n3fit ÷ hyperscan':>20}")
    for name, a, b in rows:
        ratio = f"{a / b:.1f}×" if b else ""
        print(f"  {name:38}{a:>20.1f} s{'' if b is None else f'{b:>20.1f} s':>22}{ratio:>20}")
    rss = max(m.rss_mib for m in n3.values())
    print(f"  peak RSS: n3fit {rss:.0f} MiB, hyperscan {hs.rss_mib:.0f} MiB")


def machine() -> str:
    cpu = "?"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        found = re.search(r"model name\s*:\s*(.+)", cpuinfo.read_text())
        cpu = found.group(1).strip() if found else cpu
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"{datetime.date.today()}, {platform.node()}: {os.cpu_count()} cores ({cpu}), "
        f"Python {platform.python_version()}, load {load:.1f} at start"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", choices=sorted(PRESETS), default="dis", help="the shipped datasets both fit"
    )
    parser.add_argument("--replicas", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=2000)
    parser.add_argument("--trials", type=int, default=4, help="scan trials; 0 skips the scan")
    parser.add_argument("--peer", type=Path, default=Path("/tmp/n3fit-peer"), help="n3fit venv")
    parser.add_argument("--kit", type=Path, default=KIT, help="the n3fit peer kit")
    parser.add_argument("--keep", type=Path, help="keep the run folders here")
    args = parser.parse_args()
    if not (args.kit / "run.sh").exists():
        sys.exit(f"no n3fit peer kit at {args.kit} (--kit)")
    ensure_peer(args.peer, args.kit)
    work = Path(tempfile.mkdtemp(prefix="vs-n3fit-")) if args.keep is None else args.keep
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    print("hyperscan vs n3fit 4.1.5: same data, same architecture, same machine, one run")
    print(machine())
    try:
        compare_fits(args, work)
        if args.trials:
            compare_scans(args, work)
    except BaseException:
        # A failure's message points to the logs in the run folder: they must still be there.
        if args.keep is None:
            print(f"the run folder {work} is kept for its logs", file=sys.stderr)
        raise
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n(total {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
