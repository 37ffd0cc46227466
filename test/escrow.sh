#!/bin/bash
# Reservable columns (escrow) under real concurrency and faults, Jepsen
# style (test/run.sh runs it for each PostgreSQL version, in clusters of its
# own, since it crashes and restarts the server): a primary that preloads
# pg_occ, and a hot standby of it (pg_basebackup, streaming).
#
# stock (id int PRIMARY KEY, qty int NOT NULL CHECK (qty >= 0)), qty made
# reservable: a hot product with little stock (almost half the order lines
# go to it, and most of its reservations are refused), three others, and
# 300 cold ones, with room for only 100 rows in shared memory
# (occ.reservable_rows), so that rows are evicted and loaded again from the
# tables all the time, beside the fold.  CLIENTS threads (Debian's
# python3-psycopg) each run, over and over, a transaction that inserts one
# or two order lines (a unique id, product, delta) and, for each, reserves
# the delta (mostly decrements, some increments): by occ.reserve(product,
# delta) or by the plain UPDATE that pg_occ runs as one (UPDATE stock SET
# qty = qty + $delta WHERE id = $product, or qty - $minus, $delta + qty,
# COALESCE(qty, 0) + $delta; "UPDATE 1", and a refusal is 23514 as
# occ.reserve's), chosen at random for each line (ESCROW_FORM);
# sometimes one more line in a savepoint (released, rolled back, or rolled
# back because its reservation is refused); sometimes reads a catalog table,
# calls occ.reserved_value (at serializable a read of the row, which may
# get 40001 as a read of a row others update would; and PostgreSQL's
# serializable checks may then cancel a writer at its commit, "conflict in
# from prepared pivot", counted apart) or sleeps a few ms; and commits.  A fifth of the
# transactions are instead one line (either form) as the body of occ.retry in batch mode,
# all on one key (the body fails with a simulated 40001 until it holds the
# key's gate, so that the calls queue and, at read committed and
# serializable, commit in batches: a leader's transaction runs its
# followers' bodies, each in a subtransaction).  The clients record the
# lines they kept, and what they saw: committed, failed (an error on a live
# connection: the transaction did nothing), lost (the connection died
# before COMMIT was sent: nothing either) or unknown (it died during COMMIT,
# or during a call of occ.retry).  Two phases:
#   storm  STORM_SECONDS at read committed, repeatable read and
#          serializable, while a storm cancels (pg_cancel_backend) and
#          terminates (pg_terminate_backend) random client backends every
#          few ms (and, now and then, the fold worker) and, in its first
#          two thirds, kills one with SIGKILL every KILL_EVERY seconds (the
#          postmaster restarts every backend: the clients reconnect and go
#          on) and restarts the whole server once (pg_ctl restart -m
#          immediate, as postgres);
#   quiet  QUIET_SECONDS at repeatable read and serializable, no faults:
#          no transaction may fail with a serialization failure (40001):
#          each touches only its own new order lines and its reservations
#          (and reads the catalog, which nothing writes); and some calls of
#          occ.retry must have committed in batches.
# Exact values: after the restart and every other crash, with the clients
# held back (after the others they race to load the rows again, under the
# storm), and every few seconds with the clients paused between
# transactions (and after the storm's last third, with cancels and
# terminations only), for each product occ.reserved_value = qty + its
# ledger rows = initial + the sum of its order lines' deltas, and nothing is
# in flight (the shared memory rebuilt from the tables after a crash; no
# reservation left in flight by a transaction that a fault ended).
# The bound, never broken: throughout, samplers on the primary check that
# occ.reserved_value and the plain SELECT of qty are never negative, nor a
# client's own occ.reserved_value; in occ.reservations, committed >= 0 and
# committed + decrements in flight >= 0; and in every snapshot (one
# statement) qty + ledger rows = initial + sum of the order lines, >= 0 (an
# order line commits with its reservation, and the fold moves ledger rows
# into qty atomically).  A sampler on the standby checks the same snapshot
# equation there, and that its occ.reserved_value equals qty + ledger rows.
# At the end (the fold has emptied the ledger): for each product, qty =
# occ.reserved_value = occ.reservations' committed = initial + sum of its
# order lines, >= 0, nothing in flight; every transaction seen committed
# has all the lines it kept, every one seen failed or lost none, an unknown
# one all or none; refusals (23514) happened in both phases, and the
# faults (cancels, terminations, crashes) in the storm; with both forms,
# each committed lines and was refused in each phase, every UPDATE (outside
# occ.retry) said "UPDATE 1" (and is planned as an OccReserve; one of no
# row's key says
# "UPDATE 0" and reserves nothing).  Then the standby,
# once it has replayed the primary's last LSN: qty + its ledger rows and
# occ.reserved_value equal the primary's values, and occ.reserve there
# fails with 25006, as the UPDATE does; promoted, it loads the rows from its
# tables (the same values), takes the hot product's whole stock, refuses one
# more (23514, by occ.reserve and by the UPDATE),
# and folds to 0.  Prints a summary; any violation: exit 1, with the
# seed (SEED=... runs the same clients' choices again; the timing differs).
# Environment: CLIENTS (24), STORM_SECONDS (30), QUIET_SECONDS (10),
# KILL_EVERY (5), FOLD_INTERVAL (occ.fold_interval, 100), SEED (random),
# ESCROW_FORM (how the clients reserve: mixed, each line at random by
# occ.reserve or by the UPDATE; reserve; update);
# PG_CONFIG (default: pg_config on the PATH).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=test/cluster.sh
. test/cluster.sh

