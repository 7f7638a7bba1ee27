"""The n3fit peer kit's venv (../shared/peer/setup.sh), in which the cross-checks against
n3fit and validphys run their scripts."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

PEER = Path(os.environ.get("HYPERSCAN_N3FIT_PEER", "/tmp/n3fit-peer"))


def peer_installed() -> bool:
    return (PEER / "bin" / "python").exists() and (PEER / "peer.env").exists()


def run_in_peer(script: Path, *args: object, environment: dict[str, str] | None = None) -> None:
    """``script ARGS`` by the peer venv's python, in its environment (peer.env) and
    ``environment`` on top; its error output fails the test."""
    exports = "".join(f" && export {k}={shlex.quote(v)}" for k, v in (environment or {}).items())
    command = f"source {shlex.quote(str(PEER / 'peer.env'))}{exports} && " + shlex.join(
        [str(PEER / "bin" / "python"), str(script), *map(str, args)]
    )
    run = subprocess.run(
        ["bash", "-c", command],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert run.returncode == 0, run.stderr[-4000:]
