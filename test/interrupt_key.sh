#!/bin/bash
# A transaction that waits for the gate of its key on SET LOCAL occ.key
# holds no transaction id and no snapshot (backend_xmin), and pg_locks
# shows only its virtual transaction id and its request for the gate; it
# shows as waiting on an advisory lock, blocked by the gate's holder.
# pg_cancel_backend and statement_timeout end the wait at once, with the
# transaction aborted and no gate held; pg_terminate_backend ends a waiter;
# when the holder is terminated, the gate passes to the next waiter; and
# repeated random cancels of such transactions leave no gate held and no
# update lost or doubled.
#
# Real sessions, driven step by step (test/sessions.sh): each first fails a
# transaction with the key (40001, raised explicitly), so that its next
# transaction with it takes the gate whatever the key's temperature; all do
# so before a holder takes the gate and sleeps; waiters then queue behind it.  States are reached by polling
# pg_stat_activity and pg_locks, never by sleeping a fixed time; "at once"
# is checked loosely (within 30 s, against a 10-minute holder).
set -euo pipefail

DB=occ_interrupt_key
fail() { echo "interrupt_key: FAIL: $*" >&2; exit 1; }
# shellcheck source=test/sessions.sh
. "$(dirname "$0")/sessions.sh"

dropdb --if-exists "$DB" && createdb "$DB"
sql "CREATE EXTENSION pg_occ;
     CREATE TABLE hot (id int PRIMARY KEY, v bigint NOT NULL); INSERT INTO hot VALUES (1, 0);"

# A failed transaction with the key: the session's next one takes the gate.
# Every session fails one first, before the holder takes the gate: a
# session that failed one while the gate was held could find the key hot
# (recent failures of the others) and queue already there.
PRIME="BEGIN; SET LOCAL occ.key = 'k';
DO \$\$ BEGIN RAISE EXCEPTION USING ERRCODE = 'serialization_failure', MESSAGE = 'priming'; END \$\$;
ROLLBACK;"
HOLD="BEGIN; SET LOCAL occ.key = 'k'; SELECT pg_sleep(600); COMMIT;"
# waits on the SET, then increments; says whether it still holds a gate
WAIT="BEGIN ISOLATION LEVEL REPEATABLE READ; SET LOCAL occ.key = 'k';
UPDATE hot SET v = v + 1 WHERE id = 1;
COMMIT;
SELECT 'LEFT ' || count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND objsubid = 20291;"

for s in holder waiter timeout terminate next; do
    open_session "$s" -At
    step "$s" "SET client_min_messages = warning; $PRIME"
done

send holder "$HOLD"
holder=$(holding holder)

# what a queued transaction holds, and how it shows
send waiter "$WAIT"
pid=$(queued waiter)
state=$(sql "SELECT backend_xid IS NULL, backend_xmin IS NULL, pg_blocking_pids(pid) = ARRAY[$holder] FROM pg_stat_activity WHERE pid = $pid")
locks=$(sql "SELECT string_agg(locktype || ':' || mode || ':' || granted, ',' ORDER BY locktype) FROM pg_locks WHERE pid = $pid")
echo "interrupt_key: queued backend: no xid, no xmin, blocked by the holder: $state; locks: $locks"
[ "$state" = "t|t|t" ] || fail "queued backend state $state"
[ "$locks" = "advisory:ExclusiveLock:false,virtualxid:ExclusiveLock:true" ] || fail "queued backend holds $locks"

# pg_cancel_backend: the SET fails, the transaction is aborted (its UPDATE is
# refused, its COMMIT rolls back), and the session holds no gate
sql "SELECT pg_cancel_backend($pid)" >/dev/null
close_input waiter
out=$(ended waiter)
grep -q "canceling statement due to user request" <<<"$out" || fail "cancel: $out"
grep -q "current transaction is aborted" <<<"$out" || fail "cancel: the transaction went on: $out"
grep -q "^LEFT 0$" <<<"$out" || fail "cancel: a gate was left held: $out"
echo "interrupt_key: pg_cancel_backend ended the wait, aborted the transaction, no gate left"

# statement_timeout (2 s) against a 10-minute holder
send timeout "SET statement_timeout = '2s'; $WAIT"
close_input timeout
out=$(ended timeout)
grep -q "canceling statement due to statement timeout" <<<"$out" || fail "statement_timeout: $out"
grep -q "current transaction is aborted" <<<"$out" || fail "statement_timeout: the transaction went on: $out"
grep -q "^LEFT 0$" <<<"$out" || fail "statement_timeout: a gate was left held: $out"
echo "interrupt_key: statement_timeout ended the wait, no gate left"

# pg_terminate_backend of a waiter
send terminate "$WAIT"
pid=$(queued terminate)
sql "SELECT pg_terminate_backend($pid)" >/dev/null
close_input terminate
out=$(ended terminate)
grep -q "terminating connection due to administrator command" <<<"$out" || fail "terminate: $out"
echo "interrupt_key: pg_terminate_backend ended the wait"

# the holder is terminated: its transaction's gate goes with it, the next
# waiter runs and commits
send next "$WAIT"
queued next >/dev/null
sql "SELECT pg_terminate_backend($holder)" >/dev/null
close_input holder
ended holder >/dev/null
close_input next
out=$(ended next)
if ! grep -q "^LEFT 0$" <<<"$out" || grep -v priming <<<"$out" | grep -q ERROR; then
    fail "next waiter after the holder was terminated: $out"
fi
v=$(sql "SELECT v FROM hot")
[ "$v" = 1 ] || fail "the counter is $v: only the next waiter's update should have committed"
echo "interrupt_key: the next waiter proceeded when the holder was terminated"
[ "$(sql "SELECT count(*) FROM pg_locks WHERE objsubid = 20291")" = 0 ] || fail "a gate is still held"


# repeated random cancels while 4 sessions pass the gate around, each
# running REPEATABLE READ read-modify-writes with the key (a failed one is
# not retried: psql goes on with the next); each transaction that commits
# also logs a row.  Each session then checks that it holds no gate, and the
# counter must equal the logged rows (nothing lost, nothing doubled).
sql "UPDATE hot SET v = 0; CREATE TABLE committed (id serial)"
transactions=100
script=$(mktemp)
{
    echo "SET client_min_messages = error;"
    for _ in $(seq $transactions); do
        echo "BEGIN ISOLATION LEVEL REPEATABLE READ;"
        echo "SET LOCAL occ.key = 'k';"
        echo "SELECT v AS seen FROM hot WHERE id = 1 \\gset"
        echo "SELECT pg_sleep(0.01);"
        echo "UPDATE hot SET v = :seen + 1 WHERE id = 1;"
        echo "INSERT INTO committed DEFAULT VALUES;"
        echo "COMMIT;"
    done
} >"$script"
cancels=$(cancel_storm "$script")
read -r v committed < <(sql "SELECT v, (SELECT count(*) FROM committed) FROM hot" | tr '|' ' ')
interrupted=$(cat "$SESSIONS"/storm?.out | grep -c "canceling statement" || true)
echo "interrupt_key: $cancels random cancels ($interrupted statements interrupted): $committed of $((4 * transactions)) transactions committed, counter $v, no gate left"
[ "$v" = "$committed" ] || fail "counter $v != $committed committed transactions"

dropdb "$DB"
echo "interrupt_key: ok"