fail() { echo "escrow: FAIL: $*" >&2; exit 1; }
# Debian's interpreter: the workload needs its python3-psycopg
PYTHON=${PYTHON:-/usr/bin/python3}
export CLIENTS=${CLIENTS:-24} STORM_SECONDS=${STORM_SECONDS:-30} QUIET_SECONDS=${QUIET_SECONDS:-10}
export KILL_EVERY=${KILL_EVERY:-5} SEED=${SEED:-$RANDOM} ESCROW_FORM=${ESCROW_FORM:-mixed}
case $ESCROW_FORM in mixed | reserve | update) ;; *) fail "ESCROW_FORM is mixed, reserve or update, not $ESCROW_FORM" ;; esac
base=$(mktemp -d)
chmod 711 "$base"
p=$base/p
s=$base/s
trap 'cluster_cleanup; rm -rf "$base"' EXIT
start=$SECONDS

# room for 100 rows' entries: the 304 products' are evicted and loaded
# again all the time, beside the fold
cluster_init "$p" "shared_preload_libraries = 'pg_occ'" "max_connections = 100" \
    "occ.reservable_rows = 100" "occ.fold_interval = ${FOLD_INTERVAL:-100}"
cluster_start "$p"
cluster_psql "$p" -d postgres >/dev/null <<'SQL'
CREATE EXTENSION pg_occ;
CREATE TABLE stock (id int PRIMARY KEY, qty integer NOT NULL CHECK (qty >= 0));
INSERT INTO stock VALUES (1, 20), (2, 3000), (3, 100000), (4, 1000000);
INSERT INTO stock SELECT 100 + g, 50 FROM generate_series(1, 300) g;
SELECT occ.make_reservable('stock', 'qty');
CREATE TABLE orders (id text PRIMARY KEY, txn text NOT NULL, product int NOT NULL, delta int NOT NULL);
CREATE TABLE catalog (id int PRIMARY KEY, price int NOT NULL);
-- occ.retry's bodies: a simulated conflict (40001) unless this backend
-- holds the key's gate, so that every call queues, and the calls batch
CREATE FUNCTION conflict_until_gated() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory'
                 AND objsubid = 20291 AND granted) THEN
    RAISE EXCEPTION USING ERRCODE = 'serialization_failure', MESSAGE = 'simulated conflict';
  END IF;
END $$;
INSERT INTO catalog SELECT id, 100 * id FROM stock;
SQL

# the standby: a base backup with standby.signal and primary_conninfo (-R),
# on a socket of its own
mkdir -p "$s/sock"
chown postgres: "$s" "$s/sock"
cluster_as_owner "$CLUSTER_BINDIR/pg_basebackup" -h "$p/sock" -p 5432 -U postgres \
    -D "$s/data" -R -X stream -c fast
cat >>"$s/data/postgresql.conf" <<EOF
unix_socket_directories = '$s/sock'
hot_standby = on
EOF
cluster_start "$s"
[ "$(cluster_psql "$s" -d postgres -c 'SELECT pg_is_in_recovery()')" = t ] || fail "the standby is not in recovery"

cat >"$base/escrow.py" <<'PY'
import os
import random
import subprocess
import sys
import threading
import time

import psycopg
from psycopg.pq import TransactionStatus

E = os.environ
PRIMARY = dict(host=E["ESCROW_PRIMARY"], port=5432, user="postgres", dbname="postgres")
STANDBY = dict(host=E["ESCROW_STANDBY"], port=5432, user="postgres", dbname="postgres")
CLIENTS = int(E["CLIENTS"])
STORM_SECONDS = float(E["STORM_SECONDS"])
QUIET_SECONDS = float(E["QUIET_SECONDS"])
KILL_EVERY = float(E["KILL_EVERY"])
# pg_ctl as the clusters' owner (test/cluster.sh's cluster_as_owner)
AS_OWNER = ["runuser", "-u", "postgres", "--"] if os.getuid() == 0 else []
SEED = int(E["SEED"])
INITIAL = {}  # each product's qty before the workload
COLD = []  # the products beyond the first four
# a transaction as the body of occ.retry in batch mode, all on one key:
# its first attempt fails until it holds the key's gate, so that the
# calls queue (and at serializable and read committed batch: one leader's
# transaction runs its followers' bodies, each in a subtransaction)
RETRY_SHARE = 0.2
RETRY_CALL = ("CALL occ.retry('SELECT conflict_until_gated(); INSERT INTO orders VALUES ($1, $2, $3, $4);"
              " %s',"
              " params => row(%%s::text, %%s::text, %%s::int, %%s::int), isolation => %%s,"
              " contention => 'batch', key => %%s)")
RETRY_CALLS = {"occ.reserve": RETRY_CALL % "SELECT occ.reserve(''stock'', ''qty'', $3, $4)",
               "UPDATE": RETRY_CALL % "UPDATE stock SET qty = qty + $4 WHERE id = $3"}
# how a line reserves its delta (ESCROW_FORM): by occ.reserve, or by a plain
# UPDATE of one of these shapes (and the delta times the sign), which
# pg_occ runs as the same reservation
FORM = E["ESCROW_FORM"]
UPDATE_SHAPES = [("qty + %s::int", 1), ("qty - %s::bigint", -1), ("%s::int + qty", 1),
                 ("COALESCE(qty, 0) + %s::int", 1)]
# SQLSTATEs a transaction may fail with on a live connection
EXPECTED = {"23514": "refused", "57014": "cancelled", "40001": "serialization failure",
            "40001 prepared pivot": "serialization failure"}

lock = threading.Lock()
violations = []


