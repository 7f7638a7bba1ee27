# SPDX-License-Identifier: GPL-3.0-or-later
"""A load simulator for the scan's storage (issue #55, item 8): N simulated workers, as
threads of this one process or of ``--processes P`` forked ones, each with its own storage
(its own connection pool, as a real worker process has), run through the real trial loop
(scan/_scheduler.py's ``run_trials``), the real budget gate, heartbeats, stale-trial failing
and retry schedule (``WorkerLimits``). Only the fit and its score are stood in for: a
trial's slot is held for a drawn time (exponential, mean --trial-seconds, capped at 4x) and
told a drawn value. No fit runs; TensorFlow is imported (``hyperscan.fit`` imports it) but
never used.

Storages: PostgreSQL (each worker an ``open_storage`` of its own), or Optuna's own gRPC
storage proxy (``optuna.storages.run_grpc_proxy_server``) in a subprocess on a loopback port
in front of hyperscan's PostgreSQL storage, the workers ``GrpcStorageProxy`` clients, or
PgBouncer (Debian's ``pgbouncer``, transaction pooling, ``--pool-size`` server connections) on
a loopback port, the workers' storages connected through it; the study is created directly.

Every run makes a fresh scratch database on 127.0.0.1 (or uses --url), stops by itself at the
budget or --duration-limit, and prints what it measured as JSON. ``--prefill N`` first adds N
finished trials (drawn parameters and values, the simulated trials' attributes), as a study
that a long scan has grown to: what an ask costs at 5 000 or 20 000 trials is measured without
running them; they count in the budget (--trials), as a study's earlier trials do; a fresh
process then reads the study as a starting worker does, for the time and the memory of
Optuna's cache of it (``study_read``). Threads share one GIL: the sampler's CPU time is
serialised across the workers of one process, as it is not across worker processes
(--processes, as many as the machine has cores to give).

    PYTHONPATH=. python benchmarks/load_sim.py --workers 50 --slots 8 --trials 1000
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import multiprocessing
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import warnings
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import optuna
import sqlalchemy
from optuna.trial import TrialState

from hyperscan.scan._lifecycle import Ending
from hyperscan.scan._limits import WorkerLimits
from hyperscan.scan._scheduler import run_trials
from hyperscan.scan._status import retries
from hyperscan.scan.storage import (
    describe_error,
    gate_takes,
    load_study,
    open_storage,
    retrying,
    storage_probe,
)
from hyperscan.scan.storage._internals import backend_storage, study_storage

ADMIN_DSN = "host=127.0.0.1 port=5432 user=postgres dbname=postgres"


# --- the stand-ins: the fit and its score ----------------------------------------------------

#: The simulated search space: four parameters, as a small scan space makes them.
SPACE = {
    "lr": optuna.distributions.FloatDistribution(1e-5, 1e-1, log=True),
    "width": optuna.distributions.IntDistribution(8, 64),
    "dropout": optuna.distributions.FloatDistribution(0.0, 0.3),
    "activation": optuna.distributions.CategoricalDistribution(["tanh", "gelu", "sigmoid"]),
}
#: The attributes a simulated trial records when it finishes, as a real trial records a few.
RECORDED = ("chi2_train", "chi2_valid", "seconds")


def drawn_value(params: dict[str, Any], rng: np.random.Generator) -> float:
    """A trial's value: smooth in its parameters, with noise, so that TPE has something to
    learn."""
    return float((np.log10(params["lr"]) + 3) ** 2 + params["dropout"] + rng.normal(0, 0.1))


def drawn(distribution: optuna.distributions.BaseDistribution, rng: np.random.Generator) -> Any:
    """A value of one of SPACE's distributions, uniform (in log where it is log)."""
    if isinstance(distribution, optuna.distributions.CategoricalDistribution):
        return distribution.choices[rng.integers(len(distribution.choices))]
    if isinstance(distribution, optuna.distributions.IntDistribution):
        return int(rng.integers(distribution.low, distribution.high + 1))
    if distribution.log:
        return float(np.exp(rng.uniform(np.log(distribution.low), np.log(distribution.high))))
    return float(rng.uniform(distribution.low, distribution.high))


