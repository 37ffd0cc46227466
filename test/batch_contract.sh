#!/bin/bash
# Batch mode's contract with each caller, with real sessions (test/run.sh
# runs it in its cluster): every case queues a leader L and followers
# behind a session that holds the key's gate (their first attempts fail
# until they hold it), lets them go, and checks what each caller was told
# and what committed.
#   1. records: parameters that are anonymous records (ROW(...), arrays of
#      them), whose typmod only their own backend knows, run alone: a
#      follower's value comes back as it was sent, and no backend is lost
#      (two sessions of a role with only LOGIN and occ.gate);
#   2. isolation: at REPEATABLE READ calls run alone (a batch is not each
#      call's own snapshot), at SERIALIZABLE and READ COMMITTED they batch;
#   3. one call's failure is not another's: a follower's 40002, its 40P01
#      that its retry_on does not name, its own RAISE of 57014, each fail
#      that follower only, and its retryable 40001 is not counted against
#      the leader (max_attempts => 2: its first attempt fails, its second
#      leads the batch);
#   4. the leader's deferred triggers fire under its own SET LOCAL, and its
#      deferred unique violation reaches it as 23505 (not XX000);
#   5. each caller's limits: the leader does not time out in a slow
#      follower's body, which its own statement_timeout ends; a batch
#      whose body time is unknown runs about 10 ms of bodies, not 63, or
#      what occ.batch_max_time, set by its leader alone, says;
#   6. what a body leaves: a cursor left open sends its call to run alone
#      (the next body opens its own), and a leader whose own body left one
#      takes no one, without a WARNING of a leaked hash_seq_search scan
#      (the look for cursors left its scan open); and so do a LISTEN run in a function
#      (it lands in its caller's session) and a NOTIFY that another body of
#      the batch sent (each call's arrives); a body's
#      pg_advisory_unlock_all() does not take the leader's gate away; a
#      body that wrote to a foreign table runs alone, and the next one
#      batches (its rolled-back write does not count for the others);
#   7. a follower's body that waits for a lock held outside the batch runs
#      alone (after 10 ms): the batch commits without waiting for it (nor
#      making a deadlock with it that only deadlock_timeout would end);
#      the call that leads the next batch waits for the gate behind it for
#      longer than its lock_timeout, and commits (its wait ended by
#      lock_timeout, it ran ungated and gave up with 40001, never holding
#      the gate); and without a key, pgbench's tpcb-like at scale 1 in batch mode
#      (the body learned as the key, its probes ungated beside the batches)
#      makes no deadlock (0.4.0: several a second, each ended by
#      deadlock_timeout);
#   8. what differs, said plainly in docs/batch.md: a follower's now() is a
#      time within its own call; its pg_backend_pid() and txid_current()
#      are its leader's.
# States are reached by polling, never by sleeping a set time (case 5 lets
# time pass on purpose).
set -euo pipefail
cd "$(dirname "$0")/.."

DB=occ_batch_contract
fail() { echo "batch_contract: FAIL: $*" >&2; exit 1; }
# shellcheck source=test/sessions.sh
. test/sessions.sh

