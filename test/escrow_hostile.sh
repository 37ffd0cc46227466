#!/bin/bash
# Reservable columns against hostile roles and an operator's routine, in a
# cluster of our own that preloads pg_occ with occ.reservable_rows = 100
# (test/run.sh runs it for each PostgreSQL version):
#   1. a database's owner, not a superuser, creates pg_occ (trusted) and
#      plants what the fold worker, which runs as the bootstrap superuser,
#      could run: her database's search_path (evil first), domains named
#      oid, text, name and bigint, operators + and = of her own, each
#      recording who ran it; her database's default isolation serializable.
#      Reservations fold exactly, nothing of hers ever runs as a superuser,
#      and the fold gets no serialization failure;
#   2. a database without pg_occ whose owner made a schema occ and a view
#      reservation_ledger that records who reads it: the launcher's worker
#      (after a restart) does not read it;
#   3. shares: a role holding reservations on 75 rows (all but the last
#      quarter of 100, kept for those that hold less than a quarter) in a
#      transaction gets 53400 for another row, and another role still
#      reserves and reads;
#   4. a fold worker terminated by a superuser, with a reservation left to
#      fold, is started again without a new reservation;
#   5. the launcher logs nothing at startup (0.5.0: "exited with exit code
#      1" each time), and the fold's deletes reach the ledger's statistics
#      (n_tup_del) while it runs.
# Uses PG_CONFIG (default: pg_config on the PATH); pg_occ must be installed.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=test/cluster.sh
. test/cluster.sh

fail() { echo "escrow_hostile: FAIL: $*" >&2; exit 1; }
base=$(mktemp -d)
chmod 711 "$base"
holders=()
trap 'for p in "${holders[@]}"; do kill "$p" 2>/dev/null || true; done; cluster_cleanup; rm -rf "$base"' EXIT
c=$base/c

cluster_init "$c" "shared_preload_libraries = 'pg_occ'" "occ.reservable_rows = 100" "max_connections = 50"
cluster_start "$c"
psql_as() { local user=$1 db=$2; shift 2; cluster_psql "$c" -d "$db" -U "$user" "$@"; }

# wait_for DB SQL: until SQL (a boolean) is true in DB, 30 s at most
wait_for() {
    for _ in $(seq 1 300); do
        [ "$(cluster_psql "$c" -d "$1" -c "$2" 2>/dev/null)" = t ] && return 0
        sleep 0.1
    done
    return 1
}

# hold USER DB SQL: run SQL as USER then sleep, in the background (its
# psql's pid in holders)
hold() {
    psql_as "$1" "$2" -c "$3; SELECT pg_sleep(600)" >/dev/null 2>&1 &
    holders+=($!)
    wait_for "$2" "SELECT EXISTS (SELECT FROM pg_stat_activity WHERE wait_event = 'PgSleep')" ||
        fail "the holder of '$3' did not start"
}
release() {
    cluster_psql "$c" -d postgres -c "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE wait_event = 'PgSleep'" >/dev/null
    for p in "${holders[@]}"; do wait "$p" 2>/dev/null || true; done
    holders=()
}

cluster_psql "$c" -d postgres <<'SQL'
CREATE ROLE eve LOGIN;
CREATE DATABASE evil OWNER eve;
CREATE DATABASE evil2 OWNER eve;
CREATE DATABASE app;
CREATE ROLE greedy LOGIN;
CREATE ROLE modest LOGIN;
SQL

# 1. the database's owner plants her objects, then reserves
psql_as eve evil <<'SQL'
CREATE EXTENSION pg_occ;
CREATE SCHEMA evil;
CREATE TABLE evil.ran (who text, super boolean);
GRANT INSERT ON evil.ran TO PUBLIC;
GRANT USAGE ON SCHEMA evil TO PUBLIC;
CREATE FUNCTION evil.spy() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO evil.ran SELECT current_user, rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user;
    RETURN true;
END
$$;
CREATE DOMAIN evil.oid AS pg_catalog.oid CHECK (evil.spy());
CREATE DOMAIN evil.text AS pg_catalog.text CHECK (evil.spy());
CREATE DOMAIN evil.name AS pg_catalog.name CHECK (evil.spy());
CREATE DOMAIN evil.bigint AS pg_catalog.int8 CHECK (evil.spy());
CREATE FUNCTION evil.plus(integer, bigint) RETURNS bigint LANGUAGE sql
    AS 'SELECT CASE WHEN evil.spy() THEN $1::pg_catalog.int8 OPERATOR(pg_catalog.+) $2 END';
CREATE OPERATOR evil.+ (LEFTARG = integer, RIGHTARG = bigint, FUNCTION = evil.plus);
CREATE FUNCTION evil.eq(integer, integer) RETURNS boolean LANGUAGE sql
    AS 'SELECT evil.spy() AND $1 OPERATOR(pg_catalog.=) $2';
CREATE OPERATOR evil.= (LEFTARG = integer, RIGHTARG = integer, FUNCTION = evil.eq);
ALTER DATABASE evil SET search_path = evil, pg_catalog;
ALTER DATABASE evil SET default_transaction_isolation = serializable;
CREATE TABLE public.stock (id integer PRIMARY KEY, qty integer NOT NULL CHECK (qty >= 0));
INSERT INTO public.stock VALUES (1, 1000);
SELECT occ.make_reservable('public.stock', 'qty');
SQL
for i in $(seq 1 20); do
    psql_as eve evil -c "SELECT occ.reserve('public.stock', 'qty', 1, -$i)" >/dev/null
