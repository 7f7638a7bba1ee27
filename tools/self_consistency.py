# SPDX-License-Identifier: GPL-3.0-or-later
"""Self-consistency of the shipped theory (issues #52, #51): each dataset's PineAPPL *grid* (before
evolution), convolved with an evolved PDF at the data's scales, must give FK ⊗ x·f(Q0) on the
shipped FK tables, to the accuracy of the evolution.

    python tools/self_consistency.py reference FITDIR [--set DIR] [--out FILE]
    python tools/self_consistency.py check [--reference FILE] [--grids DIR] [--tolerance T]
                                           [--spline] [--toy FILE] [--hadronic-tolerance T]

DIS: ``reference`` (after ``hyperscan evolve FITDIR``) stores what the check needs, compactly, in
``tools/self_consistency/reference.npz``: the set's member 0 (the replicas' mean; every
flavour-number block with LHAPDF's x, Q and PDG ids, and the αs table of its .info) and the
fit's mean x·f at Q0 on the union of the FK x grids (``pdfs.npz``'s ``grid_xf_flavour_basis``),
where FK ⊗ x·f is the fit's prediction exactly. ``check`` convolves every grid in ``--grids``
(``tools/build_fk.py --grid-only`` makes them) with that member through pineappl, the PDF
interpolated as LHAPDF 6 does (log-bicubic: Hermite cubics in ln x and ln Q² with
finite-difference slopes; ``--spline``: parton's bicubic spline instead, a reader neither
LHAPDF's nor ours), αs by a cubic spline in ln Q² within each block, and compares with
hyperscan's FK ⊗ x·f(Q0) on the shipped FK tables, at every point inside the set's Q range.
It prints the largest relative difference per dataset (all points, and the points passing the
standard DIS cuts; and, for the diagnosis, FK ⊗ the set at Q0 against FK ⊗ the fit: the set's
error before any evolution) and exits 1 when one exceeds the tolerance (docs/fk-tables.md says
why).

Hadronic (the LO tables of docs/hadronic.md): a DIS fit's set is a poor probe of Drell–Yan (its
antiquarks, which no DIS point fixes, cross zero), so the PDF is the toy of
tools/build_hadronic.py, evolved by an EKO on each grid's own nodes and scales
(``tools/evolve_hadronic.py --accuracy``, saved in ``tools/self_consistency/hadronic_toy.npz``):
grid ⊗ that toy, combined as nnpdf-data says, against the shipped FK tables ⊗ the toy at Q0.

Needs numpy, scipy, pineappl and parton (hyperscan's `test` extra); no yadism, no eko.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hyperscan.pdfset import log_bicubic

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tools/ is not a package
from build_hadronic import toy_xfx_at_q0  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
HERE = ROOT / "tools" / "self_consistency"
GRIDS = HERE / "grids"
REFERENCE = HERE / "reference.npz"
GRID_SUFFIX = ".grid.pineappl.lz4"
HADRONIC_GRIDS = ROOT / "hyperscan" / "data" / "hadronic" / "grids"
HADRONIC_TOY = HERE / "hadronic_toy.npz"
# The FK tables' own error: pineko's 50-point EKO interpolated to the grids' nodes (measured
# against the toy evolved on those nodes: docs/hadronic.md).
HADRONIC_TOLERANCE = 5e-3
# The set's own error: its 50-point EKO's x interpolation, 1·10⁻³ at Q0 and 2·10⁻³ at 100 GeV
# relative to a flavour's largest value (docs/outputs.md), more relative to a small observable;
# LHAPDF's interpolation adds ≲ 2.4·10⁻⁴. Measured: at most 3.1·10⁻³ (docs/fk-tables.md).
TOLERANCE = 5e-3

Xfx = Callable[[int, float, float], float]
#: PDG ids of LHA_BASIS's labels (hyperscan.data.LHA_BASIS, n3fit's exportgrid flavours)
PDG = {"TBAR": -6, "BBAR": -5, "CBAR": -4, "SBAR": -3, "UBAR": -2, "DBAR": -1, "GLUON": 21}
PDG |= {"D": 1, "U": 2, "S": 3, "C": 4, "B": 5, "T": 6, "PHT": 22}


# --- the reference set --------------------------------------------------------------------------


@dataclass(frozen=True)
class Block:
    """One LHAPDF subgrid (a flavour-number range): x·f on x (n_x) × Q (n_q) × pids."""

    x: np.ndarray
    q: np.ndarray
    pids: np.ndarray
    xf: np.ndarray  # (n_x, n_q, n_pid)
    alphas: np.ndarray  # (n_q,): αs at the block's Q


@dataclass(frozen=True)
class Reference:
    """Member 0 of a set and the fit's mean x·f at Q0 on its FK nodes (FK basis)."""

    blocks: tuple[Block, ...]
    q0: float
    q0_x: np.ndarray
    q0_xf: np.ndarray  # (14, n_x), FK_BASIS rows
    about: dict


