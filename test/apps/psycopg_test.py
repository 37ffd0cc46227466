#!/usr/bin/python3
# occ.retry from a real client: psycopg 3 (Debian's python3-psycopg), as an
# application would call it.  Checks that
#   - CALL occ.retry(%s, params => row(%s::int, %s::text)) works with the
#     driver's placeholders on an autocommit connection, and that the casts
#     are needed: psycopg sends a str untyped (42P18 without the cast) and an
#     int as the smallest integer type that holds it (smallint for 1);
#   - the reporting form returns one row, attempts (int) and slept
#     (datetime.timedelta);
#   - the result form returns the rows of the body's last row-returning
#     statement as jsonb, which psycopg decodes to a list of dicts ([] for no
#     rows, None when no statement returns rows), from the attempt that
#     committed; the combined form returns (result, attempts, slept);
#   - key => %s works with a str (sent untyped: it is a text key), a list
#     cast to text[] and an int;
#   - a give-up is psycopg.errors.SerializationFailure with the detail
#     "occ.retry gave up after N attempts.", and the connection still works;
#   - on a default (non-autocommit) connection the CALL fails with 25001
#     (psycopg.errors.ActiveSqlTransaction) and a hint that names autocommit;
#   - two threads with two connections doing a read-modify-write of one row
#     through occ.retry lose and double nothing (the retries they needed are
#     printed, not asserted: contention is up to the scheduler);
#   - SET LOCAL occ.key in the application's own transactions: a key cannot
#     be a query parameter (SET takes none: 42601), psycopg.sql.Literal
#     makes it a literal; after a query it is refused with 25001
#     (ActiveSqlTransaction) and a hint; four threads running a client-side
#     retry loop of REPEATABLE READ read-modify-writes with SET LOCAL
#     occ.key lose and double nothing, and occ.key_stats counts each
#     attempt, commit and serialization failure the threads saw;
#   - reservable columns (0.7.0): on a reservable stock table, UPDATE stock
#     SET qty = qty - %s WHERE id = %s reserves: cursor.rowcount is 1 (0 for
#     a missing key) and occ.reserved_value moves by exactly the delta, with
#     server-side binding (psycopg's default cursor), client-side binding
#     (ClientCursor), a prepared statement (prepare=True) executed 7 times,
#     past the 5 custom plans after which the server switches to a generic
#     plan, and with plan_cache_mode = force_generic_plan
#     (pg_prepared_statements counts the generic plans); a reservation past
#     the CHECK bound is psycopg.errors.CheckViolation (23514) naming the
#     constraint, and aborts the transaction; occ.try_reserve returns False
#     when sold out and the transaction goes on; SET qty = 5, another column in the same UPDATE and
#     RETURNING are ObjectNotInPrerequisiteState (55000) with a hint that
#     names update_fields; a transaction that reserved and stays open holds
#     no row lock: a second connection's UPDATE of the row (statement_timeout
#     2s) and a third's SELECT ... FOR UPDATE NOWAIT go through at once; both
#     commits count, exactly, and a plain SELECT shows the value once folded.
#
# Run with Debian's interpreter, /usr/bin/python3, against a database where
# pg_occ is installed (connection from the PG* environment variables; see
# test/apps.sh, which makes the database).  Exits non-zero on the first
# failed check.
import datetime
import sys
import threading
import time

import psycopg
from psycopg import errors, sql

checks = 0
sys.stdout.reconfigure(line_buffering=True)  # in order with the failures on stderr


def check(what, cond, got=None):
    """One check: print it, or fail with what was found."""
    global checks
    if not cond:
        print(f"psycopg: FAIL: {what}" + ("" if got is None else f" (got {got!r})"), file=sys.stderr)
        sys.exit(1)
    checks += 1
    print(f"psycopg: ok: {what}")


def connect(**kw):
    # connection parameters from PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE
    return psycopg.connect("", **kw)


