"""Compiled training loops are cached on disk: a rerun loads them and gives the same fit."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import time

import pytest
import yaml

from hyperscan import _xla_cache
from hyperscan._tensorflow import (
    XLA_CACHE_FLAG,
    cpu_description,
    machine_key,
    xla_cache_directory,
)

CARD = {
    "data": {"closure": {"size": "tiny", "level": 1}},
    "replicas": 2,
    "architecture": {"nodes": [8], "activations": ["tanh"]},
    "epochs": 20,
    "training": {"steps_per_call": 10, "threads": 1},
}


def _fit(runcard, outdir, env) -> list[float]:
    """The fit's training χ²s; it logs nothing (loading a cached loop, on the CPU that compiled
    it, neither)."""
    chi2, log = _fit_and_log(runcard, outdir, env)
    assert log == "", log
    return chi2


def _fit_and_log(runcard, outdir, env) -> tuple[list[float], str]:
    command = [sys.executable, "-m", "hyperscan", "fit", str(runcard), "-o", str(outdir)]
    done = subprocess.run(
        [*command, "--no-progress"], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    members = json.loads((outdir / "results.json").read_text())["members"]
    return [m["chi2_per_point"]["training"] for m in members], done.stderr


@pytest.fixture(scope="module")
def first_fit(tmp_path_factory):
    """CARD fitted once with a fresh cache: the runcard, the fit's training χ²s and the
    $XDG_CACHE_HOME it left. Each test copies that folder as its own, for the same fit in a
    fresh cache of every test would leave the same entries."""
    root = tmp_path_factory.mktemp("first")
    runcard = root / "fit.yml"
    runcard.write_text(yaml.safe_dump(CARD))
    env = {k: v for k, v in os.environ.items() if k not in ("TF_XLA_FLAGS", "TF_CPP_MIN_LOG_LEVEL")}
    env["XDG_CACHE_HOME"] = str(root / "cache")
    return runcard, _fit(runcard, root / "first", env), root / "cache"


def _after_first_fit(first_fit, tmp_path, monkeypatch):
    """The runcard, the first fit's χ²s, and the environment of a fit on a copy of the cache
    it left (now $XDG_CACHE_HOME) under `tmp_path`."""
    runcard, first, cache_home = first_fit
    shutil.copytree(cache_home, tmp_path / "cache")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    env = {k: v for k, v in os.environ.items() if k not in ("TF_XLA_FLAGS", "TF_CPP_MIN_LOG_LEVEL")}
    return runcard, first, env


def test_a_rerun_loads_the_compiled_loop_and_reproduces_the_fit(first_fit, tmp_path, monkeypatch):
    runcard, first, env = _after_first_fit(first_fit, tmp_path, monkeypatch)
    cache = xla_cache_directory()
    assert cache.parent == tmp_path / "cache" / "hyperscan" / "xla"

    entries = _entries(cache)
    assert entries, "the first fit left no compiled program in the cache"
    second = _fit(runcard, tmp_path / "second", env)
    # A hit: nothing compiled, so nothing written. A recompiled loop would be saved again under
    # the same name (a new file renamed into place), which the names alone would not show.
    assert _entries(cache) == entries
    assert second == first


def test_an_unreadable_entry_is_compiled_anew_and_replaced(first_fit, tmp_path, monkeypatch):
    """TensorFlow fails the op on an entry it cannot parse, every run, and leaves it there: an
    entry cut short (a node that crashed after writing it) must be a miss, with one line."""
    runcard, first, env = _after_first_fit(first_fit, tmp_path, monkeypatch)
    cache = xla_cache_directory()
    entries = _entries(cache)
    torn = cache / sorted(entries)[0]
    size = torn.stat().st_size
    torn.write_bytes(torn.read_bytes()[: size // 2])

    second, log = _fit_and_log(runcard, tmp_path / "second", env)
    assert second == first
    assert log.startswith(f"XLA cache: removed {torn} (cut short at {size // 2} of ")
    assert log.count("\n") == 1, log
    assert _entries(cache).keys() == entries.keys()
    assert _why(torn) is None  # saved again, whole


#: Compiles one tiny program once all its peers are ready, in hyperscan's cache (XDG_CACHE_HOME).
_PEER = """
import sys, time
from pathlib import Path
from hyperscan._tensorflow import configure_tensorflow
configure_tensorflow("cpu", 1)
import tensorflow as tf
Path(sys.argv[1] + ".ready").touch()
while not Path(sys.argv[2]).exists():
    time.sleep(0.01)