dropdb --if-exists "$DB" && createdb "$DB"
psql -X -q -d postgres -c "DROP ROLE IF EXISTS occ_stranger" -c "CREATE ROLE occ_stranger LOGIN"
# occ_stranger has LOGIN, no privilege on any table, and occ.gate (so that
# its key 'k' is the one that hold_gate holds: the keys of a role without
# it are its own)
sql "CREATE EXTENSION pg_occ;
     GRANT EXECUTE ON FUNCTION occ.gate(text) TO occ_stranger;
     CREATE TABLE log (seq serial PRIMARY KEY, who text NOT NULL, pid int, txid bigint);
     CREATE SEQUENCE go; CREATE SEQUENCE reached; CREATE SEQUENCE once; CREATE SEQUENCE go_alone;
     $CONFLICT_UNTIL_GATED;
     -- wait until the sequence go is set, counting reached up
     CREATE FUNCTION pause() RETURNS void LANGUAGE plpgsql AS
     \$\$ BEGIN
       PERFORM nextval('reached');
       WHILE NOT (SELECT is_called FROM go) LOOP PERFORM pg_sleep(0.02); END LOOP;
     END \$\$;
     -- in the session of the caller named who (not in a leader's), wait
     -- until the sequence go_alone is set
     CREATE FUNCTION pause_alone(who text) RETURNS void LANGUAGE plpgsql AS
     \$\$ BEGIN
       IF current_setting('application_name') = who THEN
         WHILE NOT (SELECT is_called FROM go_alone) LOOP PERFORM pg_sleep(0.02); END LOOP;
       END IF;
     END \$\$;
     -- the follower named fail with a SQLSTATE (f40001: once)
     CREATE FUNCTION fail_as(who text) RETURNS void LANGUAGE plpgsql AS
     \$\$ BEGIN
       CASE who
         WHEN 'f40002' THEN RAISE EXCEPTION USING ERRCODE = '40002', MESSAGE = 'a follower''s integrity violation';
         WHEN 'fdeadlock' THEN RAISE EXCEPTION USING ERRCODE = '40P01', MESSAGE = 'a follower''s deadlock';
         WHEN 'f57014' THEN RAISE EXCEPTION USING ERRCODE = '57014', MESSAGE = 'raised by the body';
         WHEN 'f40001' THEN
           IF nextval('once') = 1 THEN
             RAISE EXCEPTION USING ERRCODE = '40001', MESSAGE = 'a follower''s conflict';
           END IF;
         ELSE NULL;
       END CASE;
     END \$\$;
     CREATE TABLE side (id int PRIMARY KEY, v int); INSERT INTO side VALUES (1, 0);
     CREATE TABLE once_t (who text UNIQUE DEFERRABLE INITIALLY DEFERRED); INSERT INTO once_t VALUES ('dup');
     CREATE TABLE trig_t (who text);
     CREATE TABLE seen (who text, setting text);
     CREATE FUNCTION note_setting() RETURNS trigger LANGUAGE plpgsql AS
     \$\$ BEGIN
       INSERT INTO seen VALUES (NEW.who, coalesce(current_setting('app.z', true), ''));
       RETURN NULL;
     END \$\$;
     CREATE CONSTRAINT TRIGGER note_setting AFTER INSERT ON trig_t DEFERRABLE INITIALLY DEFERRED
       FOR EACH ROW EXECUTE FUNCTION note_setting();
     -- LISTEN to ch_f1 (f1), NOTIFY ch 'same' (all but L), from a function
     CREATE FUNCTION listen_notify(who text) RETURNS void LANGUAGE plpgsql AS
     \$\$ BEGIN
       IF who = 'f1' THEN LISTEN ch_f1; END IF;
       IF who <> 'L' THEN NOTIFY ch, 'same'; END IF;
     END \$\$;
     -- leave cursor c open (not L)
     CREATE FUNCTION open_c(who text) RETURNS void LANGUAGE plpgsql AS
     \$\$ DECLARE c refcursor := 'c'; BEGIN
       IF who <> 'L' THEN OPEN c FOR SELECT 1; END IF;
     END \$\$;" >/dev/null

# hold_gate: a session holds the gate of key $KEY; release_gate lets it go
KEY=k
hold_gate() {
    open_session holder -At
    step holder "BEGIN; SELECT occ.gate('$KEY');"
}
release_gate() {
    send holder "COMMIT;"
    close_input holder
    ended holder >/dev/null
    rm -f "$SESSIONS/holder.in"
}

# run_batch BODY FOLLOWER...: behind the gate's holder, L queues to lead
# (after LEADER_SETUP, if set), then each FOLLOWER posts its call, all of
# BODY; then the gate goes, and L takes them into its batch.  L's pid is
# in $leader.
run_batch() {
    local body=$1 f
    shift
    hold_gate
    caller L "$body" "" "${LEADER_SETUP:-}"
    leader=$(queued L)
    for f in "$@"; do
        caller "$f" "$body"
        posted "$f" >/dev/null
    done
    release_gate
}

# posted NAME: NAME waits in the batch queue; print its pid
posted() { wait_for "$1" "wait_event_type = 'Extension'"; }

# caller NAME BODY [ARGS] [SETUP]: NAME calls BODY (after the gate check)
# with params row(NAME) and ARGS, errors verbose, in the background
caller() {
    start_session "$1" -At -v VERBOSITY=verbose -c "SET client_min_messages = warning${4:+; $4}" \
        -c "CALL occ.retry(\$body\$SELECT conflict_until_gated(); $2\$body\$, NULL::jsonb, NULL::int, NULL::interval,
                           params => row('$1'), contention => 'batch', key => '$KEY'${3:+, $3});"
}

