#!/bin/bash
# pg_occ on a Citus cluster (issue 38; test/run.sh runs it for PostgreSQL 15,
# in a cluster of its own): a coordinator and two workers
# (/work/shared/citus/cluster.sh, Citus 13.2.2 built and installed by its
# build.sh), preloading citus first and then pg_occ.
#   - CREATE EXTENSION pg_occ on the coordinator: Citus creates it on the
#     workers too.
#   - A distributed table accounts (id int PRIMARY KEY, v bigint), 32 rows,
#     distributed by id.  On the coordinator, occ.retry in queue mode at
#     REPEATABLE READ from pgbench (16 clients, 5 s each):
#       hot       one row read and written back + 1 (a read, then an UPDATE
#                 of the value read, not v = v + 1), key 'a:<id>': the row
#                 gained exactly the commits that pgbench counted, as many
#                 as occ.stats' commits (nothing lost or doubled);
#       transfer  1 moved between two rows in shards on different workers
#                 (two-phase commit), each read and written back -/+ 1, both
#                 ways (two scripts, one body), keys of both rows: each row
#                 holds exactly what the commits of each way moved, the
#                 total is conserved, no prepared transaction is left,
#                 occ.stats agrees.
#       deadlock  two calls write two rows on two workers in opposite
#                 orders, a second apart: Citus's distributed deadlock
#                 detector cancels one, which is retried (40P01: Citus's
#                 cancel taken for the deadlock it is), both commit.
#       restart   a call that writes a row, sleeps and writes it again,
#                 whose worker backend is killed (SIGKILL) in the sleep: with
#                 retry_on listing 08006 and 57P02 it runs again once the
#                 worker is back and commits once (row +2); without, it
#                 fails and leaves nothing.
#       doomed    a serializable call that wrote a row on a worker and whose
#                 COMMIT then fails the coordinator's serialization check
#                 (a write skew on a table of the coordinator): its retry
#                 commits once, the row +1 (pg_occ has Citus commit it in
#                 two phases, so the failure rolls back the worker's part);
#                 the same for an application's transaction that sets
#                 occ.key: its failed COMMIT leaves the worker's row as it
#                 was; below SERIALIZABLE (one phase), a retryable failure
#                 at COMMIT gives up with 40003.
#       storm     Jepsen-style: transfers between A and B through the
#                 coordinator (repeatable read or read committed), each
#                 logged in a row of its own, from psql
#                 clients whose backends are cancelled and terminated, while
#                 a worker's backend is killed (SIGKILL) twice (half the
#                 clients retry 08006 and 57P02, and never fail with
#                 either): after Citus
#                 recovers its commits in doubt, nothing is logged twice,
#                 every success is logged, no failure is, the rows moved as
#                 logged, no prepared transaction is left.
#   - Delegated calls: a procedure bump(k) whose body calls occ.retry on
#     row k (key 'a:' || k), distributed by k, colocated with accounts
#     (create_distributed_function), called from pgbench through the
#     coordinator on the same hot row: Citus runs each call on the worker
#     that holds the row, so the calls queue on that worker's gate.  The row
#     gained exactly the commits; the worker's occ.stats counted every call,
#     the other worker's and the coordinator's none.  The same in batch
#     mode (bump_batch): exact, and most calls run in batches there.
#   - occ.make_reservable() on the distributed table, a reference table and
#     a Citus local table, on the coordinator and on a worker: 0A000, "not
#     supported on the citus ... table", with a hint (Citus itself would
#     refuse pg_occ's CREATE TRIGGER of the guard with XX000); on a plain
#     table of the coordinator, reservations work and are folded.
#   - shared_preload_libraries = 'pg_occ,citus' (a throwaway node): the
#     server does not start, Citus says "Citus has to be loaded first".
# The commits per second of the hot row, through the coordinator and
# delegated, are printed (not checked).  Needs Citus's scripts in
# $PG_OCC_CITUS (default: ../shared/citus beside this tree; SKIP without
# them), root, pg_occ installed; uses PG_CONFIG (default: pg_config).
set -euo pipefail
cd "$(dirname "$0")/.."

CITUS=${PG_OCC_CITUS:-$(cd .. && pwd)/shared/citus}
if [ ! -x "$CITUS/cluster.sh" ] || [ ! -f "$CITUS/build.sh" ]; then
    echo "citus: SKIP: no Citus scripts in $CITUS (set PG_OCC_CITUS)"
    exit 0
