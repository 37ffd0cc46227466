#!/bin/bash
# occ.retry on a hot standby: the default isolation level (serializable) is
# refused before the first attempt with 0A000 and a hint that names
# occ.isolation; repeatable read works, for reads.
#
# Runs in the cluster of test/run.sh's in_cluster (PG* set by pg_virtualenv,
# as root): makes a standby of it with pg_basebackup in a temporary
# directory, starts it as the postgres user on a private Unix socket (next
# port up), and removes it at the end.
set -euo pipefail

DB=occ_standby
fail() { echo "standby: FAIL: $*" >&2; exit 1; }
BINDIR=$("${PG_CONFIG:-pg_config}" --bindir)
DIR=$(mktemp -d /tmp/occ_standby.XXXXXX)
SOCK=$DIR/sock
PORT=$((PGPORT + 1))
started=

cleanup() {
    [ -z "$started" ] || runuser -u postgres -- "$BINDIR/pg_ctl" -D "$DIR/data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$DIR"
    dropdb --if-exists "$DB" >/dev/null 2>&1 || true
}
trap cleanup EXIT

dropdb --if-exists "$DB" 2>/dev/null; createdb "$DB"
psql -X -q -v ON_ERROR_STOP=1 -d "$DB" -c "CREATE EXTENSION pg_occ;
    CREATE TABLE t (v int); INSERT INTO t VALUES (1), (2);"

# the standby: a base backup with standby.signal and primary_conninfo (-R)
pg_basebackup -D "$DIR/data" -R -X stream -c fast
mkdir "$SOCK"
cat >"$DIR/data/postgresql.conf" <<EOF
port = $PORT
listen_addresses = ''
unix_socket_directories = '$SOCK'
shared_preload_libraries = 'pg_occ'
hot_standby = on
EOF
# a standby needs at least the primary's values of these
psql -X -At -d "$DB" -c "SELECT name || ' = ' || setting FROM pg_settings
    WHERE name IN ('max_connections', 'max_worker_processes', 'max_wal_senders',
                   'max_prepared_transactions', 'max_locks_per_transaction')" >>"$DIR/data/postgresql.conf"
echo "local all all trust" >"$DIR/data/pg_hba.conf"
: >"$DIR/data/pg_ident.conf"
chown -R postgres: "$DIR"
chmod 700 "$DIR/data"
runuser -u postgres -- "$BINDIR/pg_ctl" -D "$DIR/data" -l "$DIR/log" -w start >/dev/null ||
    { cat "$DIR/log" >&2; fail "the standby did not start"; }
started=1

sby() { psql -X -q -At -h "$SOCK" -p "$PORT" -U postgres -d "$DB" "$@" 2>&1; }
for _ in $(seq 1 100); do
    [ "$(sby -c 'SELECT pg_is_in_recovery()')" = t ] && break
    sleep 0.1
done
[ "$(sby -c 'SELECT pg_is_in_recovery()')" = t ] || fail "the standby is not in recovery"

# the default isolation is refused before the first attempt, with the hint
out=$(sby -v VERBOSITY=verbose -c "CALL occ.retry('SELECT count(*) FROM t')" || true)
echo "standby: serializable: $(head -1 <<<"$out")"
grep -q "0A000" <<<"$out" || fail "serializable on a standby: $out"
grep -q "occ.isolation = 'repeatable read'" <<<"$out" || fail "no hint about occ.isolation: $out"
last=$(sby -c "CALL occ.retry('SELECT 1')" -c "SELECT attempts, last_sqlstate, outcome FROM occ.last_retry()" | tail -1)
[ "$last" = "0|0A000|error" ] || fail "occ.last_retry() after the refusal: $last"

# repeatable read works, as an argument or as the setting
out=$(sby -c "CALL occ.retry('SELECT count(*) FROM t', isolation => 'repeatable read', attempts => NULL, slept => NULL)")
[ "$out" = "1|00:00:00" ] || fail "repeatable read on a standby: $out"
out=$(sby -c "SET occ.isolation = 'repeatable read'" -c "CALL occ.retry('SELECT count(*) FROM t')" \
          -c "SELECT outcome FROM occ.last_retry()")
[ "$out" = "committed" ] || fail "occ.isolation = 'repeatable read' on a standby: $out"
echo "standby: repeatable read commits"

echo "standby: ok"
