#!/bin/bash
# While occ.retry sleeps between attempts it holds no transaction id, no
# snapshot (backend_xmin) and no lock but its virtual transaction id, and it
# shows the PgSleep wait event; pg_cancel_backend, statement_timeout and
# pg_terminate_backend end the sleep at once.
#
# A real second session watches a backend whose body always fails and whose
# backoff is 10 minutes.  It waits (polling pg_stat_activity) until the
# backend sleeps; no fixed sleep is used to synchronise.  "At once" is
# checked loosely: the call must end within 30 s, not 10 minutes.
set -euo pipefail

DB=occ_interrupt
fail() { echo "interrupt: FAIL: $*" >&2; exit 1; }
sql() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$DB" -c "$1"; }

dropdb --if-exists "$DB" && createdb "$DB"
sql "CREATE EXTENSION pg_occ;
     CREATE FUNCTION always_conflict() RETURNS void LANGUAGE plpgsql AS
     \$\$ BEGIN RAISE EXCEPTION USING ERRCODE = 'serialization_failure', MESSAGE = 'simulated conflict'; END \$\$;"

CALL="CALL occ.retry('SELECT always_conflict()', base => '10min', cap => '10min', jitter => 'none', contention => 'backoff')"

# start_sleeper NAME [SETUP]: run the call in the background as application NAME
start_sleeper() {
    PGAPPNAME=$1 psql -X -q -d "$DB" -c "${2:-SELECT 1}" -c "$CALL" >"/tmp/occ_$1.out" 2>&1 &
    sleeper_pid=$!
}

# wait_sleeping NAME: poll until NAME's backend sleeps in occ.retry; print its pid
wait_sleeping() {
    for _ in $(seq 1 600); do
        pid=$(sql "SELECT pid FROM pg_stat_activity WHERE application_name = '$1' AND wait_event = 'PgSleep'")
        [ -n "$pid" ] && { echo "$pid"; return; }
        sleep 0.1
    done
    fail "$1 never slept"
}

# wait_ended NAME: the client must exit within 30 s; print its output
wait_ended() {
    for _ in $(seq 1 300); do
        kill -0 "$sleeper_pid" 2>/dev/null || { wait "$sleeper_pid" || true; cat "/tmp/occ_$1.out"; return; }
        sleep 0.1
    done
    fail "$1 still running 30 s after the interrupt"
}

# what a sleeping backend holds
start_sleeper holds
pid=$(wait_sleeping holds)
state=$(sql "SELECT wait_event_type, wait_event, backend_xid IS NULL, backend_xmin IS NULL FROM pg_stat_activity WHERE pid = $pid")
locks=$(sql "SELECT string_agg(locktype || ':' || mode, ',') FROM pg_locks WHERE pid = $pid")
echo "interrupt: sleeping backend: $state; locks: $locks"
[ "$state" = "Timeout|PgSleep|t|t" ] || fail "sleeping backend state $state"
[ "$locks" = "virtualxid:ExclusiveLock" ] || fail "sleeping backend holds $locks"

# pg_cancel_backend
sql "SELECT pg_cancel_backend($pid)" >/dev/null
out=$(wait_ended holds)
grep -q "canceling statement due to user request" <<<"$out" || fail "cancel: $out"
echo "interrupt: pg_cancel_backend ended the sleep"

# statement_timeout (2 s) against a 10-minute backoff
start_sleeper timeout "SET statement_timeout = '2s'"
out=$(wait_ended timeout)
grep -q "canceling statement due to statement timeout" <<<"$out" || fail "statement_timeout: $out"
echo "interrupt: statement_timeout ended the sleep"

# pg_terminate_backend
start_sleeper terminate
pid=$(wait_sleeping terminate)
sql "SELECT pg_terminate_backend($pid)" >/dev/null
out=$(wait_ended terminate)
grep -q "terminating connection due to administrator command" <<<"$out" || fail "terminate: $out"
echo "interrupt: pg_terminate_backend ended the sleep"

dropdb "$DB"
echo "interrupt: ok"