class Gate:
    """holds the clients back before their next transaction"""

    def __init__(self):
        self.cv = threading.Condition()
        self.open = True
        self.busy = 0  # clients in a transaction

    def enter(self):
        with self.cv:
            while not self.open:
                self.cv.wait()
            self.busy += 1

    def leave(self):
        with self.cv:
            self.busy -= 1
            self.cv.notify_all()

    def close(self, drain):
        """drain: wait until no client is in a transaction"""
        with self.cv:
            self.open = False
            if drain and not self.cv.wait_for(lambda: self.busy == 0, 60):
                violation("the clients' transactions did not end within 60 s")

    def reopen(self):
        with self.cv:
            self.open = True
            self.cv.notify_all()


gate = Gate()
done = threading.Event()  # the samplers stop
counts = {"cancels sent": 0, "terminations sent": 0, "SIGKILL crashes": 0, "restarts": 0,
          "rebuilds checked": 0, "pauses checked": 0, "fold cancels": 0, "fold terminates": 0, "samples": 0,
          "refused in savepoints": 0, "savepoints rolled back": 0, "standby samples": 0, "standby conflicts": 0,
          "own values": 0}


def say(msg):
    print("escrow: " + msg, flush=True)


def violation(msg):
    with lock:
        violations.append(msg)
        n = len(violations)
    if n <= 20:
        print("escrow: VIOLATION: " + msg, file=sys.stderr, flush=True)


def count(what, n=1):
    with lock:
        counts[what] += n


def broken(conn):
    return conn.closed or conn.broken


def connect(dsn, name, deadline_s=90):
    give_up = time.monotonic() + deadline_s
    while True:
        try:
            # the checks' statements end rather than hang
            options = "-c statement_timeout=60s" if name == "escrow-check" else ""
            return psycopg.connect(**dsn, application_name=name, autocommit=True, connect_timeout=10,
                                   options=options)
        except psycopg.OperationalError:
            if time.monotonic() > give_up:
                raise
            time.sleep(0.05)


def truth_query(with_value):
    """per product, in one snapshot: qty, its ledger rows' sum, its order
    lines' sum (and occ.reserved_value)"""
    return ("SELECT s.id, s.qty, coalesce(l.d, 0)::bigint, coalesce(o.d, 0)::bigint" +
            (", occ.reserved_value('stock', 'qty', s.id)" if with_value else "") +
            " FROM stock s"
            " LEFT JOIN (SELECT key, sum(delta) AS d FROM occ.reservation_ledger"
            "            WHERE rel = 'stock'::regclass AND col = 'qty' GROUP BY key) l ON l.key = s.id::text"
            " LEFT JOIN (SELECT product, sum(delta) AS d FROM orders GROUP BY product) o ON o.product = s.id"
            " ORDER BY s.id")


class Committed(Exception):
    """occ.retry returned: its transaction committed"""


class Phase:
    def __init__(self, name, seconds, levels):
        self.name, self.seconds, self.levels = name, seconds, levels
        self.history = []  # (txn, level, lines, outcome, sqlstate)
        self.stop = threading.Event()
        # per form: lines in committed transactions, refusals (23514)
        self.by_form = {f: {"committed lines": 0, "refused": 0} for f in ("occ.reserve", "UPDATE")}

    def tally_form(self, form, what, n=1):
        with lock:
            self.by_form[form][what] += n


def pick_product(rnd):
    r = rnd.random()
    return 1 if r < 0.45 else 2 if r < 0.6 else 3 if r < 0.7 else 4 if r < 0.8 else rnd.choice(COLD)


def pick_delta(rnd):
    return -rnd.randint(1, 3) if rnd.random() < 0.8 else rnd.randint(1, 4)


def pick_form(rnd):
    """a line's form: None for occ.reserve, else an index in UPDATE_SHAPES
    (the same choices of rnd whatever ESCROW_FORM)"""
    by_update, shape = rnd.random() < 0.5, rnd.randrange(len(UPDATE_SHAPES))
    return shape if FORM == "update" or (FORM == "mixed" and by_update) else None


def form_name(form):
    return "occ.reserve" if form is None else "UPDATE"


def reserve(conn, txn, form, product, delta):
    """the line's reservation, by occ.reserve or by the UPDATE (which must
    say UPDATE 1: every product has a row)"""
    if form is None:
        conn.execute("SELECT occ.reserve('stock', 'qty', %s::int, %s::bigint)", (product, delta))
        return
    expr, sign = UPDATE_SHAPES[form]
    cur = conn.execute("UPDATE stock SET qty = " + expr + " WHERE id = %s::int", (sign * delta, product))
    if cur.statusmessage != "UPDATE 1" or cur.rowcount != 1:
        violation("%s: UPDATE stock SET qty = %s WHERE id = %d (delta %d): %r, rowcount %d, not UPDATE 1"
                  % (txn, expr % (sign * delta), product, delta, cur.statusmessage, cur.rowcount))


def settle(conn):
    """roll back what a failed transaction left; False if the connection is gone"""
    for _ in range(5):
        if broken(conn):
            return False
        if conn.info.transaction_status == TransactionStatus.IDLE:
            return True
        try:
            conn.execute("ROLLBACK")
        except psycopg.Error:
            pass
    return False


