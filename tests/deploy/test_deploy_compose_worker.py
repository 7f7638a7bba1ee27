# SPDX-License-Identifier: GPL-3.0-or-later
"""The compose services' commands, run as the containers would run them, against PostgreSQL.

Each service runs as `hyperscan <its command>` (the image's entrypoint), with the service's
environment, in a folder standing in for the image's WORKDIR with the service's mounts in
place. Only the database host (the test server instead of the `postgres` service) and the
runcard (a tiny scan, through the compose file's own HYPERSCAN_RUNCARD variable) differ; the
worker gets `--n-trials 1` appended.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import optuna
from optuna.trial import TrialState

from hyperscan.runcard import load_fit_runcard
from hyperscan.scan import open_storage
from hyperscan.scan.storage import load_study

STUDY = "compose-e2e"


def _hyperscan() -> list[str]:
    """The `hyperscan` console script of this environment (the image's ENTRYPOINT)."""
    script = Path(sys.executable).with_name("hyperscan")
    if script.exists():
        return [str(script)]
    found = shutil.which("hyperscan")
    return [found] if found else [sys.executable, "-m", "hyperscan"]


def _container_folder(deploy, service: dict, root: Path) -> Path:
    """The image's WORKDIR with the service's bind mounts (links) and named volumes (empty
    folders) where the container has them."""
    workdir = deploy.dockerfile_workdir()
    home = root / "home"
    home.mkdir(exist_ok=True)
    for mount in deploy.mounts(service):
        assert mount.target.startswith(workdir + "/"), mount
        place = home / mount.target.removeprefix(workdir + "/")
        if place.exists() or place.is_symlink():
            continue
        if mount.is_bind:
            place.symlink_to((deploy.repo / mount.source).resolve(), target_is_directory=True)
        else:
            place.mkdir(parents=True)
    return home


def _run(deploy, service: dict, root: Path, storage: str, extra: list[str] = ()):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HYPERSCAN_", "PG"))}
    env.update(deploy.environment(service))
    env["HYPERSCAN_STORAGE"] = storage  # the test server instead of the `postgres` service
    command = [*_hyperscan(), *deploy.as_list(service["command"]), *extra]
    return subprocess.run(
        command,
        cwd=_container_folder(deploy, service, root),
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


def test_a_worker_started_as_compose_starts_it_completes_a_trial(
    deploy, postgres_url, tiny_runcard, tmp_path
):
    document = deploy.compose({"HYPERSCAN_RUNCARD": str(tiny_runcard), "HYPERSCAN_STUDY": STUDY})
    services = document["services"]
    # the compose commands are untouched: with the defaults put back they are the same
    default = deploy.compose()["services"]
    for name in ("study-create", "worker", "export"):
        ours = [
            arg.replace(str(tiny_runcard), "studies/quickstart-scan.yml").replace(
                STUDY, "quickstart-scan"
            )
            for arg in deploy.as_list(services[name]["command"])
        ]
        assert ours == deploy.as_list(default[name]["command"]), name
    assert services["worker"]["environment"]["HYPERSCAN_STORAGE"].endswith(
        "@postgres:5432/hyperscan"
    )

    created = _run(deploy, services["study-create"], tmp_path, postgres_url)
    assert created.returncode == 0, created.stderr
    assert f"study '{STUDY}' created" in created.stdout

    worker = _run(deploy, services["worker"], tmp_path, postgres_url, ["--n-trials", "1"])
    assert worker.returncode == 0, worker.stderr
    assert "trial 0:" in worker.stdout and "worker done: 1 trial," in worker.stdout

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = load_study(open_storage(postgres_url), STUDY)
    (trial,) = study.get_trials()
    assert trial.state == TrialState.COMPLETE
    assert trial.user_attrs["fit"]["members"] == 2
    assert ":" in trial.user_attrs["worker"]  # host:pid

    exported = _run(deploy, services["export"], tmp_path, postgres_url)
    assert exported.returncode == 0, exported.stderr
    best = tmp_path / "home" / "results" / f"{STUDY}-best.yml"
    assert load_fit_runcard(best).optimizer.learning_rate == trial.params["optimizer.learning_rate"]
