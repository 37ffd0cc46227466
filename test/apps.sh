#!/bin/bash
# pg_occ from applications (test/apps/): real clients, ORMs, a pooler and a
# metrics exporter, each against the running server (occ.retry, SET LOCAL
# occ.key, and reservable columns' UPDATE ... SET c = c - n WHERE pk = v):
#   - psycopg 3 (test/apps/psycopg_test.py, Debian's python3-psycopg, run
#     with /usr/bin/python3),
#   - Django (test/apps/django_test.py, Debian's python3-django, and
#     python3-psycopg2 for Django 3.2's backend) and SQLAlchemy Core
#     (test/apps/sqlalchemy_test.py, Debian's python3-sqlalchemy), both run
#     with /usr/bin/python3,
#   - node-postgres (test/apps/node_test.js; the npm package pg, installed
#     into OCC_NPM_DIR, default /var/cache/pg_occ-npm, outside the tree),
#   - pgjdbc (test/apps/JdbcTest.java, Debian's libpostgresql-jdbc-java,
#     run as a single source file by java 11+),
#   - PgBouncer in transaction pooling (test/apps/pgbouncer.sh),
#   - prometheus-postgres-exporter with sql/pg_occ_prometheus.yaml
#     (test/apps/exporter.sh).
# The client tests run in a fresh database each (occ_apps_psycopg,
# occ_apps_django, occ_apps_sqlalchemy, occ_apps_node, occ_apps_jdbc),
# dropped after.  The node test needs node and npm, the JDBC test a JDK
# (java with its source launcher): on the host test/setup.sh installs them
# (Debian's nodejs, npm and default-jdk-headless) if missing; in the Debian
# roots of test/run.sh (OCC_IN_ROOT set) they are not installed (Debian's
# npm pulls in some 450 packages, a JDK some 250 MB), so there those tests
# are skipped, and say so.  Without them elsewhere, this fails.
#
# Runs in the cluster of test/run.sh's in_cluster (PG* set by pg_virtualenv,
# pg_occ preloaded); takes a few seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

NPM_DIR=${OCC_NPM_DIR:-/var/cache/pg_occ-npm}
fail() { echo "apps: FAIL: $*" >&2; exit 1; }
start=$SECONDS
skipped=

# in_db DB COMMAND...: run COMMAND with PGDATABASE=DB, a fresh database with pg_occ
in_db() {
    local db=$1
    shift
    dropdb --if-exists "$db" 2>/dev/null
    createdb "$db"
    psql -X -q -v ON_ERROR_STOP=1 -d "$db" -c "CREATE EXTENSION pg_occ"
    PGDATABASE=$db "$@"
    dropdb "$db"
}

# psycopg
/usr/bin/python3 -c 'import psycopg' 2>/dev/null ||
    fail "/usr/bin/python3 cannot import psycopg (Debian package python3-psycopg; test/setup.sh installs it)"
t=$SECONDS
in_db occ_apps_psycopg /usr/bin/python3 test/apps/psycopg_test.py
echo "apps: psycopg test passed in $((SECONDS - t)) s"

# Django and SQLAlchemy
/usr/bin/python3 -c 'import django' 2>/dev/null ||
    fail "/usr/bin/python3 cannot import django (Debian package python3-django; test/setup.sh installs it)"
/usr/bin/python3 -c 'import sqlalchemy' 2>/dev/null ||
    fail "/usr/bin/python3 cannot import sqlalchemy (Debian package python3-sqlalchemy; test/setup.sh installs it)"
t=$SECONDS
in_db occ_apps_django /usr/bin/python3 test/apps/django_test.py
echo "apps: Django test passed in $((SECONDS - t)) s"
t=$SECONDS
in_db occ_apps_sqlalchemy /usr/bin/python3 test/apps/sqlalchemy_test.py
echo "apps: SQLAlchemy test passed in $((SECONDS - t)) s"

# node-postgres
if command -v node >/dev/null && command -v npm >/dev/null; then
    t=$SECONDS
    mkdir -p "$NPM_DIR"
    (
        flock 9
        if [ ! -f "$NPM_DIR/node_modules/pg/package.json" ]; then
            echo "apps: installing node-postgres (npm package pg) into $NPM_DIR"
            npm install --prefix "$NPM_DIR" --no-audit --no-fund --loglevel=error pg@8 >/dev/null ||
                fail "npm install --prefix $NPM_DIR pg@8 failed"
        fi
    ) 9>"$NPM_DIR/.lock"
    in_db occ_apps_node env NODE_PATH="$NPM_DIR/node_modules" node test/apps/node_test.js
    echo "apps: node-postgres test passed in $((SECONDS - t)) s"
elif [ -n "${OCC_IN_ROOT:-}" ]; then
    echo "apps: *** node or npm is not installed in this Debian $OCC_IN_ROOT root: the node-postgres test is SKIPPED ***"
    skipped=" (node-postgres SKIPPED: no node)"
else
    fail "node and npm are needed for the node-postgres test (Debian packages nodejs and npm; test/setup.sh installs them)"
fi

# pgjdbc
JDBC_JAR=/usr/share/java/postgresql.jar
[ -f "$JDBC_JAR" ] || fail "$JDBC_JAR is missing (Debian package libpostgresql-jdbc-java; test/setup.sh installs it)"
if command -v java >/dev/null; then
    t=$SECONDS
    in_db occ_apps_jdbc java -cp "$JDBC_JAR" test/apps/JdbcTest.java
    echo "apps: JDBC test passed in $((SECONDS - t)) s"
elif [ -n "${OCC_IN_ROOT:-}" ]; then
    echo "apps: *** java is not installed in this Debian $OCC_IN_ROOT root: the JDBC test is SKIPPED ***"
    skipped="$skipped (JDBC SKIPPED: no java)"
else
    fail "java (11 or later, a JDK) is needed for the JDBC test (Debian package default-jdk-headless; test/setup.sh installs it)"
fi

t=$SECONDS
test/apps/pgbouncer.sh
echo "apps: PgBouncer test passed in $((SECONDS - t)) s"

t=$SECONDS
test/apps/exporter.sh
echo "apps: exporter test passed in $((SECONDS - t)) s"

echo "apps: all passed in $((SECONDS - start)) s$skipped"
