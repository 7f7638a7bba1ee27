"""PDF-set commands: `evolve` (a fit folder's exportgrids into an LHAPDF set) and `postfit`
(the replicas that make the final set)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import click

from hyperscan.cli._common import fail, fit_folder_argument, output_folder_option


@click.command()
@fit_folder_argument
@output_folder_option(
    "Folder that receives the set's folder (default: FITDIR/lhapdf), as LHAPDF_DATA_PATH names.",
    required=False,
)
@click.option("--name", default=None, help="The set's name (default: FITDIR's name).")
@click.option(
    "--eko",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="An EKO file (eko's .tar) to evolve with, as it is; default: one made under the fit's "
    "theory card, from the cache or computed into it.",
)
@click.option(
    "--x-points",
    type=click.IntRange(min=5, max=196),
    default=None,
    help="Points of the computed EKO's x grid, taken from the export grid [default: 50].",
)
@click.option("--force", is_flag=True, help="Replace the set if it exists.")
@click.option("--progress/--no-progress", default=True, help="A progress bar for the EKO.")
def evolve(
    fitdir: Path,
    outdir: Path | None,
    name: str | None,
    eko: Path | None,
    x_points: int | None,
    force: bool,
    progress: bool,
) -> None:
    """Evolve the fit in FITDIR (an OUTDIR of `hyperscan fit`) into an LHAPDF 6 set.

    The set holds member 0, the replicas' mean, then one member per replica, on n3fit's x and Q
    grids (1 GeV to 100 TeV). The evolution kernel operator (EKO) is computed with eko under the
    fit's theory card, as n3fit's evolven3fit computes it, once: it is kept in
    $XDG_CACHE_HOME/hyperscan/ekos for every later fit of the same theory. Needs
    `pip install 'hyperscan[evolve]'`.

    \b
    Example:
      hyperscan evolve runs/quickstart
      LHAPDF_DATA_PATH=runs/quickstart/lhapdf  # then any LHAPDF reader loads "quickstart"
    """
    missing = [name for name in ("eko", "nnpdf_data") if importlib.util.find_spec(name) is None]
    if missing:
        fail(f"`hyperscan evolve` needs {' and '.join(missing)}: pip install 'hyperscan[evolve]'")
    from hyperscan.pdfset import EKO_X_POINTS, EvolveError, evolve_fit

    bar = None

    def advance(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            from tqdm import tqdm

            click.echo(
                "computing the EKO, once for this theory and grid (then kept in the cache); the "
                "first EKO of an installation also compiles eko's kernels (about 30 minutes)",
                err=True,
            )
            bar = tqdm(total=total, desc="EKO", unit="piece", disable=not progress)
        bar.update(done - bar.n)

    try:
        folder = evolve_fit(
            fitdir,
            outdir,
            name,
            eko,
            x_points=x_points or EKO_X_POINTS,
            progress=advance,
            force=force,
        )
    except EvolveError as error:
        fail(str(error))
    except OSError as error:
        fail(f"cannot write the set: {error.filename or outdir}: {error.strerror or error}")
    finally:
        if bar is not None:
            bar.close()
    click.echo(f"LHAPDF set {folder.name} written to {folder}/")


@click.command()
@fit_folder_argument
@click.option(
    "--replicas",
    type=click.IntRange(min=1),
    default=None,
    help="Members of the final set: the first N replicas that pass [default: all that pass].",
)
@click.option(
    "--set",
    "set_folder",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="The evolved LHAPDF set (a set's folder) [default: FITDIR/lhapdf/<FITDIR's name>].",
)
@click.option(
    "--chi2-threshold",
    type=click.FloatRange(min=0),
    default=4.0,
    show_default=True,
    help="σ above the passing replicas' mean χ² beyond which a replica fails.",
)
@click.option(
    "--arclength-threshold",
    type=click.FloatRange(min=0),
    default=4.0,
    show_default=True,
    help="σ above the passing replicas' mean arc length beyond which a replica fails.",
)
@click.option(
    "--integrability-threshold",
    type=click.FloatRange(min=0),
    default=0.5,
    show_default=True,
    help="Largest integrability number (Σ|x·f| at x = 1e-9, 1e-8, 1e-7) that passes.",
)
def postfit(
    fitdir: Path,
    replicas: int | None,
    set_folder: Path | None,
    chi2_threshold: float,
    arclength_threshold: float,
    integrability_threshold: float,
) -> None:
    """Select the replicas of the fit in FITDIR as n3fit's postfit does, into the final set.

    Each replica is judged on positivity, integrability, and its χ² and arc lengths against
    the others'; the command names each one that fails and why. FITDIR/postfit then holds the
    LHAPDF set of those that pass, renumbered, member 0 their mean (evolve the fit first),
    n3fit's veto_count.json, and replica_<k> links to their folders.

    \b
    Example:
      hyperscan evolve runs/quickstart && hyperscan postfit runs/quickstart
    """
    from hyperscan.pdfset import EvolveError
    from hyperscan.pdfset import postfit as select

    try:
        result = select(
            fitdir,
            replicas,
            set_folder,
            chi2_threshold,
            arclength_threshold,
            integrability_threshold,
        )
    except EvolveError as error:
        fail(str(error))
    except OSError as error:
        fail(f"cannot write the postfit folder: {error.filename or fitdir}: {error.strerror}")
    for replica, why in result.unjudged.items():
        click.echo(f"replica {replica}: not judged: {why}")
    for replica, tests in result.failures().items():
        click.echo(f"replica {replica}: fails {', '.join(tests)}")
    click.echo(
        f"{int(result.vetoes['Total'].sum())} of {len(result.replicas)} replicas pass; "
        f"LHAPDF set {result.set_folder.name} of {len(result.selected)} written to "
        f"{result.set_folder}/ (member 0 their mean)"
    )
