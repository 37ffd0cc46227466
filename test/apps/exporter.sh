#!/bin/bash
# pg_occ's metrics for Prometheus: prometheus-postgres-exporter (Debian's
# package) with sql/pg_occ_prometheus.yaml, as installed.  Makes a known set of occ.retry
# calls in a fresh database (1, 2, 4 and 6 attempts, a give-up, a refused
# call; the 2-attempt ones in queue mode), starts the exporter on a free port
# of 127.0.0.1 with the queries file only (--disable-default-metrics), scrapes
# /metrics once and checks it against occ.stats and occ.stats_info
# (test/apps/exporter_check.py: values, units, histogram buckets, types,
# labels), occ.key_stats's too.
#
# Runs in the cluster of test/run.sh's in_cluster (PG* set by pg_virtualenv,
# pg_occ preloaded); stops the exporter at the end.
set -euo pipefail
cd "$(dirname "$0")/../.."

DB=occ_apps_exporter
# where make install (and a package) puts it, as docs/monitoring.md says
QUERIES=$("${PG_CONFIG:-pg_config}" --sharedir)/extension/pg_occ_prometheus.yaml
EXPORTER=${EXPORTER:-prometheus-postgres-exporter}  # or the path of another build
fail() { echo "exporter: FAIL: $*" >&2; exit 1; }
sql() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$DB" "$@"; }

command -v "$EXPORTER" >/dev/null ||
    fail "$EXPORTER is not installed (Debian package prometheus-postgres-exporter; test/setup.sh installs it)"
[ -f "$QUERIES" ] || fail "no queries file at $QUERIES, where make install puts it"
DIR=$(mktemp -d /tmp/occ_exporter.XXXXXX)
exporter=
cleanup() {
    [ -z "$exporter" ] || { kill "$exporter" 2>/dev/null || true; wait "$exporter" 2>/dev/null || true; }
    rm -rf "$DIR"
    dropdb --if-exists "$DB" >/dev/null 2>&1 || true
}
trap cleanup EXIT

dropdb --if-exists "$DB" 2>/dev/null
createdb "$DB"
sql -c "CREATE EXTENSION pg_occ;
    CREATE SEQUENCE executions;  -- survives rollbacks: counts a call's executions
    CREATE FUNCTION fail_until(n int) RETURNS void LANGUAGE plpgsql AS \$\$
    BEGIN
      IF nextval('executions') < n THEN
        RAISE EXCEPTION USING ERRCODE = 'serialization_failure', MESSAGE = 'simulated conflict';
      END IF;
    END \$\$;"

# call N SQL: a call whose body fails until its N-th execution
call() { sql -c "SELECT setval('executions', 1, false)" -c "$2" >/dev/null; }
for _ in 1 2 3; do call 1 "CALL occ.retry('SELECT 1')"; done
for _ in 1 2; do call 2 "CALL occ.retry('SELECT fail_until(2)')"; done  # queue mode: waits for the gate
call 4 "CALL occ.retry('SELECT fail_until(4)', contention => 'backoff', base => '100us', jitter => 'none')"
call 6 "CALL occ.retry('SELECT fail_until(6)', contention => 'backoff', base => '100us', jitter => 'none')"
! call 100 "CALL occ.retry('SELECT fail_until(100)', max_attempts => 2, contention => 'backoff', base => '100us')" 2>/dev/null ||
    fail "the call that should give up did not"
! sql -c "CALL occ.retry('SELECT 1', max_attempts => 0)" 2>/dev/null || fail "max_attempts => 0 was not refused"

# the application's own transactions with SET LOCAL occ.key (occ.key_stats):
# two that commit, one that ends with a serialization failure
for outcome in "SELECT 1" "SELECT 1" "SELECT fail_until(2)"; do
    sql -c "SELECT setval('executions', 1, false)" -c "BEGIN" -c "SET LOCAL occ.key = 'exporter:1'" \
        -c "$outcome" -c "COMMIT" >/dev/null 2>&1 || true
done

