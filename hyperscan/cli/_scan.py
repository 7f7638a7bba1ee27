"""Commands that run or read a scan: worker, export, dashboard, scan."""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

from hyperscan._tensorflow import DEFAULT_MAX_GROWTH_MIB
from hyperscan.cli._common import (
    INTERRUPTED,
    Seconds,
    check_folder_exists,
    check_not_an_input,
    check_target,
    configure_or_fail,
    fail,
    file_path,
    force_option,
    grace_period_option,
    not_blank,
    output_file_option,
    runcard_argument,
    slots_option,
    storage_option,
    study_option,
    user_errors,
)
from hyperscan.cli._n3fit import SAMPLE_REFUSED, theory_id
from hyperscan.cli._render import (
    counts_line,
    event_line,
    plan_line,
    plural,
    trial_line,
    trial_start_line,
)
from hyperscan.cli._study import load_scan_runcard

if TYPE_CHECKING:
    from hyperscan.runcard import FitRuncard, Slots

#: Said by a one-slot worker on a GPU: there XLA compiles a model for 20-40 s (an H200,
#: docs/performance.md), most of a short trial, and one slot compiles one per trial.
GPU_ONE_SLOT_HINT = (
    "hint: with one trial slot each trial compiles its own model, 20-40 s on a GPU; "
    "--slots auto fits many trials in one model compiled once"
)

#: What a worker that restarts itself (--max-growth) hands the process it becomes.
RESTART_ENV = "HYPERSCAN_WORKER_RESTART"


