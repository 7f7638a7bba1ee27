"""`hyperscan study create|status|list|copy`: a study's life, without fitting anything."""

from __future__ import annotations

import json
from pathlib import Path

import click

from hyperscan.cli._common import (
    configure_or_fail,
    fail,
    grace_period_option,
    not_blank,
    runcard_argument,
    storage_option,
    study_option,
    user_errors,
)
from hyperscan.cli._render import counts_line, plural, status_text, studies_text


def load_scan_runcard(path: Path):
    """The scan runcard at ``path``, or one line saying what is wrong with it: a fit runcard
    given here gets the command that fits it."""
    from hyperscan.runcard import RuncardError, load_fit_runcard
    from hyperscan.runcard import load_scan_runcard as load

    try:
        return load(path)
    except RuncardError as error:
        try:
            load_fit_runcard(path)
        except RuncardError:
            fail(str(error))
        fail(
            f"{path} is a fit runcard (it has no 'scan:' section): fit it with "
            f"`hyperscan fit {path} -o OUTDIR`, or add a 'scan:' section to scan it "
            "(studies/quickstart-scan.yml shows one)"
        )


@click.group()
def study() -> None:
    """Create and inspect studies."""


@study.command("create")
@runcard_argument
@storage_option
@click.option(
    "--name",
    callback=not_blank,
    help="Study name (default: the runcard's file name without .yml).",
)
def study_create(runcard: Path, storage: str | None, name: str | None) -> None:
    """Create a study from a scan RUNCARD (once; the same runcard again is a no-op).

    \b
    Example:
      hyperscan study create studies/quickstart-scan.yml --storage postgresql://user@db/scans
    """
    load_scan_runcard(runcard)
    from hyperscan.scan import create_study

    with user_errors():
        created = create_study(runcard, storage, name)
        creation = created.creation
        # read only to say what a new budget leaves
        finished = created.status().finished if creation.old_budget is not None else 0
    name, where, budget = created.name, created.storage, created.runcard.scan.trials
    if creation.created:
        click.echo(f"study {name!r} created in {where}")
    elif creation.old_budget is not None:
        spent = (
            f"; {plural(finished, 'trial')} {'has' if finished == 1 else 'have'} finished, so "
            "no worker takes another"
            if finished >= budget
            else ""
        )
        click.echo(
            f"study {name!r} in {where}: budget changed from {creation.old_budget} to "
            f"{plural(budget, 'trial')} (running workers take it after their trial){spent}"
        )
    else:
        click.echo(f"study {name!r} exists with this runcard in {where}")
    objective = created.runcard.scan.objective
    if objective.multi:
        click.echo(
            f"multi-objective ({', '.join(objective.names)}): no pruning, which Optuna offers "
            "for single-objective studies only; trials with diverging replicas are still "
            "trashed"
        )


@study.command("status")
@study_option
@storage_option
@grace_period_option("The workers' grace period: a running trial without heartbeat for it is lost.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the status as one JSON object (for scripts) instead of tables.",
)
def study_status(name: str, storage: str | None, grace_period: int, as_json: bool) -> None:
    """Trials by state, the best trial and its replica statistics, running trials."""
    from hyperscan.scan import open_study

    with user_errors():
        status = open_study(name, storage, grace_period=grace_period).status()
    if as_json:
        click.echo(json.dumps(status.to_dict(), indent=2))
    else:
        click.echo(status_text(status))


@study.command("noise")
@study_option
@storage_option
@click.option(
    "--trials",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    metavar="N",
    help="Measure the N best complete trials.",
)
@click.option(
    "--repeats",
    type=click.IntRange(min=2),
    default=3,
    show_default=True,
    metavar="R",
    help="Refits of each trial in other batch layouts, and with fresh replicas.",
)
def study_noise(name: str, storage: str | None, trials: int, repeats: int) -> None:
    """Measure the study's noise floor: how far a trial's value moves when only the rounding
    changes (other batch layouts) and when its replicas are drawn afresh. Trials closer to
    the best than that are ties (`study status` and `export` name them)."""
    from hyperscan.scan import open_study

    with user_errors():
        study = open_study(name, storage)
        configure_or_fail(threads=study.runcard.fit.training.threads)

        def said(noise) -> None:
            def listed(values) -> str:
                return ", ".join("trashed" if v != v else f"{v:.6g}" for v in values)

            click.echo(
                f"trial {noise.number}: value {noise.value:.6g}; other layouts "
                f"{listed(noise.rounding)}; fresh replicas {listed(noise.replicas)}"
            )

        click.echo(
            f"refitting the {trials} best trials (or fewer) {repeats} times in other layouts "
            f"and {repeats} times with fresh replicas"
        )
        floor = study.measure_noise(trials, repeats, on_trial=said)
    click.echo(f"noise floor: {floor.text()}")


@study.command("list")
@storage_option
def study_list(storage: str | None) -> None:
    """The studies in the storage: each one's trials by state, budget and best value."""
    from hyperscan.scan import list_studies, storage_location

    with user_errors():
        studies = list_studies(storage)
        url = storage_location(storage).url
    click.echo(studies_text(studies, url))


@study.command("copy")
@click.option(
    "--from",
    "source",
    required=True,
    callback=not_blank,
    metavar="URL",
    help="Storage holding the study: a journal file path or a URL.",
)
@click.option(
    "--to",
    "target",
    required=True,
    callback=not_blank,
    metavar="URL",
    help="Storage to copy into (its schema is created if needed).",
)
@study_option
@click.option(
    "--as", "new_name", callback=not_blank, help="Name in the destination (default: the same)."
)
@grace_period_option(
    "The workers' grace period: a running trial without heartbeat for it is failed first."
)
@click.option(
    "--salvage",
    is_flag=True,
    help="The --from journal is damaged: copy every readable record, skip and tell the "
    "damaged lines, copy trials left running as failed. The journal is only read.",
)
def study_copy(
    source: str, target: str, name: str, new_name: str | None, grace_period: int, salvage: bool
) -> None:
    """Copy a study (runcard, data fingerprint, every trial and its attributes) to another
    storage, e.g. from the embedded journal to PostgreSQL. Stop its workers first.

    \b
    Example:
      hyperscan study copy --from hyperscan.journal --to postgresql://user@db/scans \\
          --study quickstart-scan
      hyperscan study copy --salvage --from damaged.journal --to saved.journal \\
          --study quickstart-scan
    """
    from hyperscan.scan import copy_study, salvage_study, storage_location

    with user_errors():
        if salvage:
            salvaged = salvage_study(name, source, target, new_name)
            copied = salvaged.copy
        else:
            copied = copy_study(name, source, target, new_name, grace_period=grace_period)
        where = storage_location(target).url
    click.echo(
        f"study {name!r} copied to {where} as {copied.name!r}: "
        f"{counts_line(copied.counts) or 'no trials'}"
    )
    if salvage:
        click.echo(f"salvage: {salvaged.damage}")
