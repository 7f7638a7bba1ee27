# SPDX-License-Identifier: GPL-3.0-or-later
#
# Local stand-in for the official postgres image, made by docker/local-base.sh from Debian's
# `postgresql-15` package. It keeps the official image's interface where docker-compose.yml
# relies on it: PGDATA=/var/lib/postgresql/data (a volume), POSTGRES_USER / POSTGRES_PASSWORD /
# POSTGRES_DB / POSTGRES_HOST_AUTH_METHOD read on the first start, `postgres -c ...` as the
# command, pg_isready for the health check, SIGINT (fast shutdown) to stop.
ARG ROOTFS=hyperscan-local/bookworm:rootfs
FROM ${ROOTFS}

# No cluster from the package's postinst: the entrypoint makes one in PGDATA on first start.
RUN mkdir -p /etc/postgresql-common \
    && echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.conf \
    && apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql-15 \
    && apt-get clean \
    && rm -rf /var/lib/apt/lists/*

ENV LANG=C.UTF-8 \
    PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PGDATA=/var/lib/postgresql/data
# A new named volume takes this directory's owner and mode: the server runs as `postgres`.
RUN mkdir -p "$PGDATA" /var/run/postgresql \
    && chown -R postgres:postgres /var/lib/postgresql /var/run/postgresql \
    && chmod 700 "$PGDATA"
COPY postgres-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
USER postgres
VOLUME /var/lib/postgresql/data
EXPOSE 5432
STOPSIGNAL SIGINT
# The default socket answers only once the first-start setup is over (it uses another one).
HEALTHCHECK --interval=5s --timeout=5s --retries=12 \
    CMD pg_isready -U "${POSTGRES_USER:-postgres}" -d "${POSTGRES_DB:-${POSTGRES_USER:-postgres}}"

ENTRYPOINT ["docker-entrypoint.sh"]
CMD ["postgres"]