fi
fail() { echo "citus: FAIL: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "run as root (Citus's cluster.sh needs it)"
export PG_CONFIG=${PG_CONFIG:-pg_config}
BINDIR=$("$PG_CONFIG" --bindir)
SECS=${CITUS_SECONDS:-5}
CLIENTS=${CITUS_CLIENTS:-16}

bash "$CITUS/build.sh"

# four free ports in a row (the cluster's three and a throwaway node's), from a random start
free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
PORT=
for _ in $(seq 1 50); do
    p=$((20000 + RANDOM % 20000))
    if free "$p" && free $((p + 1)) && free $((p + 2)) && free $((p + 3)); then PORT=$p; break; fi
done
[ -n "$PORT" ] || fail "no free ports"
W1=$((PORT + 1)) W2=$((PORT + 2))
DIR=$(mktemp -d /tmp/occ_citus.XXXXXX)
chmod 755 "$DIR"
single=
cleanup() {
    bash "$CITUS/cluster.sh" stop "$DIR/c" "$PORT" || true
    [ -z "$single" ] || runuser -u postgres -- "$BINDIR/pg_ctl" -D "$DIR/s/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$DIR"
}
trap cleanup EXIT

# q PORT SQL...: psql on a node (each -c in autocommit), values unaligned
q() {
    local port=$1
    shift
    "$BINDIR/psql" -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres -d postgres "$@"
}
# bench PORT NAME SCRIPT...: pgbench on a node, its output in $DIR/NAME.out
bench() {
    local port=$1 name=$2
    shift 2
    "$BINDIR/pgbench" -n -h 127.0.0.1 -p "$port" -U postgres -c "$CLIENTS" -j 2 -T "$SECS" "$@" postgres \
        >"$DIR/$name.out" 2>&1 || { cat "$DIR/$name.out" >&2; fail "$name: pgbench failed"; }
    ! grep -q "aborted" "$DIR/$name.out" || { cat "$DIR/$name.out" >&2; fail "$name: clients aborted"; }
}
# node_up PORT: wait (up to 20 s) until the node answers again, after a restart
node_up() {
    local _
    for _ in $(seq 1 100); do q "$1" -c "SELECT 1" >/dev/null 2>&1 && return; sleep 0.2; done
}
# RETRY_RESTARTS: the retry_on of a call that retries a worker's restart
# (docs/citus.md): the connection dropped or refused while the worker
# recovers (08006), the worker's backends ended by its crash (57P02)
RETRY_RESTARTS='{40001,40P01,08006,57P02}'
processed() { sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$DIR/$1.out"; }
tps() { sed -n 's/^tps = \([0-9.]*\) (without initial connection time)/\1/p' "$DIR/$1.out"; }
# per_script NAME N: the transactions of pgbench's script N
per_script() {
    awk -v n="SQL script $2:" 'index($0, n) == 1 { on = 1; next }
        on && / transactions \(/ { print $2; exit }' "$DIR/$1.out"
}
# commits PORT PATTERN: occ.stats' calls and commits of the bodies LIKE PATTERN
commits() { q "$1" -c "SELECT coalesce(sum(calls), 0) || '|' || coalesce(sum(commits), 0) FROM occ.stats WHERE query LIKE '$2'"; }

bash "$CITUS/cluster.sh" start "$DIR/c" "$PORT"

# pg_occ on the coordinator: Citus creates it on the workers
q "$PORT" -c "CREATE EXTENSION pg_occ"
for w in $W1 $W2; do
    [ "$(q "$w" -c "SELECT extversion FROM pg_extension WHERE extname = 'pg_occ'")" = \
      "$(q "$PORT" -c "SELECT extversion FROM pg_extension WHERE extname = 'pg_occ'")" ] ||
        fail "CREATE EXTENSION pg_occ on the coordinator did not create it on the worker :$w"
done
echo "citus: CREATE EXTENSION pg_occ on the coordinator created it on both workers"

# read_v: a read of a row in its own statement (a query that Citus runs
# on the worker); the bodies carry what it read to their UPDATE in a
# transaction-local setting, which Citus evaluates on the coordinator
q "$PORT" >/dev/null <<'SQL'
\set ON_ERROR_STOP 1
CREATE TABLE accounts (id int PRIMARY KEY, v bigint NOT NULL);
SELECT create_distributed_table('accounts', 'id');
INSERT INTO accounts SELECT g, 0 FROM generate_series(1, 32) g;
CREATE FUNCTION read_v(k int) RETURNS bigint LANGUAGE plpgsql AS $f$
DECLARE r bigint;
BEGIN
    SELECT v INTO STRICT r FROM accounts WHERE id = k;
    RETURN r;
END $f$;
CREATE PROCEDURE bump(k int) LANGUAGE plpgsql AS $p$
BEGIN
    CALL occ.retry($b$
        SELECT set_config('occ_citus.bump', read_v($1)::text, true);
        UPDATE accounts SET v = current_setting('occ_citus.bump')::bigint + 1 WHERE id = $1
    $b$, params => row(k), isolation => 'repeatable read', contention => 'queue',
         key => 'a:' || k, max_attempts => 1000);
END $p$;
SELECT create_distributed_function('bump(int)', '$1', colocate_with := 'accounts');
CREATE TABLE ref (id int PRIMARY KEY, v bigint NOT NULL);
SELECT create_reference_table('ref');
CREATE TABLE loc (id int PRIMARY KEY, v bigint NOT NULL);
SELECT citus_add_local_table_to_metadata('loc');
SQL

# the port of the worker that holds row k
node_of() {
    q "$PORT" -c "SELECT nodeport FROM citus_shards WHERE table_name = 'accounts'::regclass
                   AND shardid = get_shard_id_for_distribution_column('accounts', $1)"
}
HOT=1
HOT_NODE=$(node_of $HOT)
OTHER_NODE=$((HOT_NODE == W1 ? W2 : W1))
# the transfer's rows: one on each worker
A=$HOT
B=
for k in $(seq 2 32); do
    [ "$(node_of "$k")" != "$HOT_NODE" ] && { B=$k; break; }
done
[ -n "$B" ] || fail "all rows on one worker"
echo "citus: row $HOT on the worker :$HOT_NODE, row $B on :$OTHER_NODE"

# --- a. through the coordinator: the hot row
cat >"$DIR/hot.sql" <<'EOF'
CALL occ.retry($b$
    SELECT set_config('occ_citus.hot', read_v($1)::text, true);
    UPDATE accounts SET v = current_setting('occ_citus.hot')::bigint + 1 WHERE id = $1
$b$, params => row(:k), isolation => 'repeatable read', contention => 'queue',
    key => 'a:' || :k, max_attempts => 1000);
EOF
chmod 644 "$DIR"/*.sql
bench "$PORT" hot -D k=$HOT -f "$DIR/hot.sql"
n=$(processed hot)
[ "${n:-0}" -gt 0 ] || fail "hot: nothing committed"
v=$(q "$PORT" -c "SELECT v FROM accounts WHERE id = $HOT")
[ "$v" = "$n" ] || fail "hot: the row is $v after $n commits (lost or doubled updates)"
s=$(commits "$PORT" '%occ_citus.hot%')
[ "$s" = "$n|$n" ] || fail "hot: occ.stats (calls|commits) $s, pgbench $n"
COORD_TPS=$(tps hot)
echo "citus: hot row through the coordinator (queue mode, repeatable read): $n commits, $COORD_TPS/s, the row $v, occ.stats $s"

# --- a. a transfer between two rows on different workers, both ways: the
# same body, which writes row A first, then B (two transfers the other
# way round could deadlock across the workers in their first attempts,
# which run before the keys are hot, each waiting for Citus's detector: see
# the deadlock below), moving $3 from A to B
for way in ab ba; do
    if [ $way = ab ]; then d=1; else d=-1; fi
    cat >"$DIR/$way.sql" <<EOF
CALL occ.retry(\$b\$
    SELECT set_config('occ_citus.from', read_v(\$1)::text, true), set_config('occ_citus.to', read_v(\$2)::text, true);
    UPDATE accounts SET v = current_setting('occ_citus.from')::bigint - \$3 WHERE id = \$1;
    UPDATE accounts SET v = current_setting('occ_citus.to')::bigint + \$3 WHERE id = \$2
\$b\$, params => row($A, $B, $d), isolation => 'repeatable read', contention => 'queue',
    key => array['a:' || $A, 'a:' || $B], max_attempts => 1000);
EOF
done
chmod 644 "$DIR"/*.sql
before_a=$(q "$PORT" -c "SELECT v FROM accounts WHERE id = $A")
before_b=$(q "$PORT" -c "SELECT v FROM accounts WHERE id = $B")
total=$(q "$PORT" -c "SELECT sum(v) FROM accounts")
bench "$PORT" transfer -f "$DIR/ab.sql" -f "$DIR/ba.sql"
n=$(processed transfer) nab=$(per_script transfer 1) nba=$(per_script transfer 2)
{ [ "${n:-0}" -gt 0 ] && [ $((nab + nba)) = "$n" ]; } || fail "transfer: pgbench counted $n, $nab and $nba"
va=$(q "$PORT" -c "SELECT v FROM accounts WHERE id = $A")
vb=$(q "$PORT" -c "SELECT v FROM accounts WHERE id = $B")
{ [ "$va" = $((before_a - nab + nba)) ] && [ "$vb" = $((before_b + nab - nba)) ]; } ||
    fail "transfer: rows $A and $B are $va and $vb, expected $((before_a - nab + nba)) and $((before_b + nab - nba)) after $nab and $nba transfers"
[ "$(q "$PORT" -c "SELECT sum(v) FROM accounts")" = "$total" ] || fail "transfer: the total is not conserved"
s=$(commits "$PORT" '%occ_citus.from%')
[ "$s" = "$n|$n" ] || fail "transfer: occ.stats (calls|commits) $s, pgbench $n"
for w in $W1 $W2; do
    [ "$(q "$w" -c "SELECT count(*) FROM pg_prepared_xacts")" = 0 ] || fail "transfer: prepared transactions left on :$w"
done
echo "citus: transfers between the workers through the coordinator: $n commits ($nab and $nba), $(tps transfer)/s, the total conserved, occ.stats $s"

# --- b. delegated: bump(k) runs on the worker that holds row k
# delegated PROC: pgbench CALLs PROC(row HOT) through the coordinator; the
# row must have grown by exactly the commits, left in n
delegated() {
    local before v
    echo "CALL $1(:k);" >"$DIR/$1.sql"
    chmod 644 "$DIR/$1.sql"
    before=$(q "$PORT" -c "SELECT v FROM accounts WHERE id = $HOT")
    bench "$PORT" "$1" -D k=$HOT -f "$DIR/$1.sql"
    n=$(processed "$1")
    [ "${n:-0}" -gt 0 ] || fail "$1: nothing committed"
    v=$(q "$PORT" -c "SELECT v FROM accounts WHERE id = $HOT")
    [ "$v" = $((before + n)) ] || fail "$1: the row is $v after $n commits from $before (lost or doubled updates)"
}
delegated bump
s=$(commits "$HOT_NODE" '%occ_citus.bump%')
[ "$s" = "$n|$n" ] || fail "bump: the worker :$HOT_NODE's occ.stats (calls|commits) $s, pgbench $n: not delegated?"
for p in $PORT $OTHER_NODE; do
    s=$(commits "$p" '%occ_citus.bump%')
    [ "$s" = "0|0" ] || fail "bump: occ.stats of :$p counted $s calls of bump's body: not delegated?"
done
DELEGATED_TPS=$(tps bump)
echo "citus: hot row delegated to the worker :$HOT_NODE (queue mode, repeatable read): $n commits, $DELEGATED_TPS/s, occ.stats there $n|$n"

# --- b. delegated in batch mode: bump_batch(k) on the worker, whose
# calls of one key run in batches there (Citus's ShareLock on the shards'
# metadata, taken by every writing transaction, is Citus's, not a lock of
# the body's that would make it run alone)
q "$PORT" >/dev/null <<'SQL'
\set ON_ERROR_STOP 1
CREATE PROCEDURE bump_batch(k int) LANGUAGE plpgsql AS $p$
BEGIN
    CALL occ.retry('UPDATE accounts SET v = v + 1 /* occ_citus.batch */ WHERE id = $1',
                   params => row(k), contention => 'batch', key => 'b:' || k, max_attempts => 1000);
END $p$;
SELECT create_distributed_function('bump_batch(int)', '$1', colocate_with := 'accounts');
SQL
delegated bump_batch
s=$(q "$HOT_NODE" -c "SELECT calls || '|' || commits || '|' || batched FROM occ.stats WHERE query LIKE '%occ_citus.batch%'")
[ "${s%|*}" = "$n|$n" ] || fail "bump_batch: the worker :$HOT_NODE's occ.stats (calls|commits|batched) $s, pgbench $n"
[ "${s##*|}" -gt $((n / 2)) ] || fail "bump_batch: $n calls, ${s##*|} of them in batches on :$HOT_NODE (calls|commits|batched $s)"
echo "citus: hot row delegated in batch mode: $n commits, $(tps bump_batch)/s, the worker's occ.stats (calls|commits|batched) $s"

# From PostgreSQL 16 on, PGXS builds Citus with its symbols hidden: pg_occ
# cannot ask it whether a cancel was its deadlock detector's, nor make a
# serializable attempt commit in two phases (src/attempt/citus.c).  There
# the checks below take what pg_occ does instead: the cancel stays a cancel,
# and a failure at COMMIT gives up with 40003, never running again a body
# whose part on a worker committed.
HIDDEN=
[ "$(q "$PORT" -c "SHOW server_version_num")" -lt 160000 ] || HIDDEN=1

# --- a. a distributed deadlock is retried: two calls through the
# coordinator write rows A and B (on two workers) in opposite orders, a
# second apart; no worker sees the cycle, Citus's detector cancels one
# backend (citus.distributed_deadlock_detection_factor 2 x deadlock_timeout
# 1 s), and that call runs again (40P01), where it used to stop (57014);
# 300 ms after, when the other call has committed (retried at once, it
# could start before that commit, wait for its row and fail once more with
# 40001: seen once on PostgreSQL 15)
before_a=$(q "$PORT" -c "SELECT v FROM accounts WHERE id = $A")
before_b=$(q "$PORT" -c "SELECT v FROM accounts WHERE id = $B")
for way in "$A $B" "$B $A"; do
    set -- $way
    q "$PORT" -c "CALL occ.retry('UPDATE accounts SET v = v + 1 WHERE id = $1; SELECT pg_sleep(1);
                                  UPDATE accounts SET v = v + 1 WHERE id = $2',
                                 isolation => 'repeatable read', contention => 'backoff',
                                 base => '300ms', cap => '300ms', jitter => 'none')" \
      -c "SELECT attempts || ' ' || outcome || ' ' || coalesce(last_sqlstate, '-') FROM occ.last_retry()" \
      >"$DIR/deadlock-$1.out" 2>&1 &
done
wait
outcomes=$(cat "$DIR/deadlock-$A.out" "$DIR/deadlock-$B.out" | sort | tr '\n' ',')
if [ -n "$HIDDEN" ]; then
    grep -q "^1 committed -," <<<"$outcomes" && grep -q "ERROR:  canceling statement due to user request" <<<"$outcomes" ||
        fail "a distributed deadlock (Citus's functions hidden): the two calls ended $outcomes, not one committed and one cancelled"
    [ "$(q "$PORT" -c "SELECT v FROM accounts WHERE id = $A")" = $((before_a + 1)) ] &&
        [ "$(q "$PORT" -c "SELECT v FROM accounts WHERE id = $B")" = $((before_b + 1)) ] ||
        fail "a distributed deadlock (Citus's functions hidden): rows $A and $B did not gain 1 each"
    echo "citus: a distributed deadlock through the coordinator, Citus's functions hidden: one call committed, the other reported Citus's cancel (57014), each row +1"
else
[ "$outcomes" = "1 committed -,2 committed 40P01," ] ||
    fail "a distributed deadlock: the two calls ended (attempts outcome last SQLSTATE) $outcomes, not one at once and one retried after a 40P01"
[ "$(q "$PORT" -c "SELECT v FROM accounts WHERE id = $A")" = $((before_a + 2)) ] &&
    [ "$(q "$PORT" -c "SELECT v FROM accounts WHERE id = $B")" = $((before_b + 2)) ] ||
    fail "a distributed deadlock: rows $A and $B did not gain 2 each"
echo "citus: a distributed deadlock through the coordinator: one call committed at once, the other cancelled by Citus's detector and retried (40P01), each row +2"
fi

# --- a. a worker's restart in the middle of a call: the call writes row
# A (on the worker :HOT_NODE), sleeps, and writes it again; while it
# sleeps, the worker's backend that serves it is killed with SIGKILL (the
# worker restarts, dropping every connection to it), and its second write
# fails.  With retry_on listing 08006 and 57P02 (docs/citus.md) the call
# runs again once the worker is back and commits once: row A +2; without,
# the call fails and nothing of it is left.
# restart_call RETRY_ON: the call, its worker backend killed; prints the
# call's output ("attempts outcome", or its error) and the row's gain
restart_call() {
    local before pid call
    before=$(q "$PORT" -c "SELECT v FROM accounts WHERE id = $A")
    q "$PORT" -c "CALL occ.retry('UPDATE accounts SET v = v + 1 WHERE id = $A; SELECT pg_sleep(1.5);
                                  UPDATE accounts SET v = v + 1 WHERE id = $A',
                                 isolation => 'repeatable read', contention => 'backoff',
                                 max_attempts => 300, retry_on => '$1')" \
      -c "SELECT attempts || ' ' || outcome FROM occ.last_retry()" >"$DIR/restart.out" 2>&1 &
    call=$!
    for _ in $(seq 1 100); do
        pid=$(q "$HOT_NODE" -c "SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'citus_internal gpid=%'
                                 AND state = 'idle in transaction' AND backend_xid IS NOT NULL LIMIT 1" 2>/dev/null || true)
        [ -z "$pid" ] || break
        sleep 0.05
    done
    [ -n "$pid" ] || fail "a worker's restart: the call's backend on :$HOT_NODE never waited in its transaction"
    kill -KILL "$pid"
    wait "$call" || true
    node_up "$HOT_NODE"
    # its outcome (Citus's WARNINGs about the lost connection aside)
    { grep -E '^[0-9]+ [a-z ]+$' "$DIR/restart.out" || grep -m1 -o 'ERROR: .*' "$DIR/restart.out" || cat "$DIR/restart.out"; } |
        head -1 | tr -d '\n'
    echo " | +$(($(q "$PORT" -c "SELECT v FROM accounts WHERE id = $A") - before))"
}
got=$(restart_call "$RETRY_RESTARTS")
grep -qE '^[0-9]+ committed \| \+2$' <<<"$got" && [ "${got%% *}" -ge 2 ] ||
    fail "a worker's restart, retried: the call ended $got, not committed after 2 or more attempts with row $A +2 ($(cat "$DIR/restart.out"))"
echo "citus: a worker's restart in the middle of a call that retries 08006 and 57P02: $got (attempts outcome | row $A's gain)"
got=$(restart_call '{40001,40P01}')
grep -qE '^ERROR: .*\| \+0$' <<<"$got" ||
    fail "a worker's restart, not retried: the call ended $got, not an error with row $A unchanged ($(cat "$DIR/restart.out"))"
echo "citus: the same call that does not retry them: $(cut -c1-100 <<<"$got")"

# --- a. a serializable call whose COMMIT fails after its write on a
# worker: Citus commits a transaction that wrote through one connection in
# one phase, at pre-commit, before the coordinator's serialization check.
# The call reads skew row 1 and writes skew row 2 (a table of the
# coordinator's own), writes row A of accounts, and sleeps; meanwhile a
# serializable session that read skew row 2 writes row 1 and commits,
# which dooms the call: its COMMIT fails (40001).  pg_occ makes Citus
# commit a serializable attempt in two phases, so the failure rolls back
# the worker's part too and the retry commits once: row A +1 (with the
# worker's part committed in one phase and the body run again: +2)
q "$PORT" -c "CREATE TABLE skew (id int PRIMARY KEY, v int NOT NULL)" >/dev/null
# skew_writer WHAT: skew's rows set to 0, a serializable session that reads
# row 2, sleeps 3 s, then writes row 1 and commits, started in the
# background (its output in $DIR/skew-writer.out); returns once it sleeps
skew_writer() {
    local tries=0
    q "$PORT" -c "DELETE FROM skew" -c "INSERT INTO skew VALUES (1, 0), (2, 0)" >/dev/null
    q "$PORT" -c "BEGIN ISOLATION LEVEL SERIALIZABLE; SELECT v FROM skew WHERE id = 2; SELECT pg_sleep(3);
                  UPDATE skew SET v = v + 1 WHERE id = 1; COMMIT" >"$DIR/skew-writer.out" 2>&1 &
    until [ "$(q "$PORT" -c "SELECT count(*) FROM pg_stat_activity
                             WHERE query LIKE 'BEGIN ISOLATION LEVEL SERIALIZABLE; SELECT v FROM skew%' AND wait_event = 'PgSleep'")" = 1 ]; do
        tries=$((tries + 1))
        [ "$tries" -lt 100 ] || fail "$1: the other session did not begin: $(cat "$DIR/skew-writer.out")"
        sleep 0.1
    done
}
before_a=$(q "$PORT" -c "SELECT v FROM accounts WHERE id = $A")
skew_writer "a serializable call doomed at COMMIT"
q "$PORT" -c "CALL occ.retry('SELECT v FROM skew WHERE id = 1; UPDATE skew SET v = v + 1 WHERE id = 2;
                             UPDATE accounts SET v = v + 1 WHERE id = $A; SELECT pg_sleep(4)',
                            isolation => 'serializable', contention => 'backoff')" \
  -c "SELECT attempts || ' ' || outcome || ' ' || coalesce(last_sqlstate, '-') FROM occ.last_retry()" \
  >"$DIR/skew-call.out" 2>&1 || true
wait
if [ -n "$HIDDEN" ]; then
    grep -q "ERROR:  the occ.retry body may have committed in part" "$DIR/skew-call.out" &&
        grep -q "its functions are hidden" "$DIR/skew-call.out" ||
        fail "a serializable call doomed at COMMIT (Citus's functions hidden): $(tr '\n' ' ' <"$DIR/skew-call.out"), not 40003"
    grew=$(($(q "$PORT" -c "SELECT v FROM accounts WHERE id = $A") - before_a))
    [ "$grew" = 1 ] || fail "a serializable call doomed at COMMIT (Citus's functions hidden): row $A gained $grew, not 1"
    echo "citus: a serializable call doomed at COMMIT after writing on a worker, Citus's functions hidden: 40003, its worker's part committed once (+1), the body not run again"
else
[ "$(cat "$DIR/skew-call.out")" = "2 committed 40001" ] ||
    fail "a serializable call doomed at COMMIT: it ended $(tr '\n' ' ' <"$DIR/skew-call.out") (the other session: $(tr '\n' ' ' <"$DIR/skew-writer.out")), not committed at its second attempt after a 40001"
grew=$(($(q "$PORT" -c "SELECT v FROM accounts WHERE id = $A") - before_a))
[ "$grew" = 1 ] ||
    fail "a serializable call doomed at COMMIT after its write on a worker: row $A gained $grew, not 1 (the worker's part of the failed attempt committed)"
[ "$(q "$PORT" -c "SELECT string_agg(id || '=' || v, ',' ORDER BY id) FROM skew")" = "1=1,2=1" ] ||
    fail "a serializable call doomed at COMMIT: skew is not 1=1,2=1"
echo "citus: a serializable call doomed at COMMIT after writing on a worker: retried whole (two-phase commit), row +1, not +2"
fi

# --- a. the same with the application's own SERIALIZABLE transaction that
# sets occ.key, which the application retries whole after a 40001: its
# failed COMMIT leaves row A as it was (in one phase, the worker's part
# committed: +1)
before_a=$(q "$PORT" -c "SELECT v FROM accounts WHERE id = $A")
skew_writer "a keyed transaction doomed at COMMIT"
q "$PORT" -c "BEGIN ISOLATION LEVEL SERIALIZABLE; SET LOCAL occ.key = 'skew'; SELECT v FROM skew WHERE id = 1;
              UPDATE skew SET v = v + 1 WHERE id = 2; UPDATE accounts SET v = v + 1 WHERE id = $A;
              SELECT pg_sleep(4); COMMIT" >"$DIR/skew-client.out" 2>&1 || true
wait
grep -q "could not serialize access" "$DIR/skew-client.out" ||
    fail "a keyed transaction doomed at COMMIT: it ended $(tr '\n' ' ' <"$DIR/skew-client.out"), not with a serialization failure"
grew=$(($(q "$PORT" -c "SELECT v FROM accounts WHERE id = $A") - before_a))
if [ -n "$HIDDEN" ]; then
    # nothing pg_occ can do: the application sees 40001 and its write on
    # the worker stays (docs/citus.md: use REPEATABLE READ there)
    [ "$grew" = 1 ] ||
        fail "a keyed transaction that failed at COMMIT (Citus's functions hidden): row $A gained $grew, not the 1 of its one-phase write"
    echo "citus: an application's keyed serializable transaction doomed at COMMIT, Citus's functions hidden: one phase, its write on a worker committed (+1), as documented"
else
[ "$grew" = 0 ] ||
    fail "a keyed transaction that failed at COMMIT left its write on a worker committed: row $A gained $grew"
echo "citus: an application's keyed serializable transaction doomed at COMMIT: its write on a worker rolled back too (two-phase commit)"
fi

# --- a. below SERIALIZABLE, Citus still commits the write on one worker in
# one phase: a retryable failure at COMMIT (here a deferred unique
# constraint of a coordinator table, 23505 made retryable by retry_on)
# gives up with 40003 rather than run the body again
q "$PORT" -c "CREATE TABLE once (k int UNIQUE DEFERRABLE INITIALLY DEFERRED)" -c "INSERT INTO once VALUES (1)" >/dev/null
q "$PORT" -c "CALL occ.retry('UPDATE accounts SET v = v + 1 WHERE id = $A; INSERT INTO once VALUES (1)',
                            isolation => 'read committed', retry_on => '{23505}')" >"$DIR/once.out" 2>&1 || true
