#!/bin/bash
# Batch mode when its leader is interrupted (test/run.sh runs it for each
# PostgreSQL version, in a cluster of its own, since it crashes the server):
# cancelled, terminated or killed with SIGKILL, at each point of a batch:
#   own     in the leader's own body, before it runs a follower's body
#           (the followers' calls are taken, none is run),
#   member  in a follower's body, mid-batch (the leader's body and one
#           follower's have run),
#   commit  in the leader's COMMIT, after its commit record is flushed and
#           before it tells the followers: the commit waits for a
#           synchronous standby that does not exist (synchronous_standby_names
#           set for the check; the test's own sessions commit with
#           synchronous_commit = local).
# Each case queues a leader L and followers f1 and f2 behind a session that
# holds the key's gate, lets them go, waits until the leader is at the
# point (a sequence the body bumps, or its wait event SyncRep), interrupts
# it, and checks, Jepsen style, that nothing is lost or doubled:
#   - before the commit (own, member): nothing of the batch committed; a
#     cancel or a termination fails the leader's call only, and its
#     followers run again and commit, once each; SIGKILL takes the server
#     down with the followers, and leaves no row;
#   - in COMMIT: the batch committed, every call once; after a cancel or a
#     termination the followers report their committed outcome (a cancelled
#     leader too, with PostgreSQL's WARNING); after SIGKILL, crash recovery
#     keeps the whole batch.
# After each case the counter equals the rows and no gate is held.  Then a
# follower cancelled mid-batch, whose batch fails, reports its cancel and
# leaves nothing; one whose own body then fails reports its error, and its
# session still takes a cancel; a follower whose caller goes mid-batch
# (terminated, its client killed, terminated after a cancel) commits
# nothing, and the others commit once; one cancelled again and again
# reports its committed outcome; and a new batch runs.  States are reached by polling, never by sleeping a set time.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=test/cluster.sh
. test/cluster.sh
# shellcheck source=test/sessions.sh
. test/sessions.sh

fail() { echo "batch_kill: FAIL: $*" >&2; exit 1; }
base=$(mktemp -d)
chmod 711 "$base"
c=$base/c
trap 'cluster_cleanup; rm -rf "$base" "$SESSIONS"' EXIT

cluster_init "$c" "shared_preload_libraries = 'pg_occ'" "max_connections = 40"
cluster_start "$c"
export PGHOST=$c/sock PGPORT=5432 PGUSER=postgres
# the test's own sessions never wait for the standby; the callers set on.
# A leader runs every body it took, however long the paused one took
# (occ.batch_max_time, read by the leader alone): with the default 10 ms a
# loaded machine gives f2 back, and a kill at the commit takes its session
# down before it runs again
export PGOPTIONS="-c synchronous_commit=local -c occ.batch_max_time=1min"
DB=postgres

sql "CREATE EXTENSION pg_occ;
     CREATE TABLE log (who text NOT NULL);
     CREATE TABLE counter (n int NOT NULL); INSERT INTO counter VALUES (0);
     CREATE TABLE pause_in (who text, fail boolean NOT NULL DEFAULT false);
     CREATE SEQUENCE go; CREATE SEQUENCE reached;
     -- the callers' first attempts fail until they hold the gate, so that
     -- every call queues
     $CONFLICT_UNTIL_GATED;
     -- in the body of the call named in pause_in: say so, wait for go
     -- (sequences are not transactional: seen whatever the snapshot), and
     -- fail if it says so
     CREATE FUNCTION pause(who text) RETURNS void LANGUAGE plpgsql AS
     \$\$ BEGIN
       IF NOT EXISTS (SELECT FROM pause_in p WHERE p.who = pause.who) THEN RETURN; END IF;
       PERFORM nextval('reached');
       WHILE NOT (SELECT is_called FROM go) LOOP PERFORM pg_sleep(0.02); END LOOP;
       IF (SELECT fail FROM pause_in p WHERE p.who = pause.who) THEN PERFORM 1 / 0; END IF;
     END \$\$;"

CALL_SQL="CALL occ.retry('SELECT conflict_until_gated();
                        INSERT INTO log VALUES (\$1);
                        UPDATE counter SET n = n + 1;
                        SELECT pause(\$1)', NULL::jsonb, params => row('WHO'),
                       isolation => 'serializable', contention => 'batch', key => 'k');"

