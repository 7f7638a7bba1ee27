"""Writing a fit's results: the folder appears whole, or the results stay where written."""

from __future__ import annotations

import json
import os

import pytest

from hyperscan.fit import ResultsKeptError, run_fit, write_fit
from hyperscan.fit._output import RESULTS_FILE


@pytest.fixture(scope="module")
def result(make_card):
    return run_fit(make_card(replicas=[1], epochs=50))


def _steps(folder) -> int:
    return json.loads((folder / RESULTS_FILE).read_text())["steps"]


def test_a_folder_made_during_the_fit_keeps_it_and_the_results(result, tmp_path):
    """The CLI checks the output before the fit; another process may take it meanwhile."""
    outdir = tmp_path / "out"
    outdir.mkdir()
    (outdir / "theirs").write_text("kept")
    with pytest.raises(ResultsKeptError, match="it was made while the fit ran") as info:
        write_fit(result, "epochs: 50\n", outdir)
    assert (outdir / "theirs").read_text() == "kept"
    assert _steps(info.value.kept) == result.steps
    assert str(info.value.kept) in str(info.value)


def test_a_folder_that_cannot_be_replaced_is_left_as_it_was(result, tmp_path, monkeypatch):
    """If the new folder cannot be renamed into place (after the old one was moved aside),
    the old one is put back and the new results are kept, with no leftovers beside them."""
    outdir = tmp_path / "out"
    outdir.mkdir()
    (outdir / "old").write_text("old results")
    rename = os.rename

    def refuse_the_new_folder(source, target):
        if os.path.basename(source).startswith(".out.") and ".old." not in str(source):
            raise OSError(16, "Device or resource busy")
        rename(source, target)

    monkeypatch.setattr(os, "rename", refuse_the_new_folder)
    with pytest.raises(ResultsKeptError, match="Device or resource busy") as info:
        write_fit(result, "epochs: 50\n", outdir, force=True)
    assert (outdir / "old").read_text() == "old results"
    assert _steps(info.value.kept) == result.steps
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["out", info.value.kept.name])