setup = connect(autocommit=True)
setup.execute("""
    DROP TABLE IF EXISTS account, hot, note;
    DROP SEQUENCE IF EXISTS executions;
    CREATE TABLE account (id int PRIMARY KEY, balance numeric NOT NULL);
    INSERT INTO account VALUES (1, 100), (2, 0);
    CREATE TABLE hot (id int PRIMARY KEY, n bigint NOT NULL);
    INSERT INTO hot VALUES (1, 0);
    CREATE TABLE note (id int, body text);
    -- fails with 40001 until the n-th execution of a call (the sequence
    -- survives rollbacks), as sql/retry.sql does
    CREATE SEQUENCE executions;
    CREATE FUNCTION fail_until(n int) RETURNS void LANGUAGE plpgsql AS $$
    BEGIN
      IF nextval('executions') % n <> 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'serialization_failure', MESSAGE = 'simulated conflict';
      END IF;
    END $$;
""")
version = setup.execute("SELECT extversion FROM pg_extension WHERE extname = 'pg_occ'").fetchone()[0]
print(f"psycopg {psycopg.__version__}, libpq {psycopg.pq.version()}, pg_occ {version}")

conn = connect(autocommit=True)

# --- placeholders inside row(...): the casts are needed -------------------
conn.execute("CALL occ.retry(%s, params => row(%s::int, %s::text))",
             ["INSERT INTO note VALUES ($1, $2)", 7, "it's a text"])
row = conn.execute("SELECT id, body FROM note").fetchone()
check("CALL occ.retry(%s, params => row(%s::int, %s::text)) with placeholders", row == (7, "it's a text"), row)

try:
    conn.execute("CALL occ.retry(%s, params => row(%s::int, %s))", ["INSERT INTO note VALUES ($1, $2)", 8, "x"])
    check("a str placeholder without a cast is refused", False)
except errors.IndeterminateDatatype as e:
    check("a str placeholder inside row(...) without a cast: 42P18 " + repr(e.diag.message_primary),
          e.sqlstate == "42P18")

# --- the reporting form: one row, attempts and slept ------------------------
cur = conn.execute("CALL occ.retry(%s, attempts => NULL, slept => NULL, params => row(%s::int), "
                   "contention => 'backoff', base => '1ms', jitter => 'none')",
                   ["SELECT fail_until($1)", 3])
rows = cur.fetchall()
check("reporting form: one row (attempts, slept)", [d.name for d in cur.description] == ["attempts", "slept"]
      and len(rows) == 1, (cur.description, rows))
attempts, slept = rows[0]
check("reporting form: attempts is an int, 3 for a body that fails twice", attempts == 3, attempts)
check("reporting form: slept is a datetime.timedelta, >= 1 ms + 2 ms",
      isinstance(slept, datetime.timedelta) and slept >= datetime.timedelta(milliseconds=3), slept)

# --- the result form (0.3.0) ------------------------------------------------
cur = conn.execute("CALL occ.retry('UPDATE account SET balance = balance - $1 WHERE id = $2 RETURNING balance', "
                   "result => NULL, params => row(%s::numeric, %s::int))", [25, 1])
rows = cur.fetchall()
check("result form: one row, one column named result", [d.name for d in cur.description] == ["result"]
      and len(rows) == 1, (cur.description, rows))
check("result form: jsonb decoded to a list of dicts: [{'balance': 75}]", rows[0][0] == [{"balance": 75}], rows[0][0])

result = conn.execute("CALL occ.retry(%s, result => NULL, params => row(%s::numeric, %s::int))",
                      ["UPDATE account SET balance = balance + $1 WHERE id = $2 RETURNING id, balance", 25, 2]
                      ).fetchone()[0]
check("result form: the whole RETURNING row", result == [{"id": 2, "balance": 25}], result)

result = conn.execute("CALL occ.retry(%s, result => NULL)", ["SELECT id, balance FROM account ORDER BY id"]).fetchone()[0]
check("result form: a SELECT's rows, in order", result == [{"id": 1, "balance": 75}, {"id": 2, "balance": 25}], result)

