#!/bin/bash
# Batch mode under interrupts: clients run calls that each insert their own
# id and count it, in batch mode on one key (at serializable: batch mode
# runs calls at repeatable read alone), while a storm cancels and
# terminates their backends (leaders and followers alike) at random points:
# waiting, mid-batch, in COMMIT, after it.  Then, Jepsen style:
#   - every call its client saw succeed is in the table, once;
#   - no call is there twice (no body ran twice after a commit);
#   - no call that its client saw fail is there (a failed call did nothing;
#     a follower cancelled too late reports success, with a WARNING);
#   - the counter equals the rows (each batch committed whole, or nothing).
# Calls whose client was terminated are unknown, and may be either.
#
# Then a Jepsen/Elle-style list-append check (test/listappend.py, which
# explains it), once at serializable and once at repeatable read: clients
# run transactions of 2 to 4 reads and appends of unique values on a few
# keys of la (k, v int[]), in batch mode on one key, and record what they
# read, their outcome and when each call was invoked and completed, while
# a storm cancels and terminates their backends and, every few seconds,
# kills one with SIGKILL (the server restarts: the clients' calls in
# flight are unknown, and they reconnect).  Leaders (holding the gate),
# followers (waiting in the batch) and the others are picked in turn.  A
# quarter of the calls run ungated (contention => 'backoff'), beside the
# batches: a batch is one transaction, so what it gets wrong per call shows
# only against transactions outside it (batch mode's first version, which
# batched at repeatable read too, shows G-nonadjacent cycles through two
# calls of a batch and two ungated ones within 40 s; with every call
# batched, none).  From the history and the final lists the checker infers
# the dependency graph (ww, wr, rw, real time) and fails on lost, doubled
# or aborted appends, aborted or intermediate reads, and the cycles the
# level forbids: any at serializable; at repeatable read (snapshot
# isolation) those without two adjacent rw edges (G0, G1c, G-single and
# G-nonadjacent).  Its own self-test runs first: it must flag exactly the
# bad hand-made histories.
set -euo pipefail

DB=occ_batch_storm
CLIENTS=${CLIENTS:-8}
CALLS=${CALLS:-600}
fail() { echo "batch_storm: FAIL: $*" >&2; exit 1; }
# a command that fails outside fail() says so too (set -e would end the
# script without a word)
set -E
trap 'echo "batch_storm: FAIL: line $LINENO: \"$BASH_COMMAND\" exited $?" >&2' ERR
sql() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$DB" -c "$1"; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
# Debian's interpreter: the workload needs its python3-psycopg
PYTHON=${PYTHON:-/usr/bin/python3}
LISTAPPEND=$(dirname "$0")/listappend.py
LA_CLIENTS=${LA_CLIENTS:-8}
LA_SECONDS=${LA_SECONDS:-25}
LA_KILL_EVERY=${LA_KILL_EVERY:-5}
LA_TIMEOUT=${LA_TIMEOUT:-300}
LA_UNGATED=${LA_UNGATED:-0.25}

"$PYTHON" "$LISTAPPEND" --self-test >"$WORK/self-test" || { cat "$WORK/self-test"; fail "the list-append checker's self-test"; }
cat "$WORK/self-test"

dropdb --if-exists "$DB" && createdb "$DB"
sql "CREATE EXTENSION pg_occ;
     CREATE TABLE log (who text NOT NULL);
     CREATE TABLE hot (id int PRIMARY KEY, v bigint NOT NULL); INSERT INTO hot VALUES (1, 0);"

for c in $(seq 1 "$CLIENTS"); do
    for i in $(seq 1 "$CALLS"); do
        echo "CALL occ.retry('INSERT INTO log VALUES (\$1); UPDATE hot SET v = v + 1 WHERE id = 1; SELECT pg_sleep(0.001)', params => row('$c-$i'), isolation => 'serializable', contention => 'batch', key => 'k');"
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

# list-append ------------------------------------------------------------