f = tf.function(lambda x: tf.reduce_sum(tf.tanh(x) * 2.0 + 1.0), jit_compile=True)
print(float(f(tf.ones([4, 3]))))
"""


def test_processes_sharing_the_cache_replace_a_torn_entry_once_and_tear_none(tmp_path, monkeypatch):
    """Workers on one home folder: started together on a torn entry, each runs; one of them
    says it removed the entry; they then compile the same program and save it at once, and
    what is left is one whole entry, no temporary file, that a later process loads."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    env = {k: v for k, v in os.environ.items() if k not in ("TF_XLA_FLAGS", "TF_CPP_MIN_LOG_LEVEL")}
    cache = xla_cache_directory()
    first = _peers(tmp_path / "first", 1, env)
    (entry,) = cache.glob("*.pb")
    assert first[0].stderr == "", first[0].stderr
    entry.write_bytes(entry.read_bytes()[:-1])

    peers = _peers(tmp_path / "peers", 3, env)
    assert {p.stdout for p in peers} == {first[0].stdout}
    lines = [line for p in peers for line in p.stderr.splitlines()]
    assert len(lines) == 1 and lines[0].startswith(f"XLA cache: removed {entry} ("), lines
    assert [p.name for p in cache.iterdir() if p.suffix != ".pb"] == [".checked"]
    assert _why(entry) is None
    inode = entry.stat().st_ino
    (last,) = _peers(tmp_path / "last", 1, env)
    assert last.stdout == first[0].stdout and last.stderr == ""
    assert entry.stat().st_ino == inode  # loaded, not compiled and saved again


def _peers(folder, count, env) -> list[subprocess.CompletedProcess]:
    """`count` processes running _PEER, released together; each one's output, once all end."""
    folder.mkdir()
    go = folder / "go"
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", _PEER, str(folder / str(k)), str(go)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in range(count)
    ]
    deadline = time.monotonic() + 120
    while len(list(folder.glob("*.ready"))) < count and time.monotonic() < deadline:
        if any(p.poll() is not None for p in processes):
            break
        time.sleep(0.05)
    go.touch()
    done = []
    for process in processes:
        stdout, stderr = process.communicate(timeout=120)
        assert process.returncode == 0, stderr
        done.append(subprocess.CompletedProcess(process.args, 0, stdout, stderr))
    return done


def _why(entry) -> str | None:
    fd = os.open(entry, os.O_RDONLY)
    try:
        return _xla_cache.why_unreadable(fd, entry.name)
    finally:
        os.close(fd)


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes([*out, value])


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _entry(signature: int, cluster: int) -> tuple[str, bytes]:
    """An XlaSerializedCacheEntry's file name and contents, as TensorFlow 2.21 writes them
    (binary): key (fingerprints, device, prefix), HLO module, executable."""
    key = b"\x08" + _varint(signature) + b"\x10" + _varint(cluster) + _field(3, b"XLA_CPU_JIT")
    key += _field(4, b"xla_compile_cache")
    contents = _field(1, key) + _field(2, b"\n\x05main" * 4) + _field(3, bytes(range(256)))
    return f"xla_compile_cache__{signature}__{cluster}__XLA_CPU_JIT.pb", contents


SIGNATURE, CLUSTER = 17113214254617117398, 15647240525545053923
NAME, ENTRY = _entry(SIGNATURE, CLUSTER)


def test_an_entry_is_unreadable_if_cut_short_anywhere_or_named_for_another_key(tmp_path):
    (tmp_path / NAME).write_bytes(ENTRY)
    assert _why(tmp_path / NAME) is None
    for size in range(len(ENTRY)):
        (tmp_path / NAME).write_bytes(ENTRY[:size])
        assert _why(tmp_path / NAME) is not None, size
    (tmp_path / NAME).write_bytes(bytes(len(ENTRY)))
    assert _why(tmp_path / NAME) == "not a cache entry"
    other = tmp_path / NAME.replace(str(CLUSTER), "1")
    other.write_bytes(ENTRY)
    assert _why(other) == "its key is not its name's"