@dataclass(frozen=True)
class _Earlier:
    """What this worker's earlier processes did: the trials they ended, of those the ones
    re-queued, when the first started (``time.monotonic()``, one clock across ``exec``), and
    how many restarts."""

    trials: int = 0
    requeued: int = 0
    started: float | None = None
    restarts: int = 0

    @classmethod
    def taken_from_environment(cls) -> _Earlier:
        text = os.environ.pop(RESTART_ENV, None)
        if text is None:
            return cls()
        try:
            return cls(**json.loads(text))
        except (ValueError, TypeError):
            fail(f"${RESTART_ENV} is not what a restarting worker sets ({text!r}): unset it")


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
@slots_option(
    "Trials fitted at once in one model: a slot whose trial ends takes the next trial at once, "
    "without recompiling. auto: as many as this device holds."
)
@click.option(
    "--max-growth",
    type=click.IntRange(min=0),
    default=DEFAULT_MAX_GROWTH_MIB,
    show_default=True,
    metavar="MIB",
    envvar="HYPERSCAN_MAX_GROWTH",
    show_envvar=True,
    help="Once this worker's memory grew by more than MIB since its first trial, let its "
    "trials end and go on in a fresh process (the same process id): TensorFlow keeps every "
    "model it compiled. 0: never.",
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
    slots: Slots,
    max_growth: int,
    sampler_salt: int | None,
) -> None:
    """Take trials of a study until its budget is spent (needs only the name and storage).

    SIGTERM or Ctrl-C ends the running trials at their next sync, re-queues them (a fit
    already at its last sync is recorded instead), and exits 0.

    \b
    Example:
      HYPERSCAN_STORAGE=postgresql://user@db/scans hyperscan worker --study dis --device gpu:0
      hyperscan worker --study dis --device gpu:0 --stop-after 43000   # in a 12 h batch job
      hyperscan worker --study dis --device gpu:0 --slots 16   # 16 trials at once
    """
    earlier = _Earlier.taken_from_environment()
    # --stop-after and --timeout count from here, TensorFlow's import included, and on through
    # the worker's restarts (--max-growth)
    started = time.monotonic() if earlier.started is None else earlier.started
    from hyperscan.runcard import MAX_THREADS
    from hyperscan.scan import open_study  # no TensorFlow yet

    if threads is not None and threads > MAX_THREADS:
        fail(f"--threads {threads}: at most {MAX_THREADS}")
    if grace_period <= heartbeat_interval:
        fail(
            f"--grace-period ({grace_period} s) must exceed --heartbeat-interval "
            f"({heartbeat_interval} s), or live trials would be failed as stale"
        )
    # Per trial this worker ended, whether it was re-queued: for a signal's closing line.
    ended: list[bool] = [False] * (earlier.trials - earlier.requeued) + [True] * earlier.requeued
    with _stopped_cleanly(ended):
        with user_errors():
            # An unknown study fails here, in a second, not after TensorFlow's import.
            handle = open_study(
                name,
                storage,
                heartbeat_interval=heartbeat_interval,
                grace_period=grace_period,
                wait=True,
            )
        if threads is None:  # the study's runcard may pin them (training.threads)
            threads = handle.runcard.fit.training.threads
        runs_on = configure_or_fail(device, threads)
        chosen = ""
        if slots == "auto":
            with user_errors():
                slots = handle.auto_slots()  # the study's data, on this device
            chosen = " (auto)"
        if not quiet:  # named as its trials name their worker: host:pid
            worker_id = f"{socket.gethostname()}:{os.getpid()}"
            restarted = f", restart {earlier.restarts}" if earlier.restarts else ""
            click.echo(
                f"worker {worker_id} on study {name!r} in {handle.storage}: {runs_on}, "
                f"{plural(slots, 'trial slot')}{chosen}{restarted}"
            )
            if slots == 1 and runs_on.startswith("GPU"):
                click.echo(GPU_ONE_SLOT_HINT)

        def started_trial(trial) -> None:
            if not quiet:
                click.echo(trial_start_line(trial))

        def show(trial) -> None:
            ended.append(trial.requeued)
            if not quiet:
                click.echo(trial_line(trial, with_params=False))

        def left(limit: float | None) -> float | None:
            return None if limit is None else limit - (time.monotonic() - started)

        with user_errors():
            report = handle.run_worker(  # imports TensorFlow: only once it is configured
                n_trials=None if n_trials is None else n_trials - earlier.trials,
                timeout=left(timeout) if earlier.restarts else timeout,
                stop_after=left(stop_after),
                on_trial=show,
                on_start=started_trial,
                sampler_salt=sampler_salt,
                slots=slots,
                max_growth_mib=max_growth or None,
            )
        trials, requeued = earlier.trials + report.trials, earlier.requeued + report.requeued
        time_left = left(timeout)
        own_limits_left = (n_trials is None or trials < n_trials) and (
            time_left is None or time_left > 0
        )
        if report.outgrown_only and own_limits_left:
            click.echo(
                f"worker restarting: its memory grew by {report.grown_mib:.0f} MiB since its "
                f"first trial, past --max-growth {max_growth} MiB (TensorFlow keeps every "
                f"model it compiled); {_trials(trials, requeued)} so far"
            )
            _restart(_Earlier(trials, requeued, started, earlier.restarts + 1))
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
    click.echo(f"worker done: {_trials(trials, requeued)}, {why}")


