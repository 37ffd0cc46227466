#!/bin/bash
# Stress check: concurrent pgbench clients increment one row through
# occ.retry.  Nothing may be lost or doubled: the counter must equal the
# number of calls pgbench saw succeed, and with statistics the sums of
# occ.stats must match the work done (calls, commits, give-ups, attempts).
#
# CONTENTION=queue runs the calls in queue mode (each call queues on the
# row's gate); then occ.stats must also show queued calls.  CONTENTION=batch
# runs them in batch mode (each body's SET LOCAL is undone before the next
# body of its batch); occ.stats must show calls that ran in batches.  The
# calls run at REPEATABLE READ, except in batch mode, which batches only at
# SERIALIZABLE (and READ COMMITTED): there they run at SERIALIZABLE.
#
# Runs against the server in PG* (test/run.sh starts one); needs pg_occ
# preloaded for the statistics part.
set -euo pipefail

CLIENTS=${CLIENTS:-32}
CALLS_PER_CLIENT=${CALLS_PER_CLIENT:-100}
CONTENTION=${CONTENTION:-backoff}
ISOLATION="repeatable read"
[ "$CONTENTION" != batch ] || ISOLATION=serializable
DB=occ_stress

fail() { echo "stress: FAIL: $*" >&2; exit 1; }
sql() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$DB" -c "$1"; }

dropdb --if-exists "$DB" && createdb "$DB"
sql "CREATE EXTENSION pg_occ; CREATE TABLE hot (id int PRIMARY KEY, v bigint NOT NULL); INSERT INTO hot VALUES (1, 0);"
sql "SELECT occ.stats_reset();" >/dev/null

script=$(mktemp)
trap 'rm -f "$script"' EXIT
# read, then write the value read + 1: a lost update would show
cat > "$script" <<'SQL'
CALL occ.retry('SELECT set_config(''stress.v'', v::text, true) FROM hot WHERE id = 1;
                UPDATE hot SET v = current_setting(''stress.v'')::bigint + 1 WHERE id = 1',
               isolation => ':isolation', max_attempts => 20, base => '100us', cap => '20ms',
               contention => ':contention');
SQL

out=$(pgbench -n -d "$DB" -c "$CLIENTS" -j 2 -t "$CALLS_PER_CLIENT" -D contention="$CONTENTION" -D isolation="$ISOLATION" -f "$script" 2>&1) || true
processed=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' <<<"$out")
[ -n "$processed" ] || fail "pgbench did not run: $out"
failed=${failed:-0}
value=$(sql "SELECT v FROM hot WHERE id = 1")

echo "stress ($CONTENTION): $CLIENTS clients x $CALLS_PER_CLIENT calls: $processed committed, $failed gave up, counter $value"
[ "$((processed + failed))" -eq "$((CLIENTS * CALLS_PER_CLIENT))" ] || fail "pgbench lost calls"
[ "$value" -eq "$processed" ] || fail "counter $value != $processed committed calls"

read -r calls commits gave_up errors attempts failures queued < <(sql "
  SELECT calls, commits, gave_up, errors, attempts, serialization_failures + deadlocks + other_failures, queued
    FROM occ.stats WHERE query LIKE '%stress.v%'" | tr '|' ' ')
echo "stress: occ.stats: calls $calls, commits $commits, gave_up $gave_up, attempts $attempts, failed attempts $failures, queued $queued"
[ "$calls" -eq "$((CLIENTS * CALLS_PER_CLIENT))" ] || fail "occ.stats calls $calls"
[ "$commits" -eq "$processed" ] || fail "occ.stats commits $commits != $processed"
[ "$gave_up" -eq "$failed" ] || fail "occ.stats gave_up $gave_up != $failed"
[ "$errors" -eq 0 ] || fail "occ.stats errors $errors"
[ "$attempts" -eq "$((commits + failures))" ] || fail "attempts $attempts != commits + failed attempts"
[ "$failures" -gt 0 ] || fail "no conflicts at all: the check did not exercise retries"
if [ "$CONTENTION" != backoff ]; then
    [ "$queued" -gt 0 ] || fail "$CONTENTION mode, but no call queued"
    [ "$gave_up" -eq 0 ] || fail "$CONTENTION mode: $gave_up calls gave up"
fi
if [ "$CONTENTION" = batch ]; then
    batched=$(sql "SELECT batched || ' calls, mean size ' || round(mean_batch_size::numeric, 1) FROM occ.stats WHERE query LIKE '%stress.v%'")
    echo "stress: batched: $batched"
    [ "${batched%% *}" -gt 0 ] || fail "batch mode, but no call ran in a batch"
fi
dropdb "$DB"
echo "stress: ok"
