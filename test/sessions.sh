# Helpers of the interrupt checks (test/interrupt.sh, interrupt_queue.sh,
# interrupt_key.sh, client_gone.sh) and of batch mode's (batch.sh,
# batch_kill.sh), sourced: real sessions run by psql in the
# background, each under its own application_name, whose states are reached
# by polling pg_stat_activity and pg_locks, never by sleeping a fixed time.
# The caller sets DB and defines fail MESSAGE; the sessions' output goes to
# $SESSIONS/NAME.out, removed at exit.  A session runs a script given at
# its start (start_session), or what the test sends it, step by step
# (open_session, send, step), until its input is closed (close_input).
# shellcheck shell=bash

SESSIONS=$(mktemp -d)
trap 'rm -rf "$SESSIONS"' EXIT
declare -A client_pid session_in

sql() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$DB" -c "$1"; }

# CONFLICT_UNTIL_GATED: SQL that creates conflict_until_gated(), which
# fails (40001) unless this backend holds a gate: an ungated attempt fails,
# so that calls queue
CONFLICT_UNTIL_GATED="CREATE FUNCTION conflict_until_gated() RETURNS void LANGUAGE plpgsql AS
     \$\$ BEGIN
       IF NOT EXISTS (SELECT FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory'
                      AND objsubid = 20291 AND granted) THEN
         RAISE EXCEPTION USING ERRCODE = 'serialization_failure', MESSAGE = 'simulated conflict';
       END IF;
     END \$\$"

# start_session NAME PSQL_ARGS...: run psql in the background as
# application NAME, its output in $SESSIONS/NAME.out
start_session() {
    local name=$1
    shift
    (
        # not the input of the other sessions: they end when we close it
        for fd in "${session_in[@]}"; do eval "exec $fd>&-"; done
        PGAPPNAME=$name exec psql -X -q -d "$DB" "$@"
    ) >"$SESSIONS/$name.out" 2>&1 &
    client_pid[$name]=$!
}

# open_session NAME PSQL_ARGS...: a session as application NAME that runs
# what send and step give it, until close_input NAME
open_session() {
    local name=$1 fd
    shift
    mkfifo "$SESSIONS/$name.in"
    start_session "$name" "$@" -f "$SESSIONS/$name.in"
    exec {fd}<>"$SESSIONS/$name.in"
    session_in[$name]=$fd
}

# send NAME SQL: give SQL to NAME's session, without waiting for it
send() { printf '%s\n' "$2" >&"${session_in[$1]}"; }

# step NAME SQL: give SQL to NAME's session and wait until it has run it
step() {
    local mark="step $RANDOM$RANDOM done"
    send "$1" "$2"
    send "$1" "\\echo '$mark'"
    for _ in $(seq 1 600); do
        grep -q "^$mark\$" "$SESSIONS/$1.out" && return
        sleep 0.1
    done
    fail "$1 never ran: $2"
}

# wait_for NAME CONDITION: poll until NAME's backend satisfies CONDITION
# (on pg_stat_activity a); print its pid
wait_for() {
    local pid
    for _ in $(seq 1 600); do
        pid=$(sql "SELECT pid FROM pg_stat_activity a WHERE application_name = '$1' AND $2")
        [ -n "$pid" ] && { echo "$pid"; return; }
        sleep 0.1
    done
    fail "$1 never reached: $2"
}

# holding NAME: NAME sleeps (pg_sleep) holding a gate; print its pid
holding() { wait_for "$1" "wait_event = 'PgSleep' AND EXISTS (SELECT FROM pg_locks l WHERE l.pid = a.pid AND l.objsubid = 20291 AND l.granted)"; }

# queued NAME: NAME waits for a gate (an advisory lock); print its pid
queued() { wait_for "$1" "wait_event_type = 'Lock' AND wait_event = 'advisory'"; }

# cancel_taken NAME: cancel NAME, a follower whose call a batch's leader
# took, and wait until it says that it waits for the batch's outcome
cancel_taken() {
    sql "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = '$1'" >/dev/null
    for _ in $(seq 1 300); do
        grep -q "waits for the outcome of the batch" "$SESSIONS/$1.out" && return
        sleep 0.1
    done
    fail "the cancelled $1 did not say it waits for the batch: $(cat "$SESSIONS/$1.out")"
}

# close_input NAME: end an open session's input (not in a subshell: the
# session ends when its last writer closes it), for ended to wait for it
close_input() {
    eval "exec ${session_in[$1]}>&-"
    unset "session_in[$1]"
}

# ended NAME: the client must exit within 30 s; print its output
ended() {
    for _ in $(seq 1 300); do
        kill -0 "${client_pid[$1]}" 2>/dev/null || { wait "${client_pid[$1]}" || true; cat "$SESSIONS/$1.out"; return; }
        sleep 0.1
    done
    fail "$1 still running 30 s after the interrupt"
}

# cancel_storm SCRIPT: run the psql SCRIPT in 4 sessions, storm1 to storm4,
# and cancel 2 of their active statements at random, again and again, until
# all have ended; then each must say that it holds no gate.  Print the
# number of cancels sent (at least 10, or fail).
cancel_storm() {
    local i n cancels=0 script=$SESSIONS/storm.sql
    {
        cat "$1"
        # out of the canceller's reach before the check (repeated, in case a
        # cancel hits the SET itself), and the check twice (in case a cancel
        # chosen just before hits it)
        for _ in 1 2 3; do echo "SET application_name = 'done';"; done
        for _ in 1 2; do
            echo "SELECT 'LEFT ' || count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND objsubid = 20291;"
        done
    } >"$script"
    for i in 1 2 3 4; do
        start_session "storm$i" -At -f "$script"
    done
    while kill -0 "${client_pid[storm1]}" 2>/dev/null || kill -0 "${client_pid[storm2]}" 2>/dev/null ||
          kill -0 "${client_pid[storm3]}" 2>/dev/null || kill -0 "${client_pid[storm4]}" 2>/dev/null; do
        n=$(sql "SELECT count(pg_cancel_backend(pid)) FROM (SELECT pid FROM pg_stat_activity
                  WHERE application_name LIKE 'storm%' AND state = 'active' ORDER BY random() LIMIT 2) s")
        cancels=$((cancels + n))
    done
    for i in 1 2 3 4; do
        wait "${client_pid[storm$i]}" || true
        if ! grep -q "^LEFT 0$" "$SESSIONS/storm$i.out" || grep -q "^LEFT [1-9]" "$SESSIONS/storm$i.out"; then
            fail "storm$i: a gate was left held: $(grep "^LEFT" "$SESSIONS/storm$i.out" | tr '\n' ' ')"
        fi
    done
    [ "$cancels" -ge 10 ] || fail "only $cancels cancels were sent"
    echo "$cancels"
}