def client(c, phase):
    rnd = random.Random(SEED * 7919 + c * 131 + len(phase.name))
    conn = None
    n = 0
    try:
        while not phase.stop.is_set():
            if conn is None:
                conn = connect(PRIMARY, "escrow")
            # held back while a crash or a quiet moment is checked (after
            # connecting: a connection made before a crash is gone)
            gate.enter()
            n += 1
            level = phase.levels[(c + n) % len(phase.levels)]
            txn = "%s.%d.%d" % (phase.name, c, n)
            lines = [(pick_product(rnd), pick_delta(rnd)) for _ in range(1 if rnd.random() < 0.8 else 2)]
            # sometimes one more line in a savepoint: kept, rolled back, or
            # rolled back because its reservation is refused
            optional = len(lines) if rnd.random() < 0.15 else None
            if optional is not None:
                lines.append((pick_product(rnd), pick_delta(rnd)))
            forms = [pick_form(rnd) for _ in lines]
            current = None  # the form of the statement that runs
            kept = {}
            stage, state = "body", None
            retry = rnd.random() < RETRY_SHARE
            read_value = False
            try:
                if retry:
                    # one line; the call is the transaction, and its commit
                    product, delta = lines[0]
                    kept[0] = lines[0]
                    forms = forms[:1]
                    current = forms[0]
                    stage = "commit"
                    conn.execute(RETRY_CALLS[form_name(current)], ("%s/0" % txn, txn, product, delta, level, "stock"))
                    raise Committed()
                conn.execute("BEGIN ISOLATION LEVEL " + level)
                for j, (product, delta) in enumerate(lines):
                    if j == optional:
                        conn.execute("SAVEPOINT optional")
                    try:
                        conn.execute("INSERT INTO orders VALUES (%s, %s, %s::int, %s::int)",
                                     ("%s/%d" % (txn, j), txn, product, delta))
                        current = forms[j]
                        reserve(conn, txn, current, product, delta)
                    except psycopg.errors.CheckViolation:
                        if j != optional:
                            raise
                        phase.tally_form(form_name(current), "refused")
                        conn.execute("ROLLBACK TO SAVEPOINT optional")
                        count("refused in savepoints")
                        continue
                    if j == optional:
                        if rnd.random() < 0.5:
                            conn.execute("ROLLBACK TO SAVEPOINT optional")
                            count("savepoints rolled back")
                            continue
                        conn.execute("RELEASE SAVEPOINT optional")
                    kept[j] = (product, delta)
                r = rnd.random()
                if r < 0.3:
                    conn.execute("SELECT price FROM catalog WHERE id = %s::int", (lines[0][0],)).fetchone()
                if r < 0.15:
                    read_value = True
                    v = conn.execute("SELECT occ.reserved_value('stock', 'qty', %s::int)",
                                     (lines[0][0],)).fetchone()[0]
                    count("own values")
                    if v < 0:
                        violation("%s: occ.reserved_value of product %d in the transaction is %d"
                                  % (txn, lines[0][0], v))
                if rnd.random() < 0.25:
                    conn.execute("SELECT pg_sleep(%s)", (rnd.uniform(0.001, 0.008),))
                stage = "commit"
                conn.execute("COMMIT")
                outcome = "ok"
            except Committed:
                outcome = "ok"
            except psycopg.Error as e:
                state = e.sqlstate
                if state == "23514":
                    phase.tally_form(form_name(current), "refused")
                if broken(conn):
                    # before COMMIT was sent nothing can have committed
                    outcome = "unknown" if stage == "commit" else "lost"
                    conn.close()
                    conn = None
                else:
                    outcome = "failed"
                    # PostgreSQL's serializable checks cancel a committing
                    # writer whose write completes a dangerous structure
                    # around a reader that is committing too
                    if state == "40001" and "prepared pivot" in (e.diag.message_detail or ""):
                        state = "40001 prepared pivot"
                    if state not in EXPECTED:
                        violation("%s at %s: unexpected error %s: %s" % (txn, level, state, e))
                    if not settle(conn):
                        conn.close()
                        conn = None
            if outcome == "ok":
                for j in kept:
                    phase.tally_form(form_name(forms[j]), "committed lines")
            by = sorted({form_name(f) for f in forms})
            with lock:
                phase.history.append((txn, level + " by " + " and ".join(by) + (" in occ.retry" if retry else "") +
                                      (", reading its value" if read_value else ""), kept, outcome, state))
            gate.leave()
    except Exception as e:  # noqa: BLE001 (reported, fails the run)
        violation("client %d: %r" % (c, e))
    finally:
        if conn is not None:
            conn.close()


def sampler(k):
    conn = None
    # the four, and a few of the others (each a load, most of them)
    q_values = ("SELECT id, qty, occ.reserved_value('stock', 'qty', id) FROM stock"
                " WHERE id <= 4 OR random() < 0.02 ORDER BY id")
    q_escrow = ("SELECT key, committed, in_flight_down FROM occ.reservations"
                " WHERE rel = 'stock'::regclass AND col = 'qty'")
    q_truth = truth_query(False)
    while not done.is_set():
        try:
            if conn is None:
                conn = connect(PRIMARY, "escrow-sampler")
            for pid, qty, value in conn.execute(q_values).fetchall():
                if qty < 0 or value < 0:
                    violation("product %d: qty %d, occ.reserved_value %d" % (pid, qty, value))
            for key, committed, down in conn.execute(q_escrow).fetchall():
                if committed < 0 or committed + down < 0:
                    violation("product %s in occ.reservations: committed %d, decrements in flight %d"
                              % (key, committed, down))
            for pid, qty, ledger, orders in conn.execute(q_truth).fetchall():
                if qty + ledger != INITIAL[pid] + orders or qty + ledger < 0:
                    violation("product %d in a snapshot: qty %d + ledger %d != initial %d + order lines %d"
                              % (pid, qty, ledger, INITIAL[pid], orders))
            count("samples")
        except psycopg.Error as e:
            if conn is not None and not broken(conn):
                violation("sampler %d: %s: %s" % (k, e.sqlstate, e))
            if conn is not None:
                conn.close()
            conn = None
            time.sleep(0.05)
        except Exception as e:  # noqa: BLE001
            violation("sampler %d: %r" % (k, e))
            return
        time.sleep(0.005)
    if conn is not None:
        conn.close()


