// occ.retry from a real client: node-postgres (the npm package pg), as an
// application would call it.  The same checks as psycopg_test.py, as far as
// they apply:
//   - CALL occ.retry($1, params => row($2::int, $3::text)) works with the
//     driver's placeholders (node-postgres has no implicit transaction: every
//     query outside BEGIN is autocommitted), and the casts are needed:
//     node-postgres sends every parameter untyped (42P18 without them);
//   - the reporting form returns one row, attempts (a number) and slept (an
//     interval object of the postgres-interval package);
//   - the result form returns the rows of the body's last row-returning
//     statement as jsonb, which node-postgres parses to an array of objects
//     ([] for no rows, null when no statement returns rows); the combined
//     form returns result, attempts and slept;
//   - key => $2 works with a string (sent untyped: it is a text key) and an
//     array cast to text[];
//   - a give-up is an error with code '40001' and the detail "occ.retry gave
//     up after N attempts.", and the connection still works;
//   - inside BEGIN the CALL fails with 25001 and a hint that names autocommit;
//   - two connections doing a read-modify-write of one row through occ.retry
//     at the same time lose and double nothing;
//   - SET LOCAL occ.key in the application's own transactions: a key cannot
//     be a query parameter (SET takes none: 42601), client.escapeLiteral
//     makes it a literal; after a query it is refused with 25001 and a
//     hint; four connections running a client-side retry loop of
//     REPEATABLE READ read-modify-writes with SET LOCAL occ.key lose and
//     double nothing, and occ.key_stats counts each attempt, commit and
//     serialization failure they saw;
//   - reservable columns (0.7.0): on a reservable stock table, UPDATE stock
//     SET qty = qty - $1 WHERE id = $2 reserves: result.rowCount is 1 (0 for
//     a missing key) and occ.reserved_value moves by exactly the delta, also
//     through a named prepared statement ({name: 'dec', ...}) executed 7
//     times, past the 5 custom plans after which the server switches to a
//     generic plan (pg_prepared_statements counts it); a reservation past
//     the CHECK bound is err.code '23514' with err.constraint, and aborts
//     the transaction; occ.try_reserve returns false when sold out and the
//     transaction goes on; SET qty = $1 is err.code '55000' with a hint that
//     names update_fields.
//
// Run: NODE_PATH=<dir>/node_modules node test/apps/node_test.js, against a
// database where pg_occ is installed (connection from the PG* environment
// variables; test/apps.sh installs pg and makes the database).  Exits
// non-zero on the first failed check.
'use strict';
const assert = require('assert');
const { Client } = require('pg');

let checks = 0;
function check(what, cond, got) {
  if (!cond) {
    console.error(`node: FAIL: ${what}` + (got === undefined ? '' : ` (got ${JSON.stringify(got)})`));
    process.exit(1);
  }
  checks++;
  console.log(`node: ok: ${what}`);
}

// the error a promise rejects with, or null if it resolves
async function errorOf(promise) {
  try {
    await promise;
    return null;
  } catch (e) {
    return e;
  }
}

async function connect() {
  const c = new Client(); // PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE
  await c.connect();
  return c;
}

