# SPDX-License-Identifier: GPL-3.0-or-later
"""Evolve the shipped LO hadronic grids into FK tables with eko + pineko (the `theory` extra).

    python tools/evolve_hadronic.py [TABLE ...] --out DIR [--accuracy FILE]

TABLE: grids of hyperscan/data/hadronic/grids (default: all; see tools/build_hadronic.py).
Theory 99000001, the DIS tables' card (hyperscan/data/dis/theory_99000001.yaml, completed as
tools/build_fk.py completes it): NLO evolution from Q0 = 1.65 GeV, so that one PDF serves the
DIS and the hadronic tables; the partonic cross sections stay LO. Per group of grids with the
same scales (the E866 ratio's two tables, the Z tables at M_Z, the W tables) one EKO:
``pineko.evolve.write_operator_card_from_file`` (pineko's 50-point x grid, as the DIS tables';
pineko interpolates the EKO's output to the grid's nodes; mu = the grid's scales) ->
``eko.runner.managed.solve`` -> ``pineko.evolve.evolve_grid`` (max_as = 2, max_al = 0, Nf4Ind).

Then it checks each FK table: its convolution with the toy PDF at Q0 equals the grid's with the
same PDF evolved to the grid's scales and nodes by the same EKO (``ekobox.apply``), which tests
pineko's contraction (1e-10), not eko's accuracy. ``--accuracy FILE`` measures that too: the FK
table at Q0 against the grid with the toy evolved by a second EKO computed on the grid's own x
nodes (reported, not judged), and saves that evolved toy to FILE, which the CI check of the
shipped tables reads (tools/self_consistency.py). Writes ``DIR/<TABLE>.pineappl.lz4``, which
``tools/ship_hadronic.py DIR`` ships, and prints the wall time of each stage. Run it niced and
single-threaded: NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1.
"""

from __future__ import annotations

import argparse
import copy
import sys
import tempfile
from pathlib import Path

import numpy as np
import yaml

TOOLS = Path(__file__).resolve().parent
sys.path.insert(0, str(TOOLS))

import build_fk  # noqa: E402  (tools/ is not a package)
import build_hadronic  # noqa: E402

ROOT = TOOLS.parent
THEORY_DIR = ROOT / "hyperscan" / "data" / "dis"  # theory_99000001.yaml, the DIS tables' card
TOLERANCE = 1e-10
#: The PDG ids of the evolved toy that --accuracy saves (the photon and the top are zero).
TOY_PIDS = (-5, -4, -3, -2, -1, 21, 1, 2, 3, 4, 5)


