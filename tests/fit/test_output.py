"""Writing a fit's results: the folder appears whole, or the results stay where written."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from hyperscan.data import experimental_chi2, fit_to_fk_rotation, grid_predictions, load_problem
from hyperscan.fit import (
    HISTORY_ARRAYS,
    HISTORY_FILE,
    MEMBER_STATUSES,
    PDF_ARRAYS,
    PDF_FILE,
    RESULTS_FILE,
    RUNCARD_FILE,
    ResultsKeptError,
    results_document,
    run_fit,
    write_fit,
)


@pytest.fixture(scope="module")
def result(make_card):
    return run_fit(make_card(replicas=[1], epochs=50))


def test_the_result_keeps_each_member_s_predictions(result, make_card):
    """The scan's ensemble metrics need them: they are the predictions the fit's χ² scored."""
    problem = load_problem(make_card(replicas=[1], epochs=50))
    assert result.predictions.shape == (1, problem.n_data)
    experimental, _ = experimental_chi2(problem, result.predictions)
    np.testing.assert_allclose(experimental, result.chi2_per_point["experimental"], rtol=1e-12)
    # and FK ⊗ the fitted PDF on the fit's grid, as written to pdfs.npz, gives them again
    xf = np.einsum("mxf,kf->mxk", result.grid_pdf, fit_to_fk_rotation())
    np.testing.assert_allclose(
        result.predictions, grid_predictions(problem, result.grid_x, xf), rtol=1e-9
    )
    assert not np.allclose(result.predictions, problem.central)  # a fit, not the data


def test_results_name_each_member_s_trial(result, make_card):
    """A member whose methodology came from a scan trial (`export --sample`) says which."""
    sampled = make_card(replicas=[1], epochs=50, methodologies=[{"trial": 7}])
    assert [m["trial"] for m in results_document(result, sampled)["members"]] == [7]
    by_hand = make_card(replicas=[1], epochs=50, methodologies=[{"epochs": 60}])
    assert [m["trial"] for m in results_document(result, by_hand)["members"]] == [None]
    assert [m["trial"] for m in results_document(result)["members"]] == [None]


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


def test_the_folder_holds_what_the_format_declares(result, tmp_path):
    """The writer and the readers share one declaration of the format: the files, the arrays
    of each archive and the member statuses are those it names."""
    outdir = tmp_path / "out"
    write_fit(result, "epochs: 50\n", outdir)
    assert sorted(p.name for p in outdir.iterdir()) == sorted(
        [RESULTS_FILE, PDF_FILE, HISTORY_FILE, RUNCARD_FILE]
    )
    with np.load(outdir / PDF_FILE) as pdfs:
        assert sorted(pdfs.files) == sorted(PDF_ARRAYS)
        assert set(pdfs["status"]) <= set(MEMBER_STATUSES)
    with np.load(outdir / HISTORY_FILE) as history:
        assert sorted(history.files) == sorted(HISTORY_ARRAYS)
    members = json.loads((outdir / RESULTS_FILE).read_text())["members"]
    assert {member["status"] for member in members} <= set(MEMBER_STATUSES)


def test_the_format_and_the_writer_load_without_tensorflow():
    """Readers of a fit folder import the format from hyperscan.fit: that must not cost them
    TensorFlow's seconds and hundreds of MB; the fit itself loads it on first use."""
    code = (
        "import sys\n"
        "from hyperscan.fit import RESULTS_FILE, MEMBER_STATUSES, summary, write_fit\n"
        "assert 'tensorflow' not in sys.modules, 'the format imported tensorflow'\n"
        "from hyperscan.fit import run_fit\n"
        "assert 'tensorflow' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
