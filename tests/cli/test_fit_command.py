"""`hyperscan fit` as a user runs it: files written atomically, clear errors, exit codes."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from hyperscan.cli import main
from hyperscan.data import experimental_chi2, grid_predictions, load_problem
from hyperscan.runcard import load_fit_runcard

TINY = {
    "data": {"closure": {"size": "tiny", "level": 1}},
    "replicas": 2,
    "architecture": {"nodes": [8], "activations": ["tanh"]},
    "epochs": 100,
    "training": {"steps_per_call": 50},
}


def _write(path, card):
    path.write_text(yaml.safe_dump(card))
    return path


def test_fit_writes_results_pdfs_and_runcard(tmp_path):
    runcard = _write(tmp_path / "fit.yml", TINY)
    outdir = tmp_path / "out"
    result = CliRunner().invoke(main, ["fit", str(runcard), "-o", str(outdir), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "2 members" in result.output and f"results in {outdir}/" in result.output

    document = json.loads((outdir / "results.json").read_text())
    assert [m["replica"] for m in document["members"]] == [1, 2]
    for member in document["members"]:
        assert member["status"] in {"ok", "pos-veto", "diverged"}
        assert set(member["chi2_per_point"]) >= {"training", "validation", "experimental"}
        assert member["best_epoch"] >= -1
        assert member["trial"] is None  # no methodologies: no scan trial
    pdfs = np.load(outdir / "pdfs.npz")
    assert pdfs["xf"].shape == (2, pdfs["x"].size, 8)
    assert pdfs["replicas"].tolist() == [1, 2] and pdfs["folds"].tolist() == [-1, -1]
    assert np.isfinite(pdfs["xf"]).all()
    assert yaml.safe_load((outdir / "runcard.yml").read_text())["epochs"] == 100
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fit.yml", "out"]
    umask = os.umask(0)
    os.umask(umask)
    assert outdir.stat().st_mode & 0o777 == 0o777 & ~umask  # readable as the umask allows


def test_pdf_on_the_fit_grid_reproduces_the_fit_predictions(tmp_path):
    # Anyone can recompute a fit's predictions from pdfs.npz alone: FK ⊗ x·f on grid_x.
    runcard = _write(tmp_path / "fit.yml", TINY)
    outdir = tmp_path / "out"
    result = CliRunner().invoke(main, ["fit", str(runcard), "-o", str(outdir), "--no-progress"])
    assert result.exit_code == 0, result.output
    document = json.loads((outdir / "results.json").read_text())
    assert 0 < document["training_seconds"] <= document["seconds"]
    problem = load_problem(load_fit_runcard(runcard))
    pdfs = np.load(outdir / "pdfs.npz")
    xf = pdfs["grid_xf_flavour_basis"].astype(np.float64)  # (members, grid, 14)
    predictions = grid_predictions(problem, pdfs["grid_x"], xf)
    recomputed, _ = experimental_chi2(problem, predictions)
    stored = [m["chi2_per_point"]["experimental"] for m in document["members"]]
    np.testing.assert_allclose(recomputed, stored, rtol=1e-4)


def test_existing_output_is_refused_without_force(tmp_path):
    runcard = _write(tmp_path / "fit.yml", TINY)
    outdir = tmp_path / "out"
    outdir.mkdir()
    (outdir / "keep.txt").write_text("precious")
    refused = CliRunner().invoke(main, ["fit", str(runcard), "-o", str(outdir)])
    assert refused.exit_code == 2
    assert "--force" in refused.output
    assert (outdir / "keep.txt").read_text() == "precious"

    forced = CliRunner().invoke(
        main, ["fit", str(runcard), "-o", str(outdir), "--force", "--no-progress"]
    )
    assert forced.exit_code == 0, forced.output
    assert not (outdir / "keep.txt").exists()
    assert (outdir / "results.json").exists()


@pytest.mark.parametrize("inside", [False, True])
def test_force_never_deletes_the_runcard(tmp_path, inside):
    """OUTDIR is replaced as a whole: it may be neither the runcard nor a folder holding it."""
    folder = tmp_path / "runs"
    folder.mkdir()
    runcard = _write(folder / "fit.yml", TINY)
    outdir = folder if inside else runcard
    refused = CliRunner().invoke(main, ["fit", str(runcard), "-o", str(outdir), "--force"])
    assert refused.exit_code == 2
    verb = "holds" if inside else "is"
    assert f"{outdir} {verb} the runcard {runcard}; give another folder" in refused.output
    assert "--force to replace" not in refused.output
    assert yaml.safe_load(runcard.read_text()) == TINY


@pytest.mark.parametrize(
    ("card", "fragment"),
    [
        ({"epochs": "many"}, "epochs"),
        ({"optimizer": {"name": "adamw"}}, "optimizer.name"),
        ({"replicas": 0}, "replicas"),
        ({"learning_rate": 0.1}, "learning_rate"),
        # Dataset names are checked once the data are built, still before any fitting.
        ({"data": {"closure": {"size": "tiny"}, "datasets": ["NOPE"]}}, "data.datasets[0]"),
        ({"data": {"real": {"q2min": 1.0e6}}}, "data.real: BCDMS"),  # no point passes the cuts
        (
            {
                "data": {"closure": {"size": "tiny"}, "datasets": ["TOY_GLUON"]},
                "folds": [["TOY_GLUON"]],
            },
            "folds[0]: holds out every fitted dataset",
        ),
    ],
)
def test_bad_runcard_exits_2_with_the_key_and_no_traceback(tmp_path, card, fragment):
    runcard = _write(tmp_path / "bad.yml", card)
    result = CliRunner().invoke(main, ["fit", str(runcard), "-o", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert str(runcard) in result.output and fragment in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("force", [[], ["--force"]])
def test_an_output_that_is_a_symlink_loop_is_refused(tmp_path, force):
    runcard = _write(tmp_path / "fit.yml", TINY)
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    result = CliRunner().invoke(main, ["fit", str(runcard), "-o", str(loop), *force])
    assert result.exit_code == 2 and result.output.startswith(f"error: {loop} "), result.output
    assert "Traceback" not in result.output and loop.is_symlink()


def test_missing_runcard_exits_2(tmp_path):
    result = CliRunner().invoke(main, ["fit", str(tmp_path / "nope.yml"), "-o", "out"])
    assert result.exit_code == 2
    assert "nope.yml" in result.output


@pytest.mark.parametrize(
    ("target", "message"),
    [("a-file/out", "a-file is a file, not a folder"), (".", "is the current folder")],
)
def test_an_output_that_cannot_be_written_is_refused_before_fitting(
    tmp_path, monkeypatch, target, message
):
    runcard = _write(tmp_path / "fit.yml", TINY)  # outside ".", else refused as held by it
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    (work / "a-file").write_text("")
    result = CliRunner().invoke(main, ["fit", str(runcard), "-o", target, "--force"])
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output
    assert "members" not in result.output  # refused before the fit, not after it
    assert sorted(p.name for p in work.iterdir()) == ["a-file"]


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc")
def test_a_folder_that_takes_no_new_files_is_refused_before_fitting(tmp_path):
    """/proc refuses new files even to root, whom access() lets write anywhere: the check
    tries, so the fit is refused before it runs rather than lost after it."""
    runcard = _write(tmp_path / "fit.yml", TINY)
    result = CliRunner().invoke(main, ["fit", str(runcard), "-o", "/proc/hyperscan-fit"])
    assert result.exit_code == 2, result.output
    assert "cannot write /proc/hyperscan-fit: " in result.output
    assert "members" not in result.output and "Traceback" not in result.output


def test_a_scan_runcard_is_pointed_to_hyperscan_scan(tmp_path):
    runcard = _write(tmp_path / "scan.yml", {**TINY, "scan": {"space": {"activation": ["tanh"]}}})
    result = CliRunner().invoke(main, ["fit", str(runcard), "-o", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "is a scan runcard" in result.output and "hyperscan scan" in result.output


def test_ctrl_c_stops_at_the_next_sync_and_keeps_the_fit(tmp_path):
    """SIGINT mid-training: the fit ends at its next sync, its results are written with
    `interrupted: true`, and the exit status is 130 (a fit that did not run to its end)."""
    card = {**TINY, "epochs": 10_000_000, "stopping": {"patience": 1.0}}
    runcard = _write(tmp_path / "long.yml", card)
    cache = tmp_path / "cache"  # the compiled loop (*.pb) lands here once training is under way
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "CUDA_VISIBLE_DEVICES": "-1"}
    env.pop("TF_XLA_FLAGS", None)
    command = [sys.executable, "-m", "hyperscan", "fit", str(runcard), "-o", str(tmp_path / "out")]
    fit = subprocess.Popen(
        [*command, "--no-progress"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not any(p.is_file() for p in cache.rglob("*.pb")):
            assert fit.poll() is None and time.monotonic() < deadline, fit.communicate()
            time.sleep(0.2)
        time.sleep(1.0)
        fit.send_signal(signal.SIGINT)
        stdout, stderr = fit.communicate(timeout=60)
    finally:
        fit.kill()
    assert fit.returncode == 130, stdout + stderr
    assert "interrupted after" in stderr and "Traceback" not in stderr
    assert "stopping at the next sync, keeping the fit (a second Ctrl-C aborts" in stderr
    document = json.loads((tmp_path / "out" / "results.json").read_text())
    assert document["interrupted"] is True
    assert 0 < document["steps"] < card["epochs"]
    assert document["steps"] % card["training"]["steps_per_call"] == 0  # stopped at a sync
    # Every member was still training (patience 1.0): cut short, none vetoed by positivity.
    statuses = [member["status"] for member in document["members"]]
    assert set(statuses) <= {"ok", "interrupted"}, statuses
    counts = f"{statuses.count('ok')} ok, 0 pos-veto, 0 diverged, "
    assert counts + f"{statuses.count('interrupted')} interrupted" in stdout


def test_a_second_ctrl_c_aborts_with_130_and_nothing_written(tmp_path, monkeypatch):
    """The first signal's handler gives the terminal's SIGINT back, so a second one raises
    KeyboardInterrupt mid-fit: an abort, said as such, not click's "Aborted!" with status 1."""

    def aborted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("hyperscan.fit.fit_runcard", aborted)
    runcard = _write(tmp_path / "fit.yml", TINY)
    result = CliRunner().invoke(main, ["fit", str(runcard), "-o", str(tmp_path / "out")])
    assert result.exit_code == 130, result.output
    assert "aborted by a second signal: nothing written" in result.output
    assert "Aborted!" not in result.output and not (tmp_path / "out").exists()