def _restart(earlier: _Earlier) -> NoReturn:
    """Become a fresh process of this very command, the same process id (a batch system
    tracks it), with what this one did in the environment."""
    os.environ[RESTART_ENV] = json.dumps(asdict(earlier))
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, sys.orig_argv)


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
@click.option(
    "--rule",
    metavar="RULE",
    help="A multi-objective study's trial chosen from its Pareto front, e.g. "
    '"min chi2 within 0.05 of best, then min phi2" (docs/objectives.md).',
)
@click.option(
    "--sample",
    type=click.IntRange(min=1),
    metavar="N",
    help="An ensemble instead: each replica draws the methodology of one of the N best "
    "eligible trials (complete, not trashed, numbered T or above).",
)
@click.option(
    "--thermalization",
    type=click.IntRange(min=0),
    metavar="T",
    help="With --sample: trials numbered below T are not eligible (the sampler was still "
    "exploring).  [default: 0]",
)
@click.option(
    "--override",
    "overrides",
    multiple=True,
    metavar="PATH=VALUE",
    help="With --sample: set a key of the base runcard and of every replica's methodology "
    "(e.g. epochs=20000, replicas=100); repeatable.",
)
@click.option(
    "--seed",
    type=click.IntRange(min=0),
    metavar="S",
    help="With --sample: the seed of the replicas' draw, written in the runcard.  [default: 0]",
)
@click.option(
    "--confirm",
    type=click.IntRange(min=1),
    metavar="K",
    help="Refit the K best trials (of a multi-objective study, the K of its Pareto front that "
    "--rule prefers) with fresh replicas, all at once, and write the one whose confirmed value "
    "is best: a scan's best value is partly luck.",
)
@click.option(
    "--replicas",
    type=click.IntRange(min=1),
    metavar="R",
    help="With --confirm: replicas of each refit.  [default: a trial's]",
)
@click.option(
    "--format",
    "card_format",
    type=click.Choice(["hyperscan", "n3fit"]),
    default="hyperscan",
    show_default=True,
    help="hyperscan: a fit runcard for `hyperscan fit`; n3fit: an n3fit 4.1.5 runcard of the "
    "same fit, or refused naming what n3fit cannot express (docs/n3fit.md).",
)
@force_option
def export(
    name: str,
    storage: str | None,
    output: Path,
    number: int | None,
    rule: str | None,
    sample: int | None,
    thermalization: int | None,
    overrides: tuple[str, ...],
    seed: int | None,
    confirm: int | None,
    replicas: int | None,
    card_format: str,
    force: bool,
) -> None:
    """Write the best eligible trial, trial N, or the trial of a multi-objective study's
    Pareto front that a rule chooses, as a fit runcard (`hyperscan fit` reproduces it); with
    --confirm K, the best of the K best refitted with fresh replicas; with --sample, an
    ensemble of the best trials' methodologies. --format n3fit writes a trial as an n3fit
    4.1.5 runcard instead."""
    n3fit = card_format == "n3fit"
    if n3fit and sample is not None:
        fail(SAMPLE_REFUSED)
    if replicas is not None and confirm is None:
        fail("--replicas only applies with --confirm K")
    if confirm is not None and (number is not None or sample is not None):
        other = "--trial N" if number is not None else "--sample N"
        fail(f"give either --confirm K or {other}, not both")
    if sample is None:
        given = [
            option
            for option, value in (
                ("--thermalization", thermalization),
                ("--override", overrides or None),
                ("--seed", seed),
            )
            if value is not None
        ]
        if given:
            fail(f"{', '.join(given)} only apply with --sample N")
    elif number is not None or rule is not None:
        option = "--trial N (one trial)" if number is not None else "--rule (one trial)"
        fail(f"give either {option} or --sample N (an ensemble), not both")
    check_not_an_input(output, storage)
    check_target(output, force)
    check_folder_exists(output)
    from hyperscan.runcard import N3fitError, trial_to_n3fit
    from hyperscan.scan import open_study

    with user_errors(N3fitError):
        study = open_study(name, storage)
        theory = theory_id(study.runcard.fit) if n3fit else None
        if n3fit and confirm is not None:
            _n3fit_data(study.runcard.fit, theory)  # before the refits, not after
        if confirm is not None:
            confirmed = _confirmed(study, confirm, replicas, rule)
            if n3fit:
                confirmed = replace(confirmed, text=trial_to_n3fit(confirmed.text, theory))
            confirmed.write(output, force=force)
        elif sample is not None:
            drawn = study.export_sample(
                sample,
                thermalization or 0,
                overrides,
                **({} if seed is None else {"seed": seed}),
            )
            drawn.write(output, force=force)
        else:
            exported = study.export(number, rule)
            if n3fit:
                exported = replace(exported, text=trial_to_n3fit(exported.text, theory))
            exported.write(output, force=force)
    written = f"{output} (an n3fit 4.1.5 runcard)" if n3fit else output
    if confirm is not None:
        click.echo(f"trial {confirmed.number} ({confirmed.why}) written to {written}")
    elif sample is not None:
        chosen = sorted(set(drawn.trials))
        click.echo(
            f"{len(drawn.trials)} replicas drawn from trials {', '.join(map(str, chosen))} "
            f"(seed {drawn.seed}) written to {output}"
        )
    else:
        click.echo(f"trial {exported.number} ({exported.outcome}) written to {written}")