result = conn.execute("CALL occ.retry(%s, result => NULL, params => row(%s::int))",
                      ["UPDATE account SET balance = balance WHERE id = $1 RETURNING balance", -1]).fetchone()[0]
check("result form: [] when the statement returned no rows", result == [], result)

result = conn.execute("CALL occ.retry(%s, result => NULL)", ["UPDATE account SET balance = balance"]).fetchone()[0]
check("result form: None when no statement returns rows", result is None, result)

# without casts, psycopg types an int by its size: 1 is a smallint
result = conn.execute("CALL occ.retry(%s, result => NULL, params => row(%s))",
                      ["SELECT pg_typeof($1)::text AS type", 1]).fetchone()[0]
check("result form: an uncast int placeholder arrives as smallint", result == [{"type": "smallint"}], result)

cur = conn.execute("CALL occ.retry(%s, result => NULL, attempts => NULL, slept => NULL, params => row(%s::int), "
                   "contention => 'backoff', base => '1ms', jitter => 'none')",
                   ["SELECT fail_until($1); SELECT occ.attempt() AS attempt", 3])
rows = cur.fetchall()
check("result, attempts and slept: one row of three columns",
      [d.name for d in cur.description] == ["result", "attempts", "slept"] and len(rows) == 1, (cur.description, rows))
result, attempts, slept = rows[0]
check("result, attempts and slept: the result of the attempt that committed, [{'attempt': 3}], 3 attempts",
      result == [{"attempt": 3}] and attempts == 3 and isinstance(slept, datetime.timedelta), rows[0])

# --- giving up ---------------------------------------------------------------
always = "DO $$ BEGIN RAISE EXCEPTION 'x' USING ERRCODE = 'serialization_failure'; END $$"
try:
    conn.execute("CALL occ.retry(%s, max_attempts => 2, base => '1ms', contention => 'backoff')", [always])
    check("a body that always fails gives up", False)
except errors.SerializationFailure as e:
    check("give-up: psycopg.errors.SerializationFailure, SQLSTATE 40001", e.sqlstate == "40001", e.sqlstate)
    check("give-up: detail 'occ.retry gave up after 2 attempts.'",
          "occ.retry gave up after 2 attempts." in (e.diag.message_detail or ""), e.diag.message_detail)
last = conn.execute("SELECT attempts, outcome FROM occ.last_retry()").fetchone()
check("after a give-up the connection still works: occ.last_retry() = (2, 'gave up')", last == (2, "gave up"), last)

# --- key => %s: the driver's key parameter, sent untyped -------------------
# psycopg sends a str as unknown; key resolves it to text (0.4.0's "any" left
# it unresolved: 42P18, could not determine the data type of parameter $2)
res, = conn.execute("CALL occ.retry(%s, result => NULL, contention => 'queue', key => %s)",
                    ["SELECT n FROM hot WHERE id = 1", "hot:1"]).fetchone()
check("key => %s with a str (sent untyped) is a text key", isinstance(res, list) and len(res) == 1, res)
res, = conn.execute("CALL occ.retry(%s, result => NULL, contention => 'queue', key => %s::text[])",
                    ["SELECT 1 AS one", ["hot:1", "hot:2"]]).fetchone()
check("key => %s::text[] with a list gives several keys", res == [{"one": 1}], res)
res, = conn.execute("CALL occ.retry(%s, result => NULL, contention => 'queue', key => %s)",
                    ["SELECT 1 AS one", 7]).fetchone()
check("key => %s with an int (smallint) is a key", res == [{"one": 1}], res)