#: A fresh process (no TensorFlow) reads the study ``argv[2]`` at ``argv[1]`` as a starting
#: worker's first ask does, into Optuna's cache; prints the seconds and the memory it took.
READ_STUDY = """
import json, sys, time
from hyperscan.scan._limits import MIB, resident_bytes
from hyperscan.scan.storage import load_study, open_storage
study = load_study(open_storage(sys.argv[1]), sys.argv[2])
before, started = resident_bytes(), time.perf_counter()
trials = study.get_trials(deepcopy=False)
seconds = time.perf_counter() - started
again = time.perf_counter()
study.get_trials(deepcopy=False)
print(json.dumps({"trials": len(trials), "seconds": round(seconds, 2),
                  "again_seconds": round(time.perf_counter() - again, 3),
                  "memory_mib": round((resident_bytes() - before) / MIB, 1)}))
"""


def read_in_fresh_process(url: str, name: str) -> dict[str, Any]:
    """What a worker process that starts on the study spends filling Optuna's cache with it."""
    read = subprocess.run(
        [sys.executable, "-c", READ_STUDY, url, name], capture_output=True, text=True, check=True
    )
    return json.loads(read.stdout)


def prefill(study: optuna.Study, count: int, rng: np.random.Generator) -> float:
    """``count`` finished trials added to ``study`` (drawn from SPACE, values and attributes as
    simulated trials record them); the seconds it took."""
    started = time.perf_counter()
    trials = []
    for _ in range(count):
        params = {name: drawn(distribution, rng) for name, distribution in SPACE.items()}
        attrs = {"worker": "prefill"} | {key: float(rng.random()) for key in RECORDED}
        trials.append(
            optuna.trial.create_trial(
                params=params,
                distributions=SPACE,
                value=drawn_value(params, rng),
                user_attrs=attrs,
            )
        )
    study.add_trials(trials)
    return time.perf_counter() - started


class SimObjective:
    """Objective's two halves without a runcard: four drawn values (the sampler's work, as a
    small search space makes it), a handful of attributes written, a drawn value told."""

    problem = None

    def __init__(self, stop: threading.Event, rng: np.random.Generator, probe: Probe) -> None:
        self.stop = stop
        self.rng = rng
        self.probe = probe

    def start(self, trial: optuna.Trial) -> tuple[dict, None]:
        trial.set_user_attr("worker", threading.current_thread().name)
        lr, width, dropout = SPACE["lr"], SPACE["width"], SPACE["dropout"]
        params = {
            "lr": trial.suggest_float("lr", lr.low, lr.high, log=True),
            "width": trial.suggest_int("width", width.low, width.high),
            "dropout": trial.suggest_float("dropout", dropout.low, dropout.high),
            "activation": trial.suggest_categorical("activation", SPACE["activation"].choices),
        }
        self.probe.asked(trial.number)  # the sampler's time for this trial, ask to last suggest
        return params, None

    def finish(self, trial, params, result, monitor, trash_reason=None):
        if result is None:
            return Ending.TRASHED, None
        for key in RECORDED:
            trial.set_user_attr(key, float(self.rng.random()))
        return Ending.COMPLETE, [drawn_value(params, self.rng)]


class SimRunner:
    """The runner of S slots: a placed trial ends after its drawn hold time."""

    def __init__(self, slots: int, mean: float, rng: np.random.Generator) -> None:
        self.slots = slots
        self.mean = mean
        self.rng = rng
        self.placed: dict[Any, float] = {}  # key -> monotonic end

    @property
    def free_slots(self) -> int:
        return self.slots - len(self.placed)

    def place(self, key, card, on_sync=None) -> None:
        hold = min(self.rng.exponential(self.mean), 4 * self.mean)
        self.placed[key] = time.monotonic() + hold

    def drop(self, key) -> None:
        self.placed.pop(key, None)

    def advance(self) -> list:
        if not self.placed:
            return []
        first = min(self.placed.values())
        time.sleep(max(0.0, first - time.monotonic()))
        now = time.monotonic()
        ended = [key for key, end in self.placed.items() if end <= now]
        for key in ended:
            del self.placed[key]
        return [(key, True) for key in ended]  # any non-None result: scored by SimObjective


# --- what is measured -------------------------------------------------------------------------