done
wait_for evil "SELECT qty OPERATOR(pg_catalog.=) 790 AND NOT EXISTS (SELECT FROM occ.reservation_ledger) FROM public.stock" ||
    fail "the owner's reservations were not folded: $(cluster_psql "$c" -d evil -c 'TABLE public.stock; TABLE occ.reservation_ledger' | tr '\n' ' ')"
[ "$(cluster_psql "$c" -d evil -c "SELECT count(*) FROM evil.ran WHERE super")" = 0 ] ||
    fail "the database owner's code ran as a superuser: $(cluster_psql "$c" -d evil -c 'TABLE evil.ran' | tr '\n' ' ')"
! grep -E "could not serialize|pg_occ could not fold" "$(cluster_log "$c")" ||
    fail "the fold failed in a database whose default isolation is serializable"
echo "escrow_hostile: a database owner's search_path, domains, operators and default isolation: 20 reservations folded exactly (1000 -> 790), nothing of hers ran as a superuser"

# 2. a database without pg_occ, its owner's view named occ.reservation_ledger
psql_as eve evil2 <<'SQL'
CREATE TABLE public.ran (who text, super boolean);
GRANT INSERT ON public.ran TO PUBLIC;
CREATE FUNCTION public.spy() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.ran SELECT current_user, rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user;
    RETURN true;
END
$$;
CREATE SCHEMA occ;
CREATE VIEW occ.reservation_ledger AS
    SELECT 0::oid AS rel, 'x'::name AS col, 'k'::text AS key, 0::bigint AS delta WHERE public.spy();
SQL
cluster_stop "$c" fast
cluster_start "$c"
started=$(wc -l <"$(cluster_log "$c")")
# the launcher starts a worker in each database, which exits where there is nothing to fold
wait_for postgres "SELECT NOT EXISTS (SELECT FROM pg_stat_activity WHERE backend_type = 'pg_occ fold')" ||
    fail "the fold workers started at startup did not exit"
[ "$(cluster_psql "$c" -d evil2 -c "SELECT count(*) FROM public.ran")" = 0 ] ||
    fail "a fold worker read a database owner's occ.reservation_ledger where pg_occ is not installed"
echo "escrow_hostile: where pg_occ is not installed, the fold worker reads no table of the owner's named occ.reservation_ledger"

# 5. (first half) the launcher stays, and logs nothing at startup
sleep 1
! tail -n +"$started" "$(cluster_log "$c")" | grep -E "fold launcher.*exited" || fail "the fold launcher exited at startup"
[ "$(cluster_psql "$c" -d postgres -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pg_occ fold launcher'")" = 1 ] ||
    fail "no fold launcher runs"

# 3. shares
cluster_psql "$c" -d app <<'SQL'
CREATE EXTENSION pg_occ;
CREATE TABLE items (id integer PRIMARY KEY, qty integer NOT NULL CHECK (qty >= 0));
INSERT INTO items SELECT g, 100 FROM generate_series(1, 80) g;
SELECT occ.make_reservable('items', 'qty');
GRANT SELECT, UPDATE ON items TO greedy, modest;
SQL
hold greedy app "BEGIN; SELECT occ.reserve('items', 'qty', g, -1) FROM generate_series(1, 75) g"
out=$(psql_as greedy app -c "SELECT occ.reserve('items', 'qty', 76, -1)" 2>&1 || true)
case $out in
    *"too many rows with reservations in flight for this database or role"*) ;;
    *) fail "a role's 76th row in flight was not refused: $out" ;;
esac
psql_as modest app -c "SELECT occ.reserve('items', 'qty', 77, -1)" >/dev/null ||
    fail "another role could not reserve while one held its share"
[ "$(psql_as modest app -c "SELECT occ.reserved_value('items', 'qty', 77)")" = 99 ] ||
    fail "another role could not read while one held its share"
release
echo "escrow_hostile: a role holding reservations on 75 of occ.reservable_rows = 100 gets 53400 for one more; another role reserves and reads"

# 4. a fold worker terminated with a reservation left to fold
hold postgres app "BEGIN; SELECT * FROM items WHERE id = 20 FOR UPDATE"
cluster_psql "$c" -d app -c "SELECT occ.reserve('items', 'qty', 20, -5)" >/dev/null
wait_for app "SELECT EXISTS (SELECT FROM pg_stat_activity WHERE backend_type = 'pg_occ fold' AND datname = 'app')" ||
    fail "no fold worker started"
worker=$(cluster_psql "$c" -d app -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'pg_occ fold' AND datname = 'app'")
cluster_psql "$c" -d app -c "SELECT pg_terminate_backend($worker)" >/dev/null
wait_for app "SELECT NOT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $worker)" ||
    fail "the fold worker was not terminated"
release
wait_for app "SELECT qty = 95 AND NOT EXISTS (SELECT FROM occ.reservation_ledger) FROM items WHERE id = 20" ||
    fail "after its worker was terminated, the reservation was not folded without a new one"
echo "escrow_hostile: a fold worker terminated with work left is started again, and folds it"

# 5. (second half) the fold's deletes in the ledger's statistics while it runs
for i in $(seq 1 30); do
    cluster_psql "$c" -d app -c "SELECT occ.reserve('items', 'qty', 21, -1)" >/dev/null
done
wait_for app "SELECT n_tup_del > 0 AND EXISTS (SELECT FROM pg_stat_activity WHERE backend_type = 'pg_occ fold' AND datname = 'app')
                FROM pg_stat_all_tables WHERE relid = 'occ.reservation_ledger'::regclass" ||
    fail "the fold's deletes did not reach the ledger's statistics while the worker ran"
echo "escrow_hostile: the ledger's statistics count the fold's deletes while it runs (autovacuum sees them)"
echo "escrow_hostile: all checks passed"
