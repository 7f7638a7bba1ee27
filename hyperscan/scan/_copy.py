# SPDX-License-Identifier: GPL-3.0-or-later
"""Moving a study between storages, e.g. from the embedded journal to PostgreSQL.

Optuna's ``copy_study`` carries what hyperscan keeps on a study: its user attributes (the
runcard, the data fingerprint, the version), system attributes, and every trial with its
parameters, values, intermediate reports, user attributes and start/end times.
"""

from __future__ import annotations

import tempfile
from contextlib import suppress

import optuna
from optuna.trial import TrialState

from hyperscan.scan._quiet import quiet_optuna
from hyperscan.scan._study import ScanError
from hyperscan.scan.storage import (
    JOURNAL_PREFIX,
    Salvage,
    describe_error,
    errors_described,
    fail_stale_trials,
    journal_path,
    load_study,
    open_storage,
    redact,
    resolve_url,
    salvage_journal,
    storage_url,
    study_names,
)


def copy_study(
    source_url: str,
    target_url: str,
    name: str,
    new_name: str | None = None,
    *,
    grace_period: int = 600,
) -> optuna.Study:
    """Copy study ``name`` from ``source_url`` to ``target_url`` (as ``new_name``).

    Refused while a trial is RUNNING (a copied running trial has no heartbeat in the
    destination and would never be retried) and when the destination already holds the name;
    a trial whose heartbeat stopped for ``grace_period`` (its worker died) is failed first, as
    a worker would. A copy that fails half-way is removed from the destination. Returns the
    new study.
    """
    new_name = new_name or name
    # A failure names the storage it happened in, lest the user look at the other one. The
    # URLs with their passwords: describe_error scrubs them from what a driver says.
    from_url, to_url = resolve_url(source_url), resolve_url(target_url)
    if from_url == to_url and new_name == name:
        raise ScanError("source and destination are the same study; give another --as NAME")
    source = open_storage(source_url, heartbeat_interval=1, grace_period=grace_period)
    study = load_study(source, name)
    with errors_described(from_url):
        # Else a dead worker's trial in a study whose budget the others spent stays RUNNING,
        # and no worker comes to fail it. Not re-queued: the copy's next worker draws a trial
        # of its own if the budget still needs one.
        fail_stale_trials(study, requeue=False, why_not="the copy's workers draw their own")
        running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    if running:
        numbers = ", ".join(str(trial.number) for trial in running)
        raise ScanError(
            f"study {name!r} has running trials ({numbers}): stop its workers first; a trial "
            "whose worker died is failed once it has sent no heartbeat for the grace period"
        )
    return _write_copy(source, to_url, name, new_name)


def salvage_copy(
    source_url: str, target_url: str, name: str, new_name: str | None = None
) -> tuple[optuna.Study, Salvage]:
    """Copy study ``name`` from the damaged journal ``source_url``: every readable record, the
    trials it leaves RUNNING failed (see :mod:`hyperscan.scan.storage._salvage`). The journal
    is only read. Returns the new study and what was lost on the way."""
    new_name = new_name or name
    from_url, to_url = resolve_url(source_url), resolve_url(target_url)
    if from_url == to_url:
        raise ScanError("a salvaged study goes to another storage than the damaged journal")
    if not from_url.startswith(JOURNAL_PREFIX):
        raise ScanError(f"--salvage reads journal files; {redact(from_url)} is a database")
    with tempfile.TemporaryDirectory(prefix="hyperscan-salvage-") as scratch:
        with errors_described(from_url):
            salvage = salvage_journal(journal_path(from_url), scratch)
        load_study(salvage.storage, name)  # an unknown name lists the salvaged studies
        salvage.fail_running(name)
        return _write_copy(salvage.storage, to_url, name, new_name), salvage


@quiet_optuna()
def _write_copy(
    source: optuna.storages.BaseStorage, to_url: str, name: str, new_name: str
) -> optuna.Study:
    """Copy study ``name`` of ``source`` into the storage at ``to_url``, or nothing at all."""
    target = open_storage(to_url, create=True)
    where = storage_url(target)
    exists = ScanError(f"study {new_name!r} exists in {where}; choose another name with --as")
    if new_name in study_names(target):
        raise exists
    # Through memory: the source is read whole before the destination is written, so that
    # a failure of either is told with its own URL.
    held = optuna.storages.InMemoryStorage()
    with errors_described(storage_url(source)):
        optuna.copy_study(from_study_name=name, from_storage=source, to_storage=held)
    try:
        optuna.copy_study(
            from_study_name=name, from_storage=held, to_storage=target, to_study_name=new_name
        )
    except optuna.exceptions.DuplicatedStudyError:
        raise exists from None  # created by someone else a moment ago: not ours to remove
    except BaseException as exc:
        # Leave no half-copied study behind: the next attempt would be refused as existing.
        with suppress(Exception):
            optuna.delete_study(study_name=new_name, storage=target)
        if isinstance(exc, Exception):
            raise describe_error(exc, to_url) from exc
        raise
    return load_study(target, new_name)