@dataclass
class Probe:
    """One worker's timings; lists appended from its own thread only."""

    ask: list[float] = field(default_factory=list)
    tell: list[float] = field(default_factory=list)
    # (trial number, wall seconds, this thread's CPU seconds): the wall time includes waits for
    # the GIL that the other simulated workers hold, the CPU time is the sampler's own cost
    sampler: list[tuple[int, float, float]] = field(default_factory=list)
    gate_wait: list[float] = field(default_factory=list)  # lock taken and trials counted
    _sampling: float = 0.0
    _sampling_cpu: float = 0.0

    def asked(self, number: int) -> None:
        self.sampler.append((number, self._sampling, self._sampling_cpu))
        self._sampling = self._sampling_cpu = 0.0

    def instrument(self, study: optuna.Study) -> None:
        ask, tell = study.ask, study.tell

        def timed_ask(*args, **kwargs):
            self._sampling = self._sampling_cpu = 0.0
            started = time.perf_counter()
            try:
                return ask(*args, **kwargs)
            finally:
                self.ask.append(time.perf_counter() - started)

        def timed_tell(*args, **kwargs):
            started = time.perf_counter()
            try:
                return tell(*args, **kwargs)
            finally:
                self.tell.append(time.perf_counter() - started)

        study.ask, study.tell = timed_ask, timed_tell
        sampler = study.sampler
        names = ("before_trial", "infer_relative_search_space", "sample_relative")
        for name in (*names, "sample_independent"):  # the sampler's work, wherever it is done
            setattr(sampler, name, self._timed(getattr(sampler, name)))
        backend = backend_storage(study_storage(study))
        if hasattr(backend, "_counted"):  # the budget's gate (not through the gRPC proxy)
            counted = backend._counted

            @contextlib.contextmanager
            def timed_counted(study_id: int) -> Iterator[Any]:
                started = time.perf_counter()
                with counted(study_id) as counts:
                    self.gate_wait.append(time.perf_counter() - started)
                    yield counts

            backend._counted = timed_counted

    def _timed(self, method):
        def timed(*args, **kwargs):
            started, cpu = time.perf_counter(), time.thread_time()
            try:
                return method(*args, **kwargs)
            finally:
                self._sampling += time.perf_counter() - started
                self._sampling_cpu += time.thread_time() - cpu

        return timed


class PostgresWatch:
    """Every half second: the database's connections, and backends waiting on a lock (the
    gate's advisory lock), and the CPU time of each postgres process from /proc (a worker's
    backend exits with its connection, so it is read while it lives); commits, start to end."""

    def __init__(self, url: str) -> None:
        import psycopg2

        parsed = sqlalchemy.engine.make_url(url)
        self.database = parsed.database
        self.connection = psycopg2.connect(
            host=parsed.host, port=parsed.port or 5432, user=parsed.username,
            password=parsed.password, dbname="postgres", connect_timeout=3,
        )  # fmt: skip
        self.connection.autocommit = True
        self.peak_connections = 0
        self.peak_lock_waiters = 0
        self.lock_wait_samples = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="pg-watch", daemon=True)

    def _query(self, sql: str) -> Any:
        with self.connection.cursor() as cursor:
            cursor.execute(sql, {"db": self.database})
            return cursor.fetchone()

    def _commits(self) -> int:
        return self._query("SELECT xact_commit FROM pg_stat_database WHERE datname = %(db)s")[0]

    def __enter__(self) -> PostgresWatch:
        self.cpu0 = postgres_cpu()
        self.cpu = dict(self.cpu0)
        self.commits0, self.t0 = self._commits(), time.monotonic()
        self._thread.start()
        return self

    def _watch(self) -> None:
        while not self._stop.wait(0.5):
            total, waiting = self._query(
                "SELECT count(*), count(*) FILTER (WHERE wait_event_type = 'Lock')"
                " FROM pg_stat_activity WHERE datname = %(db)s AND pid <> pg_backend_pid()"
            )
            self.samples += 1
            self.cpu.update(postgres_cpu())
            self.peak_connections = max(self.peak_connections, total)
            self.peak_lock_waiters = max(self.peak_lock_waiters, waiting)
            self.lock_wait_samples += waiting > 0

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        wall = time.monotonic() - self.t0
        time.sleep(1.1)  # PostgreSQL 15 flushes a backend's counts within a second
        self.commits = self._commits() - self.commits0
        self.tps = self.commits / wall
        self.cpu.update(postgres_cpu())
        used = sum(cpu - self.cpu0.get(pid, 0.0) for pid, cpu in self.cpu.items())
        self.postgres_cores = used / wall
        self.connection.close()