# start WHO [PSQL_ARGS...]: a caller named WHO, in the background (its
# commits wait for the synchronous standby while synchronous_standby_names
# is set), and then what PSQL_ARGS say
start() {
    start_session "$1" -At -c "SET synchronous_commit = on" -c "SET client_min_messages = warning" \
        -c "${CALL_SQL/WHO/$1}" "${@:2}"
}

# standby SETTING: set synchronous_standby_names; for a name, wait until
# it is in force (the checkpointer has read it): a commit with
# synchronous_commit = on then waits for the standby (and is cancelled)
standby() {
    local pid
    sql "ALTER SYSTEM SET synchronous_standby_names = '$1'"
    sql "SELECT pg_reload_conf()" >/dev/null
    [ -n "$1" ] || return 0
    for _ in $(seq 1 100); do
        start_session probe -At -c "SET synchronous_commit = on" -c "CREATE TEMP TABLE t (); DROP TABLE t"
        while kill -0 "${client_pid[probe]}" 2>/dev/null; do
            pid=$(sql "SELECT pid FROM pg_stat_activity WHERE application_name = 'probe' AND wait_event = 'SyncRep'")
            if [ -n "$pid" ]; then
                sql "SELECT pg_cancel_backend($pid)" >/dev/null
                ended probe >/dev/null
                return
            fi
            sleep 0.1
        done
    done
    fail "synchronous_standby_names = '$1' never came in force"
}

# queue_batch [PSQL_ARGS...]: L, then f1 (which then does what PSQL_ARGS
# say) and f2, queue in that order behind a session that holds the key's
# gate, which then lets go: L leads (its pid in $leader), and takes the
# others' calls into its batch
queue_batch() {
    open_session holder -At
    step holder "BEGIN; SELECT occ.gate('k');"
    start L
    leader=$(queued L)
    # one at a time, so that f1 is first in the queue: the first call a
    # leader took always runs in its batch; the next ones only within the
    # batch's time (lead.c), which a loaded machine may run out of
    start f1 "$@"
    wait_for f1 "wait_event_type = 'Extension'" >/dev/null
    start f2
    wait_for f2 "wait_event_type = 'Extension'" >/dev/null
    send holder "COMMIT;"
    close_input holder
    ended holder >/dev/null
    rm -f "$SESSIONS/holder.in"
}

# point_reached POINT: wait until the leader (pid $leader) is at POINT
point_reached() {
    if [ "$1" = commit ]; then
        wait_for L "pid = $leader AND wait_event = 'SyncRep'" >/dev/null
    else
        until [ "$(sql "SELECT is_called FROM reached")" = t ]; do sleep 0.1; done
    fi
}

# rows: the calls that committed, sorted, and the counter
rows() { sql "SELECT coalesce(string_agg(who, ',' ORDER BY who), '') || ' n=' || (SELECT n FROM counter) FROM log"; }

# committed WHO OUTPUT: OUTPUT is WHO's committed outcome
committed() { grep -qE '^\[\{"pause": ""\}\]$' <<<"$2" || fail "$how at $point: $1 did not commit: $2"; }

for point in own member commit; do
    for how in cancel terminate kill; do
        sql "TRUNCATE log, pause_in; UPDATE counter SET n = 0;
             SELECT setval('go', 1, false), setval('reached', 1, false)" >/dev/null
        case $point in
            own) sql "INSERT INTO pause_in VALUES ('L')" ;;
            member) sql "INSERT INTO pause_in VALUES ('f1')" ;;
            commit) standby nobody ;;
        esac
        queue_batch
        point_reached "$point"

        case $how in
            cancel) sql "SELECT pg_cancel_backend($leader)" >/dev/null ;;
            terminate) sql "SELECT pg_terminate_backend($leader)" >/dev/null ;;
            kill) restarts=$(cluster_restarts "$c")
                  kill -KILL "$leader" ;;
        esac
        # let the bodies that run again go on, and the commits end
        [ "$how" != kill ] || cluster_recovered "$c" "$restarts" || fail "the server did not come back"
        [ "$point" = commit ] && standby ''
        sql "SELECT setval('go', 1)" >/dev/null

        out_l=$(ended L)
        out_1=$(ended f1)
        out_2=$(ended f2)
        got=$(rows)
        case $point-$how in
            own-kill | member-kill) want=" n=0" ;;
            own-* | member-*) want="f1,f2 n=2" ;;
            commit-*) want="L,f1,f2 n=3" ;;
        esac
        [ "$got" = "$want" ] || fail "$how at $point: rows $got, expected $want (L: $out_l; f1: $out_1; f2: $out_2)"
        if [ "$how" != kill ]; then
            committed f1 "$out_1"
            committed f2 "$out_2"
        fi
        case $point-$how in
            commit-cancel)
                grep -q "canceling wait for synchronous replication" <<<"$out_l" ||
                    fail "$how at $point: no WARNING for L: $out_l"
                committed L "$(grep -v -e WARNING -e DETAIL <<<"$out_l")" ;;
            *-cancel)
                grep -q "canceling statement due to user request" <<<"$out_l" ||
                    fail "$how at $point: L: $out_l" ;;
            *-terminate)
                grep -q "terminating connection due to administrator command" <<<"$out_l" ||
                    fail "$how at $point: L: $out_l" ;;
        esac
        [ "$(sql "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 20291")" = 0 ] ||
            fail "$how at $point: a gate is still held"
        echo "batch_kill: the leader's $how at $point: rows $got"
    done