# after_kill PID: the backend PID was sent SIGKILL; wait until the server
# has restarted and recovered, if the kill crashed it (la_crash, unlogged,
# is empty after crash recovery: this works in any cluster, without its
# log); return 1 if there was no crash (the backend had already exited)
after_kill() {
    local n
    # once the postmaster has reaped it, it has begun the crash restart
    for _ in $(seq 1 100); do
        kill -0 "$1" 2>/dev/null || break
        sleep 0.05
    done
    sleep 0.2
    for _ in $(seq 1 600); do
        n=$(psql -X -q -At -d "$DB" -c "SELECT count(*) FROM la_crash" 2>/dev/null) || n=
        case $n in
            0) sql "INSERT INTO la_crash VALUES (1)"; return 0 ;;
            1) return 1 ;;
        esac
        sleep 0.1
    done
    fail "the server did not come back after a SIGKILL"
}

# la_batched: calls of la_txn committed in batches since the last crash
# (occ.stats lives in shared memory); 0 if the server is restarting
la_batched() {
    psql -X -q -At -d "$DB" -c "SELECT coalesce(sum(batched), 0) FROM occ.stats WHERE query LIKE 'SELECT la_txn%'" 2>/dev/null || echo 0
}

sql "CREATE UNLOGGED TABLE la_crash (x int);
     CREATE TABLE la_faults (kind text NOT NULL);
     -- runs a transaction's micro-ops in order (each a read, [r, k, null],
     -- or an append, [a, k, value]) and returns what the reads saw: one
     -- fixed body for every call, so that they batch
     CREATE FUNCTION la_txn(ops jsonb) RETURNS jsonb LANGUAGE plpgsql AS \$\$
     DECLARE op jsonb; got int[]; reads jsonb := '[]';
     BEGIN
       FOR op IN SELECT value FROM jsonb_array_elements(ops) LOOP
         IF op->>0 = 'r' THEN
           SELECT v INTO got FROM la WHERE k = (op->>1)::int;
           reads := reads || jsonb_build_array(to_jsonb(got));
         ELSE
           UPDATE la SET v = v || (op->>2)::int WHERE k = (op->>1)::int;
         END IF;
       END LOOP;
       RETURN reads;
     END \$\$;
     -- a busy backend of the clients: by turn % 3 a leader (it holds the
     -- gate), a follower (waiting for its batch), or any
     CREATE FUNCTION la_victim(turn int) RETURNS int LANGUAGE sql AS \$\$
       SELECT a.pid FROM pg_stat_activity a
        WHERE a.application_name = 'la' AND a.state = 'active'
          AND CASE turn % 3
                WHEN 0 THEN a.pid IN (SELECT l.pid FROM pg_locks l WHERE l.locktype = 'advisory'
                                      AND l.objsubid = 20291 AND l.granted)
                WHEN 1 THEN a.wait_event_type = 'Extension'
                ELSE true END
        ORDER BY random() LIMIT 1 \$\$;
     -- the storm of cancels and terminations, from the server (a psql per
     -- signal sends only a few a second): for SECONDS, every 5 to 15 ms,
     -- cancel a victim, or one time in 20 terminate it; counted in la_faults
     CREATE PROCEDURE la_storm(seconds float8) LANGUAGE plpgsql AS \$\$
     DECLARE
       stop timestamptz := clock_timestamp() + make_interval(secs => seconds);
       turn int := (random() * 3)::int;
       victim int;
     BEGIN
       WHILE clock_timestamp() < stop LOOP
         turn := turn + 1;
         victim := la_victim(turn);
         IF victim IS NULL THEN
           NULL;
         ELSIF random() < 0.05 THEN
           PERFORM pg_terminate_backend(victim);
           INSERT INTO la_faults VALUES ('terminate');
         ELSE
           PERFORM pg_cancel_backend(victim);
           INSERT INTO la_faults VALUES ('cancel');
         END IF;
         -- and a new view of pg_stat_activity, which a transaction keeps
         COMMIT;
         PERFORM pg_sleep(0.005 + random() * 0.01);
       END LOOP;
     END \$\$;"

