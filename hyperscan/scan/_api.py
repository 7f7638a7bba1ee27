"""The scan service as a Python API, the way Optuna offers ``create_study`` → ``optimize``:
create or open a study, read its status, export a trial, copy it, run a worker or a whole
scan. Every call returns plain objects (dataclasses), never text: the CLI renders them.

Errors a user can fix come as :class:`ScanError`, :class:`StorageError` (the storage) or
:class:`~hyperscan.runcard.RuncardError` (the runcard), each with a message to show as it is.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import optuna
from optuna.storages import BaseStorage
from optuna.trial import TrialState

from hyperscan.data import Problem
from hyperscan.runcard import ScanRuncard, Slots, checked_slots, load_scan_runcard
from hyperscan.scan._copy import copy_study as _copy_study
from hyperscan.scan._copy import salvage_copy as _salvage_copy
from hyperscan.scan._export import (
    DEFAULT_SAMPLE_SEED,
    export_sample,
    export_trial,
    outcome,
    parse_override,
    write_atomically,
)
from hyperscan.scan._local import (
    ScanEvent,
    TrialRecord,
    started_record,
    supervise,
    trial_record,
    usable_cores,
    worker_starter,
)
from hyperscan.scan._noise_floor import NoiseFloor
from hyperscan.scan._status import (
    StudyStatus,
    StudySummary,
    finished_trials,
    state_counts,
    study_status,
    study_summaries,
    study_summary,
)
from hyperscan.scan._study import (
    Creation,
    ScanError,
    StudySetup,
    check_new_study,
    checked_data,
    study_problem,
)
from hyperscan.scan._study import create_study as _create_study
from hyperscan.scan._study import open_study as _open_study
from hyperscan.scan._worker_report import WorkerReport
from hyperscan.scan.storage import (
    NoSchemaError,
    StorageError,
    database_probe,
    explained_storage_errors,
    fail_stale_trials,
    load_study,
    open_storage,
    redact,
    resolve_url,
    retrying,
    storage_file,
    study_storage,
)

if TYPE_CHECKING:  # TensorFlow: imported by export_confirmed and measure_noise only
    from hyperscan.scan._confirm import Confirmation
    from hyperscan.scan._noise import TrialNoise

#: The grace period (s) a reader assumes when none is given: the workers' default.
GRACE_PERIOD = 600
HEARTBEAT_INTERVAL = 60


@dataclass(frozen=True)
class StorageLocation:
    """Where a storage argument points: its URL (password redacted) and, for a journal or an
    SQLite database, its file."""

    url: str
    file: Path | None


def storage_location(storage: str | None = None) -> StorageLocation:
    """Resolve a storage argument (a path, a URL, None for ``$HYPERSCAN_STORAGE`` or the
    default journal) without opening it; StorageError for a malformed URL."""
    return StorageLocation(redact(resolve_url(storage)), storage_file(storage))


@dataclass(frozen=True)
class ExportedTrial:
    """A trial as a fit runcard: ``hyperscan fit`` (or :func:`hyperscan.fit_runcard`)
    reproduces it."""

    study: str
    number: int
    #: Its value, or why it has none, in a few words ("value 1.23", "trashed: ...").
    outcome: str
    value: float | None  # None for a pruned or trashed trial
    text: str  # the fit runcard, headed by comments of provenance

    def write(self, path: str | os.PathLike[str], *, force: bool = False) -> Path:
        """Write the runcard to ``path`` atomically: it appears whole or not at all. An
        existing file is kept unless ``force``; a missing folder is refused, not created."""
        write_atomically(Path(path), self.text, force=force)
        return Path(path)


@dataclass(frozen=True)
class ExportedSample:
    """An ensemble drawn from a study's best trials as one fit runcard (``methodologies``):
    ``hyperscan fit`` fits every replica with its trial's methodology in one model."""

    study: str
    #: The trial each replica took, in the order of the runcard's replicas.
    trials: tuple[int, ...]
    seed: int
    text: str  # the fit runcard, headed by comments saying which trials were eligible, and why

    def write(self, path: str | os.PathLike[str], *, force: bool = False) -> Path:
        """Write the runcard to ``path`` atomically, as :meth:`ExportedTrial.write` does."""
        write_atomically(Path(path), self.text, force=force)
        return Path(path)


