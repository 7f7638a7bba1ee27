"""Importing TensorFlow without its start-up chatter on the user's terminal, pinned to a
device and a thread count: for the CLI, the workers `hyperscan scan` starts, and scripts."""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import os
import platform
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hyperscan._files import cache_root
from hyperscan._xla_cache import tidy

XLA_CACHE_FLAG = "--tf_xla_persistent_cache_directory"
#: How far a worker's memory may grow after its first trial before it goes on in a fresh
#: process: TensorFlow keeps every loop XLA compiled until the process ends, ~18 MB for each
#: trial of a one-slot worker that draws a new architecture; so ~110 such trials, and a restart
#: of seconds among hours of fits.
DEFAULT_MAX_GROWTH_MIB = 2048


@contextmanager
def _stderr_to_file():
    """TensorFlow 2.21 logs oneDNN and CUDA probes through absl before any log level applies,
    straight to file descriptor 2; capture them and show them only if the import fails."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield captured
        except Exception:  # not Ctrl-C: the user asked to stop, not for TensorFlow's log
            os.dup2(saved, 2)
            captured.seek(0)
            sys.stderr.write(captured.read().decode(errors="replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)


#: What `import tensorflow` imports only for features hyperscan never uses: Keras's optimizers
#: (most of Keras, about a third of the import time), to register them for loading
#: SavedModels; and JAX where it is installed (about a second of CPU), for TFLite's conversion
#: of JAX functions.
_NOT_PRELOADED = ("keras.src.optimizers", "jax")


@contextmanager
def _not_preloaded():
    """A None entry in sys.modules makes an import fail, which TensorFlow tolerates for
    `_NOT_PRELOADED`; the entries are removed afterwards, so Keras and JAX still import on
    demand. A module imported already is left alone."""
    blocked = [name for name in _NOT_PRELOADED if name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None
    try:
        yield
    finally:
        for name in blocked:
            if sys.modules.get(name) is None:
                sys.modules.pop(name, None)


def xla_cache_directory() -> Path:
    """Where compiled training loops are kept: ``$XDG_CACHE_HOME/hyperscan/xla/<machine>``
    (``cache_root``)."""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        cpuinfo = ""
    cpu = cpu_description(cpuinfo, f"{platform.machine()} {platform.processor()}")
    return cache_root() / "xla" / machine_key(cpu)


#: /proc/cpuinfo fields that name a CPU and its instruction sets: x86 (model name, flags) and
#: ARM (implementer, part, Features: SVE or not).
_CPU_FIELDS = ("model name", "flags", "CPU implementer", "CPU architecture", "CPU part", "Features")


def cpu_description(cpuinfo: str, platform_name: str) -> str:
    """The first CPU's identifying fields from /proc/cpuinfo (empty off Linux), and the
    platform's own name."""
    first_cpu = cpuinfo.split("\n\n", 1)[0]
    fields = [line for line in first_cpu.splitlines() if line.startswith(_CPU_FIELDS)]
    return "\n".join([platform_name, *fields])


def machine_key(cpu: str) -> str:
    """A cluster's nodes often share $HOME but not their CPUs: an executable compiled for one
    node's vector units would crash another (SIGILL), so each kind of CPU, and each TensorFlow
    version, gets its own cache folder."""
    try:
        tensorflow = importlib.metadata.version("tensorflow")
    except importlib.metadata.PackageNotFoundError:
        tensorflow = "?"
    return hashlib.sha256(f"{cpu}\ntensorflow {tensorflow}".encode()).hexdigest()[:16]


def _enable_xla_cache() -> None:
    """Keep XLA executables on disk, keyed by the compiled program.

    Compiling a training loop takes seconds; a rerun of a fit loads the executable instead.
    A later fit in the same process misses it: the key holds TensorFlow's numbering of traced
    functions, which goes on within a process; fit/_compiled.py serves those. The cached
    program is the one that would be compiled, so results are unchanged. A user's own
    ``TF_XLA_FLAGS`` cache setting wins. TensorFlow fails a fit on an entry it cannot read or
    write, so unreadable entries are removed first (``_xla_cache.tidy``), and a folder that
    cannot be written means no cache.
    """
    flags = os.environ.get("TF_XLA_FLAGS", "")
    if XLA_CACHE_FLAG in flags:
        return
    directory = xla_cache_directory()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        tidy(directory)
    except OSError:
        return
    os.environ["TF_XLA_FLAGS"] = f"{flags} {XLA_CACHE_FLAG}={directory}".strip()


def configure_tensorflow(device: str = "auto", threads: int | None = None) -> str:
    """Import TensorFlow quietly and pin it to `device` (auto | cpu | gpu:N) before any op;
    returns what it runs on, in words, for a batch log.

    GPU memory grows on demand, so several workers can share a node's GPUs.
    """
    device = device.strip().lower()
    gpu_index = None
    if device.startswith("gpu:"):
        suffix = device.removeprefix("gpu:")
        if not suffix.isdigit():
            raise ValueError(f"--device {device!r}: expected auto, cpu or gpu:N (N = 0, 1, ...)")
        gpu_index = int(suffix)
    elif device not in ("auto", "cpu"):
        raise ValueError(f"--device {device!r}: expected auto, cpu or gpu:N (N = 0, 1, ...)")
    if device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = "-1"
    # 3: no C++ log lines. Errors that matter reach Python as exceptions; the rest is noise,
    # such as XLA's warning at every load of a cached loop, compiled on this very CPU
    # (machine_key), that some tuning pseudo-features are missing. A user's own level wins.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    _enable_xla_cache()
    with _stderr_to_file(), _not_preloaded():
        import tensorflow as tf

        gpus = tf.config.list_physical_devices("GPU")
        tf.get_logger().setLevel("ERROR")
    if gpu_index is not None:
        if gpu_index >= len(gpus):
            raise ValueError(f"--device {device}: this node has {len(gpus)} GPU(s)")
        gpus = [gpus[gpu_index]]
        tf.config.set_visible_devices(gpus, "GPU")
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)
    if threads is not None and tf.config.threading.get_intra_op_parallelism_threads() != threads:
        try:
            tf.config.threading.set_intra_op_parallelism_threads(threads)
            tf.config.threading.set_inter_op_parallelism_threads(threads)
        except RuntimeError:
            raise ValueError(
                f"TensorFlow is already running with other thread settings; cannot use {threads}"
            ) from None
    if gpus:
        first = gpu_index or 0
        names = [tf.config.experimental.get_device_details(gpu).get("device_name") for gpu in gpus]
        return ", ".join(f"GPU {first + k} ({name or 'unnamed'})" for k, name in enumerate(names))
    return f"CPU, {threads} thread{'' if threads == 1 else 's'}" if threads else "CPU, all cores"


def ensure_configured() -> None:
    """TensorFlow for the library's entry points that fit or score (``hyperscan.fit``,
    ``hyperscan.score``): imported as the command line imports it, without its start-up log,
    unless the caller (a script, or a command) has imported it already, configured its way."""
    if "tensorflow" not in sys.modules:
        configure_tensorflow()


def loaded_on_use(module: str, name: str) -> Any:
    """``name`` of a module that imports TensorFlow, for a package's ``__getattr__``: the
    package stays light until a name that needs TensorFlow is used, which then imports it
    quietly (:func:`ensure_configured`)."""
    ensure_configured()
    return getattr(importlib.import_module(module), name)
