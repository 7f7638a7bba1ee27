# SPDX-License-Identifier: GPL-3.0-or-later
"""`hyperscan dashboard` serves a hyperscan journal through optuna-dashboard, on 127.0.0.1 only,
read-only, to requests that name this machine (and carry the token, when one is set).

The server is started the way users start it (the console script, as a subprocess) on a study
whose trials carry the user attributes a scan worker records, and is queried through
optuna-dashboard's JSON API (``/api/studies``, ``/api/studies/<id>``), as curl would (each
write that issue 42 made with curl is refused) and as a browser does (headless Chromium).
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
import pytest
from _chromium import Chromium
from _waiting import wait_for
from optuna.distributions import CategoricalDistribution, FloatDistribution
from optuna.trial import TrialState, create_trial

from hyperscan.scan import open_storage

optuna.logging.set_verbosity(optuna.logging.WARNING)

STUDY = "dis-scan"
START_TIMEOUT_S = 90.0  # generous: Optuna and the dashboard import first, on a loaded VM

DISTRIBUTIONS = {
    "optimizer": CategoricalDistribution(["adam", "nadam"]),
    "adam.learning_rate": FloatDistribution(1e-3, 3e-2, log=True),
}


def statistics(mean: float) -> dict[str, float]:
    return {
        "mean": mean,
        "median": round(mean - 0.01, 6),
        "trimmed_mean": round(mean - 0.02, 6),
        "max": round(mean + 0.3, 6),
        "mean_plus_std": round(mean + 0.1, 6),
    }


def replicas(mean: float) -> dict[str, dict[str, float]]:
    spread = {
        "mean": mean,
        "std": 0.05,
        "min": round(mean - 0.07, 5),
        "max": round(mean + 0.07, 5),
        "q16": round(mean - 0.05, 5),
        "q50": mean,
        "q84": round(mean + 0.05, 5),
        "n": 4,
    }
    return {"training": spread, "validation": spread, "held_out": {"n": 4, "finite": 0}}


def fit(diverged: int = 0) -> dict[str, Any]:
    return {
        "members": 4,
        "diverged": diverged,
        "pos_veto": 0,
        "best_epochs": [812, 640, 999, 731],
        "steps": 1000,
        "seconds": 41.37,
        "host": "node17",
        "threads": 8,
        "hyperscan": "0.1.0",
    }


# value, learning rate of the COMPLETE trials
COMPLETE = [(1.234, 2.0e-3), (1.117, 5.0e-3), (1.562, 1.2e-2)]
TRASH_REASON = "1 diverged: replica 3 at epoch 212: non-finite loss"


def trial_attrs(value: float) -> dict[str, Any]:
    return {
        "worker": "node17:4242",
        "statistics": statistics(value),
        "replicas": replicas(value),
        "fit": fit(),
    }


@pytest.fixture(scope="module")
def journal(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A hyperscan journal file with one study: three COMPLETE trials and one trashed one."""
    path = tmp_path_factory.mktemp("dashboard") / "scans.journal"
    storage = open_storage(str(path), create=True)
    study = optuna.create_study(study_name=STUDY, storage=storage)
    for value, rate in COMPLETE:
        study.add_trial(
            create_trial(
                params={"optimizer": "adam", "adam.learning_rate": rate},
                distributions=DISTRIBUTIONS,
                value=value,
                user_attrs=trial_attrs(value),
            )
        )
    study.add_trial(
        create_trial(
            state=TrialState.PRUNED,
            params={"optimizer": "adam", "adam.learning_rate": 2.9e-2},
            distributions=DISTRIBUTIONS,
            user_attrs={**trial_attrs(9.9), "fit": fit(diverged=1), "trashed": TRASH_REASON},
        )
    )
    return path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def hyperscan_command() -> list[str]:
    """The installed console script (next to this interpreter), as users run it."""
    script = Path(sys.executable).with_name("hyperscan")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from hyperscan.cli import main; main()"]


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "HYPERSCAN_STORAGE"}
    env["PYTHONUNBUFFERED"] = "1"  # the URL line must reach the log before the server blocks
    env.setdefault("CUDA_VISIBLE_DEVICES", "")
    return env