@dataclass(frozen=True)
class ExportedConfirmation:
    """The trial chosen by its confirmed values, as the runcard of its confirming refit:
    ``hyperscan fit`` gives its confirmed values back."""

    study: str
    number: int
    #: Every trial refitted, with its scan values and its confirmed ones (or why trashed).
    confirmed: tuple[Confirmation, ...]
    why: str  # what chose the trial, in words
    text: str  # the fit runcard, headed by what was confirmed

    def write(self, path: str | os.PathLike[str], *, force: bool = False) -> Path:
        """Write the runcard to ``path`` atomically, as :meth:`ExportedTrial.write` does."""
        write_atomically(Path(path), self.text, force=force)
        return Path(path)


class Study:
    """A study in a storage, with the runcard it carries: read its status, export a trial,
    copy it elsewhere, run a worker on it. Made by :func:`create_study` or :func:`open_study`.
    """

    def __init__(
        self,
        setup: StudySetup,
        storage: BaseStorage,
        url: str,
        creation: Creation | None = None,
    ) -> None:
        self._setup = setup
        self._storage = storage
        self._url = url  # as given, with its password: for copies and worker processes
        #: What :func:`create_study` did: created it, changed its budget, or found it as is.
        self.creation = creation
        self._problem: Problem | None = None  # built by auto_slots, for run_worker

    @property
    def name(self) -> str:
        """The study's name in its storage."""
        return self._setup.study.study_name

    @property
    def storage(self) -> str:
        """The storage's URL, password redacted."""
        return self._setup.url

    @property
    def runcard(self) -> ScanRuncard:
        """The scan runcard the study carries, as stored when it was opened."""
        return self._setup.runcard

    @property
    def optuna_study(self) -> optuna.Study:
        """The Optuna study, e.g. for optuna's visualisation or ``hyperscan.report``."""
        return self._setup.study

    def __repr__(self) -> str:
        return f"Study({self.name!r}, storage={self.storage!r})"

    @contextmanager
    def reading(self) -> Iterator[None]:
        """A block that reads the study (``optuna_study``): a storage lost meanwhile comes as
        :class:`StorageError`, not Optuna's traceback."""
        with explained_storage_errors(self._storage):
            yield

    def status(self) -> StudyStatus:
        """Trials by state, the best trial with its statistics, the running trials."""
        with self.reading():
            return study_status(self._setup)

    def export(self, trial: int | None = None, rule: str | None = None) -> ExportedTrial:
        """The best complete trial, trial number ``trial`` (complete, pruned or trashed), or
        the trial of a multi-objective study's Pareto front that ``rule`` chooses
        (docs/objectives.md), as a fit runcard."""
        with self.reading():
            found, text = export_trial(self._setup, trial, rule)
        complete = found.state == TrialState.COMPLETE
        value = found.values[0] if complete and len(found.values) == 1 else None
        names = self._setup.runcard.scan.objective.names
        return ExportedTrial(self.name, found.number, outcome(found, names), value, text)

    def export_confirmed(
        self,
        count: int,
        replicas: int | None = None,
        rule: str | None = None,
        on_confirmed: Callable[[Confirmation], None] | None = None,
    ) -> ExportedConfirmation:
        """Refit the ``count`` best complete trials (of a multi-objective study, the ``count``
        of its Pareto front that ``rule`` prefers) with fresh replicas, ``replicas`` of them
        (default: as many as a trial has), all at once in one batch, and export the one whose
        confirmed values are best (that ``rule`` chooses). Each confirmation is recorded on the
        study and told to ``on_confirmed`` as it ends. Builds the study's data and imports
        TensorFlow: configure it before, if need be."""
        from hyperscan.scan._confirm import (  # TensorFlow: only now
            candidates,
            confirm,
            confirmed_choice,
            confirmed_text,
            fresh_replicas,
        )

        with self.reading():
            trials = candidates(self._setup, count, rule)
        fresh = fresh_replicas(self.runcard, replicas)
        problem = self._data()
        with self.reading():
            confirmed = confirm(self._setup, trials, problem, fresh, on_confirmed)
            choice, why = confirmed_choice(self._setup, confirmed, rule)
            text = confirmed_text(self._setup, choice, why, confirmed)
        return ExportedConfirmation(self.name, choice.number, tuple(confirmed), why, text)

    def measure_noise(
        self,
        trials: int = 3,
        repeats: int = 3,
        on_trial: Callable[[TrialNoise], None] | None = None,
    ) -> NoiseFloor:
        """Refit the ``trials`` best complete trials ``repeats`` times in other batch layouts
        and ``repeats`` times with fresh replicas: the spreads of a value that rounding and
        the draw of replicas make (recorded on the study, shown by status and export). Each
        trial is told to ``on_trial`` as it is measured. Builds the study's data and imports
        TensorFlow: configure it before, if need be."""
        from hyperscan.scan._noise import measure_noise  # TensorFlow: only now

        problem = self._data()
        with self.reading():
            measured = measure_noise(self._setup, trials, repeats, problem, on_trial)
        return NoiseFloor.of(
            [(n.value, n.rounding, n.replicas) for n in measured],
            tuple(n.number for n in measured),
        )

    def export_sample(
        self,
        sample: int,
        thermalization: int = 0,
        overrides: Sequence[str] = (),
        seed: int = DEFAULT_SAMPLE_SEED,
    ) -> ExportedSample:
        """A fit runcard whose replicas each draw, reproducibly from ``seed``, the
        methodology of one of the ``sample`` best complete trials numbered ``thermalization``
        or above; ``overrides`` (``"epochs=20000"``) apply to the base and every replica's."""
        parsed = [parse_override(text) for text in overrides]
        with self.reading():
            trials, text = export_sample(self._setup, sample, thermalization, parsed, seed)
        return ExportedSample(self.name, tuple(trials), seed, text)

    def copy_to(
        self, storage: str, name: str | None = None, *, grace_period: int = GRACE_PERIOD
    ) -> Study:
        """Copy the study (runcard, data fingerprint, every trial) to another storage, as
        ``name`` (default: the same). Refused while a trial runs: stop its workers first."""
        _copy_study(self._url, storage, self.name, name, grace_period=grace_period)
        return open_study(name or self.name, storage)

    def auto_slots(self) -> int:
        """How many trials a worker of this study fits at once on this device with
        ``--slots auto`` (:func:`hyperscan.fit.auto_slots`). Builds the study's data, refused
        if they differ from the study's, and keeps them for :meth:`run_worker`; imports
        TensorFlow: configure it before, if need be."""
        from hyperscan.fit import auto_slots  # TensorFlow: only now

        return auto_slots(self.runcard.trial_base, self._data())

    def _data(self) -> Problem:
        if self._problem is None:
            self._problem = study_problem(self._setup)
        return self._problem

    def run_worker(
        self,
        *,
        n_trials: int | None = None,
        timeout: float | None = None,
        stop_after: float | None = None,
        on_start: Callable[[TrialRecord], None] | None = None,
        on_trial: Callable[[TrialRecord], None] | None = None,
        sampler_salt: int | None = None,
        slots: Slots = 1,
        max_growth_mib: float | None = None,
    ) -> WorkerReport:
        """Take trials in this process until the budget is spent, ``n_trials`` ended,
        ``timeout`` s passed, or a signal (SIGTERM, Ctrl-C: the running trials are re-queued).

        ``stop_after`` (s, a batch job's walltime): take no trial not expected to end in the
        time left. ``on_start`` is told of each trial with its drawn values as its fit starts,
        ``on_trial`` of each as it ends. ``slots`` > 1 fits that many trials at once in one
        model, each told as it ends and its slot refilled; ``"auto"``: :meth:`auto_slots`;
        more than the device's memory holds is a :class:`ScanError`. ``max_growth_mib``:
        take no trial once this process's memory grew by more than this since its first trial
        (the report's ``grown_mib`` says so): TensorFlow keeps every model it compiled, so the
        caller goes on in a fresh process (as `hyperscan worker` restarts itself). Imports
        TensorFlow: configure it before, if need be.
        """
        slots = checked_slots(slots)
        from hyperscan.fit import max_slots
        from hyperscan.scan._worker import run_worker  # TensorFlow: only now

        if slots == "auto":
            slots = self.auto_slots()
        if slots > 1 and slots > (most := max_slots(self.runcard.trial_base, self._data())):
            raise ScanError(
                f"{slots} trial slots would not fit in this device's memory: it holds "
                f"{most} of study {self.name!r}'s trials at most ('auto' chooses)"
            )

        def started(trial: optuna.Trial, params: dict) -> None:
            if on_start is not None:
                on_start(started_record(trial, params))

        def ended(trial: optuna.trial.FrozenTrial) -> None:
            if on_trial is not None:
                on_trial(trial_record(trial))

        return run_worker(
            self.name,
            self._storage,
            n_trials=n_trials,
            timeout=timeout,
            stop_after=stop_after,
            on_trial=ended,
            on_start=started,
            setup=self._setup,
            sampler_salt=sampler_salt,
            slots=slots,
            problem=self._problem,
            max_growth_mib=max_growth_mib,
        )