reset() {
    sql "TRUNCATE log, seen, trig_t; SELECT setval('go', 1, false), setval('reached', 1, false),
         setval('once', 1, false), setval('go_alone', 1, false); SELECT occ.stats_reset()" >/dev/null
}

# ran_by_leader: the callers whose body ran in L's backend, in order
ran_by_leader() { sql "SELECT string_agg(who, ',' ORDER BY seq) FROM log WHERE pid = (SELECT pid FROM log WHERE who = 'L')"; }

LOG_BODY='INSERT INTO log (who, pid, txid) VALUES ($1, pg_backend_pid(), txid_current()) RETURNING who'

# --- 1. anonymous records, from a role with only LOGIN (and occ.gate): the leader knows a
# ROW(text) as its first record type, the followers send a ROW(int8) and
# an array of them, which another backend would read as its own
reset
hold_gate
record_call() {
    start_session "$1" -At -c "SET client_min_messages = warning; SET SESSION AUTHORIZATION occ_stranger" \
        -c "CALL occ.retry(\$body\$SELECT conflict_until_gated(); SELECT \$1::text AS v\$body\$, NULL::jsonb,
                           params => row($2), contention => 'batch', key => 'k');"
}
record_call L "row('leader'::text)"
queued L >/dev/null
record_call rec "row(8589934593::int8)"
record_call recs "array[row(8589934593::int8), row(2::int8)]"
# they do not post their calls: they wait for the gate, to run alone
queued rec >/dev/null
queued recs >/dev/null
release_gate
[ "$(ended L)" = '[{"v": "(leader)"}]' ] || fail "records: L: $(cat "$SESSIONS/L.out")"
[ "$(ended rec)" = '[{"v": "(8589934593)"}]' ] || fail "records: a follower's ROW(int8): $(cat "$SESSIONS/rec.out")"
[ "$(ended recs)" = '[{"v": "{(8589934593),(2)}"}]' ] || fail "records: a follower's array of rows: $(cat "$SESSIONS/recs.out")"
[ "$(sql "SELECT 1")" = 1 ] || fail "records: the server is gone"
echo "batch_contract: anonymous records ran alone, each read as sent (a role with only LOGIN and occ.gate)"

# --- 2. isolation levels: at REPEATABLE READ each call runs alone, in its
# own backend; at SERIALIZABLE and READ COMMITTED the follower runs in L's
for iso in 'repeatable read' serializable 'read committed'; do
    reset
    hold_gate
    caller L "$LOG_BODY" "isolation => '$iso'"
    queued L >/dev/null
    caller f1 "$LOG_BODY" "isolation => '$iso'"
    if [ "$iso" = 'repeatable read' ]; then queued f1 >/dev/null; else posted f1 >/dev/null; fi
    release_gate
    ended L >/dev/null
    ended f1 >/dev/null
    want=L,f1
    [ "$iso" != 'repeatable read' ] || want=L
    [ "$(ran_by_leader)" = "$want" ] || fail "$iso: the leader ran $(ran_by_leader), expected $want"
done
echo "batch_contract: at repeatable read calls ran alone; at serializable and read committed they batched"

# --- 3. a follower's failure is its own
# (on a key never hot, so that L's first attempt fails: it commits at its
# second, the first in the batch, or gives up)
reset
KEY=cold
hold_gate
body="SELECT fail_as(\$1); $LOG_BODY"
args="retry_on => '{40001}', max_attempts => 3"
caller L "$body" "retry_on => '{40001}', max_attempts => 2"
queued L >/dev/null
for f in f40002 fdeadlock f57014 f40001 f1; do
    caller "$f" "$body" "$args"
    posted "$f" >/dev/null
done
release_gate
out=$(ended L)
grep -q '^\[{"who": "L"}\]|2|' <<<"$out" || fail "failures: the leader did not commit at its 2nd attempt: $out"
for f in f40002:40002 fdeadlock:40P01 f57014:57014; do
    out=$(ended "${f%:*}")
    grep -q "ERROR:  ${f#*:}:" <<<"$out" || fail "failures: ${f%:*}: $out"
