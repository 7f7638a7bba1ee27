# SPDX-License-Identifier: GPL-3.0-or-later
"""docker/compose.pgbouncer.yml read as Compose would, and its PgBouncer's entrypoint run for
real (Debian's pgbouncer, in front of the test PostgreSQL); the image and the whole stack
through it: tests/deploy/test_stack.py."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg2
import pytest
import sqlalchemy

from hyperscan.scan.storage import describe_error, transient_error

ENTRYPOINT = Path(__file__).resolve().parents[2] / "docker" / "pgbouncer" / "entrypoint.sh"


def test_the_override_puts_pgbouncer_between_the_workers_and_postgres(deploy):
    document = deploy.compose(pgbouncer=True)
    services = document["services"]
    worker, bouncer = services["worker"], services["pgbouncer"]
    url = deploy.environment(worker)["HYPERSCAN_STORAGE"]
    assert re.fullmatch(r"postgresql://[^:@/]+@pgbouncer:6432/\w+", url), url
    # the study's creation (a session lock), the dashboard and the export stay direct
    for name in ("study-create", "dashboard", "export"):
        assert "@postgres:5432/" in deploy.environment(services[name])["HYPERSCAN_STORAGE"]
    # the rest of the worker comes from the base file; it waits for PgBouncer's health
    assert worker["depends_on"]["pgbouncer"]["condition"] == "service_healthy"
    assert worker["depends_on"]["study-create"]["condition"] == "service_completed_successfully"
    assert deploy.environment(worker)["HYPERSCAN_GRACE_PERIOD"] == "600"
    assert bouncer["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert bouncer["restart"] == "unless-stopped"
    assert all(str(port).startswith("127.0.0.1:") for port in bouncer["ports"])
    env = deploy.environment(bouncer)
    assert env["POSTGRES_PASSWORD"] == deploy.env_example()["POSTGRES_PASSWORD"]
    assert (deploy.repo / bouncer["build"]["context"] / "Dockerfile").is_file()
    assert bouncer["build"]["args"]["BASE_IMAGE"] == "postgres:17"
    local = deploy.compose({"HYPERSCAN_POSTGRES_IMAGE": "local/pg"}, pgbouncer=True)
    assert local["services"]["pgbouncer"]["build"]["args"]["BASE_IMAGE"] == "local/pg"


def test_the_entrypoint_passes_shellcheck(skip_or_fail_on_ci):
    if subprocess.run(["which", "shellcheck"], capture_output=True).returncode != 0:
        skip_or_fail_on_ci("shellcheck is not installed")
    done = subprocess.run(["shellcheck", str(ENTRYPOINT)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _listens(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def bouncer(postgres_url, skip_or_fail_on_ci) -> Iterator[tuple[str, str]]:
    """The entrypoint run with Debian's pgbouncer in front of the test PostgreSQL (trust
    auth), a password with a quote and a space; the URL through it, and the password."""
    binary = "/usr/sbin/pgbouncer"
    if not os.access(binary, os.X_OK):
        skip_or_fail_on_ci("pgbouncer is not installed (apt-get install -y pgbouncer)")
    parsed = sqlalchemy.engine.make_url(postgres_url)
    password, port = 'se"cret pw', _free_port()
    env = {
        "PATH": f"/usr/sbin:{os.environ['PATH']}",
        "POSTGRES_USER": parsed.username,
        "POSTGRES_PASSWORD": password,
        "PGBOUNCER_SERVER": f"{parsed.host}:{parsed.port or 5432}",
        "PGBOUNCER_POOL_SIZE": "2",
        "PGBOUNCER_LISTEN_PORT": str(port),
    }
    # PgBouncer refuses to run as root, as the image's user does not; the script from stdin,
    # which that user may not be able to read where the checkout is.
    user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    with ENTRYPOINT.open() as script:
        process = subprocess.Popen(
            [*user, "sh", "-s"], stdin=script, env=env, stderr=subprocess.PIPE, text=True
        )
    try:
        deadline = time.monotonic() + 30
        while not _listens(port):
            assert process.poll() is None, process.stderr.read()
            assert time.monotonic() < deadline, "PgBouncer did not listen"
            time.sleep(0.1)
        yield parsed.set(host="127.0.0.1", port=port, password=None).render_as_string(), password
    finally:
        process.terminate()
        process.wait(10)


def test_the_entrypoints_pgbouncer_admits_the_password_and_passes_hyperscans_options(bouncer):
    """The settings it writes are ones PgBouncer starts with; it admits the role with the
    password (quoted in its auth file) and refuses a wrong one; hyperscan's `options` startup
    parameter (its statement_timeout) does not stop a connection."""
    url, password = bouncer
    dsn = url.replace("postgresql+psycopg2://", "postgresql://")
    connection = psycopg2.connect(
        dsn, password=password, options="-c statement_timeout=60000", connect_timeout=5
    )
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            assert cursor.fetchone() == (1,)
    finally:
        connection.close()
    with pytest.raises(psycopg2.OperationalError) as refused:
        psycopg2.connect(dsn, password="wrong", connect_timeout=5)
    # told as a wrong password, not waited out as an outage
    assert not transient_error(refused.value)
    assert "password authentication failed at 127.0.0.1" in str(describe_error(refused.value, url))