@dataclass
class Server:
    process: subprocess.Popen
    port: int
    log: Path
    host: str = "127.0.0.1"
    token: str | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def get(self, route: str) -> Any:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        ask = urllib.request.Request(self.url + route, headers=headers)
        with urllib.request.urlopen(ask, timeout=10) as reply:
            assert reply.status == 200
            return json.loads(reply.read())

    def request(
        self, method: str, route: str, body: Any = None, **headers: str
    ) -> tuple[int, dict[str, str], str]:
        """Status, headers and text of one request; ``Host`` is the URL's unless given."""
        connection = http.client.HTTPConnection(self.host, self.port, timeout=10)
        try:
            data = None if body is None else json.dumps(body)
            sent = {"Host": self.url.removeprefix("http://"), **headers}
            if data is not None:
                sent["Content-Type"] = "application/json"
            connection.request(method, route, body=data, headers=sent)
            reply = connection.getresponse()
            return reply.status, dict(reply.getheaders()), reply.read().decode()
        finally:
            connection.close()


def stop(process: subprocess.Popen) -> None:
    """End the server this test started (its own process id only)."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@contextmanager
def serving(
    journal: Path, log: Path, host: str = "127.0.0.1", *options: str, token: str | None = None
) -> Iterator[Server]:
    """`hyperscan dashboard` on `host` with `options` (and the token in its environment
    variable), once it answers; stopped at the end."""
    port = free_port()
    command = [*hyperscan_command(), "dashboard", "--storage", str(journal), "--port", str(port)]
    env = environment()
    if token is not None:
        env["HYPERSCAN_DASHBOARD_TOKEN"] = token
    with open(log, "wb") as sink:
        process = subprocess.Popen(
            [*command, "--host", host, *options],
            stdout=sink,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=journal.parent,
        )
    running = Server(process, port, log, host, token)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                pytest.fail(f"the dashboard exited with {process.returncode}:\n{running.output()}")
            try:
                running.get("/api/studies")
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if time.monotonic() > deadline:
                    pytest.fail(f"no answer within {START_TIMEOUT_S} s:\n{running.output()}")
                time.sleep(0.25)
        yield running
    finally:
        stop(process)


@pytest.fixture(scope="module")
def server(journal: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serving(journal, tmp_path_factory.mktemp("dashboard-log") / "server.log") as running:
        yield running


def study_id(server: Server) -> int:
    listed = server.get("/api/studies")["study_summaries"]
    (summary,) = [s for s in listed if s["study_name"] == STUDY]
    return summary["study_id"]


def attrs(trial: dict[str, Any]) -> dict[str, str]:
    """optuna-dashboard sends user attributes as key/value pairs, dict values as JSON text."""
    return {item["key"]: item["value"] for item in trial["user_attrs"]}


def test_the_study_is_listed(server: Server) -> None:
    listed = server.get("/api/studies")["study_summaries"]
    assert [s["study_name"] for s in listed] == [STUDY]
    assert listed[0]["directions"] == ["minimize"]


def test_trials_carry_the_replica_statistics(server: Server) -> None:
    detail = server.get(f"/api/studies/{study_id(server)}")
    assert detail["name"] == STUDY
    trials = detail["trials"]
    assert [t["number"] for t in trials] == [0, 1, 2, 3]
    assert [t["state"] for t in trials] == ["Complete"] * 3 + ["Pruned"]
    for trial, (value, _) in zip(trials, COMPLETE, strict=False):
        assert trial["values"] == [value]
        shown = attrs(trial)
        assert json.loads(shown["statistics"]) == statistics(value)
        assert json.loads(shown["replicas"]) == replicas(value)
        assert json.loads(shown["fit"]) == fit()
        assert shown["worker"] == "node17:4242"
    trashed = attrs(trials[3])
    assert trashed["trashed"] == TRASH_REASON
    assert json.loads(trashed["fit"])["diverged"] == 1
    keys = {item["key"] for item in detail["union_user_attrs"]}
    assert {"statistics", "replicas", "fit", "worker", "trashed"} <= keys


def test_best_trial_is_the_lowest_complete_one(server: Server) -> None:
    detail = server.get(f"/api/studies/{study_id(server)}")
    (best,) = detail["best_trials"]
    assert best["number"] == 1
    assert best["values"] == [1.117]
    assert "trashed" not in attrs(best)


def test_it_prints_a_local_url(server: Server) -> None:
    assert f"dashboard on http://127.0.0.1:{server.port}/ (read-only;" in server.output()


def listening_addresses(port: int) -> list[str]:
    """Local addresses (hex, as the kernel writes them) of TCP sockets listening on `port`."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            address, hex_port = fields[1].rsplit(":", 1)
            if int(hex_port, 16) == port and fields[3] == "0A":  # 0A: LISTEN
                found.append(address)
    return found


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux /proc/net/tcp")
def test_it_listens_on_the_loopback_address_only(server: Server) -> None:
    # 127.0.0.1 in /proc/net/tcp is 0100007F (little-endian); 0.0.0.0 or :: would be zeros.
    assert listening_addresses(server.port) == ["0100007F"]


