# shellcheck shell=bash
# Throwaway PostgreSQL clusters of their own for the test scripts that stop,
# start or restore a server (test/persist.sh, test/restore.sh); sourced,
# not run.  A cluster lives in a directory of its own, owned by the postgres
# user when we are root, and listens only on a Unix socket there, so it
# clashes with no other server (DIR's parents must be searchable by the
# postgres user).  Uses PG_CONFIG (default: pg_config on the
# PATH) for the server's programs.
#
#   cluster_init DIR [CONFIG LINE...]  initdb in DIR/data with the lines
#                                      added to postgresql.conf
#   cluster_start DIR, cluster_stop DIR [MODE]   pg_ctl start / stop
#   cluster_psql DIR [PSQL ARGS...]     psql as the superuser postgres
#   cluster_log DIR                    the server's log file
#   cluster_restarts DIR               how many crashes the server has
#                                      reinitialised after
#   cluster_recovered DIR N            wait until it has after more than N,
#                                      and accepts connections again
# Every cluster started is stopped (immediate) at exit by cluster_cleanup,
# which the sourcing script calls from its EXIT trap.

CLUSTER_BINDIR=$("${PG_CONFIG:-pg_config}" --bindir)
CLUSTER_STARTED=()

# cluster_as_owner COMMAND...: run a command as the owner of the clusters
cluster_as_owner() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

cluster_init() {
    local dir=$1 line
    shift
    mkdir -p "$dir/sock"
    [ "$(id -u)" != 0 ] || chown postgres: "$dir" "$dir/sock"
    cluster_as_owner "$CLUSTER_BINDIR/initdb" -D "$dir/data" -U postgres -A trust --no-sync >/dev/null
    {
        echo "port = 5432"
        echo "listen_addresses = ''"
        echo "unix_socket_directories = '$dir/sock'"
        for line in "$@"; do echo "$line"; done
    } >>"$dir/data/postgresql.conf"
}

cluster_log() { echo "$1/log"; }

cluster_restarts() { grep -c "reinitializing" "$1/log" || true; }

cluster_recovered() {
    for _ in $(seq 1 300); do
        [ "$(cluster_restarts "$1")" -gt "$2" ] &&
            cluster_psql "$1" -d postgres -c "SELECT 1" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "cluster: the server in $1 did not come back after a crash" >&2
    return 1
}

cluster_start() {
    local dir=$1
    cluster_as_owner "$CLUSTER_BINDIR/pg_ctl" -D "$dir/data" -l "$dir/log" -w start >/dev/null || {
        cat "$dir/log" >&2
        echo "cluster: the server in $dir did not start" >&2
        return 1
    }
    CLUSTER_STARTED+=("$dir")
}

cluster_stop() {
    cluster_as_owner "$CLUSTER_BINDIR/pg_ctl" -D "$1/data" -m "${2:-fast}" -w stop >/dev/null
}

cluster_psql() {
    local dir=$1
    shift
    "$CLUSTER_BINDIR/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$dir/sock" -p 5432 -U postgres "$@"
}

cluster_cleanup() {
    local dir
    for dir in "${CLUSTER_STARTED[@]}"; do
        [ ! -f "$dir/data/postmaster.pid" ] || cluster_stop "$dir" immediate 2>/dev/null || true
    done
}
