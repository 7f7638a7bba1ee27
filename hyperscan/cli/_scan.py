"""Scan commands: study create|status|list|copy, worker, export, dashboard, scan."""

from __future__ import annotations

import signal
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

import click

from hyperscan.cli._common import (
    INTERRUPTED,
    Seconds,
    check_not_an_input,
    check_target,
    fail,
    file_path,
    force_option,
    grace_period_option,
    not_blank,
    output_file_option,
    quiet_optuna,
    storage_option,
    study_option,
)
from hyperscan.cli._tensorflow import configure_or_fail


def _checked_data(card, runcard: Path, storage: str | None):
    """The runcard's data, checked before the storage is created; a new storage file holds no
    study yet, so the checks of a new study too (an existing one's are create_study's)."""
    from hyperscan.scan import check_new_study, checked_data, storage_file

    problem = checked_data(card, str(runcard))
    where = storage_file(storage)
    if where is not None and not where.exists():
        check_new_study(card, str(runcard))
    return problem


def _scan_errors():
    """The exceptions that are user mistakes or environment problems, not bugs."""
    from hyperscan.runcard import RuncardError
    from hyperscan.scan import ScanError, StorageError

    return (RuncardError, ScanError, StorageError)


def _load_scan_runcard(path: Path):
    from hyperscan.runcard import RuncardError, load_fit_runcard, load_scan_runcard

    try:
        return load_scan_runcard(path)
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
@click.argument("runcard", type=click.Path(path_type=Path, dir_okay=False))
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
    card = _load_scan_runcard(runcard)
    quiet_optuna()
    from hyperscan.scan import (
        create_study,
        explained_storage_errors,
        finished_trials,
        open_storage,
        storage_url,
    )

    name = name or runcard.stem
    try:
        problem = _checked_data(card, runcard, storage)  # before the storage is created
        handle = open_storage(storage, create=True)
        study, creation = create_study(card, handle, name, source=str(runcard), problem=problem)
        with explained_storage_errors(handle):  # read only to say what a new budget leaves
            finished = finished_trials(study) if creation.old_budget is not None else 0
    except _scan_errors() as error:
        fail(str(error))
    where = storage_url(handle)
    if creation.created:
        click.echo(f"study {name!r} created in {where}")
    elif creation.old_budget is not None:
        spent = (
            f"; {finished} {'trial has' if finished == 1 else 'trials have'} finished, so no "
            "worker takes another"
            if finished >= card.scan.trials
            else ""
        )
        click.echo(
            f"study {name!r} in {where}: budget changed from {creation.old_budget} to "
            f"{card.scan.trials} {'trial' if card.scan.trials == 1 else 'trials'} (running "
            f"workers take it after their trial){spent}"
        )
    else:
        click.echo(f"study {name!r} exists with this runcard in {where}")


@study.command("status")
@study_option
@storage_option
@grace_period_option("The workers' grace period: a running trial without heartbeat for it is lost.")
def study_status(name: str, storage: str | None, grace_period: int) -> None:
    """Trials by state, the best trial and its replica statistics, running trials."""
    quiet_optuna()
    from hyperscan.scan import explained_storage_errors, open_storage, open_study, status_text

    try:
        # A reader sends no heartbeat: its interval only has to stay below the grace period.
        handle = open_storage(storage, heartbeat_interval=1, grace_period=grace_period)
        setup = open_study(handle, name)
        with explained_storage_errors(handle):
            text = status_text(setup)
    except _scan_errors() as error:
        fail(str(error))
    click.echo(text)