grep -q "ERROR:  the occ.retry body may have committed in part" "$DIR/once.out" &&
    grep -q -e "Citus commits the work of a transaction that wrote on one other node" \
        ${HIDDEN:+-e "its functions are hidden"} "$DIR/once.out" ||
    fail "a failure at COMMIT after a one-phase write on a worker: $(tr '\n' ' ' <"$DIR/once.out"), not 40003"
echo "citus: a retryable failure at COMMIT of a one-phase distributed transaction: 40003, the body not run again"

# --- a. Jepsen-style: transfers between rows A and B (on two workers)
# through the coordinator, each logged by a row of its own in tlog (a
# distributed table), at REPEATABLE READ or READ COMMITTED (at random), by
# STORM_CLIENTS psql clients, while their backends are cancelled (most
# often) and terminated, and twice (after 5 and 10 cancels, early enough
# that a loaded machine still gets both) a worker's backend is killed with
# SIGKILL (the worker restarts, dropping every connection to it).
# Afterwards, the coordinator recovers the two-phase commits left in
# doubt; then no prepared transaction is left, no transfer is logged
# twice, every call that succeeded is logged, no call that failed is, and
# rows A and B moved by exactly what the log says
STORM_CLIENTS=${CITUS_STORM_CLIENTS:-8} STORM_CALLS=${CITUS_STORM_CALLS:-60}
q "$PORT" -c "CREATE TABLE tlog (id text PRIMARY KEY, d int NOT NULL)" \
  -c "SELECT create_distributed_table('tlog', 'id')" >/dev/null