def _n3fit_data(fit: FitRuncard, theory: int | None) -> None:
    """Refuse, before any refit, a study whose data (fixed for all its trials) n3fit cannot
    fit; what a trial draws is checked on its own runcard."""
    from hyperscan.runcard import N3fitError, fit_to_n3fit

    try:
        fit_to_n3fit(fit, theory)
    except N3fitError as error:
        problems = [(key, why) for key, why in error.problems if key.startswith("data")]
        if problems:
            raise N3fitError(error.what, problems) from None


def _confirmed(study, count: int, replicas: int | None, rule: str | None):
    """`export --confirm`: each refit said as it ends."""
    configure_or_fail(threads=study.runcard.fit.training.threads)
    names = study.runcard.scan.objective.names

    def said(done) -> None:
        confirmed = (
            _values(done.values, names)
            if done.values is not None
            else f"trashed: {done.trash_reason}"
        )
        click.echo(
            f"trial {done.number}: scan {_values(done.scan_values, names)}, confirmed {confirmed}"
        )

    click.echo(f"confirming the {count} best trials (or fewer) with fresh replicas, at once")
    return study.export_confirmed(count, replicas, rule, on_confirmed=said)


def _values(values, names) -> str:
    if len(values) == 1:
        return f"{values[0]:.6g}"
    return ", ".join(f"{name} {value:.6g}" for name, value in zip(names, values, strict=True))


@click.command()
@storage_option
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="IP address (v4 or v6) or host name to bind. Elsewhere than on this machine, set a "
    "--token.",
)
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=8080,
    show_default=True,
    help="Port to serve on.",
)
@click.option(
    "--allow-writes",
    is_flag=True,
    help="Let the dashboard's users create, rename and delete studies, write notes and tell "
    "trials (default: read-only).",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME",
    help="A name the browser may reach the dashboard by, besides the --host address, "
    "localhost, 127.0.0.1 and ::1 (repeatable); other Host headers are refused.",
)
@click.option(
    "--token",
    envvar="HYPERSCAN_DASHBOARD_TOKEN",
    metavar="TOKEN",
    help="Require this token: open http://HOST:PORT/?token=TOKEN once (a cookie keeps it), "
    "or send 'Authorization: Bearer TOKEN'. [env: HYPERSCAN_DASHBOARD_TOKEN]",
)
def dashboard(
    storage: str | None,
    host: str,
    port: int,
    allow_writes: bool,
    allowed_hosts: tuple[str, ...],
    token: str | None,
) -> None:
    """Serve optuna-dashboard for the storage: local and read-only by default.

    \b
    Example (on a login node, seen through `ssh -L 8080:localhost:8080 login`):
      hyperscan dashboard --storage postgresql://user@db/scans
    """
    from hyperscan.scan import dashboard_app, open_storage, serve_dashboard

    with user_errors():
        handle = open_storage(storage)
    try:  # a port in use is a message, not a traceback after "dashboard on ..."
        ipv6 = ":" in host
        socket.create_server(
            (host, port), family=socket.AF_INET6 if ipv6 else socket.AF_INET
        ).close()
        app = dashboard_app(
            handle,
            bind=host,
            allowed_hosts=allowed_hosts,
            allow_writes=allow_writes,
            token=token,
        )
        mode = "writes allowed" if allow_writes else "read-only"
        if token:
            mode += ", token required"
        elif host not in ("127.0.0.1", "::1", "localhost"):
            mode += "; no --token: anyone who reaches this address reads the studies"
        url = f"http://{f'[{host}]' if ipv6 else host}:{port}/"
        click.echo(f"dashboard on {url} ({mode}; Ctrl-C to stop)")
        serve_dashboard(app, host, port)
    except OSError as error:
        fail(f"cannot serve the dashboard on {host}:{port}: {error.strerror or error}")


