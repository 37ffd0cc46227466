#!/bin/bash
# One tenant (a role of a database) cannot switch queue mode off for
# another, however many failing bodies or hot keys it keeps (issue 27):
#   - the learner: a tenant in another database keeps 1000 bodies failing
#     (each call fails its first attempt), more than the learner's 256
#     slots; a body of the victim's that fails on one value is learned all
#     the same (learned_key '$1 = 42'): a tenant holding more than its share
#     of a set gives a slot up (0.4.0 never took a warm slot over: nothing
#     was learned while the other tenant kept its bodies failing);
#   - the temperature: a role in another database computes, from the public
#     hash functions, a key of its own that lands on the temperature slot of
#     the victim's key (as 0.4.0 chose slots) and keeps it hot; the victim's
#     key gets hot all the same and its next call queues before its first
#     attempt (the slots are now drawn with a secret, two per key).
# Runs in the cluster of test/run.sh's in_cluster (PG* set by pg_virtualenv,
# pg_occ preloaded).
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "tenants: FAIL: $*" >&2; exit 1; }
sql() { local db=$1; shift; psql -X -q -At -v ON_ERROR_STOP=1 -d "$db" "$@"; }
hostile=
# stop_hostile: end the other tenant's loop, its server process too (which
# runs on after its client goes until it next writes to it)
stop_hostile() {
    [ -z "$hostile" ] || { kill "$hostile" 2>/dev/null || true; wait "$hostile" 2>/dev/null || true; }
    hostile=
    sql postgres -c "SELECT count(pg_terminate_backend(pid, 10000)) FROM pg_stat_activity
                      WHERE datname = 'occ_tenant_b' AND pid <> pg_backend_pid()" >/dev/null
}
cleanup() {
    stop_hostile || true
    for db in occ_tenant_a occ_tenant_b; do dropdb --if-exists "$db" >/dev/null 2>&1 || true; done
    sql postgres -c "DO \$\$ DECLARE r record; BEGIN
        FOR r IN SELECT rolname FROM pg_roles WHERE rolname LIKE 'occ_tenant_victim%' LOOP
          EXECUTE format('DROP ROLE %I', r.rolname);
        END LOOP; END \$\$" >/dev/null 2>&1 || true
}
trap cleanup EXIT

for db in occ_tenant_a occ_tenant_b; do
    dropdb --if-exists "$db" 2>/dev/null
    createdb "$db"
    sql "$db" -c "CREATE EXTENSION pg_occ" -c "
        CREATE TABLE t (id int PRIMARY KEY, n int NOT NULL DEFAULT 0);
        INSERT INTO t SELECT i FROM generate_series(1, 100) i;
        CREATE FUNCTION fail_first(really boolean) RETURNS void LANGUAGE plpgsql AS \$\$
        BEGIN
          IF really AND occ.attempt() = 1 THEN
            RAISE EXCEPTION USING ERRCODE = 'serialization_failure', MESSAGE = 'simulated conflict';
          END IF;
        END \$\$;"
done

# --- the learner ------------------------------------------------------------------
# the other tenant: 1000 bodies, each call failing once, round after round
# (a round takes well under the second in which a body's counts cool)
sql occ_tenant_b -c "DO \$\$ BEGIN
  FOR r IN 1..1000000 LOOP
    FOR i IN 1..1000 LOOP
      CALL occ.retry(format('SELECT fail_first(true) /* %s */', i), contention => 'queue',
                     base => '10us', cap => '10us');
    END LOOP;
  END LOOP; END \$\$" >/dev/null 2>&1 &