def postgres_cpu() -> dict[int, float]:
    """CPU seconds of each postgres process on this machine (user + system), by process id."""
    ticks = os.sysconf("SC_CLK_TCK")
    seen = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as handle:
                fields = handle.read().rsplit(")", 1)
            if "(postgres" not in fields[0]:
                continue
            parts = fields[1].split()
            seen[int(pid)] = (int(parts[11]) + int(parts[12])) / ticks
        except (OSError, IndexError):
            continue
    return seen


# --- a run ------------------------------------------------------------------------------------


def percentiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"n": 0, "p50_ms": None, "p95_ms": None, "p99_ms": None}
    ms = np.asarray(values) * 1e3
    p50, p95, p99 = np.percentile(ms, [50, 95, 99])
    return {"n": len(values), "p50_ms": round(p50, 2), "p95_ms": round(p95, 2),
            "p99_ms": round(p99, 2)}  # fmt: skip


@contextlib.contextmanager
def scratch_database() -> Iterator[str]:
    import psycopg2

    name = f"sim_{uuid.uuid4().hex[:10]}"

    def admin(statement: str) -> None:
        connection = psycopg2.connect(ADMIN_DSN, connect_timeout=3)
        try:
            connection.autocommit = True
            with connection.cursor() as cursor:
                cursor.execute(statement)
        finally:
            connection.close()

    admin(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql+psycopg2://postgres@127.0.0.1:5432/{name}"
    finally:
        admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def grpc_proxy(url: str, heartbeat: int, grace: int, threads: int) -> Iterator[tuple[int, Any]]:
    """Optuna's gRPC proxy in a subprocess on a loopback port, in front of ``url``."""
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--serve-proxy",
            url,
            str(port),
            str(heartbeat),
            str(grace),
            str(threads),
        ],  # fmt: skip
        env=os.environ | {"PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        wait_for_port(port, process, "the gRPC proxy")
        yield port, process
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class PgBouncer:
    """PgBouncer on a loopback port in front of ``url``'s server, transaction pooling with
    ``pool_size`` server connections per database: :attr:`url` is the URL through it, and
    :meth:`restart` kills it and starts it again on the same port, as a crashed pooler that a
    supervisor restarts. ``options`` (hyperscan's statement_timeout) is a startup parameter
    PgBouncer 1.18 cannot pass on: it is ignored, and the client-side deadlines remain."""

    def __init__(self, url: str, pool_size: int) -> None:
        binary = pgbouncer_binary()
        if binary is None:
            raise RuntimeError("pgbouncer is not installed (Debian: apt-get install pgbouncer)")
        parsed = sqlalchemy.engine.make_url(url)
        self.port = free_port()
        self.url = parsed.set(port=self.port).render_as_string(hide_password=False)
        self.folder = tempfile.mkdtemp(prefix="pgbouncer-")
        root = os.geteuid() == 0
        if root:  # PgBouncer refuses to run as root: it runs as postgres, and logs here
            shutil.chown(self.folder, "postgres")
        config = os.path.join(self.folder, "pgbouncer.ini")
        with open(os.path.join(self.folder, "users.txt"), "w") as users:
            users.write(f'"{parsed.username}" ""\n')
        with open(config, "w") as handle:
            handle.write(
                "[databases]\n"
                f"* = host={parsed.host} port={parsed.port or 5432}\n"
                "[pgbouncer]\n"
                f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
                f"auth_type = trust\nauth_file = {self.folder}/users.txt\n"
                f"pool_mode = transaction\ndefault_pool_size = {pool_size}\n"
                "max_client_conn = 5000\nignore_startup_parameters = options\n"
                f"logfile = {self.folder}/pgbouncer.log\n"
            )
        # -q: its log to the file only
        self.command = [binary, "-q", *(["-u", "postgres"] if root else []), config]
        self.restarts = 0
        self._cpu_before = 0.0  # of the processes restarts replaced
        self.process = self._start()

    def _start(self) -> subprocess.Popen:
        process = subprocess.Popen(self.command)
        wait_for_port(self.port, process, "PgBouncer")
        return process

    def cpu(self) -> float:
        """Seconds of CPU its processes have used."""
        return self._cpu_before + process_cpu(self.process.pid)

    def restart(self, down: float) -> None:
        """Killed (SIGKILL: every client and server connection cut), started ``down`` seconds
        later."""
        self._cpu_before += process_cpu(self.process.pid)
        self.process.kill()
        self.process.wait()
        time.sleep(down)
        self.process = self._start()
        self.restarts += 1

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(10)
        shutil.rmtree(self.folder, ignore_errors=True)


def pgbouncer_binary() -> str | None:
    """Debian installs it in /usr/sbin, which a user's PATH may leave out."""
    found = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    return found if os.access(found, os.X_OK) else None


def wait_for_port(port: int, process: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start")
        time.sleep(0.2)


def serve_proxy(url: str, port: int, heartbeat: int, grace: int, threads: int) -> None:
    from concurrent.futures import ThreadPoolExecutor

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
    storage = open_storage(url, heartbeat_interval=heartbeat, grace_period=grace)
    optuna.storages.run_grpc_proxy_server(
        storage, host="127.0.0.1", port=port, thread_pool=ThreadPoolExecutor(threads)
    )


def process_cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as handle:
        parts = handle.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


class WarningCount(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0
        self.first: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1
        if len(self.first) < 5:
            self.first.append(record.getMessage()[:200])


@dataclass
class Fleet:
    """What the simulated workers of one process did."""

    probes: list[Probe]
    errors: list[str]
    alive: int  # still running at the hard end
    cpu: float  # the process's CPU seconds while they ran
    warnings: int
    warning_samples: list[str]

    @classmethod
    def from_dict(cls, fields: dict[str, Any]) -> Fleet:
        return cls(**{**fields, "probes": [Probe(**probe) for probe in fields["probes"]]})

    @classmethod
    def failed(cls, error: str, alive: int = 0) -> Fleet:
        """A process whose workers could not report: what went wrong, and how many of its
        workers it leaves running."""
        return cls([], [error[:300]], alive, 0.0, 0, [])


@dataclass
class Setting:
    """What every simulated worker of a run is given."""

    url: str  # the workers' storage URL (through PgBouncer, if it is there)
    study: str
    storage: str
    endpoint: int | None  # the gRPC proxy's port
    trials: int
    slots: int
    duration_limit: float
    trial_seconds: float
    sampler: str
    heartbeat: int
    grace: int
    seed: int

    @property
    def hard_end_s(self) -> float:
        """Seconds after the start when the run is ended, whatever runs."""
        return self.duration_limit + 8 * self.trial_seconds + 30


def run_fleet(numbers: list[int], setting: Setting) -> Fleet:
    """Simulated workers ``numbers`` as threads of this process, until they end or the hard
    end."""
    logged = WarningCount()
    logging.getLogger().addHandler(logged)
    stop = threading.Event()
    probes = {number: Probe() for number in numbers}
    errors: list[str] = []

    def worker(number: int) -> None:
        rng = np.random.default_rng([setting.seed, number])
        try:
            if setting.storage == "grpc":
                own = optuna.storages.GrpcStorageProxy(host="127.0.0.1", port=setting.endpoint)
                study = load_study(own, setting.study)
            else:  # a start-up in an outage waited out, as a worker's is
                own = retrying(
                    lambda: open_storage(
                        setting.url,
                        heartbeat_interval=setting.heartbeat,
                        grace_period=setting.grace,
                    ),
                    "worker start-up",
                    setting.url,
                )
                study = retrying(
                    lambda: load_study(own, setting.study),
                    "worker start-up",
                    setting.url,
                    probe=storage_probe(own),
                )
            worker_seed = int(rng.integers(2**31))
            study.sampler = (
                optuna.samplers.RandomSampler(seed=worker_seed)
                if setting.sampler == "random"
                else optuna.samplers.TPESampler(seed=worker_seed, constant_liar=True)
            )
            probes[number].instrument(study)
            limits = WorkerLimits(
                study, setting.trials, stop, timeout=setting.duration_limit, url=setting.url
            )
            objective = SimObjective(stop, rng, probes[number])
            gate_takes(study, limits.room_for_one)  # a no-op on a GrpcStorageProxy
            runner = SimRunner(setting.slots, setting.trial_seconds, rng)
            try:
                run_trials(study, objective, runner, limits)
            finally:
                gate_takes(study, None)
                if setting.storage == "grpc":
                    own.close()
                else:
                    own.engine.dispose()
        except Exception as error:  # counted, and the run goes on
            cause = describe_error(error, setting.url)  # Optuna's own words hide it
            errors.append(f"worker {number}: {type(error).__name__}: {cause}"[:300])

    threads = [
        threading.Thread(target=worker, args=(n,), name=f"w{n}", daemon=True) for n in numbers
    ]
    cpu0 = time.process_time()
    hard_end = time.monotonic() + setting.hard_end_s
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, hard_end - time.monotonic()))
    alive = sum(thread.is_alive() for thread in threads)
    stop.set()
    logging.getLogger().removeHandler(logged)
    return Fleet(
        list(probes.values()), errors, alive, time.process_time() - cpu0, logged.count, logged.first
    )


class ForkedFleets:
    """Simulated workers in ``len(chunks)`` processes, forked before the measurement starts
    (with nothing but this thread running), each running its chunk's workers as threads once
    :meth:`start` says go: worker processes, as a cluster has, each with its own GIL."""

    def __init__(self, chunks: list[list[int]], setting: Setting) -> None:
        context = multiprocessing.get_context("fork")
        self.go = context.Event()
        self.chunks = chunks
        self.setting = setting
        self.pipes, self.processes = [], []
        for chunk in chunks:
            receive, send = context.Pipe(duplex=False)
            process = context.Process(target=self._serve, args=(send, chunk), daemon=True)
            process.start()
            send.close()
            self.pipes.append(receive)
            self.processes.append(process)

    def _serve(self, send: Any, chunk: list[int]) -> None:
        try:
            self.go.wait()
            fleet = run_fleet(chunk, self.setting)
        except BaseException as error:  # said in the result, not lost with the process
            fleet = Fleet.failed(f"process: {type(error).__name__}: {error}")
        send.send(asdict(fleet))
        send.close()
        os._exit(0)  # none of the parent's objects finalised here (its connections stay open)

    def start(self) -> None:
        self.go.set()

    def join(self) -> list[Fleet]:
        """Each process's fleet, once it ends (a process silent past the hard end: its
        workers counted as still running, and it is killed)."""
        deadline = time.monotonic() + self.setting.hard_end_s + 30
        fleets = []
        for receive, process, chunk in zip(self.pipes, self.processes, self.chunks, strict=True):
            if receive.poll(max(0.0, deadline - time.monotonic())):
                fleets.append(Fleet.from_dict(receive.recv()))
            else:
                fleets.append(Fleet.failed(f"process {process.pid}: no answer", len(chunk)))
            process.join(5)
            if process.is_alive():
                process.kill()
                process.join()
        return fleets


def simulate(
    url: str,
    *,
    workers: int,
    slots: int,
    trials: int,
    storage: str = "postgres",
    duration_limit: float = 120.0,
    trial_seconds: float = 1.0,
    sampler: str = "tpe",
    heartbeat: int = 5,
    grace: int = 30,
    proxy_threads: int = 10,
    pool_size: int = 20,
    seed: int = 0,
    prefilled: int = 0,
    restart_proxy_at: int | None = None,
    proxy_down: float = 2.0,
    processes: int = 0,
) -> dict[str, Any]:
    """One run against the empty database at ``url`` (``prefilled`` finished trials added
    first), PgBouncer killed once the workers have told ``restart_proxy_at`` trials and
    started again ``proxy_down`` seconds later, the workers threads of this process or spread
    over ``processes`` forked ones; what it measured. The restart waits for a count of trials,
    not a time, so that it comes mid-scan however slowly the workers start."""
    if restart_proxy_at is not None and storage != "pgbouncer":
        raise ValueError("only PgBouncer is restarted (--storage pgbouncer)")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
    admin = open_storage(url, create=True, heartbeat_interval=heartbeat, grace_period=grace)
    name = f"sim-{uuid.uuid4().hex[:8]}"
    created = optuna.create_study(study_name=name, storage=admin, direction="minimize")
    prefill_seconds = prefill(created, prefilled, np.random.default_rng([seed, 2**31]))
    study_read = read_in_fresh_process(url, name) if prefilled else None
    with contextlib.ExitStack() as stack:
        endpoint, proxy_cpu, bouncer = None, None, None  # the gRPC proxy's port
        if storage == "grpc":
            endpoint, proxy_process = stack.enter_context(
                grpc_proxy(url, heartbeat, grace, proxy_threads)
            )
            proxy_cpu = lambda: process_cpu(proxy_process.pid)  # noqa: E731
        elif storage == "pgbouncer":
            bouncer = PgBouncer(url, pool_size)
            stack.callback(bouncer.close)
            proxy_cpu = bouncer.cpu
        setting = Setting(
            url=bouncer.url if bouncer else url, study=name, storage=storage, endpoint=endpoint,
            trials=trials, slots=slots, duration_limit=duration_limit,
            trial_seconds=trial_seconds, sampler=sampler, heartbeat=heartbeat, grace=grace,
            seed=seed,
        )  # fmt: skip
        numbers = list(range(workers))
        chunks = [numbers[i::processes] for i in range(processes)]
        forked = ForkedFleets(chunks, setting) if processes else None
        told_at_restart: list[int] = []
        ended = threading.Event()

        def restart_proxy() -> None:
            while not ended.wait(0.05):
                told = len(created.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))
                if told - prefilled >= restart_proxy_at:
                    told_at_restart.append(told - prefilled)
                    bouncer.restart(proxy_down)
                    return

        proxy_cpu0 = proxy_cpu() if proxy_cpu else 0.0
        with PostgresWatch(url) as watch:
            started = time.monotonic()
            if restart_proxy_at is not None:
                restart = threading.Thread(target=restart_proxy, name="restart PgBouncer")
                restart.start()
                stack.callback(restart.join)
                stack.callback(ended.set)
            if forked is None:
                fleets = [run_fleet(numbers, setting)]
            else:
                forked.start()
                fleets = forked.join()
            wall = time.monotonic() - started
        proxy_cores = (proxy_cpu() - proxy_cpu0) / wall if proxy_cpu else None
    probes = [probe for fleet in fleets for probe in fleet.probes]
    errors = [error for fleet in fleets for error in fleet.errors]
    final = optuna.load_study(study_name=name, storage=admin).get_trials(deepcopy=False)
    states = {state.name: 0 for state in TrialState}
    for trial in final:
        states[trial.state.name] += 1
    finished = states["COMPLETE"] + states["PRUNED"]
    copied = retries(final)  # each failed trial queued again, by its number
    without_copy = [
        t.number for t in final if t.state == TrialState.FAIL and t.number not in copied
    ]
    samples = sorted(s for probe in probes for s in probe.sampler)
    tenth = max(1, len(samples) // 10)
    gate = [w for probe in probes for w in probe.gate_wait]
    admin.engine.dispose()
    return {
        "storage": storage,
        "workers": workers,
        "slots": slots,
        "trials_budget": trials,
        "trials_prefilled": prefilled,
        "prefill_s": round(prefill_seconds, 1),
        # a fresh process reading the prefilled study into Optuna's cache, as a worker's
        # first ask does: seconds, and the memory the cache holds
        "study_read": study_read,
        "trials_finished": finished,
        # exact: the budget reached, not passed; a run the time limit ended short of it
        # shows "budget_reached": false and must still show "over_budget": 0
        "exact": finished == trials,
        "budget_reached": finished >= trials,
        "over_budget": max(0, finished - trials),
        "states": {k: v for k, v in states.items() if v},
        # failed trials (cut short by an outage) with no queued copy: lost to the scan
        "failed_without_copy": len(without_copy),
        "errors": len(errors),
        "error_samples": errors[:3],
        "warnings": sum(fleet.warnings for fleet in fleets),
        "warning_samples": [w for fleet in fleets for w in fleet.warning_samples][:3],
        "workers_still_running_at_hard_end": sum(fleet.alive for fleet in fleets),
        "ask": percentiles([a for probe in probes for a in probe.ask]),
        # each worker's first ask apart from its later ones
        "first_ask_per_worker": percentiles([probe.ask[0] for probe in probes if probe.ask]),
        "later_asks": percentiles([a for probe in probes for a in probe.ask[1:]]),
        "tell": percentiles([t for probe in probes for t in probe.tell]),
        "sampler_ms_per_ask_first_10pct": round(
            1e3 * statistics.mean(s[1] for s in samples[:tenth]), 2) if samples else None,
        "sampler_ms_per_ask_last_10pct": round(
            1e3 * statistics.mean(s[1] for s in samples[-tenth:]), 2) if samples else None,
        "sampler_cpu_ms_per_ask_first_10pct": round(
            1e3 * statistics.mean(s[2] for s in samples[:tenth]), 2) if samples else None,
        "sampler_cpu_ms_per_ask_last_10pct": round(
            1e3 * statistics.mean(s[2] for s in samples[-tenth:]), 2) if samples else None,
        "gate": percentiles(gate),
        "gate_seconds_total": round(sum(gate), 2),
        "peak_connections": watch.peak_connections,
        "peak_lock_waiters": watch.peak_lock_waiters,
        "samples_with_lock_waiters": f"{watch.lock_wait_samples}/{watch.samples}",
        "commits": watch.commits,
        "tps": round(watch.tps, 1),
        "postgres_cores": round(watch.postgres_cores, 2),
        "processes": processes or 1,
        "simulator_cores": round(sum(fleet.cpu for fleet in fleets) / wall, 2),
        "proxy_cores": None if proxy_cores is None else round(proxy_cores, 2),
        "proxy_restarts": bouncer.restarts if bouncer else 0,
        # trials told before the restart: fewer than the budget if it came mid-scan
        "told_at_restart": told_at_restart[0] if told_at_restart else None,
        "trials_per_second": round((finished - prefilled) / wall, 2),
        "wall_s": round(wall, 1),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=10)
    parser.add_argument("--slots", type=int, default=1)
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--storage", choices=["postgres", "grpc", "pgbouncer"], default="postgres")
    parser.add_argument("--duration-limit", type=float, default=120.0, help="seconds")
    parser.add_argument("--trial-seconds", type=float, default=1.0, help="mean hold time")
    parser.add_argument("--sampler", choices=["tpe", "random"], default="tpe")
    parser.add_argument("--heartbeat", type=int, default=5, help="heartbeat interval, s")
    parser.add_argument("--grace", type=int, default=30, help="stale after, s")
    parser.add_argument("--proxy-threads", type=int, default=10, help="gRPC server threads")
    parser.add_argument("--pool-size", type=int, default=20, help="PgBouncer's server connections")
    parser.add_argument(
        "--restart-proxy-at", type=int, help="kill PgBouncer once so many trials are told"
    )
    parser.add_argument("--proxy-down", type=float, default=2.0, help="seconds until restarted")
    parser.add_argument(
        "--processes", type=int, default=0, help="fork the workers into so many processes"
    )
    parser.add_argument("--url", help="an empty PostgreSQL database (default: a scratch one)")
    parser.add_argument(
        "--prefill", type=int, default=0, help="finished trials in the study before the workers"
    )
    args = parser.parse_args(argv)
    if args.prefill >= args.trials:
        parser.error(f"--prefill {args.prefill} leaves no trial of --trials {args.trials} to run")
    options = dict(
        workers=args.workers, slots=args.slots, trials=args.trials, storage=args.storage,
        duration_limit=args.duration_limit, trial_seconds=args.trial_seconds,
        sampler=args.sampler, heartbeat=args.heartbeat, grace=args.grace,
        proxy_threads=args.proxy_threads, pool_size=args.pool_size, prefilled=args.prefill,
        restart_proxy_at=args.restart_proxy_at, proxy_down=args.proxy_down,
        processes=args.processes,
    )  # fmt: skip
    if args.url:
        result = simulate(args.url, **options)
    else:
        with scratch_database() as url:
            result = simulate(url, **options)
    print(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "--serve-proxy":
        url, port, heartbeat, grace, threads = sys.argv[2:]
        serve_proxy(url, int(port), int(heartbeat), int(grace), int(threads))
    else:
        main()
