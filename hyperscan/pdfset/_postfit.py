# SPDX-License-Identifier: GPL-3.0-or-later
"""`hyperscan postfit`: n3fit's replica selection, then the final LHAPDF set of those that pass.

The tests are validphys 4.1.5's (``fitveto``), with its defaults: positivity passed
(``pos_state``), each integrability number at most 0.5, and the χ² and each arc length within
4 standard deviations above the mean of the replicas that pass, recomputed until the passing
count settles. Replicas are judged and numbered in postfit's order (their folders' names
sorted as text: replica_10 before replica_2), so that both tools pick the same first N.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hyperscan.fit import (
    INTEGRABILITY_FLAVOURS,
    POS_PASS,
    RESULTS_FILE,
    RUNCARD_FILE,
    exportgrid_path,
)

from ._errors import EvolveError
from ._lhapdf import PIDS, member_text, written_aside
from ._reader import PdfSet, read_set

CHI2_THRESHOLD = 4.0
ARCLENGTH_THRESHOLD = 4.0
INTEGRABILITY_THRESHOLD = 0.5
POSTFIT_FOLDER = "postfit"
VETO_FILE = "veto_count.json"
#: The arc lengths' flavours, as n3fit writes them (its evolution basis names).
ARC_LENGTH_NAMES = ("Σ", "g", "V", "V3", "V8")

CONVERGENCE = "Convergence check"
CHI2 = "ChiSquared"
TOTAL = "Total"


@dataclass(frozen=True)
class ReplicaInfo:
    """What postfit judges a replica on (its ``<fit>.json``)."""

    replica: int
    chi2: float
    arc_lengths: tuple[float, ...]
    integrability: tuple[float, ...]
    converged: bool


@dataclass(frozen=True)
class PostfitResult:
    """The judged replicas (postfit's order), each test's pass mask over them, the replicas
    selected into the final set (in ``set_folder``), and the fit's replicas that could not be
    judged, with why."""

    replicas: tuple[int, ...]
    vetoes: dict[str, np.ndarray]
    selected: tuple[int, ...]
    unjudged: dict[int, str]
    set_folder: Path

    def failures(self) -> dict[int, list[str]]:
        """Each rejected replica and, in words, the tests it failed."""
        failed: dict[int, list[str]] = {}
        for i, replica in enumerate(self.replicas):
            if not self.vetoes[TOTAL][i]:
                failed[replica] = [
                    test_description(name) for name, mask in self.vetoes.items() if not mask[i]
                ][:-1]  # Total last
        return failed


def test_description(name: str) -> str:
    """A veto's key (n3fit's) in words."""
    if name == CONVERGENCE:
        return "positivity (not POS_PASS)"
    if name == CHI2:
        return "χ² above the mean by more than the threshold's σ"
    kind, _, index = name.partition("_")
    if kind == "IntegNumber":
        return f"integrability of {INTEGRABILITY_FLAVOURS[int(index)]}"
    if kind == "ArcLength":
        return f"arc length of {ARC_LENGTH_NAMES[int(index)]}"
    return name


def postfit_order(replicas: list[int]) -> list[int]:
    """Replicas as postfit takes them: by folder name sorted as text."""
    return sorted(replicas, key=lambda r: f"replica_{r}/")


def vetoes(
    infos: list[ReplicaInfo],
    chi2_threshold: float = CHI2_THRESHOLD,
    arclength_threshold: float = ARCLENGTH_THRESHOLD,
    integrability_threshold: float = INTEGRABILITY_THRESHOLD,
) -> dict[str, np.ndarray]:
    """Each test's pass mask over ``infos``, keyed as n3fit's ``veto_count.json``, ``Total``
    last. A distribution's mean and σ are over the replicas that pass every test so far,
    starting from the converged ones; they are recomputed until the count that passes stops
    changing."""
    masks = {CONVERGENCE: np.array([info.converged for info in infos], dtype=bool)}
    numbers = np.array([info.integrability for info in infos], dtype=np.float64)
    for i in range(numbers.shape[1]):
        masks[f"IntegNumber_{i}"] = numbers[:, i] <= integrability_threshold
    distributions = {CHI2: (np.array([info.chi2 for info in infos]), chi2_threshold)}
    arcs = np.array([info.arc_lengths for info in infos], dtype=np.float64)
    for i in range(arcs.shape[1]):
        distributions[f"ArcLength_{i}"] = (arcs[:, i], arclength_threshold)
    passing = masks[CONVERGENCE].copy()
    while True:
        for name, (values, sigmas) in distributions.items():
            masks[name] = _within(values, passing, sigmas)
        now = np.all(list(masks.values()), axis=0)
        settled = now.sum() == passing.sum()
        passing = now
        if settled:
            break
    masks[TOTAL] = passing
    return masks


def _within(values: np.ndarray, among: np.ndarray, sigmas: float) -> np.ndarray:
    """Values at most ``sigmas`` population σ above the mean of those ``among``; one replica
    or none among them passes as ``among`` says (no spread to judge by)."""
    if among.sum() <= 1:
        return among.copy()
    kept = values[among]
    return values - kept.mean() <= sigmas * kept.std()


def read_fitinfo(path: Path, replica: int) -> ReplicaInfo:
    """A replica's ``<fit>.json``, as hyperscan and n3fit write it."""
    try:
        document = json.loads(path.read_text())
        return ReplicaInfo(
            replica=replica,
            chi2=float(document["chi2"]),
            arc_lengths=tuple(float(v) for v in document["arc_lengths"]),
            integrability=tuple(float(v) for v in document["integrability"]),
            converged=document["pos_state"] == POS_PASS,
        )
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise EvolveError(f"{path}: not a replica's fit information ({error})") from None