before_a=$(q "$PORT" -c "SELECT v FROM accounts WHERE id = $A")
before_b=$(q "$PORT" -c "SELECT v FROM accounts WHERE id = $B")
levels=('repeatable read' 'read committed')
# the even clients' calls retry a worker's restart too (RETRY_RESTARTS)
restart_codes=(", retry_on => '{40001,40P01}'" ", retry_on => '$RETRY_RESTARTS'")
for c in $(seq 1 "$STORM_CLIENTS"); do
    for i in $(seq 1 "$STORM_CALLS"); do
        echo "CALL occ.retry('INSERT INTO tlog VALUES (\$1, \$2);
                             UPDATE accounts SET v = v - \$2 WHERE id = $A;
                             UPDATE accounts SET v = v + \$2 WHERE id = $B',
                            params => row('$c-$i', $((RANDOM % 2 * 2 - 1))), isolation => '${levels[RANDOM % 2]}',
                            contention => 'queue', key => array['a:$A', 'a:$B'], max_attempts => 1000${restart_codes[c % 2 == 0]});"
        echo "\\if :ERROR"
        echo "\\echo fail $c-$i"
        echo "\\else"
        echo "\\echo ok $c-$i"
        echo "\\endif"
    done >"$DIR/storm$c.sql"
done
chmod 644 "$DIR"/storm*.sql
pids=()
for c in $(seq 1 "$STORM_CLIENTS"); do
    PGAPPNAME=storm "$BINDIR/psql" -X -q -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -v ON_ERROR_STOP=0 \
        -f "$DIR/storm$c.sql" >"$DIR/storm$c.out" 2>&1 &
    pids+=($!)
