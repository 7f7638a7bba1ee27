# SPDX-License-Identifier: GPL-3.0-or-later
"""docker-compose.yml for real: the images built, the stack up, a scan run through, resumed
and survived a killed worker (issue 43).

Marked `stack` and left out of the default run (minutes, and a Docker engine as root): .ci/run
runs it after the suite, on the base images of docker/local-base.sh (HYPERSCAN_PYTHON_IMAGE,
HYPERSCAN_POSTGRES_IMAGE, HYPERSCAN_TENSORFLOW_IMAGE from the environment; unset, the official
ones). docs/deployment.md says what it covers and what it cannot.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path

import optuna
import psycopg2
import pytest
import yaml

from hyperscan.runcard import load_fit_runcard
from hyperscan.scan import retries

# Image builds take minutes, more on a cold build cache than the suite's 10-minute limit.
pytestmark = [pytest.mark.stack, pytest.mark.timeout(3600)]

REPO = Path(__file__).resolve().parents[2]
STUDY = "quickstart-scan"  # docker-compose.yml's default study and runcard
BUDGET = yaml.safe_load((REPO / "studies" / f"{STUDY}.yml").read_text())["scan"]["trials"]
FINISHED = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _compose_command(skip_or_fail_on_ci: Callable) -> list[str]:
    """`docker compose` (v2) where the plugin is installed, else Debian's `docker-compose` (v1)."""
    if shutil.which("docker") is None:
        skip_or_fail_on_ci("no docker client", on_ci="no docker client: .ci/run installs it")
    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        skip_or_fail_on_ci("no Docker engine answers", on_ci="no Docker engine: .ci/run starts it")
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    skip_or_fail_on_ci("no docker compose", on_ci="no docker compose: .ci/run installs it")
    raise AssertionError("unreachable")