done

# a follower cancelled after the leader took its call waits for the
# outcome; when the batch then fails (its leader cancelled), it reports its
# own cancel truthfully: nothing of it committed, and it does not run again
sql "TRUNCATE log, pause_in; UPDATE counter SET n = 0;
     SELECT setval('go', 1, false), setval('reached', 1, false);
     INSERT INTO pause_in VALUES ('f1')" >/dev/null
queue_batch
point_reached member
cancel_taken f1
sql "SELECT pg_cancel_backend($leader)" >/dev/null
sql "SELECT setval('go', 1)" >/dev/null
out_1=$(ended f1)
grep -q "ERROR:  canceling statement due to user request" <<<"$out_1" || fail "f1 after its batch failed: $out_1"
committed f2 "$(ended f2)"
ended L >/dev/null
[ "$(rows)" = "f2 n=1" ] || fail "a cancelled follower whose batch failed: rows $(rows)"
echo "batch_kill: a follower cancelled mid-batch reported its cancel when the batch failed: rows $(rows)"

# a follower cancelled after the leader took its call, whose body then
# fails on its own (the batch commits the others): it reports its body's
# error, and its session still takes interrupts (its pg_sleep is cancelled)
sql "TRUNCATE log, pause_in; UPDATE counter SET n = 0;
     SELECT setval('go', 1, false), setval('reached', 1, false);
     INSERT INTO pause_in VALUES ('f1', true)" >/dev/null
queue_batch -c "SELECT pg_sleep(60)"
point_reached member
cancel_taken f1
sql "SELECT setval('go', 1)" >/dev/null
pid=$(wait_for f1 "wait_event = 'PgSleep'")
sql "SELECT pg_cancel_backend($pid)" >/dev/null
out_1=$(ended f1)
grep -q "ERROR:  division by zero" <<<"$out_1" || fail "the cancelled f1 whose body failed: $out_1"
grep -q "ERROR:  canceling statement due to user request" <<<"$out_1" || fail "f1's pg_sleep was not cancelled: $out_1"
committed f2 "$(ended f2)"
ended L >/dev/null
[ "$(rows)" = "L,f2 n=2" ] || fail "a cancelled follower whose body failed: rows $(rows)"
echo "batch_kill: a follower cancelled mid-batch whose body failed reported its error, and took the next cancel"