done
cancels=0 terminates=0 kills=0 start=$SECONDS
while :; do
    running=0
    for p in "${pids[@]}"; do ! kill -0 "$p" 2>/dev/null || running=$((running + 1)); done
    [ "$running" -gt 0 ] || break
    [ $((SECONDS - start)) -lt 300 ] || fail "storm: the clients still run after 300 s"
    if [ $kills -lt 2 ] && [ "$cancels" -ge $((kills * 5 + 5)) ]; then
        # a worker backend serving the coordinator's calls, killed: the
        # worker restarts (crash recovery), its connections all dropped
        w=$((kills % 2 == 0 ? W1 : W2))
        pid=$(q "$w" -c "SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'citus_internal gpid=%'
                          AND state <> 'idle' ORDER BY random() LIMIT 1" 2>/dev/null || true)
        [ -z "$pid" ] || { kill -KILL "$pid" 2>/dev/null && kills=$((kills + 1)); }
    elif [ $((RANDOM % 10)) -eq 0 ]; then
        n=$(q "$PORT" -c "SELECT count(pg_terminate_backend(pid)) FROM (SELECT pid FROM pg_stat_activity
                           WHERE application_name = 'storm' AND state = 'active' ORDER BY random() LIMIT 1) s")
        terminates=$((terminates + n))
    else
        n=$(q "$PORT" -c "SELECT count(pg_cancel_backend(pid)) FROM (SELECT pid FROM pg_stat_activity
                           WHERE application_name = 'storm' AND state = 'active' ORDER BY random() LIMIT 1) s")
        cancels=$((cancels + n))
    fi
    sleep "0.0$((RANDOM % 5 + 1))"
done
wait "${pids[@]}" 2>/dev/null || true
# both workers up again, then the commits in doubt recovered
for w in $W1 $W2; do node_up "$w"; done
q "$PORT" -c "SELECT recover_prepared_transactions()" >/dev/null
for w in $W1 $W2; do
    [ "$(q "$w" -c "SELECT count(*) FROM pg_prepared_xacts")" = 0 ] || fail "storm: prepared transactions left on :$w"
done
cat "$DIR"/storm*.out >"$DIR/storm.all"
{ grep -h '^ok ' "$DIR/storm.all" || true; } | cut -d' ' -f2 | sort >"$DIR/storm.ok"
{ grep -h '^fail ' "$DIR/storm.all" || true; } | cut -d' ' -f2 | sort >"$DIR/storm.failed"
q "$PORT" -c "SELECT id FROM tlog ORDER BY 1" | sort >"$DIR/storm.rows"
echo "citus: storm: $STORM_CLIENTS clients x $STORM_CALLS transfers, $cancels cancels, $terminates terminations, $kills worker backends killed: $(wc -l <"$DIR/storm.ok") succeeded, $(wc -l <"$DIR/storm.failed") failed, $(wc -l <"$DIR/storm.rows") logged"
echo "citus: storm: the failures' errors: $(grep -h '^psql:.*ERROR: ' "$DIR/storm.all" | sed 's/.*ERROR: *//' | cut -c1-50 |
                                              sort | uniq -c | sort -rn | head -4 | awk '{ $1 = $1 " x"; print }' | paste -sd';')"
