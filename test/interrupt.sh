#!/bin/bash
# While occ.retry sleeps between attempts it holds no transaction id, no
# snapshot (backend_xmin) and no lock but its virtual transaction id, and it
# shows the PgSleep wait event; pg_cancel_backend, statement_timeout and
# pg_terminate_backend end the sleep at once.  A delay longer than 2^31 ms
# is slept in bounded slices: the kernel never sees a timeout that wrapped
# to a negative value (which would mean "forever").
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

# start_sleeper NAME [SETUP [CALL]]: run the call in the background as application NAME
start_sleeper() {
    PGAPPNAME=$1 psql -X -q -d "$DB" -c "${2:-SELECT 1}" -c "${3:-$CALL}" >"/tmp/occ_$1.out" 2>&1 &
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

# a 25-day delay (2.16e9 ms, more than 2^31 ms): the latch wait's timeout,
# as the kernel gets it (epoll_wait's 4th argument in /proc/PID/syscall),
# must be a slice between 0 and 1 hour, not a wrapped negative value
start_sleeper long "SELECT 1" "${CALL//10min/25 days}"
pid=$(wait_sleeping long)
case $(uname -m) in
    x86_64) waits="232 281" ;;   # epoll_wait, epoll_pwait
    aarch64) waits="22" ;;       # epoll_pwait
    *) waits= ;;
esac
timeout_ms=
for _ in $(seq 1 100); do
    read -r nr _ _ _ arg3 _ <"/proc/$pid/syscall" || break
    if [ -n "$waits" ] && [[ " $waits " == *" $nr "* ]]; then
        timeout_ms=$(( (arg3 & 0xffffffff) >= 0x80000000 ? (arg3 & 0xffffffff) - 0x100000000 : (arg3 & 0xffffffff) ))
        break
    fi
    sleep 0.1
done
if [ -z "$waits" ]; then
    echo "interrupt: long delay: no syscall table for $(uname -m), not checked"
else
    [ -n "$timeout_ms" ] || fail "long delay: backend $pid never seen in epoll_wait ($(cat "/proc/$pid/syscall"))"
    echo "interrupt: a 25-day delay waits in the kernel with a timeout of $timeout_ms ms"
    [ "$timeout_ms" -ge 0 ] && [ "$timeout_ms" -le 3600000 ] ||
        fail "a 25-day delay is passed to the kernel as $timeout_ms ms"
fi
sql "SELECT pg_cancel_backend($pid)" >/dev/null
out=$(wait_ended long)
grep -q "canceling statement due to user request" <<<"$out" || fail "cancel of the long delay: $out"
echo "interrupt: a long delay is slept in slices and a cancel ends it"

dropdb "$DB"
echo "interrupt: ok"
