#!/bin/bash
# occ.retry on a hot standby: the default isolation level (serializable) is
# refused before the first attempt with 0A000 and a hint that names
# occ.isolation; repeatable read works, for reads; batch mode's calls,
# queued on a hot key (they fail until they hold its gate), run alone, as in
# queue mode: a batch there would commit nothing, and could not take a
# transaction id to say so.
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
    CREATE TABLE t (v int); INSERT INTO t VALUES (1), (2);
    CREATE FUNCTION conflict_until_gated() RETURNS void LANGUAGE plpgsql AS
    \$\$ BEGIN
      IF NOT EXISTS (SELECT FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory'
                     AND objsubid = 20291 AND granted) THEN
        RAISE EXCEPTION USING ERRCODE = 'serialization_failure', MESSAGE = 'simulated conflict';
      END IF;
    END \$\$;"

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

# batch mode: concurrent calls on one key queue, and run alone (at read
# committed, which batch mode would otherwise batch)
script=$DIR/batch.sql
echo "CALL occ.retry('SELECT conflict_until_gated(); SELECT count(*) FROM t', isolation => 'read committed',
                    contention => 'batch', key => 'k');" >"$script"
chmod 644 "$script"
out=$(runuser -u postgres -- pgbench -n -h "$SOCK" -p "$PORT" -U postgres -c 8 -j 2 -t 25 -f "$script" "$DB" 2>&1) ||
    fail "batch mode on a standby: $out"
grep -q "number of failed transactions: 0 " <<<"$out" || ! grep -q "number of failed" <<<"$out" ||
    fail "batch mode on a standby: calls failed: $out"
grep -q "actually processed: 200/200" <<<"$out" || fail "batch mode on a standby: $out"
out=$(sby -c "SELECT calls, commits, queued, batched FROM occ.stats WHERE query LIKE '%conflict_until_gated%'")
[ "$out" = "200|200|200|0" ] || fail "batch mode on a standby: occ.stats (calls, commits, queued, batched) $out"
echo "standby: batch mode's calls queued and ran alone"

echo "standby: ok"
