#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
#
# The official postgres image's first start, in short: an empty PGDATA gets a cluster whose
# superuser is POSTGRES_USER (password POSTGRES_PASSWORD), a database POSTGRES_DB, and network
# logins by password (scram-sha-256), or by anyone if POSTGRES_HOST_AUTH_METHOD=trust.
set -eu

# `docker run image -c x=y` means `postgres -c x=y`, as in the official image.
if [ "${1#-}" != "$1" ]; then
    set -- postgres "$@"
fi

if [ "$1" = postgres ] && [ ! -s "$PGDATA/PG_VERSION" ]; then
    user=${POSTGRES_USER:-postgres}
    db=${POSTGRES_DB:-$user}
    method=${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}
    if [ -z "${POSTGRES_PASSWORD:-}" ] && [ "$method" != trust ]; then
        echo "error: the database is uninitialized and POSTGRES_PASSWORD is not set" \
            "(or set POSTGRES_HOST_AUTH_METHOD=trust to allow all connections)" >&2
        exit 1
    fi
    pwfile=$(mktemp)
    printf '%s\n' "${POSTGRES_PASSWORD:-}" >"$pwfile"
    initdb --pgdata="$PGDATA" --username="$user" --pwfile="$pwfile" \
        --encoding=UTF8 --locale=C --auth-local=trust --auth-host="$method" >/dev/null
    rm -f "$pwfile"
    printf 'host all all all %s\n' "$method" >>"$PGDATA/pg_hba.conf"
    printf "listen_addresses = '*'\n" >>"$PGDATA/postgresql.conf"

    # A private socket and no TCP: the health check sees no server before the setup is over.
    setup=$(mktemp -d)
    pg_ctl --pgdata="$PGDATA" --wait --silent \
        --options="-c listen_addresses='' -c unix_socket_directories=$setup" start
    if [ "$db" != postgres ]; then
        createdb --host="$setup" --username="$user" "$db"
    fi
    pg_ctl --pgdata="$PGDATA" --wait --silent --mode=fast stop
    rmdir "$setup"
    echo "PostgreSQL init process complete; ready for start up."
fi

exec "$@"