hostile=$!
sleep 2
kill -0 "$hostile" 2>/dev/null || fail "the other tenant's loop did not run"
warm=$(sql occ_tenant_b -c "SELECT count(*) FROM occ.stats WHERE query LIKE 'SELECT fail_first(true) /* %' AND calls >= 2")
[ "$warm" -ge 900 ] || fail "the other tenant's loop ran only $warm bodies twice in 2 s: too slow to keep them warm"
# the victim: the body fails on 42, twice, with 8 calls on other rows between
got=$(sql occ_tenant_a -c "SELECT occ.setseed(0.5)" -c "
    CREATE PROCEDURE kcall(id int) LANGUAGE plpgsql AS \$\$
    BEGIN
      CALL occ.retry('SELECT fail_first(\$1 = 42); UPDATE t SET n = n + 1 WHERE id = \$1', params => row(id),
                     contention => 'queue', base => '1ms', cap => '1ms');
    END \$\$" -c "CALL kcall(42)" \
    -c "CALL kcall(1)" -c "CALL kcall(2)" -c "CALL kcall(3)" -c "CALL kcall(4)" \
    -c "CALL kcall(5)" -c "CALL kcall(6)" -c "CALL kcall(7)" -c "CALL kcall(8)" \
    -c "CALL kcall(42)" \
    -c "SELECT coalesce(learned_key, 'nothing') FROM occ.stats WHERE query LIKE '%UPDATE t SET n%'" | tail -1)
kill -0 "$hostile" 2>/dev/null || fail "the other tenant's loop stopped"
[ "$got" = '$1 = 42' ] ||
    fail "while another database's tenant keeps 1000 bodies failing, the victim's body learned: $got (expected \$1 = 42)"
stop_hostile
echo "tenants: the learner learns the victim's body while another tenant keeps 1000 bodies failing"

# --- the temperature -----------------------------------------------------------
# 0.4.0's slot of a key: hash_combine64(hashtextextended(key, 0) | 1 << 63,
# the database's oid) % 4096; find a key of occ_tenant_b on the slot of
# occ_tenant_a's 'victim:1'
db_a=$(sql postgres -c "SELECT oid FROM pg_database WHERE datname = 'occ_tenant_a'")
db_b=$(sql postgres -c "SELECT oid FROM pg_database WHERE datname = 'occ_tenant_b'")
collider=$(sql postgres -c "SELECT 'victim:1', hashtextextended('victim:1', 0)
                            UNION ALL
                            SELECT 'h:' || i, hashtextextended('h:' || i, 0) FROM generate_series(1, 40000) i" |
    /usr/bin/python3 -c '
import sys
M = (1 << 64) - 1
def combine(a, b):
    return (a ^ ((b + 0x49a0f4dd15e5a8e3 + ((a << 54) & M) + (a >> 7)) & M)) & M
def slot(h, db):
    return combine((int(h) & M) | (1 << 63), db) % 4096
db_a, db_b = int(sys.argv[1]), int(sys.argv[2])
rows = [line.split("|") for line in sys.stdin.read().split()]
target = slot(rows[0][1], db_a)
print(next(k for k, h in rows[1:] if slot(h, db_b) == target))
' "$db_a" "$db_b")
echo "tenants: $collider in occ_tenant_b had the temperature slot of victim:1 in occ_tenant_a"
# the other tenant keeps its key hot: every attempt fails its first time
sql occ_tenant_b -c "DO \$\$ BEGIN
  FOR r IN 1..1000000 LOOP
    CALL occ.retry('SELECT fail_first(true)', contention => 'queue', key => '$collider',
                   base => '10us', cap => '10us');
  END LOOP; END \$\$" >/dev/null 2>&1 &
hostile=$!
sleep 1
kill -0 "$hostile" 2>/dev/null || fail "the other tenant's hot key loop did not run"
# the victim's key: three calls that fail once make it hot; the next call
# (no probe: setseed) queues before its first attempt
got=$(sql occ_tenant_a -c "SELECT occ.setseed(0.5)" \
    -c "CALL occ.retry('SELECT fail_first(true) /* victim */', contention => 'queue', key => 'victim:1', base => '1ms', cap => '1ms')" \
    -c "CALL occ.retry('SELECT fail_first(true) /* victim */', contention => 'queue', key => 'victim:1', base => '1ms', cap => '1ms')" \
    -c "CALL occ.retry('SELECT fail_first(true) /* victim */', contention => 'queue', key => 'victim:1', base => '1ms', cap => '1ms')" \
    -c "CALL occ.retry('SELECT 1 /* victim, hot */', contention => 'queue', key => 'victim:1')" \
    -c "SELECT string_agg(format('%s: %s calls, %s attempts, %s queued', query, calls, attempts, queued), '; '
               ORDER BY query) FROM occ.stats WHERE query LIKE '% victim%'" | tail -1)
kill -0 "$hostile" 2>/dev/null || fail "the other tenant's hot key loop stopped"
stop_hostile
[[ "$got" = *"SELECT 1 /* victim, hot */: 1 calls, 1 attempts, 1 queued"* ]] ||
    fail "while another database keeps a key of the victim's slot hot, the victim's hot key did not queue its call: $got"
echo "tenants: the victim's key gets hot while another database keeps a key of its (0.4.0) slot hot"

# --- the temperature, flooded -----------------------------------------------------
# the other tenant keeps 25,000 keys of its own failing, 1,000 a transaction
# (SET LOCAL occ.key), more than the 4,096 shared slots: every shared slot
# counts one of them, hot; the victim's key gets hot in its tenant's region
# (0.7.0 had only shared slots: the key stayed cold while the flood lasted).
# A region is (database OID * 31 + role OID) % 64: the victim is a role
# whose region is not the other tenant's.
uid=$(sql postgres -c "SELECT oid FROM pg_roles WHERE rolname = current_user")
victim=$(sql postgres -c "SELECT rolname FROM (SELECT current_user AS rolname, $uid AS oid
                                               UNION ALL SELECT rolname, oid FROM pg_roles
                                               WHERE rolname LIKE 'occ_tenant_victim%') r
                          WHERE (($db_a::bigint * 31 + oid::bigint) % 64) <> (($db_b::bigint * 31 + $uid) % 64)
                          ORDER BY rolname = current_user DESC LIMIT 1")
for i in 1 2 3 4; do
    [ -z "$victim" ] || break
    sql postgres -c "CREATE ROLE occ_tenant_victim$i"
    sql postgres -c "SELECT ($db_a::bigint * 31 + oid::bigint) % 64 <> ($db_b::bigint * 31 + $uid) % 64
                     FROM pg_roles WHERE rolname = 'occ_tenant_victim$i'" | grep -q t && victim=occ_tenant_victim$i
done
[ -n "$victim" ] || fail "no role found whose temperature region is not the other tenant's"
flood=$(mktemp)
/usr/bin/python3 - "$flood" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    f.write("CREATE OR REPLACE FUNCTION flood_fail() RETURNS void LANGUAGE plpgsql AS $$ BEGIN "
            "RAISE EXCEPTION USING ERRCODE = 'serialization_failure', MESSAGE = 'flood'; END $$;\n")
    for r in range(400):
        for b in range(25):
            keys = ", ".join("'f%d-%d'" % (b, i) for i in range(1000))
            f.write("BEGIN; SET LOCAL occ.key = %s; SELECT flood_fail(); ROLLBACK;\n" % keys)
PY
{ psql -X -q -d occ_tenant_b -f "$flood" & psql -X -q -d occ_tenant_b -f "$flood"; wait; } >/dev/null 2>&1 &
hostile=$!
sleep 4
kill -0 "$hostile" 2>/dev/null || fail "the other tenant's flood did not run"
# (the call's body sees whether it holds its gate: occ.stats, shared too,
# has evicted the victim's rows by then)
got=$(sql occ_tenant_a -c "SET ROLE $victim" -c "SELECT occ.setseed(0.5)" \
    -c "CALL occ.retry('SELECT fail_first(true) /* flooded */', contention => 'queue', key => 'victim:3', base => '1ms', cap => '1ms')" \
    -c "CALL occ.retry('SELECT fail_first(true) /* flooded */', contention => 'queue', key => 'victim:3', base => '1ms', cap => '1ms')" \
    -c "CALL occ.retry('SELECT fail_first(true) /* flooded */', contention => 'queue', key => 'victim:3', base => '1ms', cap => '1ms')" \
    -c "CALL occ.retry('SELECT count(*) AS gates FROM pg_catalog.pg_locks
                        WHERE locktype = ''advisory'' AND pid = pg_catalog.pg_backend_pid()',
                       contention => 'queue', key => 'victim:3', result => NULL)" \
    -c "SELECT attempts FROM occ.last_retry()" | tail -2 | tr '\n' ' ')
kill -0 "$hostile" 2>/dev/null || fail "the other tenant's flood stopped"
stop_hostile
rm -f "$flood"
[ "$got" = '[{"gates": 1}] 1 ' ] ||
    fail "while another database keeps 25,000 keys failing, the victim's hot key did not queue its call (result, attempts): $got"
echo "tenants: the victim's key gets hot while another database keeps 25,000 keys failing (as $victim)"
echo "tenants: ok"