# a follower whose caller goes while its body runs in the leader (f1, in
# its body; f2, taken and waiting, after a cancel): terminated, or its
# client killed (SIGKILL of its psql).  Nothing of its call commits: the
# leader, before its commit, rolls back the bodies it ran and runs the
# others again; the others commit once each.  A follower cancelled after it
# was taken still ends at once when it is terminated (queue mode ends in
# well under a second).  A follower cancelled again and again while its
# body runs reports its committed outcome, not a cancel.
for case in terminate client-kill twice-cancelled cancelled-terminated; do
    sql "TRUNCATE log, pause_in; UPDATE counter SET n = 0;
         SELECT setval('go', 1, false), setval('reached', 1, false);
         INSERT INTO pause_in VALUES ('f1')" >/dev/null
    queue_batch
    point_reached member
    gone=f1
    case $case in
        terminate)
            sql "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'f1'" >/dev/null ;;
        client-kill)
            kill -KILL "${client_pid[f1]}" ;;
        twice-cancelled)
            gone=
            cancel_taken f1
            for _ in 1 2 3; do
                sql "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'f1'" >/dev/null
                sleep 0.1
            done ;;
        cancelled-terminated)
            gone=f2
            cancel_taken f2
            sql "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'f2'" >/dev/null ;;
    esac
    if [ -n "$gone" ]; then
        # the backend has gone (a terminated one at once, a follower whose
        # client was killed within its client check), the leader still paused
        for i in $(seq 1 40); do
            [ -n "$(sql "SELECT pid FROM pg_stat_activity WHERE application_name = '$gone'")" ] || break
            [ "$i" -lt 40 ] || fail "$case: $gone's backend did not end within 2 s, its leader paused"
            sleep 0.05
        done
    fi
    sql "SELECT setval('go', 1)" >/dev/null
    committed L "$(ended L)"
    out_1=$(ended f1)
    out_2=$(ended f2)
    case $case in
        twice-cancelled)
            want="L,f1,f2 n=3"
            grep -q "came too late" <<<"$out_1" && ! grep -q "ERROR" <<<"$out_1" ||
                fail "$case: f1 did not report its committed outcome: $out_1"
            committed f2 "$out_2" ;;
        cancelled-terminated)
            want="L,f1 n=2"
            committed f1 "$out_1" ;;
        *)
            want="L,f2 n=2"
            committed f2 "$out_2" ;;
    esac
    [ "$(rows)" = "$want" ] || fail "$case: rows $(rows), expected $want (f1: $out_1; f2: $out_2)"
    [ "$(sql "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 20291")" = 0 ] ||
        fail "$case: a gate is still held"
    echo "batch_kill: a follower $case mid-batch: rows $(rows)"
done

# a new session on the PGPROC of a follower terminated mid-batch, whose
# leader has not yet let go of the follower's slot (ABANDONED): it joins
# the batch queue, in its PGPROC's second slot, as a follower (it used to
# run alone, as in queue mode, waiting for the gate).  PostgreSQL 15 gives
# a new backend the PGPROC freed last: the follower is terminated from a
# session that stays (ctl), its end awaited without a connection (its
# /proc entry), after the script's own connections have ended, so that N's
# backend takes its PGPROC (later versions may give it another one, and N
# a slot of its own anyway).
sql "TRUNCATE log, pause_in; UPDATE counter SET n = 0;
     SELECT setval('go', 1, false), setval('reached', 1, false);
     INSERT INTO pause_in VALUES ('f1')" >/dev/null
queue_batch
point_reached member
open_session ctl -At
pid_1=$(sql "SELECT pid FROM pg_stat_activity WHERE application_name = 'f1'")
sleep 0.5
step ctl "SELECT pg_terminate_backend($pid_1);"
for i in $(seq 1 40); do
    [ -d "/proc/$pid_1" ] || break
    [ "$i" -lt 40 ] || fail "after a follower's slot was abandoned: f1's backend did not end within 2 s"
    sleep 0.05
done
start N
waits=$(for _ in $(seq 1 300); do
            w=$(sql "SELECT wait_event_type FROM pg_stat_activity WHERE application_name = 'N'
                      AND wait_event_type IN ('Extension', 'Lock')")
            [ -z "$w" ] || { echo "$w"; break; }
            sleep 0.1
        done)
[ "$waits" = Extension ] ||
    fail "a new session after a follower's slot was abandoned: it waits ${waits:-for nothing seen} (Lock: alone, for the gate), not in the batch queue"
sql "SELECT setval('go', 1)" >/dev/null
for who in L f2 N; do committed "$who" "$(ended "$who")"; done
ended f1 >/dev/null
close_input ctl
ended ctl >/dev/null
[ "$(rows)" = "L,N,f2 n=3" ] || fail "after a follower's slot was abandoned: rows $(rows)"
echo "batch_kill: a new session after a follower's slot was abandoned joined the batch queue: rows $(rows)"

# the queue still works after all that: a batch of three commits
sql "TRUNCATE log, pause_in; UPDATE counter SET n = 0" >/dev/null
queue_batch
for who in L f1 f2; do committed "$who" "$(ended "$who")"; done
[ "$(rows)" = "L,f1,f2 n=3" ] || fail "the last batch: $(rows)"
[ "$(sql "SELECT batched FROM occ.stats WHERE query LIKE '%pause%'")" -ge 2 ] || fail "the last batch did not batch"
echo "batch_kill: ok"
