# SPDX-License-Identifier: GPL-3.0-or-later
#
# A CPU stand-in for tensorflow/tensorflow:2.21.0-gpu, made by docker/local-base.sh: the same
# shape (python3 with pip, TensorFlow installed as the `tensorflow` package, root user) without
# CUDA's libraries, so docker/Dockerfile.gpu's steps and entrypoint can be built and run on a
# host without a GPU. TensorFlow's PyPI wheel is itself a CUDA build, so the Dockerfile's
# is_built_with_cuda() check passes; whether a GPU is found is untested here.
ARG PYTHON_IMAGE=hyperscan-local/python:3.11
FROM ${PYTHON_IMAGE}

RUN python3 -m pip install --no-cache-dir "tensorflow==2.21.0" \
    && python3 -c "import tensorflow as tf; print(tf.__version__)"