def _scan_runcard(runcard: ScanRuncard | str | os.PathLike[str]) -> tuple[ScanRuncard, str]:
    if isinstance(runcard, ScanRuncard):
        return runcard, "<runcard>"
    return load_scan_runcard(runcard), os.fspath(runcard)


def create_study(
    runcard: ScanRuncard | str | os.PathLike[str],
    storage: str | None = None,
    name: str | None = None,
) -> Study:
    """Create a study from a scan runcard (a path or a loaded one) in ``storage`` (a journal
    path or a URL; default ``$HYPERSCAN_STORAGE``, else ./hyperscan.journal), named ``name``
    (default: the runcard file's name without .yml).

    Once: the same runcard again finds the study as it is; one that differs only in its budget
    (scan.trials) changes the budget; any other is refused. ``Study.creation`` says which.
    The runcard and its data are checked before the storage is created or written.
    """
    card, source = _scan_runcard(runcard)
    return _create(card, source, storage, name)


def _create(card: ScanRuncard, source: str, storage: str | None, name: str | None) -> Study:
    if name is None:
        if source == "<runcard>":
            raise ScanError("a study of a loaded runcard needs a name")
        name = Path(source).stem
    problem = checked_data(card, source)
    where = storage_file(storage)
    if where is not None and not where.exists():  # a new storage holds no study yet:
        check_new_study(card, source)  # the checks of a new one, before the file appears
    handle = open_storage(storage, create=True)
    _, creation = _create_study(card, handle, name, source=source, problem=problem)
    return Study(_open_study(handle, name), handle, resolve_url(storage), creation)


