"""Helpers shared by the commands."""

from __future__ import annotations

import math
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

import click

#: What click.option returns: a decorator of a command's function.
OptionDecorator = Callable[[Callable[..., Any]], Callable[..., Any]]

USAGE_ERROR = 2
#: Exit status of a command stopped by a signal (128 + SIGINT, as shells report it), after
#: it kept what it had: a fit's results with `interrupted: true`, a scan's best trial so far.
INTERRUPTED = 130


def not_blank(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A callback refusing an empty value, which `--storage "$UNSET"` gives in a script:
    taken for the option left out, it would quietly pick the default."""
    if value is not None and not value.strip():
        raise click.BadParameter("is empty (an unset variable?): give a value or leave it out")
    return value


class Seconds(click.FloatRange):
    """Seconds ≥ 0. A FloatRange alone lets NaN through, since every comparison with it fails."""

    name = "seconds"

    def __init__(self) -> None:
        super().__init__(min=0)

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        seconds = super().convert(value, param, ctx)
        if math.isnan(seconds):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        return seconds


class Slots(click.ParamType):
    """A worker's trial slots (``hyperscan.runcard.checked_slots``)."""

    name = "slots"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> int | str:
        from hyperscan.runcard import checked_slots

        try:
            return checked_slots(value)
        except ValueError as error:
            self.fail(str(error), param, ctx)


def slots_option(help: str) -> OptionDecorator:
    """``--slots P|auto``, for workers and the commands that start them."""
    return click.option(
        "--slots", type=Slots(), default=1, show_default=True, metavar="P|auto", help=help
    )


storage_option = click.option(
    "--storage",
    envvar="HYPERSCAN_STORAGE",
    callback=not_blank,
    help="Storage: a journal file path (default ./hyperscan.journal), "
    "postgresql://user@host/db (the password from PGPASSWORD or ~/.pgpass, not the command "
    "line, which others may see), or sqlite:///path.db. Env: HYPERSCAN_STORAGE.",
)

study_option = click.option("--study", "name", required=True, help="Study name.")

#: A runcard to read. A folder is not refused here but by the loader, with the message every
#: other unreadable runcard gets.
runcard_argument = click.argument("runcard", type=click.Path(path_type=Path))


def grace_period_option(help: str) -> OptionDecorator:
    """Workers, and the commands that judge their trials, read the grace period alike."""
    return click.option(
        "--grace-period",
        type=click.IntRange(min=2),
        default=600,
        show_default=True,
        envvar="HYPERSCAN_GRACE_PERIOD",
        show_envvar=True,
        help=help,
    )


force_option = click.option("--force", is_flag=True, help="Replace the output file if it exists.")


def file_path(
    ctx: click.Context, param: click.Parameter, value: str | os.PathLike | None
) -> Path | None:
    """A callback for a file to write: a name, not empty and not ending in '/' (a folder
    that does not exist yet: else `-o out/` would write a file called `out`)."""
    if value is None:
        return None
    value = os.fspath(value)
    if not value:
        raise click.BadParameter("is empty: give a file name")
    if value.endswith(("/", os.sep)):
        raise click.BadParameter(f"{value} ends in '/', as a folder does: give a file name")
    return Path(value)


def folder_path(
    ctx: click.Context, param: click.Parameter, value: str | os.PathLike | None
) -> Path | None:
    """A callback for a folder to write: not empty (which would mean the current folder)."""
    if value is None:
        return None
    if not os.fspath(value):
        raise click.BadParameter("is empty: give a folder name")
    return Path(value)


#: FITDIR: a folder `hyperscan fit -o` wrote, which `plot` and `evolve` read.
fit_folder_argument = click.argument("fitdir", type=click.Path(path_type=Path, file_okay=False))


def output_folder_option(help: str, required: bool = True) -> OptionDecorator:
    """``-o/--output DIR``: the folder a command writes into (not empty, not a file)."""
    return click.option(
        "-o",
        "--output",
        "outdir",
        type=click.Path(file_okay=False),
        callback=folder_path,
        required=required,
        default=None,
        help=help,
    )


def output_file_option(description: str) -> OptionDecorator:
    """``-o/--output FILE``, required: the file a command writes."""
    return click.option(
        "-o",
        "--output",
        type=click.Path(dir_okay=False),
        callback=file_path,
        required=True,
        help=description,
    )


def fail(message: str) -> NoReturn:
    """A user mistake: one clear message, exit code 2, no traceback."""
    click.echo(f"error: {message}", err=True)
    sys.exit(USAGE_ERROR)


def configure_or_fail(device: str = "auto", threads: int | None = None) -> str:
    """`configure_tensorflow`, with an unknown device or a bad thread count as a message."""
    from hyperscan._tensorflow import configure_tensorflow

    try:
        return configure_tensorflow(device, threads)
    except ValueError as error:
        fail(str(error))


@contextmanager
def user_errors(*also: type[Exception]) -> Iterator[None]:
    """A mistake in a runcard, a study or a storage (and ``also``): its message in one line,
    exit code 2; the API's messages say all a user needs."""
    from hyperscan.runcard import RuncardError
    from hyperscan.scan import ScanError, StorageError

    try:
        yield
    except (RuncardError, ScanError, StorageError, *also) as error:
        fail(str(error))


def check_folder_exists(path: Path) -> None:
    """Fail when the folder that is to hold the file ``path`` does not exist: a typo in ``-o``
    would else create folders nobody asked for. After :func:`check_target`, which names a
    file on the way."""
    if not os.path.isdir(path.absolute().parent):
        fail(f"cannot write {path}: the folder {path.parent} does not exist")


def check_target(path: Path, force: bool) -> None:
    """Fail before any work when ``path`` (a file or folder to write) could not be written, so
    that a long fit or scan is never lost to a typo in ``-o``."""
    try:
        problem = _target_problem(path, force)
    except OSError as error:  # e.g. a folder on the way that we may not even look into
        problem = f"cannot write {path}: {error.strerror or error}"
    if problem is not None:
        fail(problem)


def check_not_an_input(output: Path, storage: str | None, runcard: Path | None = None) -> None:
    """Fail when ``output`` is the storage's file or the scan runcard, which a forced or
    always-rewritten output would replace: the storage with every study in it."""
    from hyperscan.scan import StorageError, storage_location

    try:
        stored = storage_location(storage).file
    except StorageError:  # a malformed URL: the command says so when it opens it
        stored = None
    inputs = {"the storage's file": stored, "the scan runcard": runcard}
    for what, path in inputs.items():
        if path is not None and _resolved(output) == _resolved(path):
            fail(f"{output} is {what}; give another file")


def check_keeps_runcard(outdir: Path, runcard: Path) -> None:
    """Fail when ``outdir``, which ``--force`` replaces as a whole, is or holds ``runcard``."""
    target, source = _resolved(outdir), _resolved(runcard)
    if target == source or target in source.parents:
        verb = "is" if target == source else "holds"
        fail(f"{outdir} {verb} the runcard {runcard}; give another folder")


def _resolved(path: Path) -> Path:
    """The real path; a symlink loop stays as given, for `check_target` to refuse by name."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return path.absolute()


def _target_problem(path: Path, force: bool) -> str | None:
    if os.path.lexists(path) and not force:
        return f"{path} exists; use --force to replace it"
    if os.path.lexists(path) and not (path.is_file() or path.is_dir()):
        # --force renames a new file into place: that would replace a device or a pipe
        return f"{path} is not a regular file or folder; give another path"
    if force and path.is_dir() and os.path.ismount(path):
        return f"{path} is a mount point, which cannot be replaced; give a folder inside it"
    if force and path.is_dir() and not os.access(path, os.W_OK):
        return f"cannot replace {path}: no permission to write in it (moving it needs that)"
    here = Path.cwd().resolve()
    if path.resolve() == here or path.resolve() in here.parents:
        return f"{path} is the current folder or holds it; give a new path"
    ancestor = path.absolute().parent  # where the file or folder is renamed into place
    while not os.path.lexists(ancestor):
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        return f"cannot write {path}: {ancestor} is a file, not a folder"
    if not os.access(ancestor, os.W_OK | os.X_OK):
        return f"cannot write {path}: no permission to write in {ancestor}"
    # What access() cannot tell: a read-only file system, or /proc and /sys, which refuse new
    # files even to root. The results are staged in a sibling folder like this one.
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".hyperscan-check.", dir=ancestor))
    except OSError as error:
        return f"cannot write {path}: {ancestor} takes no new files ({error.strerror or error})"
    return None