def read_set(folder: Path) -> tuple[tuple[Block, ...], dict]:
    """Member 0 of the LHAPDF set in ``folder`` (read with parton) with its αs table."""
    import yaml
    from parton.pdf import PDFGrid, PDFMember, PDFSet

    pdfset = PDFSet(folder.name, pdfdir=str(folder.parent))
    _, raw = PDFMember(pdfset, 0).load()
    info = pdfset.info
    qs, values = np.asarray(info["AlphaS_Qs"], float), np.asarray(info["AlphaS_Vals"], float)
    blocks, start = [], 0
    for text in raw:
        grid = PDFGrid.from_block(text)
        n_x, n_q = len(grid.x), len(grid.Q)
        alphas_q = qs[start : start + n_q]
        if not np.allclose(alphas_q, grid.Q, rtol=1e-6):  # the .dat has 7 digits
            raise ValueError(f"{folder}: AlphaS_Qs do not follow the member's blocks")
        xf = np.asarray(grid.xfgrid, float).reshape(n_x, n_q, -1)
        blocks.append(Block(grid.x, grid.Q, grid.flavors, xf, values[start : start + n_q]))
        start += n_q
    if start != len(qs):
        raise ValueError(f"{folder}: {len(qs)} AlphaS_Qs for {start} Q nodes")
    return tuple(blocks), yaml.safe_load(yaml.safe_dump(info))


def make_reference(fit: Path, set_folder: Path | None = None) -> Reference:
    """The reference of a fit evolved by ``hyperscan evolve`` (default set: lhapdf/<name>/)."""
    import yaml

    set_folder = set_folder or fit / "lhapdf" / fit.name
    blocks, info = read_set(set_folder)
    with np.load(fit / "pdfs.npz") as z:
        ok = z["status"] == "ok"
        q0_x = np.asarray(z["grid_x"], float)
        q0_xf = np.asarray(z["grid_xf_flavour_basis"], float)[ok].mean(axis=0).T
    about = {
        "fit": fit.name,
        "set": set_folder.name,
        "members": int(ok.sum()),
        "set_info": {k: info.get(k) for k in ("SetDesc", "NumMembers", "QMin", "QMax", "XMin")},
    }
    exportgrid = next(iter(sorted((fit / "nnfit").glob(f"replica_*/{fit.name}.exportgrid"))))
    q0 = float(np.sqrt(yaml.safe_load(exportgrid.read_text(encoding="utf-8"))["q20"]))
    return Reference(blocks, q0, q0_x, q0_xf, about)


def save_reference(ref: Reference, path: Path) -> None:
    """Compressed npz, no pickle: what the CI check reads."""
    arrays: dict[str, np.ndarray] = {
        "q0": np.asarray(ref.q0),
        "q0_x": ref.q0_x,
        "q0_xf": ref.q0_xf,
        "about": np.asarray(json.dumps(ref.about)),
        "n_blocks": np.asarray(len(ref.blocks)),
    }
    for i, b in enumerate(ref.blocks):
        arrays |= {f"x_{i}": b.x, f"q_{i}": b.q, f"pids_{i}": b.pids, f"xf_{i}": b.xf}
        arrays[f"alphas_{i}"] = b.alphas
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.npz")
    np.savez_compressed(tmp, **arrays)
    tmp.replace(path)


def load_reference(path: Path = REFERENCE) -> Reference:
    """The reference saved by ``save_reference``."""
    with np.load(path, allow_pickle=False) as z:
        blocks = tuple(
            Block(z[f"x_{i}"], z[f"q_{i}"], z[f"pids_{i}"], z[f"xf_{i}"], z[f"alphas_{i}"])
            for i in range(int(z["n_blocks"]))
        )
        return Reference(blocks, float(z["q0"]), z["q0_x"], z["q0_xf"], json.loads(str(z["about"])))