@study.command("list")
@storage_option
def study_list(storage: str | None) -> None:
    """The studies in the storage: each one's trials by state, budget and best value."""
    quiet_optuna()
    from hyperscan.scan import explained_storage_errors, open_storage, studies_text
    from hyperscan.scan.storage import NoSchemaError

    try:
        handle = open_storage(storage)
        with explained_storage_errors(handle):
            text = studies_text(handle)
    except NoSchemaError as error:  # a database nobody has created a study in: as an empty journal
        text = f"no studies in {error.url}"
    except _scan_errors() as error:
        fail(str(error))
    click.echo(text)


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
def study_copy(
    source: str, target: str, name: str, new_name: str | None, grace_period: int
) -> None:
    """Copy a study (runcard, data fingerprint, every trial and its attributes) to another
    storage, e.g. from the embedded journal to PostgreSQL. Stop its workers first.

    \b
    Example:
      hyperscan study copy --from hyperscan.journal --to postgresql://user@db/scans \\
          --study quickstart-scan
    """
    quiet_optuna()
    from hyperscan.scan import copy_study, counts_line, explained_storage_errors, redact
    from hyperscan.scan.storage import study_storage

    try:
        copied = copy_study(source, target, name, new_name, grace_period=grace_period)
        with explained_storage_errors(study_storage(copied)):  # the copy's trials, read back
            counts = counts_line(copied)
    except _scan_errors() as error:
        fail(str(error))
    click.echo(
        f"study {name!r} copied to {redact(target)} as {copied.study_name!r}: "
        f"{counts or 'no trials'}"
    )


@click.command()
@study_option
@storage_option
@click.option("--n-trials", type=click.IntRange(min=1), help="Stop after this many trials.")
@click.option(
    "--timeout",
    type=Seconds(),
    metavar="S",
    help="Stop starting trials after S s.",
)
@click.option(
    "--stop-after",
    type=Seconds(),
    metavar="S",
    help="Walltime of a batch job in s: take no trial that is not expected to end within S s "
    "(expected: the median complete trial, this worker's or else the study's); then exit 0.",
)
@click.option(
    "--device",
    default="auto",
    show_default=True,
    help="auto, cpu, or gpu:N (the N-th GPU of this node).",
)
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    help="CPU threads for TensorFlow (default: the study runcard's training.threads, else all).",
)
@click.option(
    "--heartbeat-interval",
    type=click.IntRange(min=1),
    default=60,
    show_default=True,
    envvar="HYPERSCAN_HEARTBEAT_INTERVAL",
    show_envvar=True,
    help="Seconds between heartbeats.",
)
@grace_period_option(
    "Seconds without heartbeat before a trial is failed and retried; more than "
    "--heartbeat-interval."
)
@click.option(
    "--quiet", is_flag=True, help="No line per trial; only the closing `worker done` line."
)
@click.option("--sampler-salt", type=int, hidden=True)  # `hyperscan scan` numbers its workers
def worker(
    name: str,
    storage: str | None,
    n_trials: int | None,
    timeout: float | None,
    stop_after: float | None,
    device: str,
    threads: int | None,
    heartbeat_interval: int,
    grace_period: int,
    quiet: bool,
    sampler_salt: int | None,
) -> None:
    """Take trials of a study until its budget is spent (needs only the name and storage).

    SIGTERM or Ctrl-C ends the running trial at its next sync, re-queues it (a fit already at
    its last sync is recorded instead), and exits 0.

    \b
    Example:
      HYPERSCAN_STORAGE=postgresql://user@db/scans hyperscan worker --study dis --device gpu:0
      hyperscan worker --study dis --device gpu:0 --stop-after 43000   # in a 12 h batch job
    """
    started = time.monotonic()  # --stop-after counts from here, TensorFlow's import included
    quiet_optuna()
    from hyperscan.runcard import MAX_THREADS
    from hyperscan.scan import (  # no TensorFlow yet
        open_storage,
        open_study,
        requeued,
        storage_url,
        trial_line,
        trial_start_line,
        worker_id,
    )

    if threads is not None and threads > MAX_THREADS:
        fail(f"--threads {threads}: at most {MAX_THREADS}")
    if grace_period <= heartbeat_interval:
        fail(
            f"--grace-period ({grace_period} s) must exceed --heartbeat-interval "
            f"({heartbeat_interval} s), or live trials would be failed as stale"
        )
    # Per trial this worker ended, whether it was re-queued: for a signal's closing line.
    ended: list[bool] = []
    with _stopped_cleanly(ended):
        try:
            handle = open_storage(
                storage, heartbeat_interval=heartbeat_interval, grace_period=grace_period
            )
            # An unknown study fails here, in a second, not after TensorFlow's import.
            setup = open_study(handle, name)
            if threads is None:  # the study's runcard may pin them (training.threads)
                threads = setup.runcard.fit.training.threads
        except _scan_errors() as error:
            fail(str(error))
        runs_on = configure_or_fail(device, threads)
        from hyperscan.scan import run_worker  # imports TensorFlow: only once it is configured

        if not quiet:
            click.echo(
                f"worker {worker_id()} on study {name!r} in {storage_url(handle)}: {runs_on}"
            )

        def started_trial(trial, params) -> None:
            if not quiet:
                click.echo(trial_start_line(trial, params))

        def show(trial) -> None:
            ended.append(requeued(trial))
            if not quiet:
                click.echo(trial_line(trial, with_params=False))

        try:
            report = run_worker(
                name,
                handle,
                n_trials=n_trials,
                timeout=timeout,
                stop_after=None
                if stop_after is None
                else stop_after - (time.monotonic() - started),
                on_trial=show,
                on_start=started_trial,
                setup=setup,
                sampler_salt=sampler_salt,
            )
        except _scan_errors() as error:
            fail(str(error))
    why = (
        "stopped by signal"
        if report.stopped_by_signal
        else "budget reached"
        if report.budget_reached
        else _walltime_reason(report)
        if report.walltime_reached
        else "limit reached"
    )
    # even with --quiet: a batch log's last word
    click.echo(f"worker done: {_trials(report.trials, report.requeued)}, {why}")


