#!/bin/bash
# Batch mode (contention => 'batch') with real sessions: the calls queued
# behind a key's leader run in the leader's transaction, each in its own
# subtransaction, in queue order, with one commit; each caller gets its own
# outcome.  Checked here, each a state reached by polling pg_stat_activity
# or the sessions' output, never by sleeping a fixed time:
#   1. outcomes: results, attempts and occ.attempt() as if each call had
#      run alone, a body's own error raised in its own caller only (a
#      deferred constraint's too, checked at the end of its body), the
#      rows in queue order and written by the leader's backend, a body's SET
#      LOCAL unseen by the next body (each body notes the setting it found
#      and sets it for its transaction); a follower
#      waits on a condition variable (wait event Extension) holding no
#      transaction id and no snapshot; one cancelled before the leader took
#      it leaves with nothing done; occ.stats counts the batch;
#   2. a follower cancelled after the leader took it waits for the outcome
#      and reports it: committed, with a WARNING;
#   3. the leader terminated in the middle of the batch: its followers learn
#      that the batch did not commit and run again, each once;
#   4. bodies that leave session state (SET, an advisory lock, a temporary
#      table) or change synchronous_commit, a session that holds an
#      advisory lock, and a body that EXECUTEs a prepared statement run
#      alone, in their own session; so does a caller whose settings differ
#      from the leader's.
# The callers' first attempts fail until they hold the key's gate
# (conflict_until_gated), so every call joins the queue.  A session holds
# the key's gate (occ.gate) while the calls queue: the first, the leader,
# waits for the gate, the others wait behind it; when the holder commits,
# the leader's attempt takes them all.  A body that must wait mid-batch
# waits for a sequence the test sets (sequences are not transactional, so
# the leader sees it whatever its snapshot).
set -euo pipefail

DB=occ_batch
fail() { echo "batch: FAIL: $*" >&2; exit 1; }
# shellcheck source=test/sessions.sh
. "$(dirname "$0")/sessions.sh"

dropdb --if-exists "$DB" && createdb "$DB"
sql "CREATE EXTENSION pg_occ;
     CREATE TABLE log (seq serial PRIMARY KEY, who text NOT NULL, attempt int, pid int, seen text);
     CREATE SEQUENCE go; CREATE SEQUENCE go2; CREATE SEQUENCE reached;
     CREATE TABLE once (who text UNIQUE DEFERRABLE INITIALLY DEFERRED); INSERT INTO once VALUES ('dup');
     $CONFLICT_UNTIL_GATED;
     -- wait until the sequence flag is set (after counting mark up, if given)
     CREATE FUNCTION wait_flag(flag regclass, mark regclass DEFAULT NULL) RETURNS void LANGUAGE plpgsql AS
     \$\$ DECLARE called boolean; BEGIN
       IF mark IS NOT NULL THEN PERFORM nextval(mark); END IF;
       LOOP
         EXECUTE format('SELECT is_called FROM %s', flag) INTO called;
         EXIT WHEN called;
         PERFORM pg_sleep(0.02);
       END LOOP;
     END \$\$;"

BODY='SELECT conflict_until_gated();
SELECT 1 / (CASE WHEN $1 = $$bad$$ THEN 0 ELSE 1 END);
INSERT INTO once SELECT $1 WHERE $1 = $$dup$$;
SELECT wait_flag($$go2$$, $$reached$$) WHERE $1 = $$slow$$;
SELECT set_config($$app.seen$$, coalesce(nullif(current_setting($$app.y$$, true), $$$$), $$-$$), true),
       set_config($$app.y$$, $1, true);
INSERT INTO log (who, attempt, pid, seen) VALUES ($1, occ.attempt(), pg_backend_pid(), current_setting($$app.seen$$))
RETURNING who, attempt'

# call WHO: the CALL of a caller named WHO; its output: result|attempts|slept
call() { echo "CALL occ.retry(\$body\$$BODY\$body\$, NULL::jsonb, NULL::int, NULL::interval, params => row('$1'), contention => 'batch', key => 'k');"; }

# start NAME [SETUP]: a caller named NAME, in the background (errors
# verbose: with the names of the objects they are about)
start() { start_session "$1" -At -v VERBOSITY=verbose -c "${2:-SET client_min_messages = warning}" -c "$(call "$1")"; }

