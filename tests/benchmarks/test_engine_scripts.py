"""benchmarks/fit_engine.py and ablations.py drive the Trainer from outside: they keep working."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

ROOT = Path(__file__).resolve().parents[2]


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while defined
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def fit_engine():
    return _script("fit_engine")


def test_the_timed_loop_runs_k_steps_per_call_without_retracing(fit_engine):
    setup = fit_engine.build_setup("tiny", 2, fit_engine.TINY_NODES)
    loop = fit_engine.Loop(setup)
    assert loop.report.step == 1
    loop.calls(10, 3)
    assert loop.report.step == 31
    assert loop.trainer.steps_function.experimental_get_tracing_count() == 1
    assert loop.diverged() == 0  # raises if a member stopped
    assert fit_engine.loop_kernels(loop) > 10
    for weights, first in zip(loop.trainer.parameters(), loop.first_step_params, strict=True):
        assert weights.shape == first.shape
        assert not np.array_equal(weights, first)  # 30 more steps moved every tensor


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ("fpu sse2 avx avx2 fma avx512f avx512dq avx512bw amx_bf16 amx_tile", "AVX-512 with AMX"),
        ("fpu sse2 avx avx2 fma avx512f avx512dq avx512bw", "AVX-512"),
        ("fpu sse2 avx avx2 fma", "AVX2"),
        ("fpu sse2 avx", "AVX"),
        ("fpu sse2", "no AVX"),
    ],
)
def test_the_header_names_the_widest_vector_units(fit_engine, flags, expected):
    assert fit_engine.vector_extensions(set(flags.split())) == expected


def test_the_breakdown_times_every_stage_of_the_step(fit_engine):
    runners = fit_engine.breakdown_runners(fit_engine.build_setup("tiny", 2, (4,)), steps=2)
    assert "+ Nadam, clipping, stopping" in runners
    assert "the same, nuisance fits skipped" in runners
    for runner in runners.values():
        runner()


def test_the_floor_skips_the_nuisance_fits_and_leaves_the_model_alone(fit_engine):
    setup = fit_engine.build_setup("small", 2, (4,))  # its blocks all take the nuisance way
    floor = fit_engine._without_nuisance_fits(setup.model)
    params = [tf.constant(p, tf.float32) for p in setup.params]
    chi2 = setup.model.observables(params).chi2.numpy()[:, :2]  # training, validation
    unfitted = floor.observables(params).chi2.numpy()[:, :2]
    # χ² is the minimum over the nuisances, so with none fitted (λ = 0) it can only grow.
    assert np.all(unfitted > chi2)
    assert setup.model._chi2._nuisance  # the original still fits them


def test_both_matmul_peaks_are_measured(fit_engine):
    # TensorFlow's own kernel and XLA's compiled one: two different code paths, both timed.
    for compiled in (False, True):
        peak = fit_engine.matmul_peak(compiled=compiled)
        assert np.isfinite(peak) and peak > 1e8


def test_the_ablations_measure_float32_against_float64():
    ablations = _script("ablations")
    initial, one_step, _ = ablations.precision_cost(ablations.build("tiny", 2), steps=4)
    assert 0.0 < initial < 1e-5  # the same χ² up to float32 rounding
    assert one_step < 1e-4