@contextmanager
def _stopped_cleanly(ended: list[bool]) -> Iterator[None]:
    """SIGTERM or Ctrl-C while a worker starts (TensorFlow's import, the data: seconds) or
    ends end it as during a trial: exit 0 with its closing line, not 143 or click's
    "Aborted!". While trials run, the worker's own handlers stop them at the next sync."""
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    except KeyboardInterrupt:
        click.echo(f"worker done: {_trials(len(ended), sum(ended))}, stopped by signal")
        sys.exit(0)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _trials(count: int, requeued: int = 0) -> str:
    """ "3 trials", or "3 trials (1 re-queued)": a trial cut short by a signal is not lost."""
    again = f" ({requeued} re-queued)" if requeued else ""
    return f"{count} trial" + ("" if count == 1 else "s") + again


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _interrupted(message: str) -> NoReturn:
    click.echo(f"interrupted: {message}", err=True)
    sys.exit(INTERRUPTED)


def _walltime_reason(report) -> str:
    expected = report.expected_trial_s
    trial = "a trial" if expected is None else f"a trial (~{expected:.0f} s)"
    return f"walltime: {trial} would not end in the {report.seconds_left:.0f} s left"


@click.command()
@study_option
@storage_option
@output_file_option("The fit runcard to write.")
@click.option(
    "--trial",
    "number",
    type=click.IntRange(min=0),
    metavar="N",
    help="Trial N instead of the best: any complete, pruned or trashed trial.",
)
@force_option
def export(name: str, storage: str | None, output: Path, number: int | None, force: bool) -> None:
    """Write the best eligible trial, or trial N, as a fit runcard (`hyperscan fit`
    reproduces it)."""
    check_not_an_input(output, storage)
    check_target(output, force)
    quiet_optuna()
    from hyperscan.scan import (
        explained_storage_errors,
        export_trial,
        open_storage,
        open_study,
        outcome,
        write_atomically,
    )

    try:
        handle = open_storage(storage)
        setup = open_study(handle, name)
        with explained_storage_errors(handle):
            trial, text = export_trial(setup, number)
        write_atomically(output, text, force=force)
    except _scan_errors() as error:
        fail(str(error))
    click.echo(f"trial {trial.number} ({outcome(trial)}) written to {output}")