# --- the set as pineappl reads it ---------------------------------------------------------------


class SetMember:
    """x·f(x, Q²) and αs(Q²) of one member, LHAPDF-style callables for pineappl.

    The PDF: LHAPDF's log-bicubic interpolation (``log_bicubic``), or with ``spline=True``
    parton's bicubic spline in (ln x, ln Q²), a reader neither LHAPDF's nor ours; on the
    block that holds Q² (the upper one at a threshold, as LHAPDF). αs: a cubic spline in ln Q²
    of the block's table. Values are cached by (pid, Q²) on the x nodes pineappl asks for.
    """

    def __init__(self, blocks: Sequence[Block], spline: bool = False):
        from scipy.interpolate import CubicSpline

        self.blocks = tuple(blocks)
        self.spline = spline
        self._alphas = [CubicSpline(np.log(b.q**2), b.alphas) for b in blocks]
        self._cache: dict[tuple[int, float], dict[float, float]] = {}
        self._splines: dict[int, object] = {}  # parton's PDFGrid of each block, when asked

    def _block(self, q2: float) -> int | None:
        """The block that holds Q², None outside the set (no extrapolation)."""
        for i in reversed(range(len(self.blocks))):
            b = self.blocks[i]
            if b.q[0] ** 2 * (1 - 1e-10) <= q2 <= b.q[-1] ** 2 * (1 + 1e-10):
                return i
        return None

    def values(self, pid: int, x: np.ndarray, q2: float) -> np.ndarray:
        """x·f of one PDG id at the points x and one Q² (0 for a flavour the set lacks)."""
        i = self._block(q2)
        if i is None:  # NaN, not an exception: pineappl calls from Rust and would panic
            return np.full(len(x), np.nan)
        block = self.blocks[i]
        pid = 21 if pid == 0 else pid
        if pid not in block.pids:
            return np.zeros(len(x))  # the photon of a QCD set, for instance
        index = int(np.flatnonzero(block.pids == pid)[0])
        if not self.spline:
            return log_bicubic(block.x, block.q, block.xf[:, :, index], x, q2)
        if i not in self._splines:
            from parton.pdf import PDFGrid

            flat = block.xf.reshape(len(block.x) * len(block.q), -1)
            self._splines[i] = PDFGrid(block.x, block.q, flat, block.pids)
        grid = self._splines[i]
        return np.array([float(grid.xfxQ2(pid, xi, q2, grid=True)[0, 0]) for xi in x])

    def xfxq2(self, pid: int, x: float, q2: float) -> float:
        """One value, pineappl's callback: computed once per (pid, Q²) on all x nodes of the
        set's grids (the pineko grid), then looked up."""
        from hyperscan.data import STANDARD_XGRID

        key = (pid, q2)
        if key not in self._cache:
            self._cache[key] = dict(
                zip(
                    STANDARD_XGRID.tolist(),
                    self.values(pid, STANDARD_XGRID, q2).tolist(),
                    strict=True,
                )
            )
        table = self._cache[key]
        if x not in table:
            table[x] = float(self.values(pid, np.array([x]), q2)[0])
        return table[x]

    def alphas(self, q2: float) -> float:
        """αs(Q²), NaN outside the set."""
        i = self._block(q2)
        return float("nan") if i is None else float(self._alphas[i](np.log(q2)))


# --- the check ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """One dataset: both predictions per point and the cut mask."""

    dataset: str
    from_grid: np.ndarray
    from_fk: np.ndarray
    passes_cuts: np.ndarray
    n_data: int  # all points of the dataset; those compared are inside the set's Q range

    @property
    def relative(self) -> np.ndarray:
        return np.abs(self.from_grid - self.from_fk) / np.abs(self.from_fk)

    @property
    def worst(self) -> float:
        return float(self.relative.max())

    @property
    def worst_after_cuts(self) -> float:
        return float(self.relative[self.passes_cuts].max())


