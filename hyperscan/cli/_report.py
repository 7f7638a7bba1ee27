"""Report commands: `report` (a study as one HTML page) and `plot` (a fit folder as PNGs)."""

from __future__ import annotations

from pathlib import Path

import click

from hyperscan.cli._common import (
    check_folder_exists,
    check_not_an_input,
    check_target,
    fail,
    fit_folder_argument,
    force_option,
    output_file_option,
    output_folder_option,
    storage_option,
    study_option,
    user_errors,
)


@click.command()
@study_option
@storage_option
@output_file_option("The HTML file to write (self-contained: opens offline, no JavaScript).")
@force_option
@click.option(
    "--top",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="Best trials listed in the table.",
)
def report(name: str, storage: str | None, output: Path, force: bool, top: int) -> None:
    """Write a study's report as one self-contained HTML page.

    Objective history with the running best, the statistic against each hyperparameter
    (pruned and trashed trials apart, with reasons), parameter importances, the spread of
    replica chi2 per trial, the best trials, trial states and worker throughput over time,
    the trials set apart and why. With no complete trial yet the page says so and shows the
    rest; only a study with no finished trial is refused.

    \b
    Example:
      hyperscan report --study quickstart-scan -o quickstart-report.html
    """
    check_not_an_input(output, storage)
    check_target(output, force)
    check_folder_exists(output)
    from hyperscan.report import ReportError, study_report
    from hyperscan.scan import reading_study, storage_location, write_atomically

    with user_errors(ReportError):
        with reading_study(name, storage) as study:
            text = study_report(study, storage_location(storage).url, top=top)
        write_atomically(output, text, force=force)
    click.echo(f"report of study {name!r} written to {output}")


@click.command()
@fit_folder_argument
@output_folder_option("Folder for the PNG files (created; files of the same name are replaced).")
def plot(fitdir: Path, outdir: Path) -> None:
    """Plot the fit in FITDIR (an OUTDIR of `hyperscan fit`) as PNG files.

    PDFs of all members at Q0 in the evolution and physical bases (68% band, median, and the
    truth for closure fits), chi2 per point by dataset (in a k-fold fit, apart for the members
    that fitted each dataset and those whose fold held it out), training histories. Once the
    fit is evolved (`hyperscan evolve`), its PDFs at Q = 100 GeV too, from the final set if
    `hyperscan postfit` made one, and a closure fit's ratio to its evolved truth.

    \b
    Example:
      hyperscan plot runs/quickstart -o runs/quickstart/plots
    """
    from hyperscan.report import FitPlotError, plot_fit

    try:
        written = plot_fit(fitdir, outdir)
    except FitPlotError as error:
        fail(str(error))
    except OSError as error:
        where = error.filename or outdir
        fail(f"cannot write the plots into {outdir}: {where}: {error.strerror or error}")
    click.echo(f"{len(written)} plots written to {outdir}/")
