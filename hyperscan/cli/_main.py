"""Click group and commands. Heavy imports (TensorFlow, Optuna) happen inside commands so
that `hyperscan --help` answers at once. Only `worker` and `fit` import TensorFlow: the other
commands never fit, so they start in a fraction of a second and take no GPU memory on a node
where workers run."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from hyperscan._version import __version__
from hyperscan.cli._common import (
    INTERRUPTED,
    check_keeps_runcard,
    check_target,
    configure_or_fail,
    fail,
    folder_path,
    runcard_argument,
)
from hyperscan.cli._n3fit import import_n3fit
from hyperscan.cli._pdfset import evolve, postfit
from hyperscan.cli._report import plot, report
from hyperscan.cli._scan import dashboard, export, scan, worker
from hyperscan.cli._study import study

#: What click (8.2 on) raises to show a group's help when it is called alone: not a mistake.
_HELP_ASKED = getattr(click.exceptions, "NoArgsIsHelpError", ())


@contextmanager
def _one_line_usage_errors() -> Iterator[None]:
    """click's usage errors (a bad or missing option value, an unknown option or command) as
    one `error:` line and exit code 2, as every other user mistake, not click's usage block."""
    try:
        yield
    except _HELP_ASKED:
        raise
    except click.UsageError as error:
        fail(error.format_message())


class _Commands(click.Group):
    """Ctrl-C in a command that does not stop on it itself (`export`, `report`, `study ...`)
    exits 130, as shells report SIGINT and as `fit`, `scan` and `worker` do, not with click's
    "Aborted!" and 1, which a batch script reads as a failure. Their writes are atomic.

    A usage mistake is one line, whether in the options of `hyperscan` itself (read in
    `make_context`) or in a command's (read in `invoke`)."""

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        with _one_line_usage_errors():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context) -> object:
        try:
            with _one_line_usage_errors():
                return super().invoke(ctx)
        except KeyboardInterrupt:
            click.echo("interrupted: nothing was half-written", err=True)
            sys.exit(INTERRUPTED)


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="hyperscan")
def main() -> None:
    """Hyperparameter scans of batched neural-network PDF fits."""


@main.command()
@runcard_argument
@click.option(
    "-o",
    "--output",
    "outdir",
    required=True,
    type=click.Path(),
    callback=folder_path,
    metavar="OUTDIR",
    help="Folder for results.json, pdfs.npz, history.npz and the runcard used.",
)
@click.option("--force", is_flag=True, help="Replace OUTDIR if it exists.")
@click.option(
    "--progress/--no-progress",
    default=True,
    show_default=True,
    help="Show progress on stderr: a bar in a terminal, a line a minute in a log file.",
)
def fit(runcard: Path, outdir: Path, force: bool, progress: bool) -> None:
    """Fit the ensemble of replicas described by RUNCARD.

    \b
    Example:
      hyperscan fit studies/quickstart-fit.yml -o runs/quickstart
    """
    try:
        card, problem = _fit_inputs(runcard)
        check_keeps_runcard(outdir, runcard)
        check_target(outdir, force)
        configure_or_fail(threads=card.training.threads)
        from hyperscan.fit import (
            ProgressBar,
            ResultsKeptError,
            fit_runcard,
            member_specs,
            stop_on_signals,
            summary,
            write_fit,
        )
        from hyperscan.runcard import dump_runcard
    except KeyboardInterrupt:
        click.echo("interrupted before the fit started: nothing written", err=True)
        sys.exit(INTERRUPTED)

    members = len(member_specs(card.replica_ids, card.folds, card.data.level1_fits))
    layout = card.training.batch_layout
    if layout is not None:
        click.echo(
            f"fitting in the batch this trial was fitted in ({layout.slots} slots, the trial "
            f"in slot {layout.slot}, the others empty), to repeat its fit bit for bit",
            err=True,
        )
    bar = ProgressBar(card.epochs, members, enabled=progress)
    stop = threading.Event()

    def on_sync(report) -> bool:
        bar(report)
        return stop.is_set()

    # Ctrl-C or SIGTERM: stop at the next sync and keep the fit; a second one aborts, until
    # the results are being written: then every signal waits for the write to end.
    def announce() -> None:
        click.echo(
            "stopping at the next sync, keeping the fit (a second Ctrl-C aborts: nothing kept)",
            err=True,
        )

    with stop_on_signals(stop, second_aborts=True, announce=announce) as hold:
        try:
            result = fit_runcard(card, on_sync, problem=problem)
        except KeyboardInterrupt:
            click.echo("aborted by a second signal: nothing written", err=True)
            sys.exit(INTERRUPTED)
        finally:
            bar.close()
        hold()
        try:
            write_fit(
                result,
                dump_runcard(card, header=f"fitted by hyperscan {__version__}"),
                outdir,
                force=force,
                runcard=card,
            )
        except ResultsKeptError as error:
            fail(str(error))
        except OSError as error:
            fail(f"cannot write {outdir}: {error.strerror or error}")
    click.echo(summary(result))
    click.echo(f"results in {outdir}/")
    if result.interrupted:
        click.echo(f"interrupted after {result.steps} of {card.epochs} epochs", err=True)
        sys.exit(INTERRUPTED)
    if stop.is_set():
        click.echo("interrupted after the last epoch: the fit is complete", err=True)
        sys.exit(INTERRUPTED)


def _fit_inputs(runcard: Path):
    """The fit runcard and its data, or a message saying what is wrong with them."""
    from hyperscan.data import load_problem
    from hyperscan.runcard import RuncardError, ScanRuncard, load_runcard

    try:
        card = load_runcard(runcard)
        if isinstance(card, ScanRuncard):
            fail(
                f"{runcard} is a scan runcard (it has 'scan:'): run it with "
                f"`hyperscan scan {runcard}`, or fit one of its trials after `hyperscan export`"
            )
        return card, load_problem(card, source=str(runcard))
    except RuncardError as error:
        fail(str(error))


for command in (
    study,
    worker,
    export,
    import_n3fit,
    dashboard,
    scan,
    report,
    plot,
    evolve,
    postfit,
):
    main.add_command(command)