done
grep -q "raised by the body" <<<"$(cat "$SESSIONS/f57014.out")" || fail "failures: f57014's own error: $(cat "$SESSIONS/f57014.out")"
for f in f40001 f1; do
    grep -q "^\[{\"who\": \"$f\"}\]|" <<<"$(ended "$f")" || fail "failures: $f: $(cat "$SESSIONS/$f.out")"
done
[ "$(sql "SELECT string_agg(who, ',' ORDER BY who) FROM log")" = "L,f1,f40001" ] ||
    fail "failures: rows $(sql "SELECT string_agg(who, ',' ORDER BY who) FROM log")"
KEY=k
echo "batch_contract: followers' 40002, 40P01 (not retried) and own 57014 failed only them; a follower's 40001 did not count against the leader"

# --- 4. the leader's deferred triggers: under its own SET LOCAL, and its
# deferred unique violation is 23505
body="SELECT set_config('app.z', \$1, true); INSERT INTO trig_t VALUES (\$1);
      INSERT INTO once_t SELECT \$1 WHERE \$1 = 'dup'; $LOG_BODY"
for leader in L dup; do
    reset
    hold_gate
    caller "$leader" "$body"
    queued "$leader" >/dev/null
    caller f1 "$body"
    posted f1 >/dev/null
    release_gate
    out=$(ended "$leader")
    grep -q "^\[{\"who\": \"f1\"}\]|" <<<"$(ended f1)" || fail "deferred: f1: $(cat "$SESSIONS/f1.out")"
    if [ "$leader" = dup ]; then
        grep -q 'ERROR:  23505: duplicate key value violates unique constraint "once_t_who_key"' <<<"$out" ||
            fail "deferred: the leader's violation: $out"
    else
        [ "$(sql "SELECT string_agg(who || '=' || setting, ',' ORDER BY who) FROM seen")" = "L=L,f1=f1" ] ||
            fail "deferred: the triggers saw $(sql "SELECT string_agg(who || '=' || setting, ',' ORDER BY who) FROM seen")"
    fi
done
echo "batch_contract: the leader's deferred triggers saw its SET LOCAL; its deferred violation was 23505"

# --- 5. limits: every caller has statement_timeout = 1500ms; L waits
# about 0.6 s for the gate, then runs slow's body (1 s): L commits, slow's
# body is ended by slow's own timeout (the leader's is suspended meanwhile)
reset
hold_gate
body="SELECT pg_sleep(CASE WHEN \$1 = 'slow' THEN 1 ELSE 0 END); $LOG_BODY"
caller L "$body" "" "SET statement_timeout = '1500ms'"
queued L >/dev/null
caller slow "$body" "" "SET statement_timeout = '1500ms'"
posted slow >/dev/null
sleep 0.6
release_gate
grep -q '^\[{"who": "L"}\]|' <<<"$(ended L)" || fail "limits: L timed out in slow's body: $(cat "$SESSIONS/L.out")"
grep -q "canceling statement due to statement timeout" <<<"$(ended slow)" || fail "limits: slow: $(cat "$SESSIONS/slow.out")"
[ "$(sql "SELECT string_agg(who, ',' ORDER BY who) FROM log")" = "L" ] || fail "limits: rows $(sql "SELECT string_agg(who, ',') FROM log")"
echo "batch_contract: a slow follower's statement_timeout ended its body, not the leader's call"

# the first batch of a key (its body time unknown): 20 ms bodies, 6
# followers: L runs one, about 10 ms of bodies, and the others join again
reset
body="SELECT pg_sleep(0.02); $LOG_BODY"
run_batch "$body" f1 f2 f3 f4 f5 f6
for who in L f1 f2 f3 f4 f5 f6; do ended "$who" >/dev/null; done
[ "$(sql "SELECT count(*) FROM log")" = 7 ] || fail "limits: not every call committed"
[ "$(ran_by_leader)" = L,f1 ] || fail "limits: the first batch ran $(ran_by_leader)"
echo "batch_contract: a key's first batch ran about 10 ms of bodies"

