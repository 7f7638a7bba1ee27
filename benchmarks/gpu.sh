#!/usr/bin/env bash
# NNPDF4.0-shaped fit on a GPU: 100 replicas x 1000 epochs, wall time and GPU utilisation.
#
# usage: benchmarks/gpu.sh [REPLICAS] [EPOCHS]        (from anywhere; defaults 100 1000)
#   PYTHON=/path/to/python  use an environment that already has hyperscan and a CUDA build of
#                           TensorFlow; otherwise a venv .venv-gpu is made with
#                           pip install -e . 'tensorflow[and-cuda]' (needs PyPI once, ~3 GB)
# Prints the GPU (nvidia-smi), then benchmarks/gpu_fit.py's figures, then the same fit's
# first 100 epochs on the CPU for scale, then benchmarks/slots.py's trials per hour by trial
# slots (without n3fit; the peer card's scan where ../shared/peer is there). A node with jaxlib but no TensorFlow runs the same
# fit through benchmarks/xla_bundle.py instead (exported where hyperscan runs).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REPLICAS="${1:-100}"
EPOCHS="${2:-1000}"
command -v nvidia-smi >/dev/null || { echo "gpu.sh: no nvidia-smi: is this a GPU node?" >&2; exit 2; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
if [ -z "${PYTHON:-}" ]; then
  VENV="$ROOT/.venv-gpu"
  if [ ! -x "$VENV/bin/hyperscan" ]; then
    python3 -m venv "$VENV"
    if ! "$VENV/bin/pip" install -q -e "$ROOT" "tensorflow[and-cuda]==2.21.*"; then
      rm -rf "$VENV"  # no half-made environment for the next try to trust
      echo "gpu.sh: could not install TensorFlow 2.21 with CUDA into $VENV (is a package" \
        "index reachable from this node?); set PYTHON to a Python that has hyperscan and" \
        "a CUDA build of TensorFlow 2.21 (~3 GB with its CUDA 12 libraries), or, where" \
        "jaxlib is installed, use benchmarks/xla_bundle.py" >&2
      exit 2
    fi
  fi
  PYTHON="$VENV/bin/python"
fi
cd "$ROOT"
"$PYTHON" benchmarks/gpu_fit.py --replicas "$REPLICAS" --epochs "$EPOCHS" --device gpu:0
echo "--- the same fit on this node's CPU, 100 epochs, for scale"
"$PYTHON" benchmarks/gpu_fit.py --replicas "$REPLICAS" --epochs 100 --steps-per-call 50 --device cpu
echo "--- a scan worker with P trial slots on gpu:0: trials per hour by P (issue #40)"
SCANS="dis"
[ -f "$ROOT/../shared/peer/runcards/hyperopt.yml" ] && SCANS="peer dis"
# shellcheck disable=SC2086  # two words when the peer kit is there
"$PYTHON" benchmarks/slots.py --n3fit-trials 0 --scans $SCANS --slots 1 16 64 auto --trials 128
