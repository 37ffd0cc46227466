#!/bin/bash
# A call whose client has gone does not go on: before each wait, each sleep
# and each attempt, occ.retry checks that the client is still connected,
# and ends the session with the usual FATAL "connection to client lost"
# when it is not, so nothing commits that no one will hear of (a pooler's
# query_timeout, a killed application).  A wait or a sleep ends as soon as
# the client goes only with client_connection_check_interval set.
#
# Real sessions: a holder call takes the gate of 'k' and sleeps in its body;
# a waiter queues behind it; its client (psql) is killed with SIGKILL.
# States are reached by polling pg_stat_activity, never by sleeping a fixed
# time.
set -euo pipefail

DB=occ_client_gone
fail() { echo "client_gone: FAIL: $*" >&2; exit 1; }
# shellcheck source=test/sessions.sh
. "$(dirname "$0")/sessions.sh"

dropdb --if-exists "$DB" && createdb "$DB"
sql "CREATE EXTENSION pg_occ;
     CREATE TABLE hot (id int PRIMARY KEY, v bigint NOT NULL); INSERT INTO hot VALUES (1, 0);
     $CONFLICT_UNTIL_GATED;"

HOLD="CALL occ.retry('SELECT conflict_until_gated(); SELECT pg_sleep(600)', contention => 'queue', key => 'k')"
WAIT="CALL occ.retry('SELECT conflict_until_gated(); UPDATE hot SET v = v + 1', contention => 'queue', key => 'k')"
SLEEP="CALL occ.retry('UPDATE hot SET v = v + 1; SELECT 1 / 0', retry_on => '{22012}', contention => 'backoff',
                      jitter => 'none', base => '10 min', cap => '10 min')"
# start NAME SETUP CALL: run CALL in the background as application NAME
start() { start_session "$1" -c "$2" -c "$3"; }

# gone PID: the backend must end within 30 s
gone() {
    for _ in $(seq 1 300); do
        [ "$(sql "SELECT count(*) FROM pg_stat_activity WHERE pid = $1")" = 0 ] && return
        sleep 0.1
    done
    fail "backend $1 still runs 30 s after its client was killed"
}

# 1. Queued, the client killed: once the gate passes to it, the call ends
#    before its next attempt, and does not commit.
start holder "SET client_min_messages = warning" "$HOLD"
holder=$(holding holder)
start waiter "SET client_min_messages = warning" "$WAIT"
waiter=$(queued waiter)
kill -KILL "${client_pid[waiter]}"
wait "${client_pid[waiter]}" 2>/dev/null || true
sql "SELECT pg_cancel_backend($holder)" >/dev/null
gone "$waiter"
wait "${client_pid[holder]}" 2>/dev/null || true
[ "$(sql "SELECT v FROM hot")" = 0 ] || fail "the call of a killed client committed after its wait"
echo "client_gone: a queued call whose client was killed ended before its next attempt; nothing committed"

# 2. With client_connection_check_interval, a queued call ends while it waits
start holder "SET client_min_messages = warning" "$HOLD"
holder=$(holding holder)
start waiter "SET client_connection_check_interval = '100ms'" "$WAIT"
waiter=$(queued waiter)
kill -KILL "${client_pid[waiter]}"
wait "${client_pid[waiter]}" 2>/dev/null || true
gone "$waiter"
sql "SELECT pg_cancel_backend($holder)" >/dev/null
wait "${client_pid[holder]}" 2>/dev/null || true
[ "$(sql "SELECT v FROM hot")" = 0 ] || fail "the call of a killed client committed"
echo "client_gone: with client_connection_check_interval, a queued call ended while it waited"

# 3. The same for a call sleeping a 10-minute backoff
start sleeper "SET client_connection_check_interval = '100ms'" "$SLEEP"
sleeper=$(wait_for sleeper "wait_event_type = 'Extension' OR wait_event = 'PgSleep'")
kill -KILL "${client_pid[sleeper]}"
wait "${client_pid[sleeper]}" 2>/dev/null || true
gone "$sleeper"
[ "$(sql "SELECT v FROM hot")" = 0 ] || fail "the call of a killed client committed"
echo "client_gone: with client_connection_check_interval, a sleeping call ended while it slept"

dropdb "$DB"
echo "client_gone: all checks passed"