# the same with occ.batch_max_time = 1s, set by the leader alone (not a
# setting that keeps calls apart): L runs the six bodies (120 ms)
reset
LEADER_SETUP="SET occ.batch_max_time = '1s'" run_batch "$body" f1 f2 f3 f4 f5 f6
for who in L f1 f2 f3 f4 f5 f6; do ended "$who" >/dev/null; done
[ "$(ran_by_leader)" = L,f1,f2,f3,f4,f5,f6 ] || fail "limits: with occ.batch_max_time = 1s the leader ran $(ran_by_leader)"
echo "batch_contract: with occ.batch_max_time = 1s, set by its leader, a key's first batch ran every body"

# --- 6. a cursor left open: f1 and f2 both open cursor c; each runs alone;
# so does the leader Lc, whose own body opens it: it takes no one, and then
# f1 leads f2.  No caller is warned of a leaked scan.
body="SELECT open_c(\$1); $LOG_BODY"
for leader in L Lc; do
    reset
    hold_gate
    caller "$leader" "$body"
    queued "$leader" >/dev/null
    for f in f1 f2; do
        caller "$f" "$body"
        posted "$f" >/dev/null
    done
    release_gate
    for who in "$leader" f1 f2; do
        out=$(ended "$who")
        grep -q "^\[{\"who\": \"$who\"}\]|" <<<"$out" || fail "cursor: $who: $out"
        ! grep -q "leaked hash_seq_search" <<<"$out" || fail "cursor: $who was warned (leader $leader): $out"
    done
done
echo "batch_contract: bodies that left a cursor open ran alone, the leader's too, without a leaked scan"

# a follower's write to a foreign table (postgres_fdw through a loopback
# server): f1 runs alone, f2 still in L's batch
sql "CREATE EXTENSION IF NOT EXISTS postgres_fdw;
     DO \$\$ BEGIN
       EXECUTE format('CREATE SERVER occ_loopback FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host %L, port %L, dbname %L)',
                      split_part(current_setting('unix_socket_directories'), ',', 1),
                      current_setting('port'), current_database());
     END \$\$;
     CREATE USER MAPPING FOR CURRENT_USER SERVER occ_loopback;
     CREATE TABLE far (who text);
     CREATE FOREIGN TABLE far_ft (who text) SERVER occ_loopback OPTIONS (table_name 'far');
     -- (a write the executor does not run counts too: in a function, only f1's)
     CREATE FUNCTION far_write(who text) RETURNS void LANGUAGE plpgsql AS
     \$\$ BEGIN
       IF who = 'f1' THEN INSERT INTO far_ft VALUES (who); END IF;
     END \$\$" >/dev/null
reset
body="SELECT far_write(\$1); $LOG_BODY"
# (L connects to the loopback server first: f1's write, within the batch's
# 10 ms, then does not wait for a connection)
LEADER_SETUP="SELECT FROM far_ft" run_batch "$body" f1 f2
for who in L f1 f2; do
    grep -q "^\[{\"who\": \"$who\"}\]|" <<<"$(ended "$who")" || fail "foreign: $who: $(cat "$SESSIONS/$who.out")"
done
[ "$(ran_by_leader)" = L,f2 ] || fail "foreign: the leader ran $(ran_by_leader)"
[ "$(sql "SELECT string_agg(who, ',') FROM far")" = f1 ] || fail "foreign: far has $(sql "SELECT string_agg(who, ',') FROM far")"
echo "batch_contract: a follower that wrote to a foreign table ran alone; the next batched"

# LISTEN in a function lands in f1's own session; two followers' identical
# NOTIFYs arrive twice
reset
open_session listener -At
step listener "LISTEN ch;"
hold_gate
body="SELECT listen_notify(\$1); $LOG_BODY"
for who in L f1 f2; do
    start_session "$who" -At -c "SET client_min_messages = warning" \
        -c "CALL occ.retry(\$body\$SELECT conflict_until_gated(); $body\$body\$, NULL::jsonb,
                           params => row('$who'), contention => 'batch', key => 'k');" \
        -c "SELECT coalesce(string_agg(c, ','), '-') FROM pg_listening_channels() c"
    if [ "$who" = L ]; then queued L >/dev/null; else posted "$who" >/dev/null; fi
done
release_gate
for who in L f1 f2; do
    out=$(ended "$who")
    want=-
    [ "$who" != f1 ] || want=ch_f1
    [ "$(sed -n 2p <<<"$out")" = "$want" ] || fail "listen: $who listens to $(sed -n 2p <<<"$out"), expected $want"
