"""Compiled training loops are cached on disk: a rerun loads them and gives the same fit."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import yaml

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
    command = [sys.executable, "-m", "hyperscan", "fit", str(runcard), "-o", str(outdir)]
    done = subprocess.run(
        [*command, "--no-progress"], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr  # loading a cached loop logs nothing either
    members = json.loads((outdir / "results.json").read_text())["members"]
    return [m["chi2_per_point"]["training"] for m in members]


def test_a_rerun_loads_the_compiled_loop_and_reproduces_the_fit(tmp_path, monkeypatch):
    runcard = tmp_path / "fit.yml"
    runcard.write_text(yaml.safe_dump(CARD))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    env = {k: v for k, v in os.environ.items() if k not in ("TF_XLA_FLAGS", "TF_CPP_MIN_LOG_LEVEL")}
    cache = xla_cache_directory()
    assert cache.parent == tmp_path / "cache" / "hyperscan" / "xla"

    first = _fit(runcard, tmp_path / "first", env)
    entries = _entries(cache)
    assert entries, "the first fit left no compiled program in the cache"
    second = _fit(runcard, tmp_path / "second", env)
    # A hit: nothing compiled, so nothing written. A recompiled loop would be saved again under
    # the same name (a new file renamed into place), which the names alone would not show.
    assert _entries(cache) == entries
    assert second == first


def _entries(cache) -> dict[str, tuple[int, int]]:
    """Each cached file's name, inode and modification time."""
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in cache.iterdir()}


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