# pg_occ 0.5.0's reservable columns (occ.reservations): two reservations
# taken and one refused on one row
sql -c "CREATE TABLE exporter_stock (id int PRIMARY KEY, qty int NOT NULL CHECK (qty >= 0));
        INSERT INTO exporter_stock VALUES (1, 5);
        SELECT occ.make_reservable('exporter_stock', 'qty')" >/dev/null
sql -c "SELECT occ.reserve('exporter_stock', 'qty', 1, -2)" -c "SELECT occ.reserve('exporter_stock', 'qty', 1, -3)" >/dev/null
! sql -c "SELECT occ.reserve('exporter_stock', 'qty', 1, -1)" 2>/dev/null || fail "a reservation past the bound was taken"

# pg_occ 0.3.0's retry budget.  A small storm, in a session of its own (a
# budget of 1 token that nothing refills, and a body that keeps failing), so
# that refusals and the storm's start are not 0; then the budget on for the
# exporter's sessions, so that occ.stats_info shows tokens (NULL, NaN in
# Prometheus, when it is off).
if [ -n "$(sql -c "SELECT 1 FROM pg_settings WHERE name = 'occ.retry_budget'")" ]; then
    sql -c "SELECT setval('executions', 1, false)" \
        -c "SET occ.retry_budget = 1" -c "SET occ.retry_budget_floor = 0" -c "SET occ.retry_budget_ratio = 0" \
        -c "CALL occ.retry('SELECT fail_until(1000)', contention => 'backoff', base => '100us', key => 'storm')" \
        >/dev/null 2>&1 || true
    [ "$(sql -c "SELECT budget_refusals > 0 AND last_storm IS NOT NULL FROM occ.stats_info")" = t ] ||
        fail "a budget of 1 token refused no retry: $(sql -c "SELECT * FROM occ.stats_info")"
    sql -c "ALTER DATABASE $DB SET occ.retry_budget = 1000"
fi

PORT=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# lib/pq's key=value form; loopback without TLS.  The exporter runs with an
# empty environment: its lib/pq panics on PG* variables it does not support
# ("panic: setting PGSYSCONFDIR not supported", which pg_virtualenv sets).
dsn="host=${PGHOST:-localhost} port=${PGPORT:-5432} user=${PGUSER:-postgres} password='${PGPASSWORD:-}' dbname=$DB sslmode=disable"
# Only the queries file's metrics, as far as this version's flags allow:
# 0.11 (bookworm) has --disable-settings-metrics and the collectors
# database and bgwriter; 0.20 dropped --disable-settings-metrics.
help=$("$EXPORTER" --help 2>&1)
flags=(--extend.query-path="$QUERIES" --disable-default-metrics --web.listen-address="127.0.0.1:$PORT")
for flag in --disable-settings-metrics --no-collector.database --no-collector.bgwriter --no-collector.settings; do
    name=${flag#--}
    name=${name#no-}
    ! grep -qE -- "--(\[no-\])?${name//./\\.}([= ]|$)" <<<"$help" || flags+=("$flag")
done
env -i DATA_SOURCE_NAME="$dsn" "$(command -v "$EXPORTER")" "${flags[@]}" >"$DIR/exporter.log" 2>&1 &
exporter=$!
URL=http://127.0.0.1:$PORT/metrics
for _ in $(seq 1 100); do
    /usr/bin/python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$PORT/', timeout=1)" 2>/dev/null && break
    kill -0 "$exporter" 2>/dev/null || { cat "$DIR/exporter.log" >&2; fail "the exporter did not start"; }
    sleep 0.1
done
echo "exporter: $("$EXPORTER" --version 2>&1 | head -1) on 127.0.0.1:$PORT with $QUERIES"
/usr/bin/python3 test/apps/exporter_check.py "$URL" "$DB" ||
    { echo "exporter: its log:" >&2; cat "$DIR/exporter.log" >&2; fail "see above"; }
# a query of the file that failed shows in the log (and in pg_exporter_last_scrape_error)
! grep -iE 'err.*(pg_occ|pg_occ_prometheus)' "$DIR/exporter.log" || fail "the exporter logged errors about the queries file"
echo "exporter: ok"
