"""benchmarks/gpu_monitor.py reads nvidia-smi's samples (a stand-in prints them here)."""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _monitor():
    spec = importlib.util.spec_from_file_location(
        "gpu_monitor", ROOT / "benchmarks" / "gpu_monitor.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_utilisation_and_memory_are_summarised_from_the_samples(tmp_path, monkeypatch):
    smi = tmp_path / "nvidia-smi"
    # nvidia-smi --format=csv,noheader,nounits: one "utilisation, memory" line per sample.
    printed = tmp_path / "printed"
    smi.write_text(
        f'#!/bin/sh\nprintf "20, 1000\\n60, 3000\\n100, 2000\\n"\ntouch {printed}\nexec sleep 60\n'
    )
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    sampler = _monitor().GpuSampler()
    deadline = time.monotonic() + 60
    while not printed.exists() and time.monotonic() < deadline:  # sampling, as during a fit
        time.sleep(0.01)
    summary = sampler.summary()
    assert "3 samples" in summary
    assert "mean 60%, median 60%, max 100%" in summary
    assert "memory used up to 3000 MiB" in summary


def test_without_nvidia_smi_it_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert "no nvidia-smi" in _monitor().GpuSampler().summary()
