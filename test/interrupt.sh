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
# shellcheck source=test/sessions.sh
. "$(dirname "$0")/sessions.sh"

dropdb --if-exists "$DB" && createdb "$DB"
sql "CREATE EXTENSION pg_occ;
     CREATE FUNCTION always_conflict() RETURNS void LANGUAGE plpgsql AS
     \$\$ BEGIN RAISE EXCEPTION USING ERRCODE = 'serialization_failure', MESSAGE = 'simulated conflict'; END \$\$;"

CALL="CALL occ.retry('SELECT always_conflict()', base => '10min', cap => '10min', jitter => 'none', contention => 'backoff')"

# start_sleeper NAME [SETUP [CALL]]: run the call in the background as application NAME
start_sleeper() { start_session "$1" -c "${2:-SELECT 1}" -c "${3:-$CALL}"; }

# sleeping NAME: NAME's backend sleeps in occ.retry; print its pid
sleeping() { wait_for "$1" "wait_event = 'PgSleep'"; }

# what a sleeping backend holds
start_sleeper holds
pid=$(sleeping holds)
state=$(sql "SELECT wait_event_type, wait_event, backend_xid IS NULL, backend_xmin IS NULL FROM pg_stat_activity WHERE pid = $pid")
locks=$(sql "SELECT string_agg(locktype || ':' || mode, ',') FROM pg_locks WHERE pid = $pid")
echo "interrupt: sleeping backend: $state; locks: $locks"
[ "$state" = "Timeout|PgSleep|t|t" ] || fail "sleeping backend state $state"
[ "$locks" = "virtualxid:ExclusiveLock" ] || fail "sleeping backend holds $locks"

# pg_cancel_backend
sql "SELECT pg_cancel_backend($pid)" >/dev/null
out=$(ended holds)
grep -q "canceling statement due to user request" <<<"$out" || fail "cancel: $out"
echo "interrupt: pg_cancel_backend ended the sleep"

# statement_timeout (2 s) against a 10-minute backoff
start_sleeper timeout "SET statement_timeout = '2s'"
out=$(ended timeout)
grep -q "canceling statement due to statement timeout" <<<"$out" || fail "statement_timeout: $out"
echo "interrupt: statement_timeout ended the sleep"

# pg_terminate_backend
start_sleeper terminate
pid=$(sleeping terminate)
sql "SELECT pg_terminate_backend($pid)" >/dev/null
out=$(ended terminate)
grep -q "terminating connection due to administrator command" <<<"$out" || fail "terminate: $out"
echo "interrupt: pg_terminate_backend ended the sleep"

# a 25-day delay (2.16e9 ms, more than 2^31 ms): the latch wait's timeout,
# as the kernel gets it (epoll_wait's 4th argument in /proc/PID/syscall),
# must be a slice between 0 and 1 hour, not a wrapped negative value
start_sleeper long "SELECT 1" "${CALL//10min/25 days}"
pid=$(sleeping long)
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
out=$(ended long)
grep -q "canceling statement due to user request" <<<"$out" || fail "cancel of the long delay: $out"
echo "interrupt: a long delay is slept in slices and a cancel ends it"

dropdb "$DB"
echo "interrupt: ok"
