# SPDX-License-Identifier: GPL-3.0-or-later
#
# Local stand-in for python:3.11-slim, made by docker/local-base.sh from a debootstrap'd
# Debian bookworm (its python3 is 3.11). Only for hosts that cannot pull registry images.
#
# Debian's system Python: pip may install into it (break-system-packages; the image is
# disposable), and pip trusts this host's CA bundle and index settings (pip.conf, written by
# docker/local-base.sh), so builds on top reach the same package index as the host.
ARG ROOTFS=hyperscan-local/bookworm:rootfs
FROM ${ROOTFS}

ENV LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
COPY host-ca-bundle.crt /etc/ssl/certs/host-ca-bundle.crt
COPY pip.conf /etc/pip.conf
RUN python3 -m pip --version

CMD ["python3"]
