#!/bin/bash
# occ.retry through PgBouncer in transaction pooling, with fewer server
# connections than clients: pgbench's clients call occ.retry on one hot row
# (a read-modify-write in queue mode) through a pool of 4 server connections.
# occ.retry commits inside one CALL, and PgBouncer hands the server connection
# back only when the CALL's ReadyForQuery says idle, so every call keeps one
# server connection from its start to its end (waits and sleeps included).
# Checks that
#   - nothing is lost or doubled: the row equals pgbench's committed
#     transactions, and every call ended (committed or gave up);
#   - occ.stats agrees: calls and commits of that body = pgbench's counts;
#   - what docs/retry.md says about poolers holds: a SET occ.* and
#     occ.last_retry() belong to the server connection, so another client
#     that gets it sees them (through a pool of one connection); psycopg
#     works through the pool with prepare_threshold=None (its default, named
#     prepared statements, is only reported: PgBouncer 1.24+ pools them);
#   - the application's own transactions with SET LOCAL occ.key work
#     through transaction pooling: pgbench's clients retry REPEATABLE READ
#     read-modify-writes of the hot row (--max-tries) and psycopg threads
#     run a retry loop, nothing is lost or doubled, occ.key_stats counts
#     pgbench's commits and attempts, and nothing outlives a transaction:
#     the next client on the server connection has no key and no gate;
#   - reservable columns (0.7.0) through transaction pooling: UPDATE stock
#     SET qty = qty - 1 WHERE id = 1 reports UPDATE 1 (UPDATE 0 for a
#     missing key), and pgbench's clients (transactions of three reserving
#     UPDATEs) and psycopg threads leave occ.reserved_value exact.
#
# Runs in the cluster of test/run.sh's in_cluster (PG* set by pg_virtualenv,
# as root): starts pgbouncer as the postgres user, with its own
# configuration in a temporary directory, on a free port of 127.0.0.1, and
# stops it at the end.  Keeps the run short: CLIENTS x CALLS_PER_CLIENT
# calls (8 x 200).
set -euo pipefail

CLIENTS=${CLIENTS:-8}
CALLS_PER_CLIENT=${CALLS_PER_CLIENT:-200}
POOL=4
DB=occ_apps_pgbouncer
fail() { echo "pgbouncer: FAIL: $*" >&2; exit 1; }
sql() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$DB" -c "$1"; }

command -v pgbouncer >/dev/null || fail "pgbouncer is not installed (Debian package pgbouncer; test/setup.sh installs it)"
DIR=$(mktemp -d /tmp/occ_pgbouncer.XXXXXX)
bouncer=
cleanup() {
    [ -z "$bouncer" ] || { kill "$bouncer" 2>/dev/null || true; wait "$bouncer" 2>/dev/null || true; }
    rm -rf "$DIR"
    dropdb --if-exists "$DB" >/dev/null 2>&1 || true
}
trap cleanup EXIT

dropdb --if-exists "$DB" 2>/dev/null
createdb "$DB"
sql "CREATE EXTENSION pg_occ; CREATE TABLE hot (id int PRIMARY KEY, n bigint NOT NULL); INSERT INTO hot VALUES (1, 0);"

# a free port on 127.0.0.1
PORT=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# auth_type = any: clients log in without a password, as the user of the
# [databases] entry, which logs in to the server with the cluster's password.
# occ_apps_one: the same database through a pool of one server connection.
server="host=${PGHOST:-localhost} port=${PGPORT:-5432} dbname=$DB user=${PGUSER:-postgres} password=${PGPASSWORD:-}"
cat >"$DIR/pgbouncer.ini" <<EOF
[databases]
$DB = $server pool_size=$POOL
occ_apps_one = $server pool_size=1

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $PORT
unix_socket_dir =
auth_type = any
pool_mode = transaction
max_client_conn = 100
default_pool_size = $POOL
logfile = $DIR/pgbouncer.log
pidfile = $DIR/pgbouncer.pid
EOF
chown -R postgres: "$DIR"
chmod 700 "$DIR"
# PgBouncer refuses to run as root: -u switches to postgres
pgbouncer -u postgres "$DIR/pgbouncer.ini" >/dev/null 2>&1 &
bouncer=$!
for _ in $(seq 1 100); do
    psql -X -At -h 127.0.0.1 -p "$PORT" -d "$DB" -c 'SELECT 1' >/dev/null 2>&1 && break
    kill -0 "$bouncer" 2>/dev/null || { cat "$DIR/pgbouncer.log" >&2; fail "pgbouncer did not start"; }
    sleep 0.1
