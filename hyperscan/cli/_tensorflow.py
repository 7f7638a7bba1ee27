"""Importing TensorFlow without its start-up chatter on the user's terminal."""

from __future__ import annotations

import os
import sys
import tempfile
from contextlib import contextmanager


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
        except BaseException:
            os.dup2(saved, 2)
            captured.seek(0)
            sys.stderr.write(captured.read().decode(errors="replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def import_tensorflow() -> None:
    """Import TensorFlow and initialise its devices quietly; later imports are free."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with _stderr_to_file():
        import tensorflow as tf

        tf.config.list_physical_devices()
        tf.get_logger().setLevel("ERROR")