def test_tidy_removes_unreadable_entries_and_orphans_once_and_opens_new_entries_only(
    tmp_path, caplog
):
    name, torn_entry = _entry(7, CLUSTER)
    good, torn = tmp_path / NAME, tmp_path / name
    good.write_bytes(ENTRY)
    torn.write_bytes(torn_entry[:-10])
    orphan, writing = tmp_path / f"{NAME}vm-1-2-3.tmp", tmp_path / f"{NAME}vm-1-4-5.tmp"
    orphan.write_bytes(ENTRY[:100])
    writing.write_bytes(ENTRY[:100])
    hours_ago = time.time() - 2 * _xla_cache.STALE_AFTER_S
    os.utime(orphan, (hours_ago, hours_ago))
    with caplog.at_level(logging.WARNING, logger="hyperscan._xla_cache"):
        _xla_cache.tidy(tmp_path)
        _xla_cache.tidy(tmp_path)
    assert [r.getMessage() for r in caplog.records] == [
        f"XLA cache: removed {torn} (cut short at {len(torn_entry) - 10} of {len(torn_entry)} "
        "bytes); it is compiled anew"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [".checked", good.name, writing.name]
    )

    # An entry on disk well before the last check was checked then: a start does not read it.
    torn.write_bytes(b"")
    later = time.time() + 2 * _xla_cache.SETTLE_S
    os.utime(tmp_path / ".checked", (later, later))
    _xla_cache.tidy(tmp_path)
    assert torn.exists()


def test_a_cache_folder_that_cannot_be_written_means_no_cache(tmp_path, monkeypatch):
    """TensorFlow fails the fit that cannot save its entry (PermissionDeniedError on a
    read-only folder), so hyperscan does not hand it such a folder."""
    from hyperscan import _tensorflow

    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("TF_XLA_FLAGS", raising=False)
    xla_cache_directory().mkdir(parents=True)
    monkeypatch.setattr(_xla_cache.tempfile, "mkstemp", refused)
    _tensorflow._enable_xla_cache()
    assert "TF_XLA_FLAGS" not in os.environ


def _entries(cache) -> dict[str, tuple[int, int]]:
    """Each cache entry's name, inode and modification time."""
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in cache.glob("*.pb")}


def test_the_users_own_cache_setting_wins(tmp_path, monkeypatch):
    from hyperscan import _tensorflow

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("TF_XLA_FLAGS", f"{XLA_CACHE_FLAG}=/elsewhere")
    _tensorflow._enable_xla_cache()
    assert os.environ["TF_XLA_FLAGS"] == f"{XLA_CACHE_FLAG}=/elsewhere"
    assert not xla_cache_directory().exists()

    monkeypatch.setenv("TF_XLA_FLAGS", "--tf_xla_auto_jit=0")
    _tensorflow._enable_xla_cache()
    assert os.environ["TF_XLA_FLAGS"] == (
        f"--tf_xla_auto_jit=0 {XLA_CACHE_FLAG}={xla_cache_directory()}"
    )
    assert xla_cache_directory().is_dir()


def test_a_relative_or_empty_xdg_cache_home_means_the_default(tmp_path, monkeypatch):
    """Per XDG, as the commondata cache: a relative path would scatter caches over the
    folders hyperscan runs in."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    for value in ("relative/cache", ""):
        monkeypatch.setenv("XDG_CACHE_HOME", value)
        assert xla_cache_directory().parent == tmp_path / "home" / ".cache" / "hyperscan" / "xla"


def test_each_kind_of_cpu_has_its_own_cache() -> None:
    """Nodes sharing $HOME but not their vector units must not share executables."""
    avx2 = "processor : 0\nmodel name : AMD EPYC\nflags : fpu sse avx avx2 fma\ncpu MHz : 2400"
    avx512 = avx2.replace("fma", "fma avx512f avx512bw")
    neon = "processor : 0\nFeatures : fp asimd\nCPU implementer : 0x41\nCPU part : 0xd0c"
    sve = neon.replace("asimd", "asimd sve")

    def key(cpuinfo: str, machine: str = "x86_64") -> str:
        return machine_key(cpu_description(cpuinfo, machine))

    assert key(avx2) == key(avx2.replace("2400", "3100"))  # the clock is not the kind
    assert key(avx2) != key(avx512)
    assert key(neon, "aarch64") != key(sve, "aarch64")
    second_cpu = "\n\nprocessor : 1\nflags : fpu"
    assert key(avx2 + second_cpu) == key(avx2)  # the first CPU names the machine
