#!/bin/bash
# Adversarial check: occ.backoff, occ.setseed, occ.retry, occ.gate and the
# occ.* settings called with random and hostile values and bodies.  After
# every statement the same session runs SELECT 'alive', proving that its
# backend survived.  Fails if any error has SQLSTATE XX000 (an internal
# error: pg_occ must say what is wrong, with a proper SQLSTATE), if a
# backend died (a crash ends every session), or if a session did not get to
# its end.
#
# FUZZ_ITERATIONS statements per session (default 150), FUZZ_SESSIONS
# concurrent sessions (default 2, so that gates and locks are contended),
# FUZZ_SEED for a run that repeats (default: random, printed).  Statements
# run under statement_timeout = 200ms, so long sleeps and waits end.
#
# Runs against the server in PG* (test/run.sh starts one), pg_occ preloaded.
set -euo pipefail

ITERATIONS=${FUZZ_ITERATIONS:-150}
SESSIONS=${FUZZ_SESSIONS:-2}
SEED=${FUZZ_SEED:-$RANDOM$RANDOM}
DB=occ_fuzz
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT

fail() { echo "fuzz: FAIL: $*" >&2; exit 1; }

dropdb --if-exists "$DB" 2>/dev/null
createdb "$DB"
psql -X -q -v ON_ERROR_STOP=1 -d "$DB" <<'SQL'
CREATE EXTENSION pg_occ;
CREATE TABLE fuzz_t (v int, dropped int, w int);
ALTER TABLE fuzz_t DROP COLUMN dropped;
INSERT INTO fuzz_t VALUES (1, 1);
CREATE TYPE fuzz_comp AS (a int, b text);
CREATE DOMAIN fuzz_dom AS int CHECK (VALUE > 0);
DO $$ BEGIN CREATE ROLE fuzz_nobody; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
GRANT USAGE ON SCHEMA occ TO fuzz_nobody;
-- raises the SQLSTATE it is given (never XX000: that one we look for)
CREATE FUNCTION fuzz_fail(code text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF code IS NOT NULL AND code !~ '^XX' THEN
    RAISE EXCEPTION USING ERRCODE = code, MESSAGE = 'fuzz ' || code;
  END IF;
END $$;
SQL

# gen SEED: the statements of one session
gen() {
    perl - "$1" "$ITERATIONS" <<'PERL'
use strict;
use warnings;
my ($seed, $n) = @ARGV;
srand($seed);
sub pick { return $_[int(rand(@_))]; }
sub lit { my $s = shift; $s =~ s/'/''/g; return "'$s'"; }

my @ints = ('NULL', '0', '1', '-1', '2', '30', '64', '1000', '2147483647', '-2147483648');
my @intervals = ('NULL', "'0'", "'-1 us'", "'1 us'", "'250us'", "'1ms'", "'200ms'", "'1s'",
    "'1 day'", "'24 days 21 hours'", "'25 days'", "'100 days'", "'100 days 1 us'", "'101 days'",
    "'1 mon'", "'-1 mon'", "'1000 years'", "'-178000000 years'", "'178000000 years'",
    "'1 day -86400 s'", "'-1 day 86400000000 us'");
my @doubles = ('NULL', "'NaN'", "'Infinity'", "'-Infinity'", '0', '-0.0', '0.5', '1', '2',
    '1000', '1001', '1e308', '-1', '0.999999999');
my @draws = ('NULL', "'NaN'", '0', '1', '0.5', '-0.0', '1.0000001', '-1', "'Infinity'");
my @texts = ('NULL', "''", "'full'", "'FULL'", "' full'", "'none'", "'equal'", "'decorrelated'",
    "'bounded'", "'multiplicative'", "'normal'", "'queue'", "'backoff'", "'serializable'",
    "'repeatable read'", "'read committed'", "'read uncommitted'", "'snapshot'",
    "'x'';DROP TABLE fuzz_t;--'", "'é∂ü'", "repeat('z', 100000)", "E'\\\\'", "'%s%s%n'");
my @retry_on = ('NULL', "'{}'", "'{40001}'", "'{40}'", "'{40P01,40001}'", "'{XX000}'", "'{XX}'",
    "'{00}'", "'{57014}'", "'{57}'", "'{22}'", "'{42}'", "'{4000}'", "'{400011}'", "ARRAY[NULL]",
    "'{\" 40001 \"}'", "'{ab}'", "'{\"\"}'", "array_fill('40001'::text, ARRAY[10000])",
    "'{{40001}}'");
my @params = ('NULL', 'row()', 'row(NULL)', "row('x')", "row('5')", "row(NULL, NULL, NULL)",
    "row(1, 'a'::text, NULL)", 'row(ARRAY[1, 2])', 'row(row(1, 2))', "row(1.5::numeric, now(), '{}'::jsonb)",
    "row(1, 'b')::fuzz_comp", 'row(1::fuzz_dom)', 'row(1, 2)::fuzz_t', "row('40001')", "row('22012')",
    'row(' . join(', ', 1 .. 101) . ')', 'row(' . join(', ', 1 .. 100) . ')', "row(''::text)");
my @keys = ('NULL', "''", "'k'", "'account:' || 1", "repeat('k', 100000)", "'é'", "E'\\t'");
my @bodies = (
    'SELECT 1', '', ';;;', ' ', '--', '/* comment */', 'COMMIT', 'ROLLBACK', 'BEGIN', 'SAVEPOINT s',
    'RELEASE SAVEPOINT s', "PREPARE TRANSACTION 'fuzz'", 'COPY fuzz_t FROM STDIN',
    'COPY (SELECT 1) TO STDOUT', 'COPY fuzz_t TO STDOUT', "CALL occ.retry('SELECT 1')",
    "DO 'BEGIN CALL occ.retry(''SELECT 1''); END'", "SELECT fuzz_fail('40001')",
    "SELECT fuzz_fail('40P01')", "SELECT fuzz_fail('57014')", "SELECT fuzz_fail('22012')",
    'SELECT fuzz_fail($1)', 'SELECT fuzz_fail($1::text)', 'SELECT $1, $2, $3', 'SELECT $100',
    'SELECT $0', 'SELECT $1::int + 1', 'SELECT 1/0', 'SELECT pg_sleep(0.01)', 'SELECT pg_sleep(10)',
    'SET ROLE fuzz_nobody', 'SET LOCAL ROLE fuzz_nobody', 'RESET ALL', 'DISCARD ALL', 'DISCARD PLANS',
    'SET transaction_isolation = serializable', "SET occ.retry_sqlstates = 'XX'",
    "SET occ.max_attempts = 0", "SET occ.contention = 'queue'", 'SELECT pg_advisory_unlock_all()',
    "SELECT occ.gate('k')", 'SELECT occ.gate(NULL)', "SELECT occ.gate('')",
    'LOCK TABLE fuzz_t IN ACCESS EXCLUSIVE MODE',
    'CREATE TEMP TABLE fuzz_tmp ON COMMIT DROP AS SELECT 1 AS a; SELECT * FROM fuzz_tmp',
    'CREATE TABLE fuzz_x (a int); INSERT INTO fuzz_x VALUES (1); DROP TABLE fuzz_x',
    'ALTER TABLE fuzz_t ADD COLUMN c int; UPDATE fuzz_t SET c = 1; ALTER TABLE fuzz_t DROP COLUMN c',
    'INSERT INTO fuzz_t VALUES (1, 1)', 'UPDATE fuzz_t SET v = v + 1', 'DELETE FROM fuzz_t WHERE v < 0',
    'UPDATE fuzz_t SET v = $1', 'VACUUM fuzz_t', 'TRUNCATE fuzz_t', 'LISTEN fuzz; NOTIFY fuzz',
    'PREPARE fz AS SELECT 1; EXECUTE fz; DEALLOCATE fz', 'DECLARE c CURSOR FOR SELECT 1; FETCH c',
    'SELECT pg_cancel_backend(pg_backend_pid()); SELECT pg_sleep(0.1)', 'SELECT * FROM occ.stats',
    'SELECT occ.stats_reset()', 'SELECT * FROM occ.last_retry()', 'SELECT occ.backoff(3)',
    'SELECT occ.setseed(0.5)', 'CREATE INDEX CONCURRENTLY fuzz_i ON fuzz_t (v)', 'ALTER SYSTEM RESET ALL',
    'SET SESSION AUTHORIZATION fuzz_nobody', 'SELECT $$unterminated', "SELECT 'unterminated",
    '/* unterminated', 'SELECT (((1)))', 'SELECT ' . ('(' x 1000) . '1' . (')' x 1000),
    'SELECT ' . ('(' x 100000), join('; ', ('SELECT 1') x 3000), 'SELEC 1', 'SELECT 1 SELECT 2',
    "SELECT 'é∂ü'", "DO \$\$BEGIN RAISE EXCEPTION USING ERRCODE = '40001'; END\$\$",
    'EXPLAIN ANALYZE SELECT 1', 'SHOW ALL', 'CHECKPOINT', 'CLUSTER fuzz_t', 'REINDEX TABLE fuzz_t',
    'REFRESH MATERIALIZED VIEW fuzz_nothing', 'SELECT txid_current()', 'SELECT pg_current_xact_id()',
    'SELECT * FROM pg_locks',
);

for my $i (1 .. $n) {
    my $r = rand();
    my $stmt;
    if ($r < 0.25) {
        # occ.backoff, positional and named, extremes
        my @a = (pick(@ints), pick(@intervals), pick(@intervals), pick(@texts), pick(@doubles),
                 pick(@intervals), pick(@draws));
        my $k = 1 + int(rand(7));
        $stmt = 'SELECT occ.backoff(' . join(', ', @a[0 .. $k - 1]) . ')';
    } elsif ($r < 0.3) {
        $stmt = 'SELECT occ.setseed(' . pick(@draws, '2', '-2', '0.25') . ')';
    } elsif ($r < 0.8) {
        # occ.retry: a body, then any options, named, in any order
        my $body = pick(@bodies);
        $body .= '; ' . pick(@bodies) if rand() < 0.3;
        # mostly sensible options, so that bodies run; sometimes hostile ones
        my $hostile = rand() < 0.25;
        my %opt = $hostile ? (
            params => pick(@params), max_attempts => pick(@ints), base => pick(@intervals),
            cap => pick(@intervals), jitter => pick(@texts), factor => pick(@doubles),
            max_duration => pick(@intervals), isolation => pick(@texts), retry_on => pick(@retry_on),
            contention => pick(@texts, "'queue'", "'backoff'"), key => pick(@keys),
        ) : (
            params => pick(@params), max_attempts => pick('1', '2', '3', '5'),
            base => pick("'1us'", "'100us'", "'1ms'"), cap => pick("'1ms'", "'5ms'"),
            jitter => pick("'none'", "'full'", "'equal'", "'decorrelated'", "'bounded'",
                           "'multiplicative'", "'normal'"),
            factor => pick('1', '2', '10'), max_duration => pick("'0'", "'50ms'", "'1us'"),
            isolation => pick("'serializable'", "'repeatable read'", "'read committed'"),
            retry_on => pick('NULL', "'{40001}'", "'{40}'", "'{22}'", "'{42}'", "'{0A}'", "'{25}'",
                             "'{2D}'", "'{22012}'", "'{23,40,42,54}'"),
            contention => pick("'queue'", "'backoff'"), key => pick("'k'", "'k2'", "'account:' || 1"),
        );
        delete $opt{key} if !$hostile && $opt{contention} ne "'queue'";
        my @names = grep { rand() < 0.35 } sort keys %opt;
        my @args = (rand() < 0.05 ? 'NULL' : lit($body));
        push @args, 'attempts => NULL', 'slept => NULL' if rand() < 0.2;
        push @args, map { "$_ => $opt{$_}" } @names;
        $stmt = 'CALL occ.retry(' . join(', ', @args) . ')';
        $stmt = "BEGIN; $stmt; ROLLBACK" if rand() < 0.05;
    } elsif ($r < 0.88) {
        $stmt = 'BEGIN; SELECT occ.gate(' . pick(@keys) . '); SELECT occ.gate(' . pick(@keys) . '); COMMIT';
    } elsif ($r < 0.95) {
        my $name = pick('occ.base_delay', 'occ.max_delay', 'occ.jitter', 'occ.factor', 'occ.max_attempts',
                        'occ.max_duration', 'occ.isolation', 'occ.retry_sqlstates', 'occ.contention',
                        'occ.log_retries', 'occ.track_stats', 'occ.stats_max', 'occ.nonexistent');
        my $value = pick("'0'", "'-1'", "'1us'", "'3600001ms'", "'nan'", "'full'", "'queue'", "'XX'",
                         "'40001, 40P01'", "''", "'on'", "'2147483648'", "'1e400'");
        $stmt = "SET $name = $value";
    } else {
        $stmt = pick('SELECT * FROM occ.last_retry()', 'SELECT count(*) FROM occ.stats',
                     'SELECT * FROM occ.stats_info', 'SELECT occ.stats_reset()',
                     "SELECT occ.stats(NULL)", 'SELECT occ.gate(NULL)');
    }
    print "$stmt;\n";
    # back to a known state: settings, role, no transaction
    print "ROLLBACK;\nRESET ROLE;\nRESET SESSION AUTHORIZATION;\nRESET ALL;\n";
    print "SELECT 'alive $i';\n";
}
PERL
}

echo "fuzz: seed $SEED, $SESSIONS sessions of $ITERATIONS statements"
pids=()
for s in $(seq 1 "$SESSIONS"); do
    gen "$SEED$s" >"$DIR/$s.sql"
    PGOPTIONS="-c statement_timeout=200ms -c client_min_messages=error" \
        psql -X -At -v VERBOSITY=verbose -d "$DB" -f "$DIR/$s.sql" >"$DIR/$s.out" 2>&1 &
    pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || true; done

status=0
for s in $(seq 1 "$SESSIONS"); do
    out=$DIR/$s.out
    errors=$(grep -c "ERROR: " "$out" || true)
    alive=$(grep -c "^alive " "$out" || true)
    echo "fuzz: session $s: $alive of $ITERATIONS statements survived, $errors errors:" \
         "$(grep -oE "ERROR:  [0-9A-Z]{5}" "$out" | cut -c9- | sort | uniq -c | sort -rn | awk '{printf "%s %s, ", $2, $1}')"
    if grep -Eq "(ERROR|FATAL|PANIC):  XX000" "$out"; then
        grep -n -B2 -A3 -E "(ERROR|FATAL|PANIC):  XX000" "$out" | head -40 >&2
        echo "fuzz: FAIL: an internal error (XX000) in session $s; statements: $DIR/$s.sql (seed $SEED$s)" >&2
        status=1
    fi
    if grep -Eq "server closed the connection|terminating connection because of crash|connection to server was lost|no connection to the server" "$out"; then
        grep -n -B5 -E "server closed the connection|crash|connection to server was lost" "$out" | head -40 >&2
        echo "fuzz: FAIL: a backend died in session $s (seed $SEED$s)" >&2
        status=1
    fi
    [ "$alive" = "$ITERATIONS" ] || { echo "fuzz: FAIL: session $s ended after $alive of $ITERATIONS statements (seed $SEED$s)" >&2; status=1; }
done
if [ $status != 0 ]; then
    trap - EXIT
    exit 1
fi
psql -X -q -At -d "$DB" -c "SELECT 1" >/dev/null || fail "the server does not answer"
dropdb "$DB"
psql -X -q -c "DROP ROLE fuzz_nobody" postgres
echo "fuzz: ok"
