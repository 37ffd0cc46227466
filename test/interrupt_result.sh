#!/bin/bash
# A cancel while occ.retry makes a large result into jsonb ends the call at
# once, and the attempt is rolled back: the conversion checks for
# interrupts between rows.  (It used to make the whole text into jsonb at
# once, which takes seconds for a large result, and only then see the
# cancel.)
#
# A real second session watches a backend whose body returns 1,000 rows of
# 60 kB of JSON each (60 MB: strings of \u escapes, slow to parse).  The
# body's last row marks the end of its statement by setting
# application_name, which pg_stat_activity shows at once; what follows is
# the conversion.  The watcher polls for the mark (pg_stat_activity, no
# fixed sleep), cancels, and measures how long the backend stays active
# after it; then the same without the cancel, which measures the whole
# conversion.  The cancel must end the call in less than a quarter of the
# conversion's time (it took all of it; it takes a few milliseconds now): a
# ratio of two times measured moments apart on the same machine, with a
# wide margin on either side, not a fixed threshold.
#
# Runs against the server in PG* (test/run.sh starts one).
set -euo pipefail

DB=occ_interrupt_result
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
fail() { echo "interrupt_result: FAIL: $*" >&2; exit 1; }
sql() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$DB" -c "$1"; }

dropdb --if-exists "$DB" && createdb "$DB"
sql "CREATE EXTENSION pg_occ;
     CREATE TABLE big AS
       SELECT n, v AS s FROM generate_series(1, 1000) n,
                             (SELECT ('\"' || repeat('\\u00e9', 10000) || '\"')::json AS v) one;
     CREATE TABLE done (app text);
     -- watch(app, cancel): wait for app's mark, cancel it if asked, and
     -- return the seconds for which its backend stays active after the mark
     CREATE FUNCTION watch(app text, cancel bool) RETURNS float8 LANGUAGE plpgsql AS \$\$
     DECLARE
       target int;
       marked timestamptz;
     BEGIN
       LOOP
         PERFORM pg_stat_clear_snapshot();
         SELECT pid INTO target FROM pg_stat_activity WHERE application_name = app || ' converting';
         EXIT WHEN target IS NOT NULL;
         PERFORM pg_sleep(0.005);
       END LOOP;
       marked := clock_timestamp();
       IF cancel THEN
         PERFORM pg_cancel_backend(target);
       END IF;
       LOOP
         PERFORM pg_stat_clear_snapshot();
         EXIT WHEN NOT EXISTS (SELECT FROM pg_stat_activity WHERE pid = target AND state = 'active');
         PERFORM pg_sleep(0.005);
       END LOOP;
       RETURN extract(epoch FROM clock_timestamp() - marked);
     END \$\$;"

# run APP CANCEL: the call as application APP, watched; prints the seconds
# it stayed active after its mark; its client's messages go to $OUT
run() {
    local app=$1 cancel=$2 client secs
    PGAPPNAME=$app psql -X -q -d "$DB" >"$OUT" 2>&1 <<SQL &
DO \$do\$
DECLARE
  r jsonb;
BEGIN
  CALL occ.retry('INSERT INTO done VALUES (\$\$$app\$\$);
                  SELECT s, CASE WHEN n = 1000 THEN set_config(\$\$application_name\$\$, \$\$$app converting\$\$, false) END AS mark
                    FROM big', result => r);
  RAISE NOTICE '$app: % rows', jsonb_array_length(r);
END \$do\$;
SQL
    client=$!
    secs=$(psql -X -q -At -v ON_ERROR_STOP=1 -d "$DB" -c "SET statement_timeout = '120s'" -c "SELECT watch('$app', $cancel)") ||
        fail "$app: the watcher did not see the call end"
    wait "$client" || true
    echo "$secs"
}

whole=$(run whole false)
grep -q "whole: 1000 rows" "$OUT" || fail "the call without cancel: $(cat "$OUT")"
[ "$(sql "SELECT count(*) FROM done WHERE app = 'whole'")" = 1 ] || fail "the call without cancel did not commit"
echo "interrupt_result: the conversion of 60 MB of JSON took $whole s"

canceled=$(run canceled true)
grep -q "canceling statement due to user request" "$OUT" || fail "cancel: $(cat "$OUT")"
[ "$(sql "SELECT count(*) FROM done WHERE app = 'canceled'")" = 0 ] || fail "the canceled attempt committed"
echo "interrupt_result: a cancel during the conversion ended the call in $canceled s, and rolled it back"

awk -v c="$canceled" -v w="$whole" 'BEGIN { exit !(c < w / 4) }' ||
    fail "the cancel took $canceled s to end the call, the whole conversion $whole s: it was not seen during the conversion"

dropdb "$DB"
echo "interrupt_result: ok"
