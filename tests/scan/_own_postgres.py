# SPDX-License-Identifier: GPL-3.0-or-later
"""A PostgreSQL server of a test's own, that the test may stop and start at will: initdb and
pg_ctl on a free port of 127.0.0.1, its data and socket in a temporary folder, trust auth.

The shared test server (tests/conftest.py's ``postgres_server``) must never restart under the
other tests; a restart is a test's own business, on its own server. PostgreSQL refuses to run
as root: as root (this machine, CI) the server runs as the ``postgres`` system user.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

POSTGRES_BINARIES = "/usr/lib/postgresql/*/bin"
"""Where Debian's packages put initdb, pg_ctl and postgres (not on PATH)."""
SERVER_USER = "postgres"
DATABASE = "hyperscan"


class MissingPrerequisite(Exception):
    """The machine cannot run a server of the test's own (no binaries, no server user)."""


def postgres_bin() -> Path:
    """The folder of the newest installed PostgreSQL's initdb and pg_ctl."""
    found = [
        folder
        for folder in Path("/").glob(POSTGRES_BINARIES.lstrip("/"))
        if (folder / "initdb").is_file() and (folder / "pg_ctl").is_file()
    ]
    pg_ctl = shutil.which("pg_ctl")
    if pg_ctl is not None and shutil.which("initdb") is not None:
        found.append(Path(pg_ctl).parent)
    if not found:
        raise MissingPrerequisite(
            f"no initdb and pg_ctl in {POSTGRES_BINARIES} or on PATH "
            "(apt-get install -y postgresql)"
        )

    def version(folder: Path) -> tuple[int, ...]:
        return tuple(int(part) for part in re.findall(r"\d+", str(folder))) or (0,)

    return max(found, key=version)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class OwnPostgres:
    """A PostgreSQL server in ``folder`` (created here, removed by :meth:`close`) on a free
    port, with one database, :data:`DATABASE`; started by the constructor."""

    def __init__(self) -> None:
        self.bin = postgres_bin()
        self._as_user: list[str] = []
        owner = None
        if os.geteuid() == 0:
            try:
                owner = pwd.getpwnam(SERVER_USER)
            except KeyError:
                raise MissingPrerequisite(
                    f"PostgreSQL refuses to run as root, and there is no {SERVER_USER!r} user "
                    "to run it as"
                ) from None
            runuser = shutil.which("runuser")
            if runuser is None:
                raise MissingPrerequisite("no runuser, to run PostgreSQL as a non-root user")
            self._as_user = [runuser, "-u", SERVER_USER, "--"]
        # Not under pytest's tmp_path: its folders are root's alone (0700). A short path, too,
        # for the socket (107 bytes at most).
        self.folder = Path(tempfile.mkdtemp(prefix="hyperscan-pg-"))
        self.data = self.folder / "data"
        self.log = self.folder / "server.log"
        if owner is not None:
            os.chown(self.folder, owner.pw_uid, owner.pw_gid)
        self.port = free_port()
        try:
            self._run(
                "initdb", "-D", self.data, "-U", "postgres", "--auth=trust", "-E", "UTF8",
                "--no-sync", "--no-instructions",
            )  # fmt: skip
            # Only 127.0.0.1 and a socket in its own folder: nothing of the machine's own.
            self._configure(
                listen_addresses="'127.0.0.1'",
                port=str(self.port),
                unix_socket_directories=f"'{self.folder}'",
                fsync="off",  # a clean stop still writes everything; nothing here is kept
                max_connections="50",
            )
            self.start()
            self._create_database()
        except BaseException:
            self.close()
            raise

    @property
    def url(self) -> str:
        """The SQLAlchemy URL of :data:`DATABASE`."""
        return f"postgresql+psycopg2://postgres@127.0.0.1:{self.port}/{DATABASE}"

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        self._pg_ctl("start", "-w", "-t", "60", "-l", self.log)

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``fast``: every session is ended, as `pg_ctlcluster stop` does)
        and wait until it is down."""
        self._pg_ctl("stop", "-w", "-t", "60", "-m", mode)

    def restart(self, down_for: float) -> None:
        """Stop, stay down ``down_for`` seconds, start again."""
        self.stop()
        time.sleep(down_for)
        self.start()

    def running(self) -> bool:
        status = self._command(str(self.bin / "pg_ctl"), "status", "-D", self.data)
        return subprocess.run(status, capture_output=True).returncode == 0

    def close(self) -> None:
        """Stop the server if it runs (at once: nothing is kept) and remove its folder."""
        try:
            if self.data.exists() and self.running():
                self.stop("immediate")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)

    def logs(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def _command(self, *args: object) -> list[str]:
        return [*self._as_user, *(str(arg) for arg in args)]

    def _run(self, tool: str, *args: object) -> None:
        command = self._command(self.bin / tool, *args)
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(
                f"{' '.join(command)} exited {done.returncode}:\n{done.stdout}{done.stderr}\n"
                f"--- server log\n{self.logs()}"
            )

    def _pg_ctl(self, action: str, *args: object) -> None:
        self._run("pg_ctl", action, "-D", self.data, *args)

    def _configure(self, **settings: str) -> None:
        lines = "".join(f"{key} = {value}\n" for key, value in settings.items())
        config = self.data / "postgresql.conf"
        stat = config.stat()
        with config.open("a") as out:  # as root: the file stays the server user's
            out.write(lines)
        os.chown(config, stat.st_uid, stat.st_gid)

    def _create_database(self) -> None:
        import psycopg2

        connection = psycopg2.connect(
            host="127.0.0.1", port=self.port, user="postgres", dbname="postgres", connect_timeout=5
        )
        try:
            connection.autocommit = True  # CREATE DATABASE refuses a transaction
            with connection.cursor() as cursor:
                cursor.execute(f"CREATE DATABASE {DATABASE}")
        finally:
            connection.close()