def grid_kinematics(grid_path: Path) -> np.ndarray:
    """(x, Q²) of each bin, from the observables runcard yadism made the grid of."""
    import pineappl

    grid = pineappl.grid.Grid.read(str(grid_path))
    (points,) = json.loads(grid.metadata["runcard"])["observables"].values()
    return np.array([[p["x"], p["Q2"]] for p in points], float)


def fk_predictions(dataset: str, ref: Reference) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """hyperscan's FK ⊗ x·f(Q0) on the shipped table, every point; the cut mask; the
    kinematics (x, Q², y)."""
    from hyperscan.data import DIS_DATASETS, load_real_dataset, on_grid

    data = load_real_dataset(dataset, DIS_DATASETS[dataset])  # the shipped variant
    (table,) = data.tables
    nodes = on_grid(ref.q0_x, table.xgrid, dataset)
    return table.predictions(ref.q0_xf[:, nodes]), data.cut_mask(), data.kinematics


def grid_predictions(
    grid_path: Path, xfx: Xfx, alphas: Callable[[float], float], q2_min: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """pineappl's grid ⊗ x·f(x, Q²) with αs(Q²) at the bins with Q² ≥ q2_min (the scales are
    the data's Q²); and those bins' indices."""
    import pineappl

    grid = pineappl.grid.Grid.read(str(grid_path))
    q2 = np.asarray(grid.bin_limits(), float)[:, 0, 0]  # x1 of the grid: Q² (bins are points)
    bins = np.flatnonzero(q2 >= q2_min)
    values = grid.convolve(grid.convolutions, [xfx], alphas, bin_indices=bins.astype(np.uint64))
    return np.asarray(values, float), bins


def check_dataset(
    dataset: str,
    ref: Reference,
    member: SetMember | None = None,
    grid: Path | None = None,
    xfx: Xfx | None = None,
) -> Outcome:
    """Grid ⊗ the set against FK ⊗ x·f(Q0) for one dataset, at the points inside the set's Q
    range (NMC has Q² < 1 GeV², below every cut); ``xfx`` replaces the set's PDF."""
    member = member or SetMember(ref.blocks)
    grid = grid or GRIDS / f"{dataset}{GRID_SUFFIX}"
    q2_min = float(ref.blocks[0].q[0] ** 2)
    from_grid, bins = grid_predictions(grid, xfx or member.xfxq2, member.alphas, q2_min)
    from_fk, mask, kinematics = fk_predictions(dataset, ref)
    if not np.array_equal(grid_kinematics(grid), kinematics[:, :2]):
        raise ValueError(f"{dataset}: the grid {grid.name} is not at the data's (x, Q²)")
    return Outcome(dataset, from_grid, from_fk[bins], mask[bins], len(from_fk))


def set_at_q0(ref: Reference, member: SetMember | None = None) -> float:
    """Largest |set(x, Q0) − fit(x, Q0)| on the FK nodes (u, d, s, c, their antiquarks, g),
    relative to each flavour's largest |x·f|: the evolution's own error before any scale."""
    from hyperscan.data import LHA_BASIS, fk_to_lha_rotation

    member = member or SetMember(ref.blocks)
    fit = fk_to_lha_rotation(4) @ ref.q0_xf
    worst = []  # NaN (a node outside the set) propagates: np.max, not max
    for label in ("GLUON", "U", "D", "S", "C", "UBAR", "DBAR", "SBAR", "CBAR"):
        pid = PDG[label]
        want = fit[LHA_BASIS.index(label)]
        have = np.array([member.xfxq2(pid, x, ref.q0**2) for x in ref.q0_x])
        worst.append(np.abs(have - want).max() / np.abs(want).max())
    return float(np.max(worst))


def through_fk_at_q0(dataset: str, ref: Reference, member: SetMember | None = None) -> float:
    """Largest relative difference of FK ⊗ set(Q0) from FK ⊗ fit(Q0): the set's error at Q0
    alone (the same FK table, the same evolution on both sides), a part of the check's."""
    from hyperscan.data import (
        DIS_DATASETS,
        LHA_BASIS,
        fk_to_lha_rotation,
        load_real_dataset,
        on_grid,
    )

    member = member or SetMember(ref.blocks)
    lha = np.array([member.values(PDG[label], ref.q0_x, ref.q0**2) for label in LHA_BASIS])
    set_fk = np.linalg.solve(fk_to_lha_rotation(6), lha)  # all six quarks: invertible
    (table,) = load_real_dataset(dataset, DIS_DATASETS[dataset]).tables
    nodes = on_grid(ref.q0_x, table.xgrid, dataset)
    have, want = table.predictions(set_fk[:, nodes]), table.predictions(ref.q0_xf[:, nodes])
    return float(np.max(np.abs(have - want) / np.abs(want)))


# --- the hadronic tables: the toy PDF evolved on each grid's own nodes ---------------------------


@dataclass(frozen=True)
class EvolvedToy:
    """The toy PDF (tools/build_hadronic.py's, no bottom at Q0) evolved from Q0 by an EKO computed
    on each hadronic grid's own x nodes and scales (``tools/evolve_hadronic.py --accuracy``):
    no x interpolation after it, unlike the FK tables' 50-point EKO."""

    pids: tuple[int, ...]
    tables: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]  # x, mu², x·f (mu², pid, x)

    def xfx(self, table: str) -> Xfx:
        """pineappl's callback for ``table``'s grid: x·f at its nodes and scales, looked up."""
        x, mu2, xf = self.tables[table]
        at_x = {float(v): i for i, v in enumerate(x)}

        def value(pid: int, xi: float, q2: float) -> float:
            scale = np.flatnonzero(np.abs(mu2 / q2 - 1) < 1e-9)  # mu went through sqrt and back
            if pid not in self.pids or xi not in at_x or scale.size != 1:
                return 0.0 if pid in (6, -6, 22) else float("nan")  # NaN: pineappl calls from Rust
            return float(xf[scale[0], self.pids.index(pid), at_x[xi]])

        return value


