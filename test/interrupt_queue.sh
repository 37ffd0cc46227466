#!/bin/bash
# While a queue-mode occ.retry call waits for the gate of its key it holds no
# transaction id and no snapshot (backend_xmin), and pg_locks shows only its
# virtual transaction id and its request for the gate; it shows as waiting
# on an advisory lock, blocked by the gate's holder.  pg_cancel_backend,
# statement_timeout and pg_terminate_backend end the wait at once,
# max_duration bounds it, the next waiter proceeds when the holder is
# terminated, and repeated random cancels leave no gate held and no update
# lost or doubled.
#
# Real sessions: a holder call takes the gate and sleeps in its body; other
# calls queue behind it.  States are reached by polling pg_stat_activity and
# pg_locks, never by sleeping a fixed time; "at once" is checked loosely
# (within 30 s, against a 10-minute holder).
set -euo pipefail

DB=occ_interrupt_queue
fail() { echo "interrupt_queue: FAIL: $*" >&2; exit 1; }
# shellcheck source=test/sessions.sh
. "$(dirname "$0")/sessions.sh"

dropdb --if-exists "$DB" && createdb "$DB"
sql "CREATE EXTENSION pg_occ;
     CREATE TABLE hot (id int PRIMARY KEY, v bigint NOT NULL); INSERT INTO hot VALUES (1, 0);
     $CONFLICT_UNTIL_GATED;"

HOLD="CALL occ.retry('SELECT conflict_until_gated(); SELECT pg_sleep(600)', contention => 'queue', key => 'k')"
WAIT="CALL occ.retry('SELECT conflict_until_gated(); UPDATE hot SET v = v + 1', contention => 'queue', key => 'k')"

# start NAME CALL [SETUP]: run CALL in the background as application NAME
start() { start_session "$1" -c "${3:-SET client_min_messages = warning}" -c "$2"; }

start holder "$HOLD"
holder=$(holding holder)

# what a queued call holds, and how it shows
start waiter "$WAIT"
pid=$(queued waiter)
state=$(sql "SELECT backend_xid IS NULL, backend_xmin IS NULL, pg_blocking_pids(pid) = ARRAY[$holder] FROM pg_stat_activity WHERE pid = $pid")
locks=$(sql "SELECT string_agg(locktype || ':' || mode || ':' || granted, ',' ORDER BY locktype) FROM pg_locks WHERE pid = $pid")
echo "interrupt_queue: queued backend: no xid, no xmin, blocked by the holder: $state; locks: $locks"
[ "$state" = "t|t|t" ] || fail "queued backend state $state"
[ "$locks" = "advisory:ExclusiveLock:false,virtualxid:ExclusiveLock:true" ] || fail "queued backend holds $locks"

# pg_cancel_backend
sql "SELECT pg_cancel_backend($pid)" >/dev/null
out=$(ended waiter)
grep -q "canceling statement due to user request" <<<"$out" || fail "cancel: $out"
echo "interrupt_queue: pg_cancel_backend ended the wait"

# statement_timeout (2 s) against a 10-minute holder
start timeout "$WAIT" "SET statement_timeout = '2s'"
out=$(ended timeout)
grep -q "canceling statement due to statement timeout" <<<"$out" || fail "statement_timeout: $out"
echo "interrupt_queue: statement_timeout ended the wait"

# max_duration (2 s): gives up with the last failure's SQLSTATE
start maxdur "${WAIT%)}, max_duration => '2s')" "\\set VERBOSITY verbose"
out=$(ended maxdur)
grep -q "ERROR:  40001: simulated conflict" <<<"$out" && grep -q "max_duration ran out while waiting for the gate" <<<"$out" ||
    fail "max_duration: $out"
echo "interrupt_queue: max_duration bounded the wait (40001, gave up)"

# pg_terminate_backend
start terminate "$WAIT"
pid=$(queued terminate)
sql "SELECT pg_terminate_backend($pid)" >/dev/null
out=$(ended terminate)
grep -q "terminating connection due to administrator command" <<<"$out" || fail "terminate: $out"
echo "interrupt_queue: pg_terminate_backend ended the wait"

# the holder is terminated: its session gate goes with it, the next waiter runs
start next "$WAIT"
queued next >/dev/null
sql "SELECT pg_terminate_backend($holder)" >/dev/null
ended holder >/dev/null
out=$(ended next)
[ "$out" = "" ] || fail "next waiter after the holder was terminated: $out"
[ "$(sql "SELECT v FROM hot")" = 1 ] || fail "the next waiter's update is missing"
echo "interrupt_queue: the next waiter proceeded when the holder was terminated"
[ "$(sql "SELECT count(*) FROM pg_locks WHERE objsubid = 20291")" = 0 ] || fail "a gate is still held"

# repeated random cancels while 4 sessions pass the gate around: each session
# then checks that it holds no gate, and the counter equals the calls that
# succeeded (nothing lost, nothing doubled)
sql "UPDATE hot SET v = 0"
calls=100
script=$(mktemp)
{
    echo "\\set ON_ERROR_STOP 0"
    for _ in $(seq $calls); do
        echo "CALL occ.retry('SELECT conflict_until_gated(); SELECT pg_sleep(0.005); UPDATE hot SET v = v + 1', contention => 'queue', key => 'k');"
        echo "\\echo DONE :ERROR"
    done
} >"$script"
cancels=$(cancel_storm "$script")
succeeded=$(cat "$SESSIONS"/storm?.out | grep -c "^DONE false$" || true)
v=$(sql "SELECT v FROM hot")
echo "interrupt_queue: $cancels random cancels: $succeeded of $((4 * calls)) calls committed, counter $v, no gate left"
[ "$v" = "$succeeded" ] || fail "counter $v != $succeeded committed calls"

dropdb "$DB"
echo "interrupt_queue: ok"