# list_append LEVEL: the workload at LEVEL under the storm, then the check
list_append() {
    local level=$1 tag=${1// /-} crashes=0 batched=0 turn=$RANDOM b pid driver storm rc faults
    local last_kill=$SECONDS start=$SECONDS
    sql "DROP TABLE IF EXISTS la; CREATE TABLE la (k int PRIMARY KEY, v int[] NOT NULL DEFAULT '{}');
         TRUNCATE la_crash, la_faults; INSERT INTO la_crash VALUES (1)"
    # batched counts this level's calls only (the body is the same)
    sql "SELECT occ.stats_reset()" >/dev/null
    PGDATABASE=$DB "$PYTHON" "$LISTAPPEND" run --isolation "$level" --clients "$LA_CLIENTS" --seconds "$LA_SECONDS" \
        --seed "$RANDOM" --ungated "$LA_UNGATED" "$WORK/la-$tag.history" "$WORK/la-$tag.final" >"$WORK/la-$tag.out" 2>&1 &
    driver=$!
    # cancels and terminations until the clients are done, again after
    # each crash
    (
        while kill -0 "$driver" 2>/dev/null; do
            psql -X -q -d "$DB" -c "CALL la_storm(1)" >/dev/null 2>&1 || sleep 0.1
        done
    ) &
    storm=$!
    # and every LA_KILL_EVERY seconds a SIGKILL, by turn of a leader, a
    # follower or any busy backend (until one crashes the server: none of
    # the kind may be busy)
    while kill -0 "$driver" 2>/dev/null; do
        # a call that never returns would hang the clients: bound the run
        if [ $((SECONDS - start)) -gt "$LA_TIMEOUT" ]; then
            kill "$driver" "$storm"
            fail "list-append at $level: the clients did not finish in $LA_TIMEOUT s"
        fi
        if [ $((SECONDS - last_kill)) -ge "$LA_KILL_EVERY" ]; then
            turn=$((turn + 1))
            b=$(la_batched)
            [ "$b" -le "$batched" ] || batched=$b
            pid=$(psql -X -q -At -d "$DB" -c "SELECT la_victim($turn)" 2>/dev/null) || pid=
            if [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null && after_kill "$pid"; then
                crashes=$((crashes + 1))
                last_kill=$SECONDS
            fi
        fi
        sleep 0.1
    done
    rc=0
    wait "$driver" || rc=$?
    wait "$storm" || true
    cat "$WORK/la-$tag.out"
    [ "$rc" = 0 ] || fail "list-append at $level: the workload failed"
    b=$(la_batched)
    [ "$b" -le "$batched" ] || batched=$b
    faults=$(sql "SELECT count(*) FILTER (WHERE kind = 'cancel') || ' cancels, ' ||
                         count(*) FILTER (WHERE kind = 'terminate') || ' terminations' FROM la_faults")
    echo "batch_storm: list-append at $level: $LA_CLIENTS clients for $LA_SECONDS s; sent $faults, $crashes SIGKILLs that crashed the server; up to $batched calls committed in batches between crashes"
    [ "$(sql "SELECT count(*) FROM la_faults WHERE kind = 'cancel'")" -ge 100 ] || fail "list-append at $level: too few cancels"
    [ "$(sql "SELECT count(*) FROM la_faults WHERE kind = 'terminate'")" -ge 5 ] || fail "list-append at $level: too few terminations"
    [ "$crashes" -ge 2 ] || fail "list-append at $level: $crashes SIGKILLs crashed the server"
    # at repeatable read batch mode may run each call alone; at
    # serializable it must batch, or this checks nothing of batches
    [ "$level" != serializable ] || [ "$batched" -gt 0 ] || fail "list-append at $level: no call ran in a batch"
    [ "$(sql "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 20291")" = 0 ] ||
        fail "list-append at $level: a gate is still held"
    "$PYTHON" "$LISTAPPEND" check --isolation "$level" "$WORK/la-$tag.history" "$WORK/la-$tag.final" ||
        fail "list-append at $level: anomalies (above)"
}

list_append serializable
list_append "repeatable read"
dropdb "$DB"
echo "batch_storm: ok"