def load_evolved_toy(path: Path = HADRONIC_TOY) -> EvolvedToy:
    with np.load(path, allow_pickle=False) as z:
        names = sorted({k.rsplit(".", 1)[0] for k in z.files if k != "pids"})
        tables = {n: (z[f"{n}.x"], z[f"{n}.mu2"], z[f"{n}.xf"]) for n in names}
        return EvolvedToy(tuple(int(p) for p in z["pids"]), tables)


def toy_at_q0(x: np.ndarray) -> np.ndarray:
    """(14, n_x) the same toy at Q0 in FK_BASIS, what the FK tables act on."""
    from hyperscan.data import LHA_BASIS, fk_to_lha_rotation

    pdg = [PDG.get(label, 22) for label in LHA_BASIS]
    lha = np.array([[toy_xfx_at_q0(p, xi, 0.0) for xi in x] for p in pdg])
    return np.linalg.solve(fk_to_lha_rotation(6), lha)


def hadronic_grid_predictions(grid_path: Path, xfx: Xfx) -> np.ndarray:
    """pineappl's grid ⊗ x·f ⊗ x·f, every bin (both beams the proton: the grids fold the
    antiproton and the deuteron into their channels); LO, so αs does not enter."""
    import pineappl

    grid = pineappl.grid.Grid.read(str(grid_path))
    return np.asarray(grid.convolve(grid.convolutions, [xfx, xfx], lambda q2: 0.118), float)


def check_hadronic(
    dataset: str,
    toy: EvolvedToy,
    grids: Path = HADRONIC_GRIDS,
    xfx: Callable[[str], Xfx] | None = None,
) -> Outcome:
    """The observable from the LO grids ⊗ the evolved toy (operands normalised and combined as
    nnpdf-data's metadata say) against hyperscan's from the shipped FK tables ⊗ the toy at Q0,
    at the points shipped with FK rows (E866 pp has none for those cut at every order).
    ``xfx``: the PDF per grid instead of the evolved toy's."""
    from hyperscan.data import HADRONIC_DATASETS, combine, load_real_dataset
    from hyperscan.data._real import SHIPPED_PTO
    from hyperscan.runcard.real_datasets import commondata_files

    variant = HADRONIC_DATASETS[dataset]
    data = load_real_dataset(dataset, variant)
    files = commondata_files(dataset, variant)
    if files.shifts:
        raise ValueError(f"{dataset}: shifted tables are not compared here")
    factor = dict(files.normalization)
    pdf = xfx or toy.xfx
    from_grid = [
        np.concatenate(
            [
                hadronic_grid_predictions(grids / f"{t}.pineappl.lz4", pdf(t))
                * files.conversion_factor
                * factor.get(t, 1.0)
                for t in operand
            ]
        )
        for operand in files.fk_tables
    ]
    from_fk = [t.predictions(toy_at_q0(t.xgrid)) for t in data.tables]
    rows = [np.any(t.fk != 0, axis=(1, 2, 3)) for t in data.tables if t.n_data > 1]
    shipped = np.logical_and.reduce(rows)
    return Outcome(
        dataset,
        combine(data.operation, from_grid)[shipped],
        combine(data.operation, from_fk)[shipped],
        data.cut_mask(pto=SHIPPED_PTO)[shipped],
        data.n_data,
    )