@click.command()
@storage_option
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="IP address (v4 or v6) or host name to bind; the dashboard has no authentication and "
    "can delete studies.",
)
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=8080,
    show_default=True,
    help="Port to serve on.",
)
def dashboard(storage: str | None, host: str, port: int) -> None:
    """Serve optuna-dashboard for the storage (local only by default)."""
    quiet_optuna()
    from optuna_dashboard import run_server

    from hyperscan.scan import open_storage

    try:
        handle = open_storage(storage)
    except _scan_errors() as error:
        fail(str(error))
    try:  # a port in use is a message, not a traceback after "dashboard on ..."
        ipv6 = ":" in host
        socket.create_server(
            (host, port), family=socket.AF_INET6 if ipv6 else socket.AF_INET
        ).close()
        click.echo(f"dashboard on http://{f'[{host}]' if ipv6 else host}:{port}/ (Ctrl-C to stop)")
        run_server(handle, host=host, port=port)
    except OSError as error:
        fail(f"cannot serve the dashboard on {host}:{port}: {error.strerror or error}")


@click.command()
@click.argument("runcard", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="Worker processes on this machine, at most one per usable core and per trial left.",
)
@storage_option
@click.option(
    "--name",
    callback=not_blank,
    help="Study name (default: the runcard's file name without .yml).",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    callback=file_path,
    help="Best runcard to write, replaced by each run of the study (default: NAME-best.yml).",
)
def scan(
    runcard: Path, workers: int, storage: str | None, name: str | None, output: Path | None
) -> None:
    """Run a whole scan on this machine: create the study, run workers, export the best.

    \b
    Example:
      hyperscan scan studies/quickstart-scan.yml --workers 2
    """
    card = _load_scan_runcard(runcard)
    quiet_optuna()
    from hyperscan.scan import (
        counts_line,
        create_study,
        default_output,
        explained_storage_errors,
        export_trial,
        fail_stale_trials,
        finished_trials,
        open_storage,
        open_study,
        start_workers,
        storage_url,
        supervise,
        usable_cores,
        write_atomically,
    )

    cores = usable_cores()
    if workers > cores:
        click.echo(
            f"--workers {workers} on {cores} cores: starting {cores}, more would compete", err=True
        )
        workers = cores
    name = name or runcard.stem
    output = output or default_output(name)
    check_not_an_input(output, storage, runcard)
    check_target(output, force=True)  # rewritten as the study grows: see --output
    try:
        problem = _checked_data(card, runcard, storage)  # before the storage is created
        handle = open_storage(storage, create=True)
        _, creation = create_study(card, handle, name, source=str(runcard), problem=problem)
        setup = open_study(handle, name)
        with explained_storage_errors(handle):
            left = card.scan.trials - finished_trials(setup.study)  # failing stale ones keeps it
            fail_stale_trials(setup.study, requeue=left > 0)
            # A resumed study's earlier trials: the live summary lists only this run's.
            earlier = [
                t.number for t in setup.study.get_trials(deepcopy=False) if t.state.is_finished()
            ]
    except _scan_errors() as error:
        fail(str(error))
    workers = max(0, min(workers, left))  # a worker more than the trials left only starts
    was = "" if creation.old_budget is None else f" (was {creation.old_budget})"
    click.echo(
        f"study {name!r} {'created' if creation.created else 'resumed'}: budget "
        f"{card.scan.trials} trials{was} of {len(card.scan.folds) or 1}×{card.scan.replicas} "
        f"members, {workers} worker{'' if workers == 1 else 's'}"
        + ("" if left > 0 else " (budget already spent)")
    )
    processes = start_workers(name, storage, workers, card.fit.training.threads) if workers else []
    codes, interrupted = (
        supervise(processes, setup.study, click.echo, storage_url(handle), earlier)
        if processes
        else ([], False)
    )
    try:
        with explained_storage_errors(handle):
            click.echo(f"trials: {counts_line(setup.study)}")
            trial, text = export_trial(setup)
        write_atomically(output, text, force=True)
    except _scan_errors() as error:
        if interrupted:
            _interrupted(f"{error}; the same command resumes the study")
        fail(str(error))
    click.echo(f"best: trial {trial.number}, value {trial.value:.6g} → {output}")
    if interrupted:
        _interrupted("the best trial so far is exported; the same command resumes the study")
    if any(codes):
        click.echo(f"error: worker exit codes {codes}", err=True)
        sys.exit(1)