def grid_layout(path: Path) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(x nodes, mu^2 values) of a grid: grids with the same mu^2 share an EKO."""
    from pineappl.grid import Grid

    info = Grid.read(str(path)).evolve_info(np.array([True]))
    return tuple(np.asarray(info.x1).tolist()), tuple(np.asarray(info.fac1).tolist())


def operator_card(grid: Path, card_path: Path, theory: dict) -> dict:
    """pineko's operator card for ``grid``, checked: pineko's 50-point x grid (the DIS tables',
    which pineko then interpolates to the grid's nodes), the grid's scales, the theory's Q0."""
    import pineko.evolve

    pineko.evolve.write_operator_card_from_file(grid, card_path, copy.deepcopy(theory))
    card = yaml.safe_load(card_path.read_text(encoding="utf-8"))
    card["configs"]["n_integration_cores"] = 1
    _, mu2 = grid_layout(grid)
    if not np.allclose(card["xgrid"], build_fk.PINEKO_XGRID, rtol=1e-14, atol=0):
        raise RuntimeError(f"{grid.name}: pineko's x grid is not its 50-point grid")
    mu = sorted(m for m, _ in card["mugrid"])
    if not np.allclose(mu, np.sqrt(sorted(mu2)), rtol=1e-12):
        raise RuntimeError(f"{grid.name}: pineko's scales {mu} are not the grid's")
    if card["init"] != [theory["Q0"], theory["nf0"]]:
        raise RuntimeError(f"{grid.name}: pineko's init {card['init']} is not the theory's")
    card_path.write_text(yaml.safe_dump(card), encoding="utf-8")
    return card


def solve_eko(theory: dict, card: dict, path: Path) -> None:
    import eko
    import eko.io.runcards
    import eko.runner.managed

    # as pineko's `theory.eko` and tools/build_fk.py: eko still reads these deprecated keys
    eko_theory = dict(copy.deepcopy(theory), Qedref=theory["Qref"])
    eko_theory["MaxNfAs"] = theory["MaxNfPdf"]
    legacy = eko.io.runcards.Legacy(eko_theory, card)
    eko.runner.managed.solve(legacy.new_theory, eko.io.runcards.OperatorCard.from_dict(card), path)
    del eko


def evolve(grid_path: Path, eko_path: Path, out: Path, theory: dict) -> None:
    import eko
    import pineappl
    import pineko.evolve

    grid = pineappl.grid.Grid.read(str(grid_path))
    partial = out.with_name(f".partial.{out.name}")
    with eko.EKO.edit(eko_path) as operator:
        pineko.evolve.evolve_grid(
            grid,
            [operator],
            str(partial),
            build_fk.MAX_AS,
            build_fk.MAX_AL,
            xir=1.0,
            xif=1.0,
            xia=1.0,
            theory_meta=copy.deepcopy(theory),
            assumptions=build_fk.ASSUMPTIONS,
            grid_path=grid_path,
        )
    partial.replace(out)  # no half-written FK table under the final name


class _Toy:
    """The toy PDF at Q0 as ekobox.apply wants it (an LHAPDF-like object)."""

    def xfxQ2(self, pid: int, x: float, q2: float) -> float:  # noqa: N802 (LHAPDF's name)
        return build_hadronic.toy_xfx_at_q0(pid, x, q2)

    def hasFlavor(self, pid: int) -> bool:  # noqa: N802
        return pid in (*range(-6, 7), 21, 22)


def evolved_toy(grid_path: Path, eko_path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The toy PDF evolved from Q0 to the grid's scales by the EKO at ``eko_path``, on the grid's
    nodes (interpolated there by eko where the EKO's x grid is another): (x (n_x,), mu^2
    (n_mu,), x·f (n_mu, len(TOY_PIDS), n_x))."""
    import eko
    from ekobox import apply

    nodes = np.asarray(grid_layout(grid_path)[0])
    with eko.EKO.read(eko_path) as operator:
        same = np.array_equal(np.asarray(operator.xgrid.raw), nodes)
        evolved, _ = apply.apply_pdf(operator, _Toy(), targetgrid=None if same else nodes)
    mu2 = np.array(sorted(float(m) for m, _nf in evolved))
    xf = np.zeros((mu2.size, len(TOY_PIDS), nodes.size))
    for (m, _nf), pdfs in evolved.items():
        i = int(np.searchsorted(mu2, float(m)))
        for j, pid in enumerate(TOY_PIDS):
            xf[i, j] = nodes * np.asarray(pdfs.get(pid, np.zeros(nodes.size)))
    return nodes, mu2, xf


def grid_with_evolved_toy(
    grid_path: Path, evolved: tuple[np.ndarray, np.ndarray, np.ndarray]
) -> np.ndarray:
    """The grid convolved with the toy PDF as ``evolved_toy`` evolved it to the grid's scales
    and nodes."""
    import pineappl

    grid = pineappl.grid.Grid.read(str(grid_path))
    nodes, scales, values = evolved
    table: dict[tuple[int, float], list[tuple[float, float]]] = {}
    for i, mu2 in enumerate(scales):
        for j, pid in enumerate(TOY_PIDS):
            for x, value in zip(nodes, values[i, j], strict=True):
                table.setdefault((pid, float(x)), []).append((float(mu2), float(value)))

    def xfx(pid: int, x: float, q2: float) -> float:
        # the EKO's mu^2 went through sqrt and back in the operator card
        found = [v for mu2, v in table.get((pid, x), []) if abs(mu2 / q2 - 1) < 1e-9]
        if len(found) != 1 and (pid, x) in table:
            raise RuntimeError(f"no single evolved value at pid {pid}, x {x}, mu^2 {q2}")
        return found[0] if found else 0.0

    return np.asarray(
        grid.convolve(pdg_convs=grid.convolutions, xfxs=[xfx, xfx], alphas=lambda q2: 0.118)
    )


def fk_with_toy(fk_path: Path) -> np.ndarray:
    """The FK table convolved with the toy PDF at Q0."""
    import pineappl

    fk = pineappl.fk_table.FkTable.read(str(fk_path))
    toy = _Toy()
    return np.asarray(fk.convolve(fk.convolutions, [toy.xfxQ2, toy.xfxQ2]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tables", nargs="*", help="default: all shipped grids")
    parser.add_argument("--out", type=Path, required=True, help="folder for the FK tables")
    parser.add_argument(
        "--accuracy",
        type=Path,
        metavar="FILE",
        help="also evolve the toy by an EKO on each grid's own nodes (one more EKO per group), "
        "compare, and save that evolved toy to FILE (tools/self_consistency.py reads it)",
    )
    args = parser.parse_args(argv)
    names = args.tables or list(build_hadronic.TABLES)
    unknown = [n for n in names if n not in build_hadronic.TABLES]
    if unknown:
        print(f"error: unknown table(s) {unknown}", file=sys.stderr)
        return 2
    try:
        theory = build_fk.load_theory(THEORY_DIR)
        build_fk.import_theory()
    except build_fk.UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    grids = {n: build_hadronic.SHIPPED / f"{n}.pineappl.lz4" for n in names}
    # the EKO depends on the scales only: pineko computes it on its own 50-point x grid
    groups: dict[tuple, list[str]] = {}
    for name, path in grids.items():
        groups.setdefault(grid_layout(path)[1], []).append(name)
    args.out.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    worst = 0.0
    saved: dict[str, np.ndarray] = {}
    with tempfile.TemporaryDirectory(prefix=".evolve_hadronic-", dir=args.out) as work:
        work = Path(work)
        for k, (mu2, members) in enumerate(groups.items()):
            label = f"{len(mu2)} scales: {', '.join(members)}"
            eko_path = work / f"eko-{k}.tar"
            with build_fk.stage(f"eko {label}", timings):
                card = operator_card(grids[members[0]], work / f"card-{k}.yaml", theory)
                solve_eko(theory, card, eko_path)
            for name in members:
                target = args.out / f"{name}.pineappl.lz4"
                with build_fk.stage(f"evolve {name}", timings):
                    evolve(grids[name], eko_path, target, theory)
                at_q0 = fk_with_toy(target)
                same_eko = evolved_toy(grids[name], eko_path)
                diff = float(
                    np.max(np.abs(at_q0 / grid_with_evolved_toy(grids[name], same_eko) - 1))
                )
                worst = max(worst, diff)
                print(f"{name}: FK at Q0 = grid at Q (same EKO) to {diff:.1e}", flush=True)
            if args.accuracy is None:
                continue
            # the same toy evolved by an EKO on each grid's own nodes, no interpolation after
            by_nodes: dict[tuple, list[str]] = {}
            for name in members:
                by_nodes.setdefault(grid_layout(grids[name])[0], []).append(name)
            for j, (x, same_nodes) in enumerate(by_nodes.items()):
                nodes_path = work / f"eko-{k}-nodes-{j}.tar"
                with build_fk.stage(f"eko on the nodes of {', '.join(same_nodes)}", timings):
                    solve_eko(theory, dict(card, xgrid=list(x)), nodes_path)
                for name in same_nodes:
                    at_q0 = fk_with_toy(args.out / f"{name}.pineappl.lz4")
                    evolved = evolved_toy(grids[name], nodes_path)
                    on_nodes = grid_with_evolved_toy(grids[name], evolved)
                    keys = (f"{name}.x", f"{name}.mu2", f"{name}.xf")
                    saved |= dict(zip(keys, evolved, strict=True))
                    accuracy = float(np.max(np.abs(at_q0 / on_nodes - 1)))
                    print(f"{name}: FK at Q0 vs grid at Q, toy evolved on the grid's nodes: "
                          f"{accuracy:.1e}", flush=True)  # fmt: skip
    if args.accuracy is not None:
        args.accuracy.parent.mkdir(parents=True, exist_ok=True)
        partial = args.accuracy.with_name(f".partial.{args.accuracy.name}")
        with partial.open("wb") as file:
            np.savez_compressed(file, pids=np.array(TOY_PIDS), **saved)
        partial.replace(args.accuracy)
        print(f"wrote the toy evolved on the grids' nodes to {args.accuracy}")
    print(f"max relative difference {worst:.1e} (tolerance {TOLERANCE:g})")
    return 0 if worst <= TOLERANCE else 1


if __name__ == "__main__":
    sys.exit(main())