# --- a default connection is in a transaction: 25001 with a hint -----------
with connect() as tx:
    try:
        tx.execute("CALL occ.retry('SELECT 1')")
        check("a non-autocommit connection is refused", False)
    except errors.ActiveSqlTransaction as e:
        check("non-autocommit connection: psycopg.errors.ActiveSqlTransaction (25001)", e.sqlstate == "25001")
        hint = e.diag.message_hint or ""
        print(f"psycopg: the hint is: {hint!r}")
        check("non-autocommit connection: the hint names autocommit", "autocommit" in hint, hint)
    tx.rollback()
    tx.autocommit = True   # the same connection, switched: now it works
    tx.execute("CALL occ.retry('SELECT 1')")
    check("the same connection with autocommit = True can call", True)

# --- real contention: two threads, two connections ----------------------------
CALLS = 300
retries = [0, 0]
failures = []


def worker(i):
    try:
        with connect(autocommit=True) as c:
            for _ in range(CALLS):
                # read, then write the value read + 1: a lost update would show
                a, _s = c.execute(
                    "CALL occ.retry(%s, attempts => NULL, slept => NULL, isolation => 'repeatable read')",
                    ["SELECT set_config('app.n', n::text, true) FROM hot WHERE id = 1;"
                     " UPDATE hot SET n = current_setting('app.n')::bigint + 1 WHERE id = 1"]).fetchone()
                retries[i] += a - 1
            last = c.execute("SELECT attempts, outcome FROM occ.last_retry()").fetchone()
            if last[1] != "committed":
                failures.append(f"thread {i}: occ.last_retry() = {last!r}")
    except Exception as e:  # reported by the main thread
        failures.append(f"thread {i}: {type(e).__name__}: {e}")


threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
check("contention: both threads ran every call", not failures, failures)
n = conn.execute("SELECT n FROM hot WHERE id = 1").fetchone()[0]
check(f"contention: 2 x {CALLS} read-modify-writes, the row is {2 * CALLS} (nothing lost or doubled)", n == 2 * CALLS, n)
print(f"psycopg: contention: {retries[0] + retries[1]} retries in {2 * CALLS} calls (not asserted)")

# --- SET LOCAL occ.key: the application's own transactions -------------------
with connect() as tx:   # psycopg's default: it sends BEGIN before the first statement
    try:
        tx.execute("SET LOCAL occ.key = %s", ["hot:1"])
        check("SET LOCAL occ.key = %s with a parameter is refused", False)
    except errors.SyntaxError as e:
        check("SET LOCAL occ.key = %s: SET takes no parameter, 42601", e.sqlstate == "42601", e.sqlstate)
    tx.rollback()
    tx.execute(sql.SQL("SET LOCAL occ.key = {}").format(sql.Literal("hot:1")))
    key = tx.execute("SHOW occ.key").fetchone()[0]
    check("SET LOCAL occ.key = {} with sql.Literal sets the key", key == "hot:1", key)
    tx.rollback()
    tx.execute("SELECT 1")
    try:
        tx.execute(sql.SQL("SET LOCAL occ.key = {}").format(sql.Literal("hot:1")))
        check("SET LOCAL occ.key after a query is refused", False)
    except errors.ActiveSqlTransaction as e:
        check("SET LOCAL occ.key after a query: ActiveSqlTransaction (25001) with a hint",
              e.sqlstate == "25001" and "first statement after BEGIN" in (e.diag.message_hint or ""),
              (e.sqlstate, e.diag.message_hint))
    tx.rollback()

setup.execute("SELECT occ.stats_reset()")
setup.execute("UPDATE hot SET n = 0 WHERE id = 1")
THREADS, TRANSACTIONS = 4, 50
tries = [0] * THREADS
conflicts = [0] * THREADS
failures = []


