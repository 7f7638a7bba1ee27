#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PgBouncer's settings from the environment, written at each start (nothing secret in the
# image): transaction pooling, which hyperscan's workers need (docs/deployment.md).
#   POSTGRES_USER, POSTGRES_PASSWORD  the one role it admits and logs in as (scram-sha-256)
#   PGBOUNCER_SERVER                  the PostgreSQL server, host[:port] (default postgres:5432)
#   PGBOUNCER_POOL_SIZE               server connections per database (default 20)
#   PGBOUNCER_MAX_CLIENTS             client connections (default 2000: about 4 per worker)
#   PGBOUNCER_LISTEN_PORT             its port (default 6432)
set -eu

: "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD: PgBouncer logs in to PostgreSQL with it}"
user=${POSTGRES_USER:-postgres}
server=${PGBOUNCER_SERVER:-postgres:5432}
host=${server%:*}
port=${server##*:}
[ "$port" != "$server" ] || port=5432

# PgBouncer's auth file quotes each field, a quote inside doubled.
quoted() {
    printf '"%s"' "$(printf '%s' "$1" | sed 's/"/""/g')"
}

config=$(mktemp -d)
umask 077
printf '%s %s\n' "$(quoted "$user")" "$(quoted "$POSTGRES_PASSWORD")" >"$config/users.txt"
cat >"$config/pgbouncer.ini" <<INI
[databases]
* = host=$host port=$port

[pgbouncer]
listen_addr = *
listen_port = ${PGBOUNCER_LISTEN_PORT:-6432}
unix_socket_dir =
auth_type = scram-sha-256
auth_file = $config/users.txt
pool_mode = transaction
default_pool_size = ${PGBOUNCER_POOL_SIZE:-20}
max_client_conn = ${PGBOUNCER_MAX_CLIENTS:-2000}
; hyperscan's statement_timeout, which PgBouncer before 1.20 cannot pass on: the workers' own
; deadlines remain, and the budget's lock sets its own lock_timeout in its transaction.
ignore_startup_parameters = options
; a line per connection is noise with hundreds of workers; errors and statistics remain
log_connections = 0
log_disconnections = 0
INI
exec pgbouncer "$config/pgbouncer.ini"
