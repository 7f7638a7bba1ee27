#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
#
# Local base images from Debian's packages, for hosts that cannot pull python:3.11-slim,
# postgres:17 or tensorflow/tensorflow:*-gpu from a registry (docs/deployment.md):
#
#   hyperscan-local/bookworm:rootfs      debootstrap --variant=minbase bookworm, `docker import`ed
#   hyperscan-local/python:3.11          Debian's python3 (3.11) with pip, this host's pip settings
#   hyperscan-local/postgres:15          Debian's postgresql-15, set up like the official image
#   hyperscan-local/tensorflow:2.21.0-cpu  the Python base with TensorFlow 2.21.0 from PyPI
#
# Then, from the repository root:
#   HYPERSCAN_PYTHON_IMAGE=hyperscan-local/python:3.11 \
#   HYPERSCAN_POSTGRES_IMAGE=hyperscan-local/postgres:15 docker-compose up --build
#
# Usage: docker/local-base.sh [--rebuild]   (as root: debootstrap and docker need it)
# The rootfs is made once (--rebuild makes it again); the images are rebuilt from Docker's
# cache, so a second run takes seconds. DEBIAN_MIRROR picks the mirror; HOST_CA_BUNDLE the CA
# bundle that pip in the images trusts (this host's, which knows any TLS-inspecting proxy).
set -euo pipefail
cd "$(dirname "$0")/local-base"

SUITE=bookworm
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
CA_BUNDLE=${HOST_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
ROOTFS=hyperscan-local/bookworm:rootfs
PYTHON=hyperscan-local/python:3.11
POSTGRES=hyperscan-local/postgres:15
TENSORFLOW=hyperscan-local/tensorflow:2.21.0-cpu

if [ "${1:-}" = --rebuild ] || ! docker image inspect "$ROOTFS" >/dev/null 2>&1; then
    root=$(mktemp -d /var/tmp/hyperscan-rootfs.XXXXXX)
    trap 'rm -rf "$root"' EXIT
    debootstrap --variant=minbase --include=python3,python3-venv,python3-pip,ca-certificates \
        "$SUITE" "$root" "$MIRROR" >/dev/null
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    tar -C "$root" --numeric-owner -c . \
        | docker import --message "debootstrap --variant=minbase $SUITE $MIRROR" - "$ROOTFS"
    rm -rf "$root"
    trap - EXIT
fi

# The Python base's build context: its Dockerfile, this host's CA bundle and pip settings.
# Only the host's http(s) index settings carry over (file:// indexes are not in the image).
context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT
cp python.Dockerfile "$context/"
cp "$CA_BUNDLE" "$context/host-ca-bundle.crt"
{
    echo "[global]"
    echo "cert = /etc/ssl/certs/host-ca-bundle.crt"
    echo "break-system-packages = true"
    for key in index-url extra-index-url trusted-host; do
        read -ra values <<<"$(python3 -m pip config get "global.$key" 2>/dev/null || true)"
        kept=()
        for value in "${values[@]}"; do
            case $value in
                file:*) ;;
                *) kept+=("$value") ;;
            esac
        done
        if [ ${#kept[@]} -gt 0 ]; then
            echo "$key = ${kept[*]}"
        fi
    done
} >"$context/pip.conf"

build() {
    local tag=$1 dockerfile=$2 dir=$3
    shift 3
    echo "local-base: building $tag" >&2
    DOCKER_BUILDKIT=0 docker build --quiet --tag "$tag" --file "$dir/$dockerfile" "$@" "$dir" >/dev/null
}
build "$PYTHON" python.Dockerfile "$context" --build-arg ROOTFS="$ROOTFS"
build "$POSTGRES" postgres.Dockerfile . --build-arg ROOTFS="$ROOTFS"
build "$TENSORFLOW" tensorflow.Dockerfile . --build-arg PYTHON_IMAGE="$PYTHON"
docker image ls --filter reference='hyperscan-local/*'