def keyed_worker(i):
    """A client-side retry loop: each transaction sets its key first."""
    try:
        with connect() as c:
            c.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            set_key = sql.SQL("SET LOCAL occ.key = {}").format(sql.Literal("hot:1"))
            for _ in range(TRANSACTIONS):
                while True:
                    tries[i] += 1
                    try:
                        c.execute(set_key)      # BEGIN ISOLATION LEVEL REPEATABLE READ; SET LOCAL ...
                        n = c.execute("SELECT n FROM hot WHERE id = 1").fetchone()[0]
                        time.sleep(0.001)       # the application's work
                        c.execute("UPDATE hot SET n = %s WHERE id = 1", [n + 1])
                        c.commit()
                        break
                    except errors.SerializationFailure:
                        conflicts[i] += 1
                        c.rollback()
    except Exception as e:  # reported by the main thread
        failures.append(f"thread {i}: {type(e).__name__}: {e}")


threads = [threading.Thread(target=keyed_worker, args=(i,)) for i in range(THREADS)]
for t in threads:
    t.start()
for t in threads:
    t.join()
check("SET LOCAL occ.key: every thread ran every transaction", not failures, failures)
n = conn.execute("SELECT n FROM hot WHERE id = 1").fetchone()[0]
check(f"SET LOCAL occ.key: {THREADS} x {TRANSACTIONS} read-modify-writes retried by the client, "
      f"the row is {THREADS * TRANSACTIONS} (nothing lost or doubled)", n == THREADS * TRANSACTIONS, n)
stats = conn.execute("SELECT transactions, commits, serialization_failures, queued FROM occ.key_stats"
                     " WHERE key = 'hot:1'").fetchone()
check(f"occ.key_stats counts the {sum(tries)} attempts, {THREADS * TRANSACTIONS} commits and "
      f"{sum(conflicts)} serialization failures the threads saw",
      stats is not None and stats[:3] == (sum(tries), THREADS * TRANSACTIONS, sum(conflicts)), stats)
print(f"psycopg: SET LOCAL occ.key: {sum(tries)} attempts for {THREADS * TRANSACTIONS} commits, "
      f"{stats[3]} queued (not asserted)")

# --- reservable columns: UPDATE ... SET qty = qty - %s WHERE id = %s reserves ---
setup.execute("""
    DROP TABLE IF EXISTS stock;
    CREATE TABLE stock (id int PRIMARY KEY, name text NOT NULL, qty int NOT NULL CHECK (qty >= 0));
    INSERT INTO stock VALUES (1, 'widget', 1000), (2, 'gadget', 1);
    SELECT occ.make_reservable('stock', 'qty');
""")
DEC = "UPDATE stock SET qty = qty - %s WHERE id = %s"


def reserved(c, key):
    """occ.reserved_value: the committed value plus c's own reservations"""
    return c.execute("SELECT occ.reserved_value('stock', 'qty', %s::int)", [key]).fetchone()[0]


expected = 1000
cur = conn.execute(DEC, (3, 1))
expected -= 3
check("reservable: UPDATE stock SET qty = qty - %s WHERE id = %s (server-side binding): rowcount 1, "
      "status 'UPDATE 1'", cur.rowcount == 1 and cur.statusmessage == "UPDATE 1", (cur.rowcount, cur.statusmessage))
got = reserved(conn, 1)
check(f"reservable: occ.reserved_value is {expected} after the reservation of 3", got == expected, got)
cur = conn.execute(DEC, (3, 99))
check("reservable: the same UPDATE of a missing key: rowcount 0, status 'UPDATE 0'",
      cur.rowcount == 0 and cur.statusmessage == "UPDATE 0", (cur.rowcount, cur.statusmessage))
cur = conn.execute("UPDATE stock SET qty = %s + qty WHERE id = %s", (-2, 1))
expected -= 2
check("reservable: SET qty = %s + qty: rowcount 1", cur.rowcount == 1, cur.rowcount)
cur = psycopg.ClientCursor(conn)
cur.execute(DEC, (5, 1))
expected -= 5
check("reservable: client-side binding (ClientCursor, literals in the text): rowcount 1",
      cur.rowcount == 1, cur.rowcount)
got = reserved(conn, 1)
check(f"reservable: the value is exact after the three forms: {expected}", got == expected, got)

