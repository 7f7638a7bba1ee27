"""Runcards both ways with n3fit 4.1.5: `import-n3fit`, and what `export --format n3fit` needs
(the mappings themselves are hyperscan.runcard's, docs/n3fit.md)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import click

from hyperscan._version import __version__
from hyperscan.cli._common import (
    check_folder_exists,
    check_target,
    fail,
    force_option,
    output_file_option,
    user_errors,
)

if TYPE_CHECKING:
    from hyperscan.runcard import FitRuncard

#: Why `export --sample --format n3fit` is refused, in one line.
SAMPLE_REFUSED = (
    "--format n3fit cannot write --sample: n3fit 4.1.5 takes per-replica methodologies only "
    "through trial_specs, which reads the tries.json of one of its own hyperopt runs, not "
    "methodologies written in the runcard; export the trials one by one with --trial N"
)


def theory_id(runcard: FitRuncard) -> int | None:
    """The ID of ``data.real.theory`` when it names the folder holding one ``theory_<ID>``
    (a ``theory_<ID>`` folder says its ID itself, and the shipped data are 99000001)."""
    real = runcard.data.real
    if real is None or real.theory is None:
        return None
    folder = Path(real.theory).expanduser()
    if re.fullmatch(r"theory_\d+", folder.name):
        return None
    try:
        found = [p.name for p in folder.glob("theory_*") if (p / "fastkernel").is_dir()]
    except OSError:
        return None
    numbers = [int(name.removeprefix("theory_")) for name in found if name[7:].isdigit()]
    return numbers[0] if len(numbers) == 1 else None


@click.command("import-n3fit")
@click.argument("n3fit_card", metavar="N3FIT_CARD", type=click.Path(path_type=Path))
@output_file_option(
    "The hyperscan runcard to write: a fit runcard, or a scan runcard when N3FIT_CARD has "
    "hyperscan_config and kfold (n3fit's hyperopt)."
)
@click.option(
    "--theory",
    metavar="PATH",
    help="A theory folder as NNPDF's share folder lays it out (theory_<ID>/fastkernel/), "
    "written as data.real.theory: for a theoryid other than the shipped data's 99000001, or "
    "datasets and positivity sets hyperscan does not ship.",
)
@click.option(
    "--n3fit-args",
    "args",
    metavar="ARGS",
    help="n3fit's arguments after the runcard, e.g. '1 -r 8' or '1 --hyperopt 30': the "
    "replicas (and hyperopt trials) n3fit takes from its command line.  [default: the card's "
    "'# n3fit-args:' line, else replica 1]",
)
@force_option
def import_n3fit(
    n3fit_card: Path, output: Path, theory: str | None, args: str | None, force: bool
) -> None:
    """Write N3FIT_CARD, an n3fit 4.1.5 runcard, as a hyperscan runcard: a fit runcard, or a
    scan runcard from a hyperopt runcard. Every key is mapped or refused by name, all at
    once; keys without meaning for the fit are ignored and listed in the written card's
    header (docs/n3fit.md).

    \b
    Example:
      hyperscan import-n3fit ../shared/peer/runcards/hyperopt.yml -o hyperopt-scan.yml
      hyperscan scan hyperopt-scan.yml
    """
    from hyperscan.runcard import N3fitError, RuncardError, n3fit_to_hyperscan, read_n3fit_card
    from hyperscan.scan import write_atomically

    if output.absolute().resolve() == n3fit_card.absolute().resolve():
        fail(f"{output} is the n3fit runcard; give another file")
    check_target(output, force)
    check_folder_exists(output)
    try:
        text = n3fit_card.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        why = error.strerror if isinstance(error, OSError) and error.strerror else error
        fail(f"cannot read {n3fit_card}: {why}")
    source = str(n3fit_card)
    header = [
        f"Imported by hyperscan {__version__} (`hyperscan import-n3fit`, docs/n3fit.md) "
        f"from the n3fit 4.1.5 runcard {source}.",
    ]
    try:
        card, line = read_n3fit_card(text, source)
    except RuncardError as error:  # malformed YAML
        fail(_one_line(error))
    try:
        imported = n3fit_to_hyperscan(card, args=line if args is None else args, theory=theory)
        written = imported.text(source, header)
    except N3fitError as error:
        fail(f"{source}: {error}")
    except RuncardError as error:  # the mapped values break a rule of hyperscan's
        fail(f"{source}: the hyperscan runcard it maps to is invalid: " + _one_line(error))
    with user_errors():
        write_atomically(output, written, force=force)
    kind = "scan" if imported.is_scan else "fit"
    click.echo(f"{kind} runcard written to {output}")


def _one_line(error: Exception) -> str:
    return "; ".join(line.strip() for line in str(error).splitlines() if line.strip())