done
step listener "SELECT 1;"
close_input listener
out=$(ended listener)
got=$(grep -c 'notification "ch" with payload "same"' <<<"$out")
[ "$got" = 2 ] || fail "notify: the listener got $got notifications of 2"
echo "batch_contract: a LISTEN in a function stayed in its caller's session; two calls' identical NOTIFYs arrived twice"

# a follower's pg_advisory_unlock_all(): the leader holds its gate still
# while it runs the next body (f2's, which pauses)
reset
body="SELECT pg_advisory_unlock_all() WHERE \$1 = 'f1'; SELECT pause() WHERE \$1 = 'f2'; $LOG_BODY"
run_batch "$body" f1 f2
until [ "$(sql "SELECT is_called FROM reached")" = t ]; do sleep 0.1; done
held=$(sql "SELECT count(*) FROM pg_locks WHERE pid = $leader AND locktype = 'advisory' AND objsubid = 20291 AND granted")
sql "SELECT setval('go', 1)" >/dev/null
for who in L f1 f2; do
    grep -q "^\[{\"who\": \"$who\"}\]|" <<<"$(ended "$who")" || fail "unlock_all: $who: $(cat "$SESSIONS/$who.out")"
done
[ "$held" = 1 ] || fail "unlock_all: a follower's body took the leader's gate away"
echo "batch_contract: a follower's pg_advisory_unlock_all() left the leader its gate"

# --- 7. an outsider holds row 1 of side; f1's body updates it: the batch
# (L, f1, f2) commits L and f2 while the outsider still holds it; f1 runs
# alone, and commits once the outsider has
reset
open_session outsider -At
step outsider "BEGIN; UPDATE side SET v = v + 1 WHERE id = 1;"
body="UPDATE side SET v = v + 1 WHERE id = 1 AND \$1 = 'f1'; $LOG_BODY"
run_batch "$body" f1 f2
for who in L f2; do
    grep -q "^\[{\"who\": \"$who\"}\]|" <<<"$(ended "$who")" || fail "lock wait: $who: $(cat "$SESSIONS/$who.out")"
done
wait_for f1 "wait_event_type = 'Lock' AND wait_event = 'transactionid'" >/dev/null
step outsider "COMMIT;"
close_input outsider
ended outsider >/dev/null
rm -f "$SESSIONS/outsider.in"
grep -q '^\[{"who": "f1"}\]|' <<<"$(ended f1)" || fail "lock wait: f1: $(cat "$SESSIONS/f1.out")"
[ "$(ran_by_leader)" = L,f2 ] || fail "lock wait: the leader ran $(ran_by_leader)"
[ "$(sql "SELECT v FROM side")" = 2 ] || fail "lock wait: side.v = $(sql "SELECT v FROM side")"
echo "batch_contract: a follower's body that waited for a lock outside the batch ran alone; the batch did not wait"

# ... and the calls in line behind it get the gate: every caller has
# lock_timeout = 3s; in L's batch (w, f1, f3) w's body waits for the
# outsider's row (w is sent alone, in line for the gate), f1's pauses L
# until w waits for the gate, and f3 is left for the next batch.  w takes
# the gate and pauses before its UPDATE until f3, leading the next batch,
# waits for the gate behind it: w waits for the row until its lock_timeout
# (55P03), longer than f3's lock_timeout from the start of its wait, which
# must not end f3's turn (it ran ungated after it, failed 30 times and gave
# up with 40001, never holding the gate)
reset
open_session outsider -At
step outsider "BEGIN; UPDATE side SET v = v + 1 WHERE id = 1;"
hold_gate
body="SELECT pause() WHERE \$1 = 'f1'; SELECT pause_alone(\$1) WHERE \$1 = 'w';
      UPDATE side SET v = v + 1 WHERE id = 1 AND \$1 = 'w'; $LOG_BODY"
caller L "$body" "" "SET lock_timeout = '3s'"
queued L >/dev/null
for f in w f1 f3; do
    caller "$f" "$body" "" "SET lock_timeout = '3s'"
    posted "$f" >/dev/null
done
release_gate
queued w >/dev/null
sql "SELECT setval('go', 1)" >/dev/null
queued f3 >/dev/null
holding w >/dev/null
sql "SELECT setval('go_alone', 1)" >/dev/null
grep -q "ERROR:  55P03: canceling statement due to lock timeout" <<<"$(ended w)" ||
    fail "lock wait, the next batch: w: $(cat "$SESSIONS/w.out")"