# a prepared statement (Parse once, then Bind/Execute): after 5 custom plans
# the server may switch to a generic plan, where the key and the delta are
# parameters at execution
counts = [conn.execute(DEC, (1, 1), prepare=True).rowcount for _ in range(7)]
expected -= 7
check("reservable: prepare=True, executed 7 times: rowcount 1 each time", counts == [1] * 7, counts)
got = reserved(conn, 1)
check(f"reservable: prepare=True, 7 x 1: the value is {expected}", got == expected, got)
plans = conn.execute("SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                     "WHERE statement LIKE 'UPDATE stock SET qty = qty - $1%'").fetchall()
check("reservable: after its 5 custom plans the server ran the prepared statement with a generic plan "
      "(pg_prepared_statements: generic_plans >= 1)", len(plans) == 1 and plans[0][0] >= 1, plans)
counts = [conn.execute(DEC, (2, 99), prepare=True).rowcount for _ in range(2)]
check("reservable: the prepared statement with a missing key: rowcount 0", counts == [0, 0], counts)

with connect(autocommit=True) as generic:
    generic.execute("SET plan_cache_mode = force_generic_plan")
    counts = [generic.execute(DEC, (1, 1), prepare=True).rowcount for _ in range(3)]
    counts += [generic.execute(DEC, (1, 99), prepare=True).rowcount]
    expected -= 3
    plans = generic.execute("SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                            "WHERE statement LIKE 'UPDATE stock SET qty = qty - $1%'").fetchone()
    check("reservable: force_generic_plan, prepare=True: rowcount 1, 1, 1 and 0 for a missing key, "
          "all generic plans", counts == [1, 1, 1, 0] and plans is not None and plans[0] == 4 and plans[1] == 0,
          (counts, plans))
got = reserved(conn, 1)
check(f"reservable: after the generic plans the value is {expected}", got == expected, got)

# a refusal: 23514 naming the constraint, and the transaction is aborted
with connect() as tx:
    tx.execute(DEC, (1, 2))   # BEGIN; takes the gadget's only unit
    try:
        tx.execute(DEC, (1, 2))
        check("reservable: a reservation past the CHECK bound is refused", False)
    except errors.CheckViolation as e:
        check("reservable: past the bound: psycopg.errors.CheckViolation (23514) naming stock_qty_check",
              e.sqlstate == "23514" and "stock_qty_check" in str(e), (e.sqlstate, str(e)))
        print(f"psycopg: the refusal's diag: constraint_name {e.diag.constraint_name!r}, "
              f"detail {e.diag.message_detail!r}")
    check("reservable: after the refusal the transaction is aborted (INERROR)",
          tx.info.transaction_status == psycopg.pq.TransactionStatus.INERROR, tx.info.transaction_status)
    try:
        tx.execute("SELECT 1")
        check("reservable: a statement after the refusal is refused", False)
    except errors.InFailedSqlTransaction:
        check("reservable: the next statement is InFailedSqlTransaction (25P02)", True)
    tx.rollback()
got = reserved(conn, 2)
check("reservable: the rolled back transaction reserved nothing: the gadget is still 1", got == 1, got)

# occ.try_reserve: false when sold out, and the transaction goes on
with connect() as tx:
    cur = tx.execute(DEC, (1, 1))
    check("reservable: in a transaction, UPDATE ... - 1: rowcount 1", cur.rowcount == 1, cur.rowcount)
    taken = tx.execute("SELECT occ.try_reserve('stock', 'qty', %s, %s)", [2, -5]).fetchone()[0]
    check("reservable: occ.try_reserve(..., 2, -5) of a stock of 1 (sold out) returns False",
          taken is False, taken)
    check("reservable: after try_reserve's False the transaction goes on (INTRANS)",
          tx.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS, tx.info.transaction_status)
    taken = tx.execute("SELECT occ.try_reserve('stock', 'qty', %s, %s)", [2, -1]).fetchone()[0]
    check("reservable: then occ.try_reserve(..., 2, -1) returns True", taken is True, taken)
    got = (reserved(tx, 1), reserved(tx, 2))
    check(f"reservable: inside the transaction occ.reserved_value sees its own reservations: ({expected - 1}, 0)",
          got == (expected - 1, 0), got)
    tx.commit()
expected -= 1
got = (reserved(conn, 1), reserved(conn, 2))
check(f"reservable: committed: ({expected}, 0)", got == (expected, 0), got)

# other shapes that change the column: refused by its guard, 55000 with a hint
for what, query in [("SET qty = 5", "UPDATE stock SET qty = %s WHERE id = %s"),
                    ("another column in the same UPDATE",
                     "UPDATE stock SET qty = qty - %s, name = 'x' WHERE id = %s"),
                    ("RETURNING", "UPDATE stock SET qty = qty - %s WHERE id = %s RETURNING qty")]:
    try:
        conn.execute(query, (5, 1))
        check(f"reservable: {what} is refused", False)
    except errors.ObjectNotInPrerequisiteState as e:
        hint = e.diag.message_hint or ""
        check(f"reservable: {what}: ObjectNotInPrerequisiteState (55000), the hint names update_fields",
              e.sqlstate == "55000" and "update_fields" in hint, (e.sqlstate, hint))
print(f"psycopg: the guard's hint is: {hint!r}")
cur = conn.execute("UPDATE stock SET name = %s WHERE id = %s", ("sprocket", 1))
check("reservable: an UPDATE of another column only is not the guard's business: rowcount 1",
      cur.rowcount == 1, cur.rowcount)
got = reserved(conn, 1)
check(f"reservable: the refused statements changed nothing: {expected}", got == expected, got)

# no row lock: a second connection's UPDATE does not wait for an open one
first = connect()
cur = first.execute(DEC, (1, 1))   # BEGIN; reserve; stays open
check("reservable: the first transaction's UPDATE ... - 1: rowcount 1", cur.rowcount == 1, cur.rowcount)
second = connect()
second.execute("SET statement_timeout = '2s'")
second.commit()
t0 = time.monotonic()
try:
    cur = second.execute(DEC, (1, 1))
    waited = time.monotonic() - t0
    check(f"reservable: a second connection's UPDATE of the same row while the first is open: rowcount 1 "
          f"in {waited * 1000:.0f} ms (< 1 s)", cur.rowcount == 1 and waited < 1.0, (cur.rowcount, waited))
except errors.QueryCanceled as e:
    check("reservable: the second connection's UPDATE did not wait for the first transaction", False, str(e))
# the fold worker locks the row for a moment when it applies reservations
# committed earlier: NOWAIT may meet that lock, never one the two open
# transactions hold (they stay open throughout), so it is tried a few times
with connect(autocommit=True) as third:
    third.execute("SET statement_timeout = '2s'")
    for _ in range(40):
        try:
            third.execute("SELECT id FROM stock WHERE id = 1 FOR UPDATE NOWAIT")
            check("reservable: both open reservations hold no row lock: SELECT ... FOR UPDATE NOWAIT goes through", True)
            break
        except errors.LockNotAvailable as e:
            failed = str(e)
            time.sleep(0.05)
    else:
        check("reservable: the open reservations hold no row lock", False, failed)
check("reservable: the first transaction is still open",
      first.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS, first.info.transaction_status)
second.commit()
first.commit()
first.close()
second.close()
expected -= 2
got = reserved(conn, 1)
check(f"reservable: both committed: the value is {expected}", got == expected, got)

# the fold applies the committed reservations to the column (~100 ms)
deadline = time.monotonic() + 10
while (plain := conn.execute("SELECT qty FROM stock WHERE id = 1").fetchone()[0]) != expected \
        and time.monotonic() < deadline:
    time.sleep(0.05)
check(f"reservable: a plain SELECT of qty shows {expected} once folded", plain == expected, plain)

conn.close()
setup.close()
print(f"psycopg: {checks} passed, 0 failed")