done
version=$(pgbouncer --version | head -1)
echo "pgbouncer: $version on 127.0.0.1:$PORT, pool_mode = transaction, $POOL server connections for $CLIENTS clients"
bpsql() { psql -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PORT" "$@"; }

# --- pgbench through PgBouncer: a read-modify-write of the hot row ---------
# (pgbench's default simple query protocol: no named prepared statements,
# which PgBouncer 1.18 cannot pool in transaction mode)
script=$DIR/occ_hot.sql
cat >"$script" <<'SQL'
CALL occ.retry('SELECT set_config(''apps.n'', n::text, true) FROM hot WHERE id = 1;
                UPDATE hot SET n = current_setting(''apps.n'')::bigint + 1 WHERE id = 1',
               isolation => 'repeatable read', contention => 'queue', key => 'hot:1');
SQL
start=$(date +%s%N)
out=$(pgbench -n -h 127.0.0.1 -p "$PORT" -d "$DB" -c "$CLIENTS" -j 2 -t "$CALLS_PER_CLIENT" -f "$script" 2>&1) ||
    fail "pgbench failed: $out"
processed=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' <<<"$out")
[ -n "$processed" ] || fail "pgbench did not run: $out"
failed=${failed:-0}
tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out")
value=$(sql "SELECT n FROM hot WHERE id = 1")
echo "pgbouncer: pgbench $CLIENTS clients x $CALLS_PER_CLIENT calls in $((($(date +%s%N) - start) / 1000000)) ms ($tps tps): $processed committed, $failed gave up, row $value"
[ "$((processed + failed))" -eq "$((CLIENTS * CALLS_PER_CLIENT))" ] || fail "pgbench lost calls: $out"
[ "$value" -eq "$processed" ] || fail "row $value != $processed committed calls: lost or doubled updates"

read -r calls commits gave_up attempts queued < <(sql "
    SELECT sum(calls), sum(commits), sum(gave_up), sum(attempts), sum(queued)
      FROM occ.stats s JOIN pg_database d ON d.oid = s.dbid
     WHERE d.datname = current_database() AND s.query LIKE '%apps.n%'" | tr '|' ' ')
echo "pgbouncer: occ.stats: calls $calls, commits $commits, gave_up $gave_up, attempts $attempts, queued $queued"
[ "$calls" = "$((CLIENTS * CALLS_PER_CLIENT))" ] || fail "occ.stats calls $calls != $((CLIENTS * CALLS_PER_CLIENT))"
[ "$commits" = "$processed" ] || fail "occ.stats commits $commits != pgbench's $processed"
[ "$gave_up" = "$failed" ] || fail "occ.stats gave_up $gave_up != pgbench's failed $failed"

# --- session state belongs to the server connection -------------------------
# one client sets occ.max_attempts and calls; the next client, on the same
# (only) server connection, sees both the setting and the call
bpsql -d occ_apps_one -c "SET occ.max_attempts = 3" -c "CALL occ.retry('SELECT 1')"
leaked=$(bpsql -d occ_apps_one -c "SELECT current_setting('occ.max_attempts') || ' ' || outcome FROM occ.last_retry()")
echo "pgbouncer: a new client on the same server connection sees occ.max_attempts and occ.last_retry(): $leaked"
[ "$leaked" = "3 committed" ] || fail "expected the previous client's SET occ.max_attempts = 3 and its call, got '$leaked'"

# --- a driver through the pool: psycopg ------------------------------------------
# psycopg prepares a query it has run 5 times (a named prepared statement),
# which PgBouncer cannot follow from one server connection to the next in
# transaction pooling before 1.21 (1.24 by default); prepare_threshold=None
# turns that off.
# Checked: 4 threads x 50 calls without errors; the default is only reported.
psycopg_through() {
    /usr/bin/python3 - "$1" "$PORT" "$DB" <<'EOF'
import sys, threading, psycopg
threshold = None if sys.argv[1] == "None" else int(sys.argv[1])
errors = []
def client():
    try:
        with psycopg.connect(host="127.0.0.1", port=sys.argv[2], dbname=sys.argv[3], autocommit=True,
                             prepare_threshold=threshold) as conn:
            for _ in range(50):
                conn.execute("CALL occ.retry(%s, params => row(%s::int), key => 'hot:1')",
                             ["UPDATE hot SET n = n + 1 WHERE id = $1", 1])
    except Exception as e:
        errors.append(f"{type(e).__name__}: {e}")
threads = [threading.Thread(target=client) for _ in range(4)]
for t in threads: t.start()
for t in threads: t.join()
print(errors[0] if errors else "ok")
EOF
}
before=$(sql "SELECT n FROM hot WHERE id = 1")
got=$(psycopg_through None)
after=$(sql "SELECT n FROM hot WHERE id = 1")
echo "pgbouncer: psycopg with prepare_threshold=None, 4 threads x 50 calls: $got, row +$((after - before))"
[ "$got" = ok ] || fail "psycopg through PgBouncer with prepare_threshold=None: $got"
[ "$((after - before))" -eq 200 ] || fail "psycopg through PgBouncer: row grew by $((after - before)), not 200"
echo "pgbouncer: psycopg with its default prepare_threshold (5), for information: $(psycopg_through 5)"

# --- SET LOCAL occ.key through the pool -------------------------------------------
sql "SELECT occ.stats_reset(); UPDATE hot SET n = 0 WHERE id = 1" >/dev/null
script=$DIR/occ_key.sql
cat >"$script" <<'SQL'
BEGIN ISOLATION LEVEL REPEATABLE READ;
SET LOCAL occ.key = 'hot:1';
SELECT n FROM hot WHERE id = 1 \gset
UPDATE hot SET n = :n + 1 WHERE id = 1;
COMMIT;
SQL
out=$(pgbench -n -h 127.0.0.1 -p "$PORT" -d "$DB" -c "$CLIENTS" -j 2 -t "$CALLS_PER_CLIENT" --max-tries=1000 \
      -f "$script" 2>&1) || fail "pgbench with SET LOCAL occ.key failed: $out"
processed=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
retries=$(sed -n 's/^total number of retries: \([0-9]*\).*/\1/p' <<<"$out")
retries=${retries:-0}
value=$(sql "SELECT n FROM hot WHERE id = 1")
read -r transactions commits queued < <(sql "SELECT transactions, commits, queued FROM occ.key_stats WHERE key = 'hot:1'" | tr '|' ' ')
echo "pgbouncer: pgbench with SET LOCAL occ.key, $CLIENTS clients x $CALLS_PER_CLIENT transactions: $processed committed, $retries retries, row $value; occ.key_stats: $transactions transactions, $commits commits, $queued queued"
[ "$processed" = "$((CLIENTS * CALLS_PER_CLIENT))" ] || fail "pgbench with SET LOCAL occ.key: $out"
[ "$value" = "$processed" ] || fail "row $value != $processed committed transactions: lost or doubled updates"
[ "$commits" = "$processed" ] || fail "occ.key_stats commits $commits != pgbench's $processed"
[ "$transactions" = "$((processed + retries))" ] || fail "occ.key_stats transactions $transactions != $processed + $retries retries"

# psycopg threads, a client-side retry loop through the pool
got=$(/usr/bin/python3 - "$PORT" "$DB" <<'PY'
import sys, threading, psycopg
from psycopg import errors, sql
failures = []
def client():
    try:
        with psycopg.connect(host="127.0.0.1", port=sys.argv[1], dbname=sys.argv[2], prepare_threshold=None) as conn:
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            for _ in range(50):
                while True:
                    try:
                        conn.execute(sql.SQL("SET LOCAL occ.key = {}").format(sql.Literal("hot:1")))
                        n = conn.execute("SELECT n FROM hot WHERE id = 1").fetchone()[0]
                        conn.execute("UPDATE hot SET n = %s WHERE id = 1", [n + 1])
                        conn.commit()
                        break
                    except errors.SerializationFailure:
                        conn.rollback()
    except Exception as e:
        failures.append(f"{type(e).__name__}: {e}")
threads = [threading.Thread(target=client) for _ in range(4)]
for t in threads: t.start()
for t in threads: t.join()
print(failures[0] if failures else "ok")
PY
)
after=$(sql "SELECT n FROM hot WHERE id = 1")
echo "pgbouncer: psycopg retry loops with SET LOCAL occ.key, 4 threads x 50 transactions: $got, row +$((after - value))"
[ "$got" = ok ] || fail "psycopg with SET LOCAL occ.key through PgBouncer: $got"
[ "$((after - value))" -eq 200 ] || fail "psycopg with SET LOCAL occ.key: row grew by $((after - value)), not 200"

# nothing outlives the transaction: the next client on the (only) server
# connection has no key, and no gate is held; a session SET is refused
bpsql -d occ_apps_one -c "BEGIN" -c "SET LOCAL occ.key = 'hot:1'" -c "COMMIT"
left=$(bpsql -d occ_apps_one -c "SELECT '[' || current_setting('occ.key') || '] ' || (SELECT count(*) FROM pg_locks WHERE objsubid = 20291)")
echo "pgbouncer: after a transaction with SET LOCAL occ.key, the next client sees the key and gates: $left"
[ "$left" = "[] 0" ] || fail "a key or a gate outlived its transaction: $left"
err=$(bpsql -d occ_apps_one -c "SET occ.key = 'hot:1'" 2>&1) && fail "a session SET occ.key went through"
grep -q "occ.key can only be set with SET LOCAL" <<<"$err" || fail "session SET occ.key: $err"

# --- reservable columns through the pool -------------------------------------------
# UPDATE stock SET qty = qty - 1 WHERE id = 1 reserves: no row lock, so the
# clients' transactions through the pool do not queue on the row
sql "CREATE TABLE stock (id int PRIMARY KEY, qty int NOT NULL CHECK (qty >= 0));
     INSERT INTO stock VALUES (1, 100000);
     SELECT occ.make_reservable('stock', 'qty');" >/dev/null
tag=$(psql -X -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PORT" -d "$DB" -c "UPDATE stock SET qty = qty - 1 WHERE id = 1")
echo "pgbouncer: reservable: UPDATE stock SET qty = qty - 1 WHERE id = 1 through the pool: $tag"
[ "$tag" = "UPDATE 1" ] || fail "the reserving UPDATE through PgBouncer reported '$tag', not 'UPDATE 1'"
tag=$(psql -X -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PORT" -d "$DB" -c "UPDATE stock SET qty = qty - 1 WHERE id = 99")
[ "$tag" = "UPDATE 0" ] || fail "the reserving UPDATE of a missing key through PgBouncer reported '$tag', not 'UPDATE 0'"
script=$DIR/occ_reserve.sql
cat >"$script" <<'SQL'
BEGIN;
UPDATE stock SET qty = qty - 1 WHERE id = 1;
UPDATE stock SET qty = qty + 3 WHERE id = 1;
UPDATE stock SET qty = qty - 4 WHERE id = 1;
COMMIT;
SQL
out=$(pgbench -n -h 127.0.0.1 -p "$PORT" -d "$DB" -c "$CLIENTS" -j 2 -t 25 -f "$script" 2>&1) ||
    fail "pgbench with reserving UPDATEs failed: $out"
processed=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
[ "$processed" = "$((CLIENTS * 25))" ] || fail "pgbench with reserving UPDATEs: $out"
value=$(sql "SELECT occ.reserved_value('stock', 'qty', 1)")
echo "pgbouncer: reservable: pgbench $CLIENTS clients x 25 transactions of 3 reserving UPDATEs (-1 +3 -4): $processed committed, value $value"
[ "$value" = "$((100000 - 1 - 2 * processed))" ] ||
    fail "after $processed transactions of -2 the value is $value, not $((100000 - 1 - 2 * processed))"
# the same through psycopg (prepare_threshold=None: no named statements)
got=$(/usr/bin/python3 - "$PORT" "$DB" <<'PY'
import sys, threading, psycopg
results = []
def client():
    try:
        with psycopg.connect(host="127.0.0.1", port=sys.argv[1], dbname=sys.argv[2], prepare_threshold=None) as conn:
            for _ in range(20):
                results.append(conn.execute("UPDATE stock SET qty = qty - %s WHERE id = %s", (1, 1)).rowcount)
                conn.commit()
    except Exception as e:
        results.append(f"{type(e).__name__}: {e}")
threads = [threading.Thread(target=client) for _ in range(4)]
for t in threads: t.start()
for t in threads: t.join()
print("ok" if results == [1] * 80 else [r for r in results if r != 1][:1] or len(results))
PY
)
after=$(sql "SELECT occ.reserved_value('stock', 'qty', 1)")
echo "pgbouncer: reservable: psycopg, 4 threads x 20 reserving UPDATEs: $got, value $after"
[ "$got" = ok ] || fail "psycopg's reserving UPDATEs through PgBouncer: not rowcount 1 each: $got"
[ "$after" = "$((value - 80))" ] || fail "after psycopg's 80 reservations of 1 the value is $after, not $((value - 80))"

echo "pgbouncer: ok"