[ "$cancels" -ge 10 ] || fail "storm: only $cancels cancels"
[ "$kills" = 2 ] || fail "storm: $kills worker backends killed, not 2"
# (a restart can also end a command with an error that has no SQLSTATE
# of its own, "SSL SYSCALL error: EOF detected", XX000 from Citus: not
# one that retry_on can tell from others, so not counted here)
restart_errors='ERROR: .*(connection to the remote node|terminating connection because of crash)'
for c in $(seq 2 2 "$STORM_CLIENTS"); do
    ! grep -qE "$restart_errors" "$DIR/storm$c.out" ||
        fail "storm: client $c, whose calls retry a worker's restart, failed on one: $(grep -hE "$restart_errors" "$DIR/storm$c.out" | head -3)"
done
echo "citus: storm: the calls that retry a worker's restart never failed on one; the others failed $(cat $(seq -f "$DIR/storm%g.out" 1 2 "$STORM_CLIENTS") | grep -cE "$restart_errors") times on it"
dups=$(uniq -d "$DIR/storm.rows" | head -5)
[ -z "$dups" ] || fail "storm: transfers logged twice: $dups"
missing=$(comm -23 "$DIR/storm.ok" "$DIR/storm.rows" | head -5)
[ -z "$missing" ] || fail "storm: transfers that succeeded but are not logged: $missing"
ghost=$(comm -12 "$DIR/storm.failed" "$DIR/storm.rows" | head -5)
[ -z "$ghost" ] || fail "storm: transfers that failed but are logged: $ghost"
moved=$(q "$PORT" -c "SELECT coalesce(sum(d), 0) FROM tlog")
[ "$(q "$PORT" -c "SELECT v FROM accounts WHERE id = $A")" = $((before_a - moved)) ] &&
    [ "$(q "$PORT" -c "SELECT v FROM accounts WHERE id = $B")" = $((before_b + moved)) ] ||
    fail "storm: rows $A and $B are $(q "$PORT" -c "SELECT v FROM accounts WHERE id = $A") and $(q "$PORT" -c "SELECT v FROM accounts WHERE id = $B"), the log moved $moved from $before_a and $before_b"