def standby_sampler():
    conn = None
    q = truth_query(True)
    while not done.is_set():
        try:
            if conn is None:
                conn = connect(STANDBY, "escrow-sampler")
            for pid, qty, ledger, orders, value in conn.execute(q).fetchall():
                if qty + ledger != INITIAL[pid] + orders or qty + ledger < 0 or value != qty + ledger:
                    violation("standby, product %d in a snapshot: qty %d + ledger %d, initial %d + order lines %d,"
                              " occ.reserved_value %d" % (pid, qty, ledger, INITIAL[pid], orders, value))
            count("standby samples")
        except psycopg.Error as e:
            # queries that replay cancels: conflicts with recovery
            if e.sqlstate in ("40001", "40P01", "57014", "55P03"):
                count("standby conflicts")
            else:
                violation("standby sampler: %s: %s" % (e.sqlstate, e))
            if conn is not None:
                conn.close()
            conn = None
        except Exception as e:  # noqa: BLE001
            violation("standby sampler: %r" % (e,))
            return
        time.sleep(0.02)
    if conn is not None:
        conn.close()


def restarts():
    with open(E["ESCROW_LOG"], errors="replace") as f:
        return f.read().count("all server processes terminated; reinitializing")


def check_exact(what):
    """with the clients held back (or stopped), nothing is in flight, and
    the rows' shared memory (after a crash: rebuilt from the tables) gives
    each product's exact value"""
    conn = connect(PRIMARY, "escrow-check")
    try:
        # a backend whose client saw it end may still be ending its
        # transaction
        give_up = time.monotonic() + 10
        while conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'escrow'"
                           " AND state <> 'idle'").fetchone()[0] > 0:
            if time.monotonic() > give_up:
                violation("at %s, client backends still busy after 10 s, with the clients held back" % what)
                break
            time.sleep(0.01)
        for pid, qty, ledger, orders, value in conn.execute(truth_query(True)).fetchall():
            want = INITIAL[pid] + orders
            if qty + ledger != want or value != want:
                violation("after %s, product %d: occ.reserved_value %d, qty %d + ledger %d, initial %d + order lines %d"
                          % (what, pid, value, qty, ledger, INITIAL[pid], orders))
        for key, n, down, up in conn.execute("SELECT key, in_flight, in_flight_down, in_flight_up"
                                             " FROM occ.reservations WHERE rel = 'stock'::regclass"):
            if n != 0 or down != 0 or up != 0:
                violation("after %s, product %s: %d reservations in flight (%d, %d), with the clients held back"
                          % (what, key, n, down, up))
    except psycopg.errors.QueryCanceled:
        stuck("at %s, the check of the values did not end within 60 s" % what)
    finally:
        conn.close()


def crash(what, action, hold=True):
    """hold the clients back, crash the server with action, wait until it is
    back, check the rebuilt state, let the clients go; False if it did not
    crash.  Without hold, the clients reconnect at once, and race to load
    the rows' entries (under the storm); nothing is checked."""
    if hold:
        gate.close(False)
    try:
        before = restarts()
        action()
        if what == "SIGKILL":
            give_up = time.monotonic() + 10
            while restarts() == before:
                if time.monotonic() > give_up:
                    return False  # the backend had ended on its own
                time.sleep(0.02)
        if hold:
            check_exact(what)
            count("rebuilds checked")
        return True
    finally:
        gate.reopen()


def pause_and_check(what):
    """hold the clients back until none is in a transaction, check the
    exact values, let them go"""
    gate.close(True)
    try:
        check_exact(what)
        count("pauses checked")
    finally:
        gate.reopen()


def victim(conn, states="state <> 'idle'"):
    row = conn.execute("SELECT pid FROM pg_stat_activity WHERE application_name = 'escrow' AND " + states +
                       " ORDER BY random() LIMIT 1").fetchone()
    return row[0] if row else None


def storm(phase):
    rnd = random.Random(SEED + 99)
    conn = None
    start = time.monotonic()
    restart_at = start + phase.seconds * 0.4
    # no crash in the last third: the end checks that the cancels and
    # terminations since the last one left nothing in flight
    crashes_end = start + phase.seconds * 2 / 3
    next_kill = start + KILL_EVERY * 0.6
    next_pause = start + 2
    restarted = False
    pg_ctl = [E["ESCROW_PG_CTL"], "-D", E["ESCROW_DATA"], "-l", E["ESCROW_LOG"], "-m", "immediate", "-w"]
    try:
        while time.monotonic() < start + phase.seconds:
            try:
                if conn is None:
                    conn = connect(PRIMARY, "escrow-storm")
                now = time.monotonic()
                if not restarted and now >= restart_at:
                    conn.close()
                    conn = None
                    crash("pg_ctl restart -m immediate",
                          lambda: subprocess.run(AS_OWNER + pg_ctl + ["restart"],
                                                 check=True, stdout=subprocess.DEVNULL))
                    count("restarts")
                    restarted = True
                    continue
                if next_kill <= now < crashes_end:
                    pid = victim(conn, "state IN ('active', 'idle in transaction')")
                    if pid is not None:
                        conn.close()
                        conn = None
                        if crash("SIGKILL", lambda: os.kill(pid, 9), counts["SIGKILL crashes"] % 2 == 0):
                            count("SIGKILL crashes")
                            next_kill = time.monotonic() + KILL_EVERY
                        else:  # it had ended: another, soon
                            next_kill = time.monotonic() + 0.5
                        continue
                if now >= next_pause:
                    pause_and_check("a pause in the storm")
                    next_pause = time.monotonic() + 4
                    continue
                r = rnd.random()
                if r < 0.02:
                    # the fold worker, cancelled (its round fails, rolls
                    # back and is tried again) or now and then terminated
                    # (the next commit starts another)
                    what = "terminate" if r < 0.004 else "cancel"
                    n = conn.execute("SELECT count(*) FILTER (WHERE pg_%s_backend(pid)) FROM pg_stat_activity"
                                     " WHERE backend_type = 'pg_occ fold'" % what).fetchone()[0]
                    count("fold %ss" % what, n)
                elif r < 0.1:
                    pid = victim(conn)
                    if pid is not None and conn.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()[0]:
                        count("terminations sent")
                else:
                    pid = victim(conn, "state = 'active'")
                    if pid is not None and conn.execute("SELECT pg_cancel_backend(%s)", (pid,)).fetchone()[0]:
                        count("cancels sent")
            except psycopg.Error as e:
                if conn is not None and not broken(conn):
                    violation("storm: %s: %s" % (e.sqlstate, e))
                if conn is not None:
                    conn.close()
                conn = None
            time.sleep(rnd.uniform(0.003, 0.02))
    except Exception as e:  # noqa: BLE001
        violation("storm: %r" % (e,))
    finally:
        gate.reopen()
        if conn is not None:
            conn.close()