def datasets_with_grids(grids: Path = GRIDS) -> list[str]:
    """The datasets whose grids lie in ``grids``."""
    return sorted(p.name[: -len(GRID_SUFFIX)] for p in grids.glob(f"*{GRID_SUFFIX}"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    make = sub.add_parser("reference", help="store a fit's set and x·f(Q0) for the check")
    make.add_argument("fit", type=Path)
    make.add_argument("--set", type=Path, default=None, help="default: FIT/lhapdf/<name>")
    make.add_argument("--out", type=Path, default=REFERENCE)
    run = sub.add_parser("check", help="grid ⊗ set against FK ⊗ x·f(Q0), per dataset")
    run.add_argument("--reference", type=Path, default=REFERENCE)
    run.add_argument("--grids", type=Path, default=GRIDS)
    run.add_argument("--tolerance", type=float, default=TOLERANCE)
    run.add_argument("--spline", action="store_true", help="parton's spline, not LHAPDF's")
    run.add_argument("--toy", type=Path, default=HADRONIC_TOY, help="the evolved toy (hadronic)")
    run.add_argument("--hadronic-tolerance", type=float, default=HADRONIC_TOLERANCE)
    args = parser.parse_args(argv)

    if args.command == "reference":
        ref = make_reference(args.fit, args.set)
        save_reference(ref, args.out)
        print(f"wrote {args.out} ({args.out.stat().st_size / 1e3:.0f} kB): {ref.about}")
        return 0

    ref = load_reference(args.reference)
    member = SetMember(ref.blocks, spline=args.spline)
    print(f"set at Q0 = {ref.q0} GeV against the fit: {set_at_q0(ref, member):.2e}")
    print(
        f"{'dataset':36s} {'points':>9s} {'max rel diff':>12s} {'after cuts':>10s} "
        f"{'at Q0 only':>10s} {'s':>5s}"
    )
    worst = []
    for dataset in datasets_with_grids(args.grids):
        start = time.perf_counter()
        out = check_dataset(dataset, ref, member, args.grids / f"{dataset}{GRID_SUFFIX}")
        took = time.perf_counter() - start
        worst.append(out.worst)
        print(
            f"{dataset:36s} {len(out.from_fk):4d}/{out.n_data:4d} {out.worst:12.2e} "
            f"{out.worst_after_cuts:10.2e} {through_fk_at_q0(dataset, ref, member):10.2e} "
            f"{took:5.1f}"
        )
    from hyperscan.data import HADRONIC_DATASETS

    toy, hadronic = load_evolved_toy(args.toy), []
    print(f"hadronic: the toy evolved on the grids' nodes, tolerance {args.hadronic_tolerance:g}")
    for dataset in HADRONIC_DATASETS:
        start = time.perf_counter()
        out = check_hadronic(dataset, toy)
        took = time.perf_counter() - start
        hadronic.append(out.worst)
        print(
            f"{dataset:36s} {len(out.from_fk):4d}/{out.n_data:4d} {out.worst:12.2e} "
            f"{out.worst_after_cuts:10.2e} {'':>10s} {took:5.1f}"
        )
    verdicts = []
    for what, values, tolerance in (
        ("DIS", worst, args.tolerance),
        ("hadronic", hadronic, args.hadronic_tolerance),
    ):
        largest = float(np.max(values))  # NaN fails
        verdicts.append(bool(largest <= tolerance))
        shown = "<=" if verdicts[-1] else "not <="
        print(f"{what}: largest {largest:.2e} {shown} tolerance {tolerance:g}")
    return 0 if all(verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