echo "citus: storm: nothing logged twice, every success logged, no failure logged, the rows moved as logged ($moved), no prepared transaction left"

# --- c. reservable columns: refused on the tables of Citus, with 0A000
# refused PORT TABLE KIND: occ.make_reservable(TABLE) on a node
refused() {
    local out
    out=$("$BINDIR/psql" -X -q -h 127.0.0.1 -p "$1" -U postgres -d postgres -v VERBOSITY=verbose \
              -c "SELECT occ.make_reservable('$2', 'v')" 2>&1 || true)
    grep -q "ERROR:  0A000: reservable columns are not supported on the citus $3 table \"$2\"" <<<"$out" ||
        fail "make_reservable on the $3 table $2 (:$1): $out"
    grep -q "^HINT:  .*occ.retry" <<<"$out" || fail "make_reservable on the $3 table $2 (:$1): no hint: $out"
}
refused "$PORT" accounts distributed
refused "$W1" accounts distributed
refused "$PORT" ref reference
refused "$W2" ref reference
refused "$PORT" loc local
[ "$(q "$PORT" -c "SELECT count(*) FROM pg_trigger WHERE tgname LIKE 'occ_reservable%'")" = 0 ] ||
    fail "make_reservable left a trigger"
echo "citus: occ.make_reservable refused on the distributed, reference and local tables (0A000, with a hint)"
# what the hint says works: a plain table on the coordinator, reserved by
# the plain UPDATE and occ.reserve, folded
q "$PORT" >/dev/null <<'SQL'
\set ON_ERROR_STOP 1
CREATE TABLE stock (id int PRIMARY KEY, qty int NOT NULL CHECK (qty >= 0));
INSERT INTO stock VALUES (1, 10);
SELECT occ.make_reservable('stock', 'qty');
UPDATE stock SET qty = qty - 3 WHERE id = 1;
SELECT occ.reserve('stock', 'qty', 1, -2);
SQL
[ "$(q "$PORT" -c "SELECT occ.reserved_value('stock', 'qty', 1)")" = 5 ] || fail "reservations on a plain table"
for _ in $(seq 1 100); do
    [ "$(q "$PORT" -c "SELECT qty FROM stock")" = 5 ] && break
    sleep 0.1