# outcome WHO OUTPUT: OUTPUT is WHO's committed row, with occ.attempt() in
# the body equal to the attempts that the call reports (1 when the key was
# hot at its start and it queued at once, 2 after a first failed attempt)
outcome() { grep -qE "^\[\{\"who\": \"$1\", \"attempt\": ([12])\}\]\|\1\|" <<<"$2"; }

# posted NAME: NAME waits in the batch queue; print its pid
posted() { wait_for "$1" "wait_event_type = 'Extension'"; }

# hold_gate: a session holds the key's gate; release_gate lets it go
hold_gate() {
    open_session holder -At
    step holder "BEGIN; SELECT occ.gate('k');"
}
release_gate() {
    send holder "COMMIT;"
    close_input holder
    ended holder >/dev/null
    rm -f "$SESSIONS/holder.in"
}

reset() {
    sql "TRUNCATE log; SELECT setval('go', 1, false), setval('go2', 1, false), setval('reached', 1, false); SELECT occ.stats_reset()" >/dev/null
}

# --- 1. outcomes (the leader's batch given the time to run every body
# on a loaded machine: occ.batch_max_time, its own setting)
reset
hold_gate
start L "SET client_min_messages = warning; SET occ.batch_max_time = '1min'"
leader=$(queued L)
for f in f1 bad dup f2 f4; do
    start "$f"
    posted "$f" >/dev/null
done
pid=$(posted f1)
state=$(sql "SELECT backend_xid IS NULL, backend_xmin IS NULL FROM pg_stat_activity WHERE pid = $pid")
[ "$state" = "t|t" ] || fail "a posted follower holds an xid or a snapshot: $state"
sql "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'f4'" >/dev/null
out=$(ended f4)
grep -q "canceling statement due to user request" <<<"$out" || fail "cancelled follower: $out"
release_gate
for f in L f1 f2; do
    out=$(ended "$f")
    outcome "$f" "$out" || fail "$f's outcome: $out"
done
out=$(ended bad)
grep -q "ERROR:  22012: division by zero" <<<"$out" || fail "bad's outcome: $out"
out=$(ended dup)
grep -q 'ERROR:  23505: duplicate key value violates unique constraint "once_who_key"' <<<"$out" &&
    grep -q '^CONSTRAINT NAME:  once_who_key$' <<<"$out" || fail "dup's outcome: $out"
rows=$(sql "SELECT string_agg(who || ':' || (pid = $leader) || ':' || seen, ',' ORDER BY seq) FROM log")
[ "$rows" = "L:true:-,f1:true:-,f2:true:-" ] || fail "rows: $rows"
stats=$(sql "SELECT calls, commits, errors, batched, mean_batch_size FROM occ.stats WHERE query LIKE '%wait_flag%'")
[ "$stats" = "6|3|3|3|3" ] || fail "occ.stats: $stats"
echo "batch: one leader ran 3 calls and 2 failing ones in order, each with its own outcome (a deferred constraint's too); a cancelled waiter left with nothing done"

# --- 2. a follower cancelled after the leader took it
reset
hold_gate
start L
queued L >/dev/null
start slow
posted slow >/dev/null
release_gate
until [ "$(sql "SELECT is_called FROM reached")" = t ]; do sleep 0.1; done
cancel_taken slow
sql "SELECT setval('go2', 1)" >/dev/null
out=$(ended slow)
grep -q "came too late" <<<"$out" || fail "cancelled follower's outcome: $out"
outcome slow "$out" || fail "cancelled follower's result: $out"
ended L >/dev/null
rows=$(sql "SELECT string_agg(who, ',' ORDER BY seq) FROM log")
[ "$rows" = "L,slow" ] || fail "rows after the late cancel: $rows"
echo "batch: a follower cancelled after the leader took it reported its committed outcome, with a WARNING"

# --- 3. the leader terminated in the middle of the batch
reset
hold_gate
start L
leader=$(queued L)
start slow
posted slow >/dev/null
start f2
posted f2 >/dev/null
release_gate
until [ "$(sql "SELECT is_called FROM reached")" = t ]; do sleep 0.1; done
sql "SELECT pg_terminate_backend($leader)" >/dev/null
out=$(ended L)
grep -q "terminating connection" <<<"$out" || fail "terminated leader: $out"
# the followers run again: slow leads now, and waits for go2 in its own body
sql "SELECT setval('go2', 1)" >/dev/null
for f in slow f2; do
    out=$(ended "$f")
    outcome "$f" "$out" || fail "$f after its leader's end: $out"