@click.command()
@runcard_argument
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
@slots_option("Trials each worker fits at once in one model (see `hyperscan worker --help`).")
@click.option(
    "--confirm",
    type=click.IntRange(min=1),
    metavar="K",
    help="End by refitting the K best trials with fresh replicas, all at once, and write the "
    "one whose confirmed value is best (as `hyperscan export --confirm K`).",
)
def scan(
    runcard: Path,
    workers: int,
    storage: str | None,
    name: str | None,
    output: Path | None,
    slots: Slots,
    confirm: int | None,
) -> None:
    """Run a whole scan on this machine: create the study, run workers, export the best.

    \b
    Example:
      hyperscan scan studies/quickstart-scan.yml --workers 2
      hyperscan scan studies/quickstart-scan.yml --workers 1 --slots 8
    """
    load_scan_runcard(runcard)
    from hyperscan.scan import ScanError, run_scan
    from hyperscan.scan.results import ScanPlan

    name = name or runcard.stem
    output = output or default_output(name)
    check_not_an_input(output, storage, runcard)
    check_target(output, force=True)  # rewritten as the study grows: see --output
    check_folder_exists(output)

    def tell(event) -> None:
        if isinstance(event, ScanPlan):  # before any worker starts
            if event.requested_workers > event.cores:
                click.echo(
                    f"--workers {event.requested_workers} on {event.cores} cores: starting "
                    f"{event.cores}, more would compete",
                    err=True,
                )
            click.echo(plan_line(event))
        else:
            click.echo(event_line(event))

    with user_errors():
        result = run_scan(runcard, storage, name, workers=workers, slots=slots, on_event=tell)
    if result.counts is not None:
        click.echo(f"trials: {counts_line(result.counts)}")
    problem = result.error
    confirmed = None
    if result.best is not None and confirm is not None and not result.interrupted:
        from hyperscan.scan import open_study

        with user_errors():
            study = open_study(name, storage)
            confirmed = _confirmed(study, confirm, None, None)
    if result.best is not None:
        try:
            (confirmed or result.best).write(output, force=True)
        except ScanError as error:
            problem = str(error)
    if problem is not None:
        if result.interrupted:
            _interrupted(f"{problem}; the same command resumes the study")
        fail(problem)
    if result.best is None:  # a multi-objective study: a front to choose from, by a rule
        click.echo(
            "multi-objective study: `hyperscan study status` shows its Pareto front; "
            f'`hyperscan export --study {result.plan.study} --rule "..." [--confirm K]` writes '
            "the trial a rule chooses from it"
        )
    elif confirmed is not None:
        chosen = next(c for c in confirmed.confirmed if c.number == confirmed.number)
        click.echo(
            f"best: trial {chosen.number}, confirmed value {chosen.values[0]:.6g} (scan "
            f"{chosen.scan_values[0]:.6g}) → {output}"
        )
    else:
        click.echo(f"best: trial {result.best.number}, value {result.best.value:.6g} → {output}")
    if result.interrupted:
        _interrupted("the best trial so far is exported; the same command resumes the study")
    if any(result.worker_exit_codes):
        click.echo(f"error: worker exit codes {result.worker_exit_codes}", err=True)
        sys.exit(1)


def default_output(name: str) -> Path:
    """Where `hyperscan scan` writes the best trial's fit runcard without ``--output``: named
    after the study, so scans of different studies in one folder do not overwrite each other."""
    return Path(f"{name}-best.yml")