done
[ "$(q "$PORT" -c "SELECT qty FROM stock")" = 5 ] || fail "reservations on a plain table: not folded after 10 s"
echo "citus: reservations on a plain table of the coordinator: reserved and folded"

# --- the wrong order in shared_preload_libraries: Citus refuses to start
mkdir "$DIR/s" && chown postgres "$DIR/s"
runuser -u postgres -- "$BINDIR/initdb" -D "$DIR/s/data" -A trust --no-sync >/dev/null
single=1
if runuser -u postgres -- "$BINDIR/pg_ctl" -D "$DIR/s/data" -w -t 20 -l "$DIR/s/log" \
       -o "-p $((PORT + 3)) -k $DIR/s -c listen_addresses='' -c shared_preload_libraries=pg_occ,citus" start >/dev/null 2>&1; then
    fail "the server started with shared_preload_libraries = 'pg_occ,citus'"
fi
grep -q "Citus has to be loaded first" "$DIR/s/log" ||
    fail "shared_preload_libraries = 'pg_occ,citus': $(cat "$DIR/s/log")"
echo "citus: shared_preload_libraries = 'pg_occ,citus': the server does not start: $(grep -m1 -o 'FATAL:.*' "$DIR/s/log")"

echo "citus: ok (hot row: $COORD_TPS commits/s through the coordinator, $DELEGATED_TPS/s delegated)"