done
rows=$(sql "SELECT string_agg(who, ',' ORDER BY who) FROM log")
[ "$rows" = "f2,slow" ] || fail "rows after the leader's end: $rows"
echo "batch: the leader terminated mid-batch: nothing of the batch committed, its followers ran again, once each"

# --- 4. bodies that leave session state run alone
sql "CREATE FUNCTION keep_state(who text, what text) RETURNS void LANGUAGE plpgsql AS
     \$\$ BEGIN
       IF who <> 'keeper' THEN RETURN; END IF;
       CASE what
         WHEN 'set' THEN PERFORM set_config('app.x', '1', false);
         WHEN 'lock' THEN PERFORM pg_advisory_lock(7);
         WHEN 'temp' THEN CREATE TEMP TABLE t (x int);
         WHEN 'commit' THEN PERFORM set_config('synchronous_commit', 'remote_apply', true);
         WHEN 'held' THEN PERFORM pg_advisory_xact_lock(7);
       END CASE;
     END \$\$;" >/dev/null
# what a session has kept: advisory lock 7, app.x, temporary table t (its
# own: pg_class has the other sessions' too, the keeper's that runs alone)
KEPT="SELECT (SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory' AND objid = 7)
          || ',' || coalesce(current_setting('app.x', true), '') || ','
          || (SELECT count(*) FROM pg_class WHERE relname = 't' AND relnamespace = pg_my_temp_schema())"
for what in set lock temp commit held; do
    reset
    hold_gate
    body="$BODY; SELECT keep_state(\$1, '$what')"
    for who in L keeper; do
        # held: the keeper's session holds advisory lock 7 before its call
        setup="SET client_min_messages = warning"
        [ "$what/$who" != held/keeper ] || setup="$setup; DO \$\$ BEGIN PERFORM pg_advisory_lock(7); END \$\$"
        start_session "$who" -At -c "$setup" \
            -c "CALL occ.retry(\$body\$$body\$body\$, NULL::jsonb, NULL::int, NULL::interval, params => row('$who'), contention => 'batch', key => 'k');" \
            -c "$KEPT"
        # a session that holds an advisory lock does not post its call: it
        # waits for the gate, to run alone
        if [ "$who" = L ] || [ "$what" = held ]; then queued "$who" >/dev/null; else posted keeper >/dev/null; fi
    done
    release_gate
    out=$(ended L)
    [ "$(sed -n 2p <<<"$out")" = "0,,0" ] || fail "the leader kept the follower's $what: $out"
    out=$(ended keeper)
    case $what in
        set) expect="0,1,0" ;;
        lock) expect="1,,0" ;;
        temp) expect="0,,1" ;;
        commit) expect="0,,0" ;;
        held) expect="1,,0" ;;
    esac
    [ "$(sed -n 2p <<<"$out")" = "$expect" ] || fail "the follower's $what is not in its session: $out"
    rows=$(sql "SELECT string_agg(who || ':' || (pid = (SELECT pid FROM log WHERE who = 'L')), ',' ORDER BY seq) FROM log")
    [ "$rows" = "L:true,keeper:false" ] || fail "keeper ($what) ran in the batch: $rows"
done
echo "batch: bodies that SET, take an advisory lock, create a temporary table or change synchronous_commit, and a session that holds an advisory lock, ran alone, in their own session"

# --- 4b. a body that uses what its session holds (EXECUTE of a prepared
# statement) runs in its own session, where the statement is its own
reset
hold_gate
for who in L keeper; do
    start_session "$who" -At -c "SET client_min_messages = warning" -c "PREPARE p AS SELECT '$who' AS prepared_by" \
        -c "CALL occ.retry(\$body\$$BODY; EXECUTE p\$body\$, NULL::jsonb, params => row('$who'), contention => 'batch', key => 'k');"
    [ "$who" = L ] && queued L >/dev/null || posted keeper >/dev/null