def test_a_folder_we_may_not_look_into_is_a_message_not_a_traceback(tmp_path, monkeypatch):
    """Path.exists() raises PermissionError under a folder of another user's (mode 0700)."""
    from hyperscan.cli._common import check_target

    def denied(path):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(os.path, "lexists", denied)
    with pytest.raises(SystemExit) as exited:
        check_target(tmp_path / "locked" / "out", force=False)
    assert exited.value.code == 2


def test_force_never_replaces_a_device_or_a_pipe(tmp_path, capsys):
    """--force renames a new file into place, which would turn /dev/full or a FIFO into a
    plain file."""
    from hyperscan.cli._common import check_target

    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    for target in (pipe, Path(os.devnull)):
        with pytest.raises(SystemExit) as exited:
            check_target(target, force=True)
        assert exited.value.code == 2
        assert "is not a regular file or folder" in capsys.readouterr().err
    assert stat.S_ISFIFO(pipe.lstat().st_mode)


def test_ctrl_c_before_the_fit_starts_exits_130_with_nothing_written(tmp_path, monkeypatch):
    """Reading the data and importing TensorFlow take seconds: Ctrl-C then is an interruption
    (130), not click's "Aborted!" with status 1."""
    from hyperscan.cli import _main

    def interrupted(runcard):
        raise KeyboardInterrupt

    monkeypatch.setattr(_main, "_fit_inputs", interrupted)
    runcard = _write(tmp_path / "fit.yml", TINY)
    result = CliRunner().invoke(main, ["fit", str(runcard), "-o", str(tmp_path / "out")])
    assert result.exit_code == 130, result.output
    assert "interrupted before the fit started: nothing written" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fit.yml"]