@pytest.mark.skipif(sys.platform != "linux", reason="127.0.0.2 is a loopback address on Linux")
def test_another_local_address_is_refused(server: Server) -> None:
    """All of 127/8 reaches this machine on Linux: a server bound to 0.0.0.0 would answer."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=5):
        pass
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.2", server.port), timeout=5).close()


def test_it_serves_an_ipv6_address(journal: Path, tmp_path: Path) -> None:
    with serving(journal, tmp_path / "server.log", host="::1") as running:
        assert [s["study_name"] for s in running.get("/api/studies")["study_summaries"]] == [STUDY]
        assert f"dashboard on http://[::1]:{running.port}/" in running.output()


def refused_dashboard(storage: Path, port: int) -> subprocess.CompletedProcess[str]:
    """`hyperscan dashboard` that must refuse to start: its output once it has exited."""
    return subprocess.run(
        [*hyperscan_command(), "dashboard", "--storage", str(storage), "--port", str(port)],
        capture_output=True,
        text=True,
        env=environment(),
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_a_missing_journal_is_an_error_not_a_new_file(tmp_path: Path) -> None:
    missing = tmp_path / "typo.journal"
    result = refused_dashboard(missing, free_port())
    assert result.returncode == 2, result.stdout + result.stderr
    assert "no journal file" in result.stderr
    assert not missing.exists()


def test_a_port_in_use_is_an_error_not_a_traceback(journal: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        result = refused_dashboard(journal, port)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"cannot serve the dashboard on 127.0.0.1:{port}" in result.stderr
    assert "Traceback" not in result.stderr and "dashboard on http" not in result.stdout


# ---- the guard (issue 42, finding 2)

TOKEN = "s3cret-t0ken"


def study_state(journal: Path) -> list[tuple[str, list[tuple[str, float | None, dict]]]]:
    """Every study with its trials' states, values and user attributes, read from the file."""
    storage = open_storage(str(journal))
    return [
        (
            summary.study_name,
            [
                (t.state.name, t.value, t.user_attrs)
                for t in optuna.load_study(study_name=summary.study_name, storage=storage).trials
            ],
        )
        for summary in optuna.get_all_study_summaries(storage)
    ]