done
release_gate
for who in L keeper; do
    out=$(ended "$who")
    [ "$out" = "[{\"prepared_by\": \"$who\"}]" ] || fail "$who's EXECUTE ran another session's statement: $out"
done
echo "batch: a body that EXECUTEs a prepared statement ran in its own session"

# --- 4c. a caller whose session's settings differ from the leader's (its
# time zone) is not taken into its batch: it runs after it, alone, while
# one with the leader's settings is taken
reset
hold_gate
for who in L same other; do
    setup="SET client_min_messages = warning"
    [ "$who" != other ] || setup="$setup; SET TimeZone = 'Asia/Tokyo'"
    start_session "$who" -At -c "$setup" -c "$(call "$who")"
    [ "$who" = L ] && queued L >/dev/null || posted "$who" >/dev/null
done
release_gate
for who in L same other; do outcome "$who" "$(ended "$who")" || fail "$who's outcome"; done
rows=$(sql "SELECT string_agg(who || ':' || (pid = (SELECT pid FROM log WHERE who = 'L')), ',' ORDER BY seq) FROM log")
[ "$rows" = "L:true,same:true,other:false" ] || fail "a caller with other settings ran in the leader's batch, or one with the same did not: $rows"
echo "batch: a caller whose settings differ from the leader's ran after its batch, alone; one with its settings ran in it"

# --- 5. write skew and lost updates stay out with batches: doctors go off
# call only while another is on call (SERIALIZABLE); however the calls are
# batched, one doctor stays on call, and every committed call is counted
sql "CREATE TABLE doctors (id int PRIMARY KEY, on_call boolean NOT NULL);
     CREATE TABLE offs (n bigint NOT NULL); INSERT INTO offs VALUES (0)" >/dev/null
script=$SESSIONS/skew.sql
cat >"$script" <<'SQL'
\set id random(1, 40)
CALL occ.retry('UPDATE doctors SET on_call = false WHERE id = $1 AND on_call
                  AND (SELECT count(*) FROM doctors WHERE on_call) >= 2;
                UPDATE offs SET n = n + 1', params => row(:id), isolation => 'serializable',
               contention => 'batch', key => 'ward', max_attempts => 1000);
SQL
for round in 1 2 3; do
    sql "TRUNCATE doctors; INSERT INTO doctors SELECT g, true FROM generate_series(1, 40) g; UPDATE offs SET n = 0" >/dev/null
    out=$(pgbench -n -d "$DB" -c 32 -j 2 -t 20 -f "$script" 2>&1) || fail "pgbench, round $round: $out"
    state=$(sql "SELECT count(*) FILTER (WHERE on_call), (SELECT n FROM offs) FROM doctors")
    [ "$state" = "1|640" ] || fail "write skew or a lost update, round $round: on call | calls counted = $state"
done
batched=$(sql "SELECT batched FROM occ.stats WHERE query LIKE '%doctors%'")
[ "$batched" -gt 0 ] || fail "the write-skew check ran no batch"
echo "batch: write skew: one doctor stayed on call in every round, every call counted once ($batched calls ran in batches)"

# --- 6. a batch's snapshot is taken after each of its calls began: a call
# that joins while the leader's attempt runs waits for the next batch, and
# sees what committed before it was called
reset
sql "CREATE TABLE marks (n int)" >/dev/null
BODY2='SELECT conflict_until_gated();
SELECT wait_flag($$go$$) WHERE $1 = $$L$$;
INSERT INTO log (who, seen) SELECT $1, count(*)::text FROM marks RETURNING who, seen'
for who in L late; do
    start_session "$who" -At -c "SET client_min_messages = warning" \
        -c "CALL occ.retry(\$body\$$BODY2\$body\$, NULL::jsonb, params => row('$who'), contention => 'batch', key => 'k');"
    if [ "$who" = L ]; then
        holding L >/dev/null
        sql "INSERT INTO marks VALUES (1)" >/dev/null
    else
        posted late >/dev/null
    fi
done
sql "SELECT setval('go', 1)" >/dev/null
ended L >/dev/null
out=$(ended late)
[ "$out" = '[{"who": "late", "seen": "1"}]' ] || fail "a call saw a snapshot older than its start: $out"
echo "batch: a call that joined during the leader's attempt saw what committed before it was called"