grep -q '^\[{"who": "f3"}\]|' <<<"$(ended f3)" || fail "lock wait, the next batch: f3: $(cat "$SESSIONS/f3.out")"
for who in L f1; do
    grep -q "^\[{\"who\": \"$who\"}\]|" <<<"$(ended "$who")" ||
        fail "lock wait, the next batch: $who: $(cat "$SESSIONS/$who.out")"
done
step outsider "COMMIT;"
close_input outsider
ended outsider >/dev/null
[ "$(ran_by_leader)" = L,f1 ] || fail "lock wait, the next batch: the leader ran $(ran_by_leader)"
echo "batch_contract: the call that led the next batch waited for the gate behind the one sent alone, past its lock_timeout, and committed"

# tpcb-like without a key, 32 clients for 8 s: the benchmark's script
PGOPTIONS="-c client_min_messages=warning" pgbench -i -s 1 -q "$DB" >/dev/null 2>&1 || fail "pgbench -i"
sql "SELECT occ.stats_reset()" >/dev/null
out=$(pgbench -n -d "$DB" -c 32 -j 2 -T 8 -f test/pgbench/tpcb_occ.sql -D scale=1 -D iso=serializable \
          -D contention=batch -D keyprefix=NULL 2>&1) || fail "tpcb-like: $out"
stats=$(sql "SELECT calls, commits, deadlocks, batched > 0 FROM occ.stats WHERE query LIKE '%pgbench_branches%'")
IFS='|' read -r calls commits deadlocks batched <<<"$stats"
[ "$calls" = "$commits" ] && [ "$batched" = t ] || fail "tpcb-like without a key: calls, commits, deadlocks, batched: $stats"
[ "$deadlocks" = 0 ] || fail "tpcb-like without a key: $deadlocks deadlocks ($stats)"
[ "$(sql "SELECT sum(abalance) = (SELECT sum(delta) FROM pgbench_history) FROM pgbench_accounts")" = t ] ||
    fail "tpcb-like without a key: the balances do not match the history"
echo "batch_contract: tpcb-like without a key, in batch mode: $commits commits, no deadlock"

# --- 8. what a follower sees: now() within its own call (the leader
# waited 1 s for the gate, its transaction begun before), and, as the
# docs/batch.md says, the leader's pid and transaction id
reset
hold_gate
body="SELECT now() AS now, pg_backend_pid() AS pid, txid_current() AS txid"
caller L "$body"
queued L >/dev/null
start_session f1 -At -c "SET client_min_messages = warning" -c "SELECT clock_timestamp()" \
    -c "CALL occ.retry(\$body\$SELECT conflict_until_gated(); $body\$body\$, NULL::jsonb,
                       params => row('f1'), contention => 'batch', key => 'k');"
posted f1 >/dev/null
release_gate
out_l=$(ended L)
out_1=$(ended f1)
called=$(head -1 <<<"$out_1")
now_1=$(sed -n 2p <<<"$out_1" | sed 's/.*"now": "\([^"]*\)".*/\1/')
[ "$(sql "SELECT '$now_1'::timestamptz >= '$called'::timestamptz")" = t ] ||
    fail "differences: f1's now() $now_1 is before its call began, $called"
pid_l=$(sed 's/.*"pid": \([0-9]*\).*/\1/' <<<"$out_l")
[ "$(sed -n 2p <<<"$out_1" | sed 's/.*"pid": \([0-9]*\).*/\1/')" = "$pid_l" ] ||
    fail "differences: f1's pg_backend_pid() is not its leader's: $out_1 / $out_l"
[ "$(sed -n 2p <<<"$out_1" | sed 's/.*"txid": \([0-9]*\).*/\1/')" = "$(sed 's/.*"txid": \([0-9]*\).*/\1/' <<<"$out_l")" ] ||
    fail "differences: f1's txid_current() is not its batch's: $out_1 / $out_l"
echo "batch_contract: a follower's now() was within its call; its pid and transaction id were its leader's"

dropdb "$DB"
psql -X -q -d postgres -c "DROP ROLE occ_stranger"
echo "batch_contract: ok"