def run(phase, faults):
    threads = [threading.Thread(target=client, args=(c, phase), daemon=True) for c in range(1, CLIENTS + 1)]
    for t in threads:
        t.start()
    if faults:
        storm(phase)
    else:
        end = time.monotonic() + phase.seconds
        while time.monotonic() < end - 1:
            time.sleep(min(2, end - 1 - time.monotonic()))
            pause_and_check("a pause")
        time.sleep(max(0, end - time.monotonic()))
    phase.stop.set()
    give_up = time.monotonic() + 90
    for t in threads:
        t.join(max(0, give_up - time.monotonic()))
    if any(t.is_alive() for t in threads):
        stuck(phase.name + ": clients did not finish within 90 s")


def stuck(msg):
    try:
        conn = connect(PRIMARY, "escrow-check", 10)
        for row in conn.execute("SELECT pid, application_name, state, wait_event_type, wait_event, left(query, 80)"
                                " FROM pg_stat_activity WHERE backend_type <> 'client backend' OR application_name LIKE 'escrow%'"):
            print("escrow: %r" % (row,), file=sys.stderr)
    except Exception as e:  # noqa: BLE001
        print("escrow: (pg_stat_activity: %r)" % (e,), file=sys.stderr)
    print("escrow: FAIL: " + msg, file=sys.stderr, flush=True)
    os._exit(1)


def tally(phase):
    t = {"committed": 0, "refused": 0, "cancelled": 0, "serialization failures": 0,
         "serialization failures after a read": 0, "cancelled beside a committing reader": 0,
         "lost (connection gone before COMMIT)": 0, "unknown (connection gone in COMMIT)": 0}
    for txn, level, lines, outcome, state in phase.history:
        if outcome == "ok":
            t["committed"] += 1
        elif outcome == "failed":
            # at serializable, occ.reserved_value reads its row, which
            # others' reservations write: a 40001 as a read of a row that
            # others UPDATE would get (docs/reservable.md)
            reader = level.startswith("serializable") and level.endswith("reading its value")
            key = {"23514": "refused", "57014": "cancelled",
                   "40001": "serialization failures after a read" if reader else "serialization failures",
                   "40001 prepared pivot": "serialization failures after a read" if reader
                   else "cancelled beside a committing reader"}.get(state)
            if key:
                t[key] += 1
        elif outcome == "lost":
            t["lost (connection gone before COMMIT)"] += 1
        else:
            t["unknown (connection gone in COMMIT)"] += 1
    return t


def watchdog():
    """the whole run is bounded: a hang fails it, with what the server was doing"""
    time.sleep(STORM_SECONDS + QUIET_SECONDS + 300)
    stuck("still running after %d s" % (STORM_SECONDS + QUIET_SECONDS + 300))


