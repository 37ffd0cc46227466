#!/bin/bash
# A dump restored by the database's owner, who is not a superuser (test/run.sh
# runs it for each PostgreSQL version), from one cluster of our own into a
# fresh one, both preloading pg_occ.  pg_occ is a trusted extension, so:
#   - the owner of a database creates pg_occ in it alone, and pg_dump of that
#     database (as its owner) gives a dump that the owner restores alone with
#     pg_restore --exit-on-error into a new database of a fresh cluster: the
#     extension (owned by them, with its comment), a function that calls
#     occ.retry and a view over occ.stats all work;
#   - a GRANT on occ.stats_reset(), which only a superuser can give, is in the
#     dump and only a superuser can restore it: the README's recipe leaves it
#     out (pg_restore -L) and has a superuser grant it again;
#   - where a superuser created pg_occ before the restore, the recipe also
#     leaves out the dump's COMMENT ON EXTENSION, which only the extension's
#     owner may run.
# Uses PG_CONFIG (default: pg_config on the PATH); pg_occ must be installed.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=test/cluster.sh
. test/cluster.sh

fail() { echo "restore: FAIL: $*" >&2; exit 1; }
base=$(mktemp -d)
chmod 711 "$base"
trap 'cluster_cleanup; rm -rf "$base"' EXIT
old=$base/old new=$base/new
dump=$base/app.dump

# the roles of both clusters: the owner of the database, and a monitoring
# role that a superuser lets reset the statistics
roles="CREATE ROLE app_owner LOGIN; CREATE ROLE monitor LOGIN"
for c in "$old" "$new"; do
    cluster_init "$c" "shared_preload_libraries = 'pg_occ'"
    cluster_start "$c"
    cluster_psql "$c" -d postgres -c "$roles"
done

# the old cluster: app_owner makes and uses the database, pg_occ included
cluster_psql "$old" -d postgres -c "CREATE DATABASE app OWNER app_owner"
cluster_psql "$old" -U app_owner -d app <<'SQL'
CREATE EXTENSION pg_occ;
CREATE TABLE account (id int PRIMARY KEY, balance int NOT NULL);
INSERT INTO account VALUES (1, 100), (2, 0);
CREATE PROCEDURE transfer(amount int) LANGUAGE plpgsql AS $$
BEGIN
  CALL occ.retry('UPDATE account SET balance = balance - $1 WHERE id = 1;
                  UPDATE account SET balance = balance + $1 WHERE id = 2', params => row(amount));
END $$;
CREATE VIEW transfer_calls AS
  SELECT coalesce(sum(calls), 0) AS calls FROM occ.stats WHERE query LIKE 'UPDATE account%';
CALL transfer(10);
SQL
cluster_psql "$old" -d app -c "GRANT EXECUTE ON FUNCTION occ.stats_reset() TO monitor"
[ "$(cluster_psql "$old" -U app_owner -d app -c "SELECT calls FROM transfer_calls")" = 1 ] ||
    fail "the old cluster does not count the transfer"
"$CLUSTER_BINDIR/pg_dump" -h "$old/sock" -p 5432 -U app_owner -Fc -f "$dump" app

# restore_as_owner DB [ENTRY...]: pg_restore as app_owner into DB, less the
# dump's entries named (as pg_restore -l names them)
restore_as_owner() {
    local db=$1 entry
    shift
    "$CLUSTER_BINDIR/pg_restore" -l "$dump" >"$base/list"
    for entry in "$@"; do
        # "ID; CATALOG OID TYPE SCHEMA NAME OWNER": comment out those whose
        # TYPE SCHEMA NAME OWNER are entry
        awk -v e="$entry" '{ l = $0; sub(/^[0-9]+; [0-9]+ [0-9]+ /, "", l); sub(/ +$/, "", l) }
                           l == e { $0 = ";" $0; n++ } { print } END { exit n ? 0 : 1 }' \
            "$base/list" >"$base/list.new" || fail "no entry '$entry' in the dump"
        mv "$base/list.new" "$base/list"
    done
    "$CLUSTER_BINDIR/pg_restore" -h "$new/sock" -p 5432 -U app_owner -d "$db" \
        --exit-on-error -L "$base/list" "$dump"
}

# check DB: the restored database works, for its owner
check() {
    local db=$1 got
    got=$(cluster_psql "$new" -U app_owner -d "$db" -c "CALL transfer(5)" \
              -c "SELECT string_agg(balance::text, ',' ORDER BY id) FROM account")
    [ "$got" = "85,15" ] || fail "$db: balances after a transfer: $got"
    got=$(cluster_psql "$new" -U app_owner -d "$db" -c "SELECT calls FROM transfer_calls")
    [ "$got" -ge 1 ] || fail "$db: the view over occ.stats counts $got calls"
}

# the whole dump, as its owner, but for the GRANT that a superuser gave
acl="ACL occ FUNCTION stats_reset() postgres"
cluster_psql "$new" -d postgres -c "CREATE DATABASE app OWNER app_owner"
restore_as_owner app "$acl"
check app
got=$(cluster_psql "$new" -d app -c "SELECT extowner::regrole, extversion, obj_description(oid, 'pg_extension') IS NOT NULL
                                       FROM pg_extension WHERE extname = 'pg_occ'")
[ "$got" = "app_owner|$(cluster_psql "$new" -d app -c "SELECT default_version FROM pg_available_extensions WHERE name = 'pg_occ'")|t" ] ||
    fail "the restored extension: $got"
cluster_psql "$new" -d app -c "GRANT EXECUTE ON FUNCTION occ.stats_reset() TO monitor"
cluster_psql "$new" -U monitor -d app -c "SELECT occ.stats_reset()" >/dev/null
echo "restore: the database's owner restored it alone; a superuser granted occ.stats_reset() again"

# that GRANT is what needs a superuser: the owner cannot restore it
cluster_psql "$new" -d postgres -c "CREATE DATABASE app_acl OWNER app_owner"
out=$(restore_as_owner app_acl 2>&1) && fail "the owner restored a superuser's GRANT"
grep -q "permission denied for function stats_reset" <<<"$out" || fail "restoring the GRANT: $out"
echo "restore: the GRANT on occ.stats_reset() needs a superuser, as the README says"

# a database where a superuser created pg_occ first: leave out the comment too
cluster_psql "$new" -d postgres -c "CREATE DATABASE app2 OWNER app_owner"
cluster_psql "$new" -d app2 -c "CREATE EXTENSION pg_occ"
restore_as_owner app2 "$acl" "COMMENT - EXTENSION pg_occ"
check app2
echo "restore: into a database where a superuser created pg_occ, without its comment"

echo "restore: ok"