class Stack:
    """One Compose project of docker-compose.yml, with its own name, ports and folders."""

    def __init__(self, compose: list[str], folder: Path):
        self.project = f"hyperscan-stack-{secrets.token_hex(3)}"
        self.password = secrets.token_urlsafe(12)
        self.results = folder / "results"
        self.results.mkdir()
        self.results.chmod(0o777)  # the image's user (uid 10001) writes the export here
        self.postgres_port = _free_port()
        self.pgbouncer_port = _free_port()
        self.dashboard_port = _free_port()
        self.env = {
            **os.environ,
            "POSTGRES_PASSWORD": self.password,
            "POSTGRES_PORT": str(self.postgres_port),
            "PGBOUNCER_PORT": str(self.pgbouncer_port),
            "HYPERSCAN_DASHBOARD_PORT": str(self.dashboard_port),
            "HYPERSCAN_RESULTS": str(self.results),
            # A killed worker's trial is failed and retried after seconds, not 10 minutes.
            "HYPERSCAN_HEARTBEAT_INTERVAL": "1",
            "HYPERSCAN_GRACE_PERIOD": "5",
        }
        self.command = [*compose, "--project-name", self.project, "--file", "docker-compose.yml"]

    def __call__(
        self, *args: str, gpu: bool = False, pgbouncer: bool = False, timeout: float = 600
    ) -> str:
        """`docker compose ARGS` on this project; ``gpu``: with docker/compose.gpu.yml,
        ``pgbouncer``: with docker/compose.pgbouncer.yml."""
        override = ["--file", "docker/compose.gpu.yml"] if gpu else []
        override += ["--file", "docker/compose.pgbouncer.yml"] if pgbouncer else []
        done = subprocess.run(
            [*self.command, *override, *args],
            cwd=REPO,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert done.returncode == 0, f"compose {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def docker_run(self, image: str, *args: str) -> subprocess.CompletedProcess:
        """`hyperscan ARGS` in a container of ``image`` on the project's network, with the
        storage and password as the compose file gives them."""
        return subprocess.run(
            ["docker", "run", "--rm", "--network", f"{self.project}_default"]
            + ["--env", "HYPERSCAN_STORAGE=postgresql://hyperscan@postgres:5432/hyperscan"]
            + ["--env", f"PGPASSWORD={self.password}", image, *args],
            capture_output=True,
            text=True,
            timeout=600,
        )

    def containers(self, service: str, pgbouncer: bool = False) -> list[str]:
        return self("ps", "--quiet", service, pgbouncer=pgbouncer).split()

    def addresses(self, service: str, pgbouncer: bool = False) -> list[str]:
        """The addresses of the service's containers on the project's network."""
        return subprocess.run(
            ["docker", "inspect", "--format"]
            + ["{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}"]
            + self.containers(service, pgbouncer),
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()

    def host_address(self) -> str:
        """This host's address on the project's network: not loopback, and there on any host
        (a port published on all addresses would answer on it)."""
        return subprocess.run(
            ["docker", "network", "inspect", f"{self.project}_default", "--format"]
            + ["{{(index .IPAM.Config 0).Gateway}}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()

    @property
    def storage(self) -> str:
        return f"postgresql://hyperscan:{self.password}@127.0.0.1:{self.postgres_port}/hyperscan"

    def trials(self, study: str = STUDY) -> list[optuna.trial.FrozenTrial]:
        # SQLAlchemy's own driver name: its default for postgresql:// is psycopg 3.
        url = self.storage.replace("postgresql://", "postgresql+psycopg2://", 1)
        storage = optuna.storages.RDBStorage(url)
        try:
            return optuna.load_study(study_name=study, storage=storage).get_trials()
        finally:
            storage.engine.dispose()

    def exit_codes(self, service: str) -> list[int] | None:
        """The exit codes of the service's containers; None while one of them runs."""
        states = subprocess.run(
            ["docker", "inspect", "--format", "{{.State.Running}} {{.State.ExitCode}}"]
            + self.containers(service),
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
        if any(state.startswith("true") for state in states):
            return None
        return [int(state.split()[1]) for state in states]

    def wait_for(self, what: str, check: Callable[[], object], timeout: float = 600) -> object:
        """Poll ``check`` until it returns something true; fail with the workers' logs."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                found = check()
            except (optuna.exceptions.OptunaError, KeyError, psycopg2.Error, OSError):
                found = None  # the database or the study not there yet
            if found:
                return found
            time.sleep(1)
        logs = self("logs", "--no-color", "--tail", "30")
        pytest.fail(f"not within {timeout:.0f} s: {what}\n{logs}")


@pytest.fixture(scope="module")
def stack(skip_or_fail_on_ci, tmp_path_factory) -> Iterator[Stack]:
    """The project's images built (from Docker's cache when warm); everything down and its
    volumes removed afterwards (the images stay, as a cache)."""
    stack = Stack(_compose_command(skip_or_fail_on_ci), tmp_path_factory.mktemp("stack"))
    stack("build", "study-create", timeout=1800)
    try:
        yield stack
    finally:
        stack("down", "--volumes", "--remove-orphans", "--timeout", "30")


def _finished(trials: list[optuna.trial.FrozenTrial]) -> dict[int, float | None]:
    return {t.number: t.value for t in trials if t.state in FINISHED}


def test_the_stack_scans_resumes_and_survives_a_killed_worker(stack):
    # Up: PostgreSQL (healthy first), the study, the dashboard and two workers.
    stack("up", "--detach", "--scale", "worker=2", "worker", "dashboard")
    workers = {cid[:12]: cid for cid in stack.containers("worker")}  # hostname: id
    assert len(workers) == 2

    # Kill a worker mid-trial: its trial is failed once its heartbeat stops, and queued again.
    def running_in_a_worker():
        for trial in stack.trials():
            host = str(trial.user_attrs.get("worker", "")).partition(":")[0]
            if trial.state == optuna.trial.TrialState.RUNNING and host in workers:
                return trial.number, workers[host]
        return None

    killed_trial, container = stack.wait_for("a trial running in a worker", running_in_a_worker)
    subprocess.run(["docker", "kill", container], check=True, capture_output=True)
    retry = stack.wait_for(
        f"trial {killed_trial} (its worker killed) retried",
        lambda: retries(stack.trials()).get(killed_trial),
    )
    assert retry[1], f"trial {killed_trial}'s retry {retry[0]} does not say its worker was lost"

    # Down mid-scan: the volume keeps the study; the second up resumes it, nothing lost.
    before = _finished(stack.trials())
    assert len(before) < BUDGET, "the budget was spent before `down`: nothing left to resume"
    stack("down", "--timeout", "120")
    volumes = subprocess.run(
        ["docker", "volume", "ls", "--quiet", "--filter", f"name={stack.project}_pgdata"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert volumes == [f"{stack.project}_pgdata"]

    stack("up", "--detach", "--scale", "worker=2", "worker", "dashboard")
    stack.wait_for(
        f"the budget of {BUDGET} trials spent", lambda: len(_finished(stack.trials())) >= BUDGET
    )
    trials = stack.trials()
    after = _finished(trials)
    assert len(after) == BUDGET
    assert {n: after.get(n) for n in before} == before, "trials finished before `down` changed"
    # The retry finished, or was itself re-queued by `down` and its retry finished.
    repeats, last = retries(trials), killed_trial
    while last in repeats:
        last = repeats[last][0]
    assert trials[last].state in FINISHED, f"trial {killed_trial}'s last retry {last} unfinished"

    # Two workers with one process id (in their containers) still draw apart; retries repeat.
    again = {retry for retry, _ in retries(trials).values()}
    drawn = [tuple(sorted(t.params.items())) for t in trials if t.number not in again]
    assert len(set(drawn)) == len(drawn), "two workers drew the same trial"

    # The workers see the budget spent and exit 0; then the export writes the best runcard.
    assert stack.wait_for("the workers exited", lambda: stack.exit_codes("worker")) == [0, 0]
    stack("up", "--detach", "export")
    best = stack.results / f"{STUDY}-best.yml"
    stack.wait_for(f"{best.name} written to the mounted folder", best.is_file)
    assert load_fit_runcard(best).epochs == 1000  # a fit runcard: the study's base, one trial's

    # The dashboard answers on this host's loopback, and only there.
    page = urllib.request.urlopen(f"http://127.0.0.1:{stack.dashboard_port}/", timeout=10)
    assert page.status == 200
    elsewhere = stack.host_address()
    assert elsewhere and not elsewhere.startswith("127.")
    with pytest.raises(OSError):
        socket.create_connection((elsewhere, stack.dashboard_port), timeout=5).close()

    # PostgreSQL asks for the password from the environment.
    with pytest.raises(psycopg2.OperationalError, match="password authentication failed"):
        psycopg2.connect(stack.storage.replace(stack.password, "wrong"), connect_timeout=5)


def test_the_gpu_image_builds_on_its_tensorflow_base_and_runs_a_trial(stack):
    """docker/Dockerfile.gpu through docker/compose.gpu.yml's build, on HYPERSCAN_TENSORFLOW_IMAGE
    (here docker/local-base.sh's CPU stand-in): the Dockerfile's steps, the base's TensorFlow
    kept, the entrypoint, the override's worker command, and a trial run in that image on the
    CPU. Untested without a GPU node: CUDA, the device reservation, a trial on a GPU."""
    stack("build", "worker", gpu=True, timeout=1800)
    stack("up", "--detach", "study-create")  # PostgreSQL healthy, the quick-start study there

    # The override's own command: the worker finds the study, then TensorFlow, and no GPU here.
    command = yaml.safe_load((REPO / "docker" / "compose.gpu.yml").read_text())["services"][
        "worker"
    ]["command"]
    args = [arg.replace("${HYPERSCAN_STUDY:-quickstart-scan}", STUDY) for arg in command]
    no_gpu = stack.docker_run("hyperscan:gpu", *args)
    assert no_gpu.returncode == 2, no_gpu.stdout + no_gpu.stderr
    assert "--device gpu:0: this node has 0 GPU(s)" in no_gpu.stderr

    created = stack.docker_run(
        "hyperscan:gpu", "study", "create", f"studies/{STUDY}.yml", "--name", "gpu-image"
    )
    assert created.returncode == 0, created.stdout + created.stderr
    worker = stack.docker_run(
        "hyperscan:gpu", "worker", "--study", "gpu-image", "--device", "cpu", "--n-trials", "1"
    )
    assert worker.returncode == 0, worker.stdout + worker.stderr
    assert "worker done: 1 trial" in worker.stdout, worker.stdout


def test_workers_through_pgbouncer_scan_across_its_crash(stack):
    """docker/compose.pgbouncer.yml: its image built on HYPERSCAN_POSTGRES_IMAGE, its settings
    written from the environment, two workers through it (scram-sha-256 with the compose
    file's password), PgBouncer killed mid-scan and started again: the workers wait it out and
    exit 0 at exactly the budget, none left RUNNING or queued, a trial cut short re-queued; the
    database's sessions come from PgBouncer, not from the workers."""
    study = "via-pgbouncer"
    stack.env["HYPERSCAN_STUDY"] = study  # study-create makes it; the workers scan it
    try:
        stack("build", "pgbouncer", pgbouncer=True, timeout=1800)
        stack("up", "--detach", "--scale", "worker=2", "worker", pgbouncer=True)

        def mid_scan():
            trials = stack.trials(study)
            running = [t for t in trials if t.state == optuna.trial.TrialState.RUNNING]
            return _finished(trials) and running and len(_finished(trials)) < BUDGET

        stack.wait_for("a trial finished and one running, through PgBouncer", mid_scan)
        sessions = (
            "SELECT DISTINCT host(client_addr) FROM pg_stat_activity"
            " WHERE datname = 'hyperscan' AND pid <> pg_backend_pid() AND client_addr IS NOT NULL"
        )
        with closing(psycopg2.connect(stack.storage, connect_timeout=5)) as connection:
            cursor = connection.cursor()
            cursor.execute(sessions)
            clients = {row[0] for row in cursor.fetchall()}
        (bouncer,) = stack.addresses("pgbouncer", pgbouncer=True)
        assert bouncer in clients and not clients & set(stack.addresses("worker")), clients
        stack("kill", "pgbouncer", pgbouncer=True)
        time.sleep(3)
        stack("start", "pgbouncer", pgbouncer=True)

        assert stack.wait_for("the workers exited", lambda: stack.exit_codes("worker")) == [0, 0]
        trials = stack.trials(study)
        states = [(t.number, t.state.name) for t in trials]
        assert len(_finished(trials)) == BUDGET, states
        left = {optuna.trial.TrialState.RUNNING, optuna.trial.TrialState.WAITING}
        assert not [t for t in trials if t.state in left], states
        copied = retries(trials)
        for trial in trials:
            if trial.state == optuna.trial.TrialState.FAIL:
                assert trial.number in copied, f"trial {trial.number} not re-queued: {states}"
        # The workers saw PgBouncer gone (Docker's DNS forgets a stopped container's name) ...
        logs = stack("logs", "--no-color", "worker", pgbouncer=True)
        assert re.search(r"pgbouncer:6432 (does not resolve now|.*refused)", logs), logs
        # ... and waited it out, not restarted by Compose (on-failure) after a crash.
        restarts = subprocess.run(
            ["docker", "inspect", "--format", "{{.RestartCount}}", *stack.containers("worker")],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        assert restarts == ["0", "0"], logs
    finally:
        del stack.env["HYPERSCAN_STUDY"]