def main():
    threading.Thread(target=watchdog, daemon=True).start()
    conn = connect(PRIMARY, "escrow-check")
    for pid, qty in conn.execute("SELECT id, qty FROM stock"):
        INITIAL[pid] = qty
    # the UPDATEs are reservations (an OccReserve, no ModifyTable: no row
    # lock), and one of a key no row has reserves nothing
    for expr, sign in UPDATE_SHAPES:
        plan = "\n".join(r[0] for r in conn.execute(
            "EXPLAIN UPDATE stock SET qty = " + expr + " WHERE id = %s::int", (sign * -1, 1)))
        if "OccReserve" not in plan or "Update on" in plan:
            violation("UPDATE stock SET qty = %s WHERE id = 1 is not planned as a reservation:\n%s"
                      % (expr % -sign, plan))
    cur = conn.execute("UPDATE stock SET qty = qty - 1 WHERE id = -1")
    if cur.statusmessage != "UPDATE 0":
        violation("UPDATE stock SET qty = qty - 1 WHERE id = -1 (no such row): %r, not UPDATE 0" % cur.statusmessage)
    conn.close()
    COLD.extend(sorted(p for p in INITIAL if p > 4))
    samplers = [threading.Thread(target=sampler, args=(k,), daemon=True) for k in (1, 2)]
    samplers.append(threading.Thread(target=standby_sampler, daemon=True))
    for t in samplers:
        t.start()
    storm_phase = Phase("storm", STORM_SECONDS, ["read committed", "repeatable read", "serializable"])
    quiet_phase = Phase("quiet", QUIET_SECONDS, ["repeatable read", "serializable"])
    run(storm_phase, True)
    check_exact("the storm")
    run(quiet_phase, False)
    done.set()
    for t in samplers:
        t.join(30)

    conn = connect(PRIMARY, "escrow-check")
    # the fold empties the ledger
    give_up = time.monotonic() + 30
    while conn.execute("SELECT count(*) FROM occ.reservation_ledger").fetchone()[0] > 0:
        if time.monotonic() > give_up:
            stuck("the fold did not empty the ledger within 30 s: %r" % (conn.execute(
                "SELECT rel, col, key, count(*), sum(delta) FROM occ.reservation_ledger GROUP BY 1, 2, 3").fetchall(),))
        time.sleep(0.1)

    # the client's view against the order lines
    lines_of = {}
    for oid, txn, product, delta in conn.execute("SELECT id, txn, product, delta FROM orders"):
        lines_of.setdefault(txn, {})[int(oid.rsplit("/", 1)[1])] = (product, delta)
    seen = set()
    unknown_committed = 0
    for phase in (storm_phase, quiet_phase):
        for txn, level, lines, outcome, state in phase.history:
            seen.add(txn)
            got = lines_of.get(txn, {})
            want = lines
            if outcome == "ok" and got != want:
                violation("%s at %s committed, but its order lines are %r, not %r" % (txn, level, got, want))
            elif outcome in ("failed", "lost") and got:
                violation("%s at %s %s (%s), but its order lines are there: %r" % (txn, level, outcome, state, got))
            elif outcome == "unknown" and got and got != want:
                violation("%s at %s (unknown) committed in part: %r of %r" % (txn, level, got, want))
            unknown_committed += outcome == "unknown" and got == want
    for txn in set(lines_of) - seen:
        violation("order lines of a transaction no client ran: %s" % txn)

    # exactly once: each product's value is its initial value plus its
    # order lines, everywhere
    final = {}
    for pid, qty, ledger, orders, value in conn.execute(truth_query(True)).fetchall():
        want = INITIAL[pid] + orders
        final[pid] = want
        if qty != want or ledger != 0 or value != want or qty < 0:
            violation("product %d: qty %d, ledger %d, occ.reserved_value %d; initial %d + order lines %d = %d"
                      % (pid, qty, ledger, value, INITIAL[pid], orders, want))
    for key, committed, down, up, n in conn.execute(
            "SELECT key, committed, in_flight_down, in_flight_up, in_flight FROM occ.reservations"
            " WHERE rel = 'stock'::regclass AND col = 'qty'"):
        if committed != final[int(key)] or down != 0 or up != 0 or n != 0:
            violation("product %s in occ.reservations: committed %d (want %d), in flight %d, %d, %d"
                      % (key, committed, final[int(key)], down, up, n))
    queued, batched = conn.execute("SELECT coalesce(sum(queued), 0), coalesce(sum(batched), 0)"
                                   " FROM occ.stats WHERE query LIKE '%INSERT INTO orders%'").fetchone()
    lsn = conn.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
    conn.close()

    # the standby, once it has replayed all that
    sconn = connect(STANDBY, "escrow-check")
    give_up = time.monotonic() + 60
    while not sconn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (str(lsn),)).fetchone()[0]:
        if time.monotonic() > give_up:
            stuck("the standby did not replay up to %s within 60 s" % lsn)
        time.sleep(0.1)
    for pid, qty, ledger, orders, value in sconn.execute(truth_query(True)).fetchall():
        if qty + ledger != final[pid] or value != final[pid]:
            violation("standby, product %d: qty %d + ledger %d, occ.reserved_value %d; the primary's %d"
                      % (pid, qty, ledger, value, final[pid]))
    try:
        sconn.execute("SELECT occ.reserve('stock', 'qty', 1, -1)")
        violation("occ.reserve on the standby succeeded")
    except psycopg.Error as e:
        if e.sqlstate != "25006":
            violation("occ.reserve on the standby: %s: %s (want 25006)" % (e.sqlstate, e))
        standby_error = str(e).splitlines()[0]
    try:
        sconn.execute("UPDATE stock SET qty = qty - 1 WHERE id = 1")
        violation("the UPDATE on the standby succeeded")
    except psycopg.Error as e:
        if e.sqlstate != "25006":
            violation("the UPDATE on the standby: %s: %s (want 25006)" % (e.sqlstate, e))

    # failover: the standby, promoted, loads its rows from its tables, takes
    # the hot product's whole stock and refuses one more
    subprocess.run(AS_OWNER + [E["ESCROW_PG_CTL"], "-D", E["ESCROW_STANDBY_DATA"], "-w", "promote"],
                   check=True, stdout=subprocess.DEVNULL)
    give_up = time.monotonic() + 30
    while sconn.execute("SELECT pg_is_in_recovery()").fetchone()[0]:
        if time.monotonic() > give_up:
            stuck("the standby was not promoted within 30 s")
        time.sleep(0.1)
    for pid, value in sconn.execute("SELECT id, occ.reserved_value('stock', 'qty', id) FROM stock"):
        if value != final[pid]:
            violation("promoted standby, product %d: occ.reserved_value %d, the primary's %d" % (pid, value, final[pid]))
    try:
        sconn.execute("BEGIN ISOLATION LEVEL SERIALIZABLE")
        if final[1] > 0:
            sconn.execute("SELECT occ.reserve('stock', 'qty', 1, %s::bigint)", (-final[1],))
        sconn.execute("COMMIT")
    except psycopg.Error as e:
        violation("promoted standby: taking the hot product's %d: %s: %s" % (final[1], e.sqlstate, e))
    try:
        sconn.execute("SELECT occ.reserve('stock', 'qty', 1, -1)")
        violation("promoted standby: a reservation of the hot product's stock, 0, was taken")
    except psycopg.Error as e:
        if e.sqlstate != "23514":
            violation("promoted standby: a reservation beyond the stock: %s: %s (want 23514)" % (e.sqlstate, e))
    try:
        sconn.execute("UPDATE stock SET qty = qty - 1 WHERE id = 1")
        violation("promoted standby: an UPDATE of the hot product's stock, 0, was taken")
    except psycopg.Error as e:
        if e.sqlstate != "23514":
            violation("promoted standby: an UPDATE beyond the stock: %s: %s (want 23514)" % (e.sqlstate, e))
    give_up = time.monotonic() + 30
    while sconn.execute("SELECT count(*) FROM occ.reservation_ledger").fetchone()[0] > 0:
        if time.monotonic() > give_up:
            stuck("the promoted standby's fold did not empty its ledger within 30 s")
        time.sleep(0.1)
    got = sconn.execute("SELECT qty, occ.reserved_value('stock', 'qty', 1) FROM stock WHERE id = 1").fetchone()
    if got != (0, 0):
        violation("promoted standby: the hot product's qty and occ.reserved_value are %r, not 0" % (got,))
    sconn.close()

    # the summary, and what must have happened
    for phase in (storm_phase, quiet_phase):
        t = tally(phase)
        say("%s phase, %d clients for %g s (%s): %d transactions: %s" % (
            phase.name, CLIENTS, phase.seconds, ", ".join(phase.levels), len(phase.history),
            ", ".join("%d %s" % (v, k) for k, v in t.items())))
        if t["committed"] < 100:
            violation("%s phase: only %d transactions committed" % (phase.name, t["committed"]))
        if t["refused"] < 10:
            violation("%s phase: only %d reservations refused: the hot product's bound was not tested"
                      % (phase.name, t["refused"]))
        if t["serialization failures"] > 0:
            violation("%s phase: %d serialization failures (40001) from transactions that read no reserved row"
                      " (only their own rows and reservations)" % (phase.name, t["serialization failures"]))
        say("%s phase, by form: %s" % (phase.name, "; ".join(
            "%s %d lines committed, %d refused" % (f, v["committed lines"], v["refused"])
            for f, v in phase.by_form.items())))
        for f, v in phase.by_form.items():
            if FORM in ("mixed", "update" if f == "UPDATE" else "reserve") and (
                    v["committed lines"] < 100 or v["refused"] < 10):
                violation("%s phase: by %s only %d lines committed, %d refused"
                          % (phase.name, f, v["committed lines"], v["refused"]))
    st = tally(storm_phase)
    say("occ.retry: %d calls in batch mode (since the last crash %d queued, %d committed in batches)"
        % (sum(level.endswith("occ.retry") for phase in (storm_phase, quiet_phase)
               for txn, level, kept, outcome, state in phase.history), queued, batched))
    if batched == 0:
        violation("no call of occ.retry committed in a batch")
    say("storm: %d cancels and %d terminations sent, %d SIGKILLs that crashed the server, %d immediate restarts;"
        " the fold worker cancelled %d times, terminated %d; %d unknown outcomes turned out committed"
        % (counts["cancels sent"], counts["terminations sent"], counts["SIGKILL crashes"], counts["restarts"],
           counts["fold cancels"], counts["fold terminates"], unknown_committed))
    say("checks: %d samples on the primary, %d on the standby (%d cancelled by recovery conflicts),"
        " %d values seen inside transactions, %d rebuilds of shared memory checked after a crash"
        " and %d pauses;"
        " %d optional lines refused and %d rolled back in savepoints"
        % (counts["samples"], counts["standby samples"], counts["standby conflicts"], counts["own values"],
           counts["rebuilds checked"], counts["pauses checked"], counts["refused in savepoints"], counts["savepoints rolled back"]))
    say("final: %s, %d others %d in all; the standby agrees, and refuses occ.reserve (%s) and the UPDATE;"
        " promoted, it takes the hot product's stock and refuses more (by both)"
        % (", ".join("product %d = %d" % (p, final[p]) for p in range(1, 5)), len(COLD),
           sum(final[p] for p in COLD), standby_error))
    if st["cancelled"] < 10:
        violation("storm: only %d transactions cancelled" % st["cancelled"])
    if counts["terminations sent"] < 3:
        violation("storm: only %d terminations" % counts["terminations sent"])
    if counts["SIGKILL crashes"] < 2:
        violation("storm: only %d SIGKILLs crashed the server" % counts["SIGKILL crashes"])
    if counts["restarts"] != 1:
        violation("storm: %d immediate restarts" % counts["restarts"])
    if counts["rebuilds checked"] != (counts["SIGKILL crashes"] + 1) // 2 + counts["restarts"]:
        violation("storm: shared memory checked after %d crashes of %d"
                  % (counts["rebuilds checked"], counts["SIGKILL crashes"] + counts["restarts"]))
    if counts["samples"] < 50 or counts["standby samples"] < 20:
        violation("only %d samples on the primary, %d on the standby"
                  % (counts["samples"], counts["standby samples"]))
    if violations:
        print("escrow: FAIL: %d violations, the first: %s" % (len(violations), violations[0]),
              file=sys.stderr, flush=True)
        sys.exit(1)


main()
PY

say() { echo "escrow: $*"; }
say "seed $SEED"
ESCROW_PRIMARY=$p/sock ESCROW_STANDBY=$s/sock ESCROW_DATA=$p/data ESCROW_LOG=$(cluster_log "$p") \
ESCROW_STANDBY_DATA=$s/data ESCROW_PG_CTL=$CLUSTER_BINDIR/pg_ctl "$PYTHON" "$base/escrow.py" ||
    { tail -n 30 "$(cluster_log "$p")" >&2; fail "see above (seed $SEED)"; }
# nothing in the servers' logs that should not be there: no PANIC, no
# failed assertion, no crash but ours, no fold that broke the bound or
# found no row
for l in "$(cluster_log "$p")" "$(cluster_log "$s")"; do
    ! grep -E "PANIC|TRAP|terminated by signal (6|11)|new row for relation|pg_occ fold: " "$l" ||
        fail "in the server log $l (above)"
done
say "ok in $((SECONDS - start)) s"
