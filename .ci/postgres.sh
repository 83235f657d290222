#!/usr/bin/env bash
# A throwaway PostgreSQL server on 127.0.0.1 for the tests (Debian's `postgresql` package).
#
#   eval "$(bash .ci/postgres.sh start)"   # prints the export lines: DSN and data folder
#   bash .ci/postgres.sh stop "$ADVISORCHAIN_TEST_POSTGRES_DIR"
#
# Installs the package with apt-get if no server is found, creates a cluster in a fresh
# temporary folder as a non-root user (PostgreSQL refuses to run as root), starts it on a
# free port with trust authentication on loopback only, and creates a database.
set -euo pipefail

run_as() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

bindir() {
    ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1
}

start() {
    if [ -z "$(bindir)" ] || [ ! -x "$(bindir)/initdb" ]; then
        echo "installing postgresql with apt-get..." >&2
        apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
    fi
    local bin dir port
    bin="$(bindir)"
    dir="$(mktemp -d /tmp/advisorchain-pg.XXXXXX)"
    if [ "$(id -u)" = 0 ]; then chown postgres: "$dir"; fi
    port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    run_as "$bin/initdb" -D "$dir/data" -U advisorchain --auth=trust -E UTF8 >/dev/null
    run_as "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off" start >&2
    run_as "$bin/createdb" -h 127.0.0.1 -p "$port" -U advisorchain advisorchain_test
    echo "export ADVISORCHAIN_TEST_POSTGRES_DSN=postgresql://advisorchain@127.0.0.1:$port/advisorchain_test"
    echo "export ADVISORCHAIN_TEST_POSTGRES_DIR=$dir"
}

stop() {
    local dir="${1:?usage: postgres.sh stop DIR}"
    run_as "$(bindir)/pg_ctl" -D "$dir/data" -m fast -w stop >&2 || true
    rm -rf "$dir"
}

case "${1:-start}" in
    start) start ;;
    stop) stop "${2:-}" ;;
    *) echo "usage: postgres.sh [start | stop DIR]" >&2; exit 2 ;;
esac