def writes(study: int, trial: int) -> list[tuple[str, str, Any]]:
    """The writes made with curl in issue 42: create, rename, delete, notes, tell, attributes."""
    return [
        ("POST", "/api/studies", {"study_name": "intruder", "directions": ["minimize"]}),
        ("POST", f"/api/studies/{study}/rename", {"study_name": "renamed"}),
        ("DELETE", f"/api/studies/{study}", {"remove_associated_artifacts": False}),
        ("PUT", f"/api/studies/{study}/note", {"version": 0, "body": "owned"}),
        ("PUT", f"/api/studies/{study}/{trial}/note", {"version": 0, "body": "owned"}),
        ("POST", f"/api/trials/{trial}/tell", {"state": "Complete", "values": [0.001]}),
        ("POST", f"/api/trials/{trial}/user-attrs", {"user_attrs": {"worker": "evil"}}),
    ]


def test_every_write_is_refused_by_default(server: Server, journal: Path) -> None:
    before = study_state(journal)
    first_trial = server.get(f"/api/studies/{study_id(server)}")["trials"][0]["trial_id"]
    for method, route, body in writes(study_id(server), first_trial):
        status, _, text = server.request(method, route, body)
        assert status == 403, (method, route, text)
        assert "read-only: start it with `hyperscan dashboard --allow-writes`" in text
    assert study_state(journal) == before


def test_another_host_name_is_refused(server: Server) -> None:
    """DNS rebinding: a page of evil.example, its name pointed at 127.0.0.1, reads nothing."""
    for host, name in [
        ("evil.example", "evil.example"),
        (f"evil.example:{server.port}", "evil.example"),
        ("127.0.0.1.nip.io", "127.0.0.1.nip.io"),
    ]:
        status, _, text = server.request("GET", "/api/studies", Host=host)
        assert status == 403, host
        assert f"`hyperscan dashboard --allowed-host {name}`" in text
        assert STUDY not in text
    for host in (f"localhost:{server.port}", f"127.0.0.1:{server.port}", "LOCALHOST"):
        assert server.request("GET", "/api/studies", Host=host)[0] == 200, host


@pytest.fixture(scope="module")
def open_server(
    journal: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Server, Path]]:
    """A dashboard with writes allowed, another host name and a token, on a copy of the
    journal (it is written to)."""
    folder = tmp_path_factory.mktemp("dashboard-open")
    writable = folder / "scans.journal"
    shutil.copy(journal, writable)
    with serving(
        writable,
        folder / "server.log",
        "127.0.0.1",
        "--allow-writes",
        "--allowed-host",
        "node17.cluster",
        token=TOKEN,
    ) as running:
        yield running, writable


def test_the_token_is_required_and_never_printed(open_server: tuple[Server, Path]) -> None:
    server, _ = open_server
    assert server.request("GET", "/api/studies")[0] == 401
    status, _, text = server.request("GET", "/api/studies", Authorization="Bearer wrong")
    assert status == 401 and "needs its token" in text
    assert server.request("GET", "/api/studies", Authorization=f"Bearer {TOKEN}")[0] == 200
    assert server.request("GET", f"/api/studies?token={TOKEN}")[0] == 200  # a script's call
    assert TOKEN not in server.output()
    assert "(writes allowed, token required; Ctrl-C to stop)" in server.output()


def test_the_token_in_the_address_becomes_a_cookie(open_server: tuple[Server, Path]) -> None:
    server, _ = open_server
    status, headers, _ = server.request("GET", f"/dashboard?token={TOKEN}")
    assert status == 303 and headers["Location"] == "/dashboard"  # gone from the address bar
    cookie = headers["Set-Cookie"].split(";")[0]
    assert "HttpOnly" in headers["Set-Cookie"] and "SameSite=Strict" in headers["Set-Cookie"]
    assert server.request("GET", "/api/studies", Cookie=cookie)[0] == 200
    assert server.request("GET", "/api/studies", Cookie=cookie + "x")[0] == 401


def test_writes_pass_when_allowed_but_not_from_another_site(
    open_server: tuple[Server, Path],
) -> None:
    server, writable = open_server
    auth = {"Authorization": f"Bearer {TOKEN}"}
    new = {"study_name": "added", "directions": ["minimize"]}
    status, _, text = server.request(
        "POST", "/api/studies", new, Origin="https://evil.example", **auth
    )
    assert status == 403 and "another site" in text
    status, _, text = server.request("POST", "/api/studies", new, Origin=server.url, **auth)
    assert status == 201, text
    assert [name for name, _ in study_state(writable)] == [STUDY, "added"]