def postfit(
    folder: Path | str,
    replicas: int | None = None,
    set_folder: Path | str | None = None,
    chi2_threshold: float = CHI2_THRESHOLD,
    arclength_threshold: float = ARCLENGTH_THRESHOLD,
    integrability_threshold: float = INTEGRABILITY_THRESHOLD,
) -> PostfitResult:
    """Judge the replicas of the fit in ``folder``, then write ``folder/postfit``: n3fit's
    ``veto_count.json``, ``replica_<k>`` links to the selected replicas' folders, and the LHAPDF
    set of the first ``replicas`` that pass (default: all of them), made from the members of
    the evolved set (default ``folder/lhapdf/<folder name>``) with member 0 their mean.
    Nothing is written when fewer pass than asked for."""
    folder = Path(folder)
    if not (folder / RESULTS_FILE).is_file() or not (folder / RUNCARD_FILE).is_file():
        raise EvolveError(
            f"{folder} is not a hyperscan fit folder (no {RESULTS_FILE} and {RUNCARD_FILE})"
        )
    name = folder.resolve().name
    set_folder = Path(set_folder) if set_folder is not None else folder / "lhapdf" / name
    if not (set_folder / f"{set_folder.name}.info").is_file():
        raise EvolveError(
            f"no LHAPDF set at {set_folder} ({set_folder.name}.info): evolve the fit first "
            f"(hyperscan evolve {folder}), or name its set with --set"
        )
    pdf_set = read_set(set_folder)
    if pdf_set.pids != PIDS:
        raise EvolveError(f"{set_folder}: flavours {pdf_set.pids}, not {PIDS}")
    members = {replica: m for m, replica in enumerate(pdf_set.replicas) if replica is not None}
    status = {
        int(m["replica"]): m["status"]
        for m in json.loads((folder / RESULTS_FILE).read_text())["members"]
    }
    judged, unjudged = [], {}
    for replica in postfit_order(list(status)):
        info = folder / exportgrid_path(name, replica).with_suffix(".json")
        if not info.is_file():
            unjudged[replica] = f"{status[replica]}, no fit information ({info.name})"
        elif replica not in members:
            unjudged[replica] = f"not in the set {set_folder}"
        else:
            judged.append(read_fitinfo(info, replica))
    if not judged:
        raise EvolveError(f"{folder}: no replica has both fit information and a set member")
    masks = vetoes(judged, chi2_threshold, arclength_threshold, integrability_threshold)
    passing = [info.replica for info, ok in zip(judged, masks[TOTAL], strict=True) if ok]
    wanted = len(passing) if replicas is None else replicas
    if wanted > len(passing):
        raise EvolveError(
            f"{len(passing)} of the {len(judged)} replicas judged pass postfit's tests, fewer "
            f"than the {wanted} asked for"
        )
    selected = tuple(passing[:wanted])
    thresholds = {
        "chi2_threshold": chi2_threshold,
        "arclength_threshold": arclength_threshold,
        "integrability_threshold": integrability_threshold,
    }
    target = folder / POSTFIT_FOLDER
    with written_aside(target) as staging:
        veto_count = thresholds | {key: mask.tolist() for key, mask in masks.items()}
        (staging / VETO_FILE).write_text(json.dumps(veto_count))
        for k, replica in enumerate(selected, start=1):
            source = Path("..", "nnfit", f"replica_{replica}")
            os.symlink(source, staging / f"replica_{k}", target_is_directory=True)
        _write_selected_set(pdf_set, [members[r] for r in selected], staging / set_folder.name)
    return PostfitResult(
        replicas=tuple(info.replica for info in judged),
        vetoes=masks,
        selected=selected,
        unjudged=unjudged,
        set_folder=target / set_folder.name,
    )


def _write_selected_set(pdf_set: PdfSet, members: list[int], target: Path) -> None:
    """The selected members renumbered 1…N, as evolved, and member 0 recomputed as their mean."""
    target.mkdir()
    source = pdf_set.folder
    info = (source / f"{source.name}.info").read_text()
    info = re.sub(r"^NumMembers:.*$", f"NumMembers: {len(members) + 1}", info, flags=re.M)
    (target / f"{target.name}.info").write_text(info)
    mean = [(pdf_set.x, q**2, values[members].mean(axis=0)) for q, values in pdf_set.blocks]
    (target / f"{target.name}_0000.dat").write_text(member_text("PdfType: central\n", mean))
    for k, m in enumerate(members, start=1):
        text = (source / f"{source.name}_{m:04d}.dat").read_text()
        (target / f"{target.name}_{k:04d}.dat").write_text(text)
