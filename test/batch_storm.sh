#!/bin/bash
# Batch mode under interrupts: clients run calls that each insert their own
# id and count it, in batch mode on one key, while a storm cancels and
# terminates their backends (leaders and followers alike) at random points:
# waiting, mid-batch, in COMMIT, after it.  Then, Jepsen style:
#   - every call its client saw succeed is in the table, once;
#   - no call is there twice (no body ran twice after a commit);
#   - no call that its client saw fail is there (a failed call did nothing;
#     a follower cancelled too late reports success, with a WARNING);
#   - the counter equals the rows (each batch committed whole, or nothing).
# Calls whose client was terminated are unknown, and may be either.
set -euo pipefail

DB=occ_batch_storm
CLIENTS=${CLIENTS:-8}
CALLS=${CALLS:-600}
fail() { echo "batch_storm: FAIL: $*" >&2; exit 1; }
sql() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$DB" -c "$1"; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

dropdb --if-exists "$DB" && createdb "$DB"
sql "CREATE EXTENSION pg_occ;
     CREATE TABLE log (who text NOT NULL);
     CREATE TABLE hot (id int PRIMARY KEY, v bigint NOT NULL); INSERT INTO hot VALUES (1, 0);"

for c in $(seq 1 "$CLIENTS"); do
    for i in $(seq 1 "$CALLS"); do
        echo "CALL occ.retry('INSERT INTO log VALUES (\$1); UPDATE hot SET v = v + 1 WHERE id = 1; SELECT pg_sleep(0.001)', params => row('$c-$i'), isolation => 'repeatable read', contention => 'batch', key => 'k');"
        echo "\\if :ERROR"
        echo "\\echo fail $c-$i"
        echo "\\else"
        echo "\\echo ok $c-$i"
        echo "\\endif"
    done >"$WORK/$c.sql"
done
for c in $(seq 1 "$CLIENTS"); do
    PGAPPNAME=storm psql -X -q -d "$DB" -v ON_ERROR_STOP=0 -f "$WORK/$c.sql" >"$WORK/$c.out" 2>&1 &
    echo $! >"$WORK/$c.pid"
done

# the storm: until every client has ended, cancel one active call, and
# now and then terminate one
cancels=0 terminates=0
while :; do
    running=0
    for c in $(seq 1 "$CLIENTS"); do
        ! kill -0 "$(cat "$WORK/$c.pid")" 2>/dev/null || running=$((running + 1))
    done
    [ "$running" -gt 0 ] || break
    if [ $((RANDOM % 15)) -eq 0 ]; then
        n=$(sql "SELECT count(pg_terminate_backend(pid)) FROM (SELECT pid FROM pg_stat_activity WHERE application_name = 'storm' AND state = 'active' ORDER BY random() LIMIT 1) s")
        terminates=$((terminates + n))
    else
        n=$(sql "SELECT count(pg_cancel_backend(pid)) FROM (SELECT pid FROM pg_stat_activity WHERE application_name = 'storm' AND state = 'active' ORDER BY random() LIMIT 1) s")
        cancels=$((cancels + n))
    fi
    sleep "0.0$((RANDOM % 3 + 1))"
done
wait || true

cat "$WORK"/*.out >"$WORK/all"
{ grep -h '^ok ' "$WORK/all" || true; } | cut -d' ' -f2 | sort >"$WORK/ok"
{ grep -h '^fail ' "$WORK/all" || true; } | cut -d' ' -f2 | sort >"$WORK/failed"
sql "SELECT who FROM log ORDER BY 1" | sort >"$WORK/rows"
late=$(grep -c "came too late" "$WORK/all" || true)
echo "batch_storm: $CLIENTS clients x $CALLS calls, $cancels cancels and $terminates terminations sent: $(wc -l <"$WORK/ok") succeeded ($late after a late cancel), $(wc -l <"$WORK/failed") failed, $(wc -l <"$WORK/rows") rows"
[ "$cancels" -ge 10 ] || fail "only $cancels cancels"
dups=$(uniq -d "$WORK/rows" | head -5)
[ -z "$dups" ] || fail "calls that ran twice: $dups"
missing=$(comm -23 "$WORK/ok" "$WORK/rows" | head -5)
[ -z "$missing" ] || fail "calls that succeeded but are not there: $missing"
ghost=$(comm -12 "$WORK/failed" "$WORK/rows" | head -5)
[ -z "$ghost" ] || fail "calls that failed but are there: $ghost"
[ "$(sql "SELECT v FROM hot")" = "$(wc -l <"$WORK/rows")" ] || fail "counter $(sql "SELECT v FROM hot") != $(wc -l <"$WORK/rows") rows"
batched=$(sql "SELECT coalesce(sum(batched), 0) FROM occ.stats WHERE query LIKE 'INSERT INTO log%'")
echo "batch_storm: $batched calls committed in batches"
[ "$batched" -gt 0 ] || fail "no call ran in a batch"
[ "$(sql "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 20291")" = 0 ] || fail "a gate is still held"
dropdb "$DB"
echo "batch_storm: ok"