async function main() {
  const conn = await connect();
  await conn.query(`
    DROP TABLE IF EXISTS account, hot, note;
    DROP SEQUENCE IF EXISTS executions;
    CREATE TABLE account (id int PRIMARY KEY, balance numeric NOT NULL);
    INSERT INTO account VALUES (1, 100), (2, 0);
    CREATE TABLE hot (id int PRIMARY KEY, n bigint NOT NULL);
    INSERT INTO hot VALUES (1, 0);
    CREATE TABLE note (id int, body text);
    CREATE SEQUENCE executions;
    CREATE FUNCTION fail_until(n int) RETURNS void LANGUAGE plpgsql AS $$
    BEGIN
      IF nextval('executions') % n <> 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'serialization_failure', MESSAGE = 'simulated conflict';
      END IF;
    END $$;`);
  const v = (await conn.query("SELECT extversion FROM pg_extension WHERE extname = 'pg_occ'")).rows[0].extversion;
  console.log(`node ${process.version}, pg ${require('pg/package.json').version}, pg_occ ${v}`);

  // --- placeholders inside row(...): the casts are needed -------------------
  await conn.query('CALL occ.retry($1, params => row($2::int, $3::text))',
                   ['INSERT INTO note VALUES ($1, $2)', 7, "it's a text"]);
  let r = await conn.query('SELECT id, body FROM note');
  check('CALL occ.retry($1, params => row($2::int, $3::text)) with placeholders',
        r.rows.length === 1 && r.rows[0].id === 7 && r.rows[0].body === "it's a text", r.rows);

  let e = await errorOf(conn.query('CALL occ.retry($1, params => row($2, $3))',
                                   ['INSERT INTO note VALUES ($1, $2)', 8, 'x']));
  check(`placeholders inside row(...) without casts: 42P18 '${e && e.message}'`, e && e.code === '42P18', e && e.code);

  // --- the reporting form: one row, attempts and slept ----------------------
  r = await conn.query("CALL occ.retry($1, attempts => NULL, slept => NULL, params => row($2::int), " +
                       "contention => 'backoff', base => '1ms', jitter => 'none')",
                       ['SELECT fail_until($1)', 3]);
  check('reporting form: one row (attempts, slept)',
        r.rows.length === 1 && r.fields.map((f) => f.name).join() === 'attempts,slept', r.rows);
  check('reporting form: attempts is a number, 3 for a body that fails twice', r.rows[0].attempts === 3, r.rows[0]);
  const slept = r.rows[0].slept;
  const sleptMs = (slept.seconds || 0) * 1000 + (slept.milliseconds || 0);
  check(`reporting form: slept is an interval object (${slept.toPostgres()}), >= 1 ms + 2 ms`, sleptMs >= 3, slept);

  // --- the result form (0.3.0) ----------------------------------------------
  r = await conn.query("CALL occ.retry('UPDATE account SET balance = balance - $1 WHERE id = $2 RETURNING balance', " +
                       'result => NULL, params => row($1::numeric, $2::int))', [25, 1]);
  check('result form: one row, one column named result',
        r.rows.length === 1 && r.fields.map((f) => f.name).join() === 'result', r.rows);
  check('result form: jsonb parsed to an array of objects: [{"balance": 75}]',
        JSON.stringify(r.rows[0].result) === '[{"balance":75}]', r.rows[0].result);

  // the statement of the README's JDBC example, as pgjdbc sends it (typed ? become $n)
  r = await conn.query('CALL occ.retry($1, result => null, params => row($2::int, $3::numeric))',
                       ['UPDATE account SET balance = balance - $2 WHERE id = $1 RETURNING balance', 1, '25']);
  check('the README\'s JDBC statement: [{"balance": 50}]', JSON.stringify(r.rows[0].result) === '[{"balance":50}]',
        r.rows[0].result);
  r = await conn.query("CALL occ.retry('UPDATE account SET balance = balance + 25 WHERE id = 1')");

  r = await conn.query('CALL occ.retry($1, result => NULL)', ['SELECT id, balance FROM account ORDER BY id']);
  assert.deepStrictEqual(r.rows[0].result, [{ id: 1, balance: 75 }, { id: 2, balance: 0 }]);
  check("result form: a SELECT's rows, in order", true);

  r = await conn.query('CALL occ.retry($1, result => NULL, params => row($2::int))',
                       ['UPDATE account SET balance = balance WHERE id = $1 RETURNING balance', -1]);
  check('result form: [] when the statement returned no rows', JSON.stringify(r.rows[0].result) === '[]', r.rows[0]);
  r = await conn.query('CALL occ.retry($1, result => NULL)', ['UPDATE account SET balance = balance']);
  check('result form: null when no statement returns rows', r.rows[0].result === null, r.rows[0]);

  r = await conn.query('CALL occ.retry($1, result => NULL, attempts => NULL, slept => NULL, ' +
                       "params => row($2::int), contention => 'backoff', base => '1ms', jitter => 'none')",
                       ['SELECT fail_until($1); SELECT occ.attempt() AS attempt', 3]);
  check('result, attempts and slept: one row of three columns',
        r.rows.length === 1 && r.fields.map((f) => f.name).join() === 'result,attempts,slept', r.rows);
  check('result, attempts and slept: the result of the attempt that committed, [{"attempt": 3}], 3 attempts',
        JSON.stringify(r.rows[0].result) === '[{"attempt":3}]' && r.rows[0].attempts === 3, r.rows[0]);

  // --- giving up --------------------------------------------------------------
  e = await errorOf(conn.query("CALL occ.retry($1, max_attempts => 2, base => '1ms', contention => 'backoff')",
    ["DO $$ BEGIN RAISE EXCEPTION 'x' USING ERRCODE = 'serialization_failure'; END $$"]));
  check("give-up: error.code '40001'", e && e.code === '40001', e && e.code);
  check("give-up: error.detail 'occ.retry gave up after 2 attempts.'",
        (e.detail || '').includes('occ.retry gave up after 2 attempts.'), e.detail);
  r = await conn.query('SELECT attempts, outcome FROM occ.last_retry()');
  check("after a give-up the connection still works: occ.last_retry() = (2, 'gave up')",
        r.rows[0].attempts === 2 && r.rows[0].outcome === 'gave up', r.rows[0]);

  // --- key => $2: the driver's key parameter, sent untyped -------------------
  // node-postgres sends every parameter as unknown; key resolves it to text
  // (0.4.0's "any" left it unresolved: 42P18)
  r = await conn.query("CALL occ.retry($1, result => NULL, contention => 'queue', key => $2)",
                       ['SELECT 1 AS one', 'hot:1']);
  check('key => $2 with a string (sent untyped) is a text key',
        JSON.stringify(r.rows[0].result) === '[{"one":1}]', r.rows[0].result);
  r = await conn.query("CALL occ.retry($1, result => NULL, contention => 'queue', key => $2::text[])",
                       ['SELECT 1 AS one', ['hot:1', 'hot:2']]);
  check('key => $2::text[] with an array gives several keys',
        JSON.stringify(r.rows[0].result) === '[{"one":1}]', r.rows[0].result);

  // --- inside BEGIN: 25001 with a hint ----------------------------------------
  await conn.query('BEGIN');
  e = await errorOf(conn.query("CALL occ.retry('SELECT 1')"));
  await conn.query('ROLLBACK');
  check("inside BEGIN: error.code '25001'", e && e.code === '25001', e && e.code);
  console.log(`node: the hint is: '${e.hint}'`);
  check('inside BEGIN: the hint names autocommit', (e.hint || '').includes('autocommit'), e.hint);

  // --- real contention: two connections at the same time -------------------------
  const CALLS = 300;
  const body = "SELECT set_config('app.n', n::text, true) FROM hot WHERE id = 1;" +
               " UPDATE hot SET n = current_setting('app.n')::bigint + 1 WHERE id = 1";
  const clients = [await connect(), await connect()];
  const retries = await Promise.all(clients.map(async (c) => {
    let n = 0;
    for (let i = 0; i < CALLS; i++) {
      const res = await c.query("CALL occ.retry($1, attempts => NULL, slept => NULL, isolation => 'repeatable read')",
                                [body]);
      n += res.rows[0].attempts - 1;
    }
    return n;
  }));
  await Promise.all(clients.map((c) => c.end()));
  r = await conn.query('SELECT n FROM hot WHERE id = 1');
  check(`contention: 2 x ${CALLS} read-modify-writes, the row is ${2 * CALLS} (nothing lost or doubled)`,
        Number(r.rows[0].n) === 2 * CALLS, r.rows[0].n);
  console.log(`node: contention: ${retries[0] + retries[1]} retries in ${2 * CALLS} calls (not asserted)`);

  // --- SET LOCAL occ.key: the application's own transactions -------------------
  await conn.query('BEGIN');
  e = await errorOf(conn.query('SET LOCAL occ.key = $1', ['hot:1']));
  await conn.query('ROLLBACK');
  check("SET LOCAL occ.key = $1: SET takes no parameter, 42601", e && e.code === '42601', e && e.code);
  await conn.query('BEGIN');
  await conn.query(`SET LOCAL occ.key = ${conn.escapeLiteral('hot:1')}`);
  r = await conn.query('SHOW occ.key');
  await conn.query('ROLLBACK');
  check('SET LOCAL occ.key with client.escapeLiteral sets the key', r.rows[0]['occ.key'] === 'hot:1', r.rows[0]);
  await conn.query('BEGIN');
  await conn.query('SELECT 1');
  e = await errorOf(conn.query(`SET LOCAL occ.key = ${conn.escapeLiteral('hot:1')}`));
  await conn.query('ROLLBACK');
  check("SET LOCAL occ.key after a query: 25001 with a hint",
        e && e.code === '25001' && (e.hint || '').includes('first statement after BEGIN'), e && [e.code, e.hint]);

  await conn.query('SELECT occ.stats_reset()');
  await conn.query('UPDATE hot SET n = 0 WHERE id = 1');
  const THREADS = 4;
  const TRANSACTIONS = 50;
  const keyed = await Promise.all(Array.from({ length: THREADS }, async () => {
    const c = await connect();
    const counts = { tries: 0, conflicts: 0 };
    for (let i = 0; i < TRANSACTIONS; i++) {
      for (;;) {
        counts.tries++;
        try {
          await c.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
          await c.query(`SET LOCAL occ.key = ${c.escapeLiteral('hot:1')}`);
          const n = Number((await c.query('SELECT n FROM hot WHERE id = 1')).rows[0].n);
          await new Promise((resolve) => setTimeout(resolve, 1)); // the application's work
          await c.query('UPDATE hot SET n = $1 WHERE id = 1', [n + 1]);
          await c.query('COMMIT');
          break;
        } catch (err) {
          await c.query('ROLLBACK');
          if (err.code !== '40001') throw err;
          counts.conflicts++;
        }
      }
    }
    await c.end();
    return counts;
  }));
  const tries = keyed.reduce((a, k) => a + k.tries, 0);
  const conflicts = keyed.reduce((a, k) => a + k.conflicts, 0);
  r = await conn.query('SELECT n FROM hot WHERE id = 1');
  check(`SET LOCAL occ.key: ${THREADS} x ${TRANSACTIONS} read-modify-writes retried by the client, ` +
        `the row is ${THREADS * TRANSACTIONS} (nothing lost or doubled)`,
        Number(r.rows[0].n) === THREADS * TRANSACTIONS, r.rows[0].n);
  r = await conn.query("SELECT transactions, commits, serialization_failures, queued FROM occ.key_stats WHERE key = 'hot:1'");
  const st = r.rows[0];
  check(`occ.key_stats counts the ${tries} attempts, ${THREADS * TRANSACTIONS} commits and ${conflicts} serialization failures`,
        st && Number(st.transactions) === tries && Number(st.commits) === THREADS * TRANSACTIONS &&
        Number(st.serialization_failures) === conflicts, st);
  console.log(`node: SET LOCAL occ.key: ${tries} attempts for ${THREADS * TRANSACTIONS} commits, ${st.queued} queued (not asserted)`);

  // --- reservable columns: UPDATE ... SET qty = qty - $1 WHERE id = $2 reserves ---
  await conn.query(`
    DROP TABLE IF EXISTS stock;
    CREATE TABLE stock (id int PRIMARY KEY, name text NOT NULL, qty int NOT NULL CHECK (qty >= 0));
    INSERT INTO stock VALUES (1, 'widget', 1000), (2, 'gadget', 1);
    SELECT occ.make_reservable('stock', 'qty');`);
  const DEC = 'UPDATE stock SET qty = qty - $1 WHERE id = $2';
  const reserved = async (c, key) =>
    Number((await c.query("SELECT occ.reserved_value('stock', 'qty', $1::int) AS v", [key])).rows[0].v);
  let expected = 1000;
  r = await conn.query(DEC, [3, 1]);
  expected -= 3;
  check("reservable: UPDATE stock SET qty = qty - $1 WHERE id = $2: rowCount 1, command 'UPDATE'",
        r.rowCount === 1 && r.command === 'UPDATE', [r.command, r.rowCount]);
  r = await conn.query(DEC, [3, 99]);
  check('reservable: the same UPDATE of a missing key: rowCount 0', r.rowCount === 0, r.rowCount);
  let got = await reserved(conn, 1);
  check(`reservable: occ.reserved_value is ${expected}`, got === expected, got);

  // a named prepared statement: parsed once on the connection, then
  // Bind/Execute; after 5 custom plans the server switches to a generic plan
  const counts = [];
  for (let i = 0; i < 7; i++) {
    counts.push((await conn.query({ name: 'dec', text: DEC, values: [1, 1] })).rowCount);
  }
  expected -= 7;
  check('reservable: a named prepared statement executed 7 times: rowCount 1 each time',
        JSON.stringify(counts) === JSON.stringify([1, 1, 1, 1, 1, 1, 1]), counts);
  r = await conn.query({ name: 'dec', text: DEC, values: [1, 99] });
  check('reservable: the named prepared statement with a missing key: rowCount 0', r.rowCount === 0, r.rowCount);
  r = await conn.query("SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = 'dec'");
  check('reservable: after its 5 custom plans the server ran it with a generic plan (pg_prepared_statements)',
        r.rows.length === 1 && Number(r.rows[0].generic_plans) >= 1, r.rows);
  got = await reserved(conn, 1);
  check(`reservable: after the prepared statement the value is ${expected}`, got === expected, got);

  // a refusal: 23514 naming the constraint, and the transaction is aborted
  await conn.query('BEGIN');
  r = await conn.query(DEC, [1, 2]); // the gadget's only unit
  check('reservable: in BEGIN, UPDATE ... - 1 of a stock of 1: rowCount 1', r.rowCount === 1, r.rowCount);
  e = await errorOf(conn.query(DEC, [1, 2]));
  check('reservable: past the CHECK bound: code 23514, constraint stock_qty_check',
        e && e.code === '23514' && e.constraint === 'stock_qty_check', e && [e.code, e.constraint, e.message]);
  e = await errorOf(conn.query('SELECT 1'));
  check('reservable: after the refusal the transaction is aborted: 25P02', e && e.code === '25P02', e && e.code);
  await conn.query('ROLLBACK');
  got = await reserved(conn, 2);
  check('reservable: the rolled back transaction reserved nothing: the gadget is still 1', got === 1, got);

  // occ.try_reserve: false when sold out, and the transaction goes on
  await conn.query('BEGIN');
  r = await conn.query("SELECT occ.try_reserve('stock', 'qty', $1::int, $2) AS taken", [2, -5]);
  check('reservable: occ.try_reserve of 5 from a stock of 1 returns false', r.rows[0].taken === false, r.rows[0]);
  r = await conn.query(DEC, [1, 2]);
  check('reservable: the transaction goes on: UPDATE ... - 1 of the gadget, rowCount 1', r.rowCount === 1, r.rowCount);
  await conn.query('COMMIT');
  got = await reserved(conn, 2);
  check('reservable: committed: the gadget is 0', got === 0, got);

  // other shapes that change the column: refused by its guard, 55000 with a hint
  e = await errorOf(conn.query('UPDATE stock SET qty = $1 WHERE id = $2', [5, 1]));
  check('reservable: SET qty = $1: code 55000, the hint names update_fields',
        e && e.code === '55000' && (e.hint || '').includes('update_fields'), e && [e.code, e.hint]);
  got = await reserved(conn, 1);
  check(`reservable: the refused statement changed nothing: ${expected}`, got === expected, got);

  await conn.end();
  console.log(`node: ${checks} passed, 0 failed`);
}

main().catch((err) => {
  console.error(`node: FAIL: ${err.stack || err}`);
  process.exit(1);
});