def open_study(
    name: str,
    storage: str | None = None,
    *,
    grace_period: int = GRACE_PERIOD,
    heartbeat_interval: int | None = None,
    wait: bool = False,
) -> Study:
    """Open a study that hyperscan created. ``grace_period``: the workers' (a running trial
    without a heartbeat for it is lost); ``heartbeat_interval``: this process's, if it runs a
    worker (default: a tenth of the grace period, at most a minute).

    ``wait`` (a worker starting): a storage that does not answer (a restart, a connection
    limit reached by a burst of starts) is tried again on the schedule of a running worker,
    with a line in the log per try; a wrong setting (password, host name) fails at once."""
    if heartbeat_interval is None:
        heartbeat_interval = max(1, min(HEARTBEAT_INTERVAL, grace_period // 10))

    def opened() -> Study:
        handle = open_storage(
            storage, heartbeat_interval=heartbeat_interval, grace_period=grace_period
        )
        return Study(_open_study(handle, name), handle, resolve_url(storage))

    if not wait:
        return opened()
    url = resolve_url(storage)
    return retrying(opened, "worker start-up", url, probe=database_probe(url))


def list_studies(storage: str | None = None) -> list[StudySummary]:
    """Every study of the storage in brief: trials by state, budget, best value. A database
    nobody has created a study in (no Optuna tables yet) has none, as an empty journal."""
    try:
        handle = open_storage(storage)
        with explained_storage_errors(handle):
            return study_summaries(handle)
    except NoSchemaError:
        return []


@contextmanager
def reading_study(name: str, storage: str | None = None) -> Iterator[optuna.Study]:
    """The Optuna study ``name``, whether or not hyperscan created it, to read inside the
    block: a storage lost meanwhile comes as :class:`StorageError`, not Optuna's traceback.
    For :mod:`hyperscan.report`, optuna's visualisation, or any other reader."""
    handle = open_storage(storage)
    study = load_study(handle, name)
    with explained_storage_errors(handle):
        yield study


def copy_study(
    name: str,
    source: str | None,
    target: str,
    new_name: str | None = None,
    *,
    grace_period: int = GRACE_PERIOD,
) -> StudySummary:
    """Copy study ``name`` (whether or not hyperscan created it: runcard, data fingerprint,
    every trial and its attributes) from storage ``source`` to ``target``, as ``new_name``
    (default: the same); returns the copy in brief.

    Refused while a trial runs (stop its workers first); a trial whose heartbeat stopped for
    ``grace_period`` is failed first, as a worker would. A copy that fails half-way is removed.
    """
    copied = _copy_study(source, target, name, new_name, grace_period=grace_period)
    with explained_storage_errors(study_storage(copied)):  # the copy's trials, read back
        return study_summary(copied)


@dataclass(frozen=True)
class SalvagedStudy:
    """A study copied out of a damaged journal, and what could not be copied."""

    copy: StudySummary
    #: Numbers (from 1) of the lines that are not whole journal records.
    skipped_lines: list[int]
    #: Readable records left out: a damaged line created a trial or study, so the records
    #: after it could not be matched to theirs (0 when none).
    left_out: int
    #: Trials the readable records leave RUNNING (their end was lost), copied as FAIL.
    failed_trials: list[int]
    #: All of it in one line, for the user.
    damage: str


def salvage_study(
    name: str, source: str, target: str, new_name: str | None = None
) -> SalvagedStudy:
    """Copy study ``name`` out of the damaged journal file ``source`` into ``target`` (as
    ``new_name``): every whole record is kept, the damaged lines are skipped and told. The
    journal is only read; a copy that fails half-way is removed."""
    copied, salvage = _salvage_copy(source, target, name, new_name)
    with explained_storage_errors(study_storage(copied)):
        summary = study_summary(copied)
    return SalvagedStudy(
        copy=summary,
        skipped_lines=[line.number for line in salvage.skipped],
        left_out=len(salvage.left_out),
        failed_trials=salvage.failed,
        damage=salvage.summary(),
    )


@dataclass(frozen=True)
class ScanPlan:
    """What :func:`run_scan` is about to do, told before its workers start."""

    study: str
    storage: str  # password redacted
    creation: Creation
    budget: int
    folds: int  # 1 without k-fold
    replicas: int
    requested_workers: int
    cores: int  # the cores this process may run on
    workers: int  # started: at most one per core and per trial left
    trials_left: int
    level1_fits: int = 1  # closure ``fits``: members = fits × folds × replicas
    slots: Slots = 1  # trials each worker fits at once


@dataclass(frozen=True)
class ScanResult:
    """How :func:`run_scan` ended."""

    plan: ScanPlan
    #: The study's trials by state at the end (None if the storage could not be read).
    counts: dict[str, int] | None
    best: ExportedTrial | None
    #: Why there is no best trial (or no counts): e.g. no trial complete yet.
    error: str | None
    worker_exit_codes: list[int]
    interrupted: bool  # by Ctrl-C or SIGTERM: the workers re-queued their running trials


def run_scan(
    runcard: ScanRuncard | str | os.PathLike[str],
    storage: str | None = None,
    name: str | None = None,
    *,
    workers: int = 2,
    slots: Slots = 1,
    on_event: Callable[[ScanPlan | ScanEvent], None] | None = None,
) -> ScanResult:
    """A whole scan on this machine: create the study (or resume it), fail the trials of
    workers that died, run ``workers`` worker processes until the budget is spent, and export
    the best trial. Each worker fits ``slots`` trials at once (``"auto"``: as many as the
    device holds; see :meth:`Study.run_worker`).

    ``on_event`` is told the :class:`ScanPlan` before the workers start, then each
    :class:`ScanEvent`. Ctrl-C or SIGTERM stop the workers cleanly (their running trials are
    re-queued); the result says so, and the same call resumes the study.
    """
    tell = on_event or (lambda event: None)
    slots = checked_slots(slots)
    card, source = _scan_runcard(runcard)
    study = _create(card, source, storage, name)
    cores = usable_cores()
    with study.reading():
        optuna_study = study.optuna_study
        left = card.scan.trials - finished_trials(optuna_study)  # failing stale ones keeps it
        fail_stale_trials(optuna_study, requeue=left > 0)
        # A resumed study's earlier trials: the live summary lists only this run's.
        earlier = [
            t.number for t in optuna_study.get_trials(deepcopy=False) if t.state.is_finished()
        ]
    plan = ScanPlan(
        study=study.name,
        storage=study.storage,
        creation=study.creation or Creation(created=False),
        budget=card.scan.trials,
        folds=len(card.scan.folds) or 1,
        replicas=card.scan.replicas,
        requested_workers=workers,
        cores=cores,
        workers=max(0, min(workers, cores, left)),  # a worker more than the trials left idles
        trials_left=left,
        level1_fits=card.fit.data.level1_fits,
        slots=slots,
    )
    tell(plan)
    codes: list[int] = []
    interrupted = False
    if plan.workers:
        start = worker_starter(
            study.name, resolve_url(storage), plan.workers, card.fit.training.threads, slots
        )
        processes = [start(number) for number in range(plan.workers)]
        codes, interrupted = supervise(processes, optuna_study, tell, study.storage, earlier, start)
    counts = best = error = None
    try:
        with study.reading():
            counts = dict(sorted(state_counts(optuna_study.get_trials(deepcopy=False)).items()))
        # a multi-objective study has a front, not a best: `export --rule` chooses from it
        best = None if card.scan.objective.multi else study.export()
    except (ScanError, StorageError) as problem:
        error = str(problem)
    return ScanResult(plan, counts, best, error, codes, interrupted)