def test_an_allowed_host_name_is_served(open_server: tuple[Server, Path]) -> None:
    server, _ = open_server
    auth = {"Authorization": f"Bearer {TOKEN}"}
    status, _, _ = server.request("GET", "/api/studies", Host="node17.cluster:8080", **auth)
    assert status == 200
    assert server.request("GET", "/api/studies", Host="node18.cluster", **auth)[0] == 403


def rendered(chromium: str, server: Server, route: str) -> list[str]:
    """The API calls of a dashboard page loaded in headless Chromium; the page's errors and
    any refusal of its calls (the server logs each one) fail the test."""
    logged = len(server.output())
    with Chromium(chromium) as browser:
        page = browser.check(server.url + route)
    assert page.errors == [], page.errors
    assert page.screenshot.startswith(b"\x89PNG")
    refused = [line for line in server.output()[logged:].splitlines() if '" 40' in line]
    assert refused == []
    return [r for r in page.requests if "/api/" in r]


def test_the_read_only_dashboard_renders(server: Server, chromium: str) -> None:
    """The study list and a study's page: viewing them writes nothing (no call refused)."""
    assert any(r.endswith("/api/studies") for r in rendered(chromium, server, "/dashboard"))
    number = study_id(server)
    calls = rendered(chromium, server, f"/dashboard/studies/{number}")
    assert f"{server.url}/api/studies/{number}?after=0" in calls, calls


def test_the_dashboard_renders_with_its_token(
    open_server: tuple[Server, Path], chromium: str
) -> None:
    """Opened once with ?token=, the page's own API calls pass on the cookie."""
    server, _ = open_server
    calls = rendered(chromium, server, f"/dashboard?token={TOKEN}")
    assert any(r.endswith("/api/studies") for r in calls)
    assert all(TOKEN not in r for r in calls)


def raw_request(server: Server, line: str) -> str:
    """The reply to ``line`` sent as it is (a malformed request line)."""
    with socket.create_connection((server.host, server.port), timeout=10) as connection:
        connection.sendall(f"{line}\r\nHost: 127.0.0.1\r\n\r\n".encode())
        return connection.makefile("rb").read().decode()


def test_no_log_line_shows_the_token(open_server: tuple[Server, Path]) -> None:
    """A refused request is logged with its request line: the token in its address, however
    spelled, is '***' there, as in the lines of a malformed request."""
    server, _ = open_server
    logged = len(server.output())
    spelled = TOKEN.replace("s", "%73")  # the same token for the guard, escaped
    assert server.request("GET", f"/api/nothing?token={TOKEN}")[0] == 404
    assert server.request("GET", f"/api/nothing?a=1&%74oken={spelled}")[0] == 404
    assert server.request("GET", f"/api/{spelled}", Authorization=f"Bearer {TOKEN}")[0] == 404
    new = {"study_name": "refused", "directions": ["minimize"]}
    status, _, _ = server.request(
        "POST", f"/api/studies?token={TOKEN}", new, Origin="https://evil.example"
    )
    assert status == 403
    assert "Error code: 400" in raw_request(server, f"GET /?token={TOKEN} HTTP/1.1 extra")

    def all_logged() -> str:
        # The server logs a request after its reply is sent: the reply alone does not say so.
        log = server.output()[logged:]
        counts = (log.count('" 404 '), log.count('" 403 '), log.count('" 400 '))
        return log if counts == (3, 1, 1) else ""

    log = wait_for(all_logged, timeout=30, what="the 5 requests' log lines", context=server.output)
    assert "?token=*** " in log and "&%74oken=*** " in log and "/api/*** " in log
    assert TOKEN not in log and spelled not in log, log
