#!/bin/bash
# A dump restored by the database's owner, who is not a superuser (test/run.sh
# runs it for each PostgreSQL version), from one cluster of our own into a
# fresh one, both preloading pg_occ.  pg_occ is a trusted extension, so:
#   - the owner of a database creates pg_occ in it alone, and pg_dump of that
#     database (as its owner) gives a dump that the owner restores alone with
#     pg_restore --exit-on-error, as it is, into a new database of a fresh
#     cluster: the extension (owned by them, with its comment), a procedure
#     that calls occ.retry and a view over occ.stats all work;
#   - a reservation committed and not folded yet (a ledger row) is in the
#     dump and restored: the restored value counts it, and it is folded;
#     the owner may not add a ledger row for another role's table;
#   - the owner may call occ.gate and grant it to another role (the
#     extension's functions belong to the bootstrap superuser), and the
#     GRANT is restored with the dump;
#   - a GRANT on occ.stats_reset(), which only a superuser can give, is in
#     the dump and only a superuser can restore it; and where a superuser
#     created pg_occ before the restore (here in template1), the dump's
#     COMMENT ON EXTENSION is for them only, and so is the owner's GRANT
#     on occ.gate (the owner has no grant option on a superuser's
#     extension).  docs/operations.md's list (pg_restore -L) leaves them out, and a
#     superuser gives the GRANTs again;
#   - the ledger's rows are the database owner's to dump and restore
#     wherever pg_occ was created (pg_database_owner may read and insert
#     them: 0.5.0 left them to a superuser where a superuser had created
#     pg_occ, and the owner's pg_dump failed);
#   - restored after the tables (docs/operations.md's split restore), and after a
#     read of a row in between, a ledger row counts: it is taken as a
#     reservation (0.5.0 ignored it, and took a reservation past the
#     bound); one that the row's reservations since would take past its
#     bound is refused (23514), and the restore stops there.
# Uses PG_CONFIG (default: pg_config on the PATH); pg_occ must be installed.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=test/cluster.sh
. test/cluster.sh

fail() { echo "restore: FAIL: $*" >&2; exit 1; }
base=$(mktemp -d)
chmod 711 "$base"
holder=
trap '[ -z "$holder" ] || kill "$holder" 2>/dev/null || true; cluster_cleanup; rm -rf "$base"' EXIT
old=$base/old new=$base/new

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
-- the owner of the database may take a gate and let another role take it
-- (a trusted extension's objects belong to the bootstrap superuser)
BEGIN;
SELECT occ.gate('account:1');
SELECT occ.gate(ARRAY['account:1', 'account:2']);
COMMIT;
GRANT EXECUTE ON FUNCTION occ.gate(text) TO monitor;
-- a reservable column
CREATE TABLE stock (id int PRIMARY KEY, qty int NOT NULL CHECK (qty >= 0));
INSERT INTO stock VALUES (1, 10);
SELECT occ.make_reservable('stock', 'qty');
SQL
# whose ledger holds a reservation not folded yet (its row locked meanwhile,
# until the dumps are made; put there by hand, as the owner may)
cluster_psql "$old" -d app -c "BEGIN; SELECT qty FROM stock FOR UPDATE; SELECT pg_sleep(600)" >/dev/null 2>&1 &
holder=$!
for _ in $(seq 100); do
    [ "$(cluster_psql "$old" -d app -c "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'")" = 1 ] && break
    sleep 0.1
done
cluster_psql "$old" -U app_owner -d app -c "INSERT INTO occ.reservation_ledger VALUES ('stock', 'qty', '1', -3)"
# but not for a table that is not the owner's to change
cluster_psql "$old" -d app -c "CREATE TABLE other_stock (id int PRIMARY KEY, qty int NOT NULL)"
out=$(cluster_psql "$old" -U app_owner -d app -c "INSERT INTO occ.reservation_ledger VALUES ('other_stock', 'qty', '1', 5)" 2>&1) &&
    fail "the owner of the database added a ledger row for another role's table"
grep -q "permission denied" <<<"$out" || fail "a ledger row for another role's table: $out"
cluster_psql "$old" -d app -c "DROP TABLE other_stock"
cluster_psql "$old" -U monitor -d app -c "SELECT occ.gate('account:1')" >/dev/null ||
    fail "monitor cannot call occ.gate after the owner's GRANT"
[ "$(cluster_psql "$old" -U app_owner -d app -c "SELECT calls FROM transfer_calls")" = 1 ] ||
    fail "the old cluster does not count the transfer"
# as the owner: one dump as made, one after a superuser's GRANT
pg_dump_app() { "$CLUSTER_BINDIR/pg_dump" -h "$old/sock" -p 5432 -U app_owner -Fc -f "$1" app; }
pg_dump_app "$base/app.dump"
cluster_psql "$old" -d app -c "GRANT EXECUTE ON FUNCTION occ.stats_reset() TO monitor"
pg_dump_app "$base/granted.dump"
cluster_psql "$old" -d app -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE wait_event = 'PgSleep'" >/dev/null
wait "$holder" || true
holder=

# restore_ledger DB DUMP: the ledger's rows, which docs/operations.md's list leaves
# for after the rest (by the database's owner, wherever pg_occ was created)
restore_ledger() {
    "$CLUSTER_BINDIR/pg_restore" -l "$2" | grep ' TABLE DATA occ reservation_ledger' >"$base/ledger.list"
    "$CLUSTER_BINDIR/pg_restore" -h "$new/sock" -p 5432 -U app_owner -d "$1" --exit-on-error -L "$base/ledger.list" "$2"
}

# restore_as_owner DB DUMP [LIST]: pg_restore as app_owner into a new DB
restore_as_owner() {
    cluster_psql "$new" -d postgres -c "CREATE DATABASE $1 OWNER app_owner"
    "$CLUSTER_BINDIR/pg_restore" -h "$new/sock" -p 5432 -U app_owner -d "$1" \
        --exit-on-error ${3:+-L "$3"} "$2"
}

# check DB: the restored database works, for its owner, and so does pg_occ
# (the extension's owner: OWNER)
check() {
    local db=$1 owner=$2 got version
    got=$(cluster_psql "$new" -U app_owner -d "$db" -c "CALL transfer(5)" \
              -c "SELECT string_agg(balance::text, ',' ORDER BY id) FROM account")
    [ "$got" = "85,15" ] || fail "$db: balances after a transfer: $got"
    got=$(cluster_psql "$new" -U app_owner -d "$db" -c "SELECT calls FROM transfer_calls")
    [ "$got" -ge 1 ] || fail "$db: the view over occ.stats counts $got calls"
    version=$(cluster_psql "$new" -d "$db" -c "SELECT default_version FROM pg_available_extensions WHERE name = 'pg_occ'")
    got=$(cluster_psql "$new" -d "$db" -c "SELECT extowner::regrole, extversion, obj_description(oid, 'pg_extension') IS NOT NULL
                                             FROM pg_extension WHERE extname = 'pg_occ'")
    [ "$got" = "$owner|$version|t" ] || fail "$db: the extension (owner, version, has a comment): $got"
    check_stock "$db"
}
# check_stock DB: the restored ledger's reservation counts, and is folded
# (the load of the row starts the fold)
check_stock() {
    local got
    got=$(cluster_psql "$new" -U app_owner -d "$1" -c "SELECT occ.reserved_value('stock', 'qty', 1)")
    [ "$got" = 7 ] || fail "$1: the reserved value of the restored stock: $got, not 10 - 3"
    for _ in $(seq 100); do
        got=$(cluster_psql "$new" -U app_owner -d "$1" -c "SELECT qty FROM stock WHERE id = 1")
        [ "$got" = 7 ] && return
        sleep 0.1
    done
    fail "$1: the restored ledger row was not folded: qty $got"
}
# monitor_gates DB: monitor may take a gate there
monitor_gates() {
    cluster_psql "$new" -U monitor -d "$1" -c "SELECT occ.gate('account:1')" >/dev/null ||
        fail "$1: monitor cannot call occ.gate"
}

# docs/operations.md's list: the dump's, less the GRANTs on occ.stats_reset() and
# occ.gate, and the extension's comment
"$CLUSTER_BINDIR/pg_restore" -l "$base/granted.dump" |
    sed -e '/ ACL occ FUNCTION stats_reset()/s/^/;/' -e '/ ACL occ FUNCTION gate(/s/^/;/' \
        -e '/ COMMENT - EXTENSION pg_occ/s/^/;/' -e '/ TABLE DATA occ reservation_ledger/s/^/;/' >"$base/app.list"
[ "$(grep -c '^;.* \(ACL occ FUNCTION stats_reset()\|ACL occ FUNCTION gate(\|COMMENT - EXTENSION pg_occ\|TABLE DATA occ reservation_ledger\)' "$base/app.list")" = 4 ] ||
    fail "docs/operations.md's list does not leave out the GRANTs, the comment and the ledger: $(cat "$base/app.list")"

# a dump as made: the owner restores it alone, as it is
restore_as_owner app "$base/app.dump"
check app app_owner
monitor_gates app
echo "restore: the database's owner restored its dump alone, the GRANT on occ.gate included"

# a superuser's GRANT needs a superuser: with docs/operations.md's list, the owner
# restores the rest, and a superuser gives the GRANT again
out=$(restore_as_owner app_acl "$base/granted.dump" 2>&1) && fail "the owner restored a superuser's GRANT"
grep -q "permission denied for function stats_reset" <<<"$out" || fail "restoring the GRANT: $out"
restore_as_owner app_granted "$base/granted.dump" "$base/app.list"
# a read of the row between the two restores loads its entry...
[ "$(cluster_psql "$new" -U app_owner -d app_granted -c "SELECT occ.reserved_value('stock', 'qty', 1)")" = 10 ] ||
    fail "the restored stock before its ledger"
# ...which the ledger's rows then count (check_stock: 7)
restore_ledger app_granted "$base/granted.dump"
check app_granted app_owner
cluster_psql "$new" -d app_granted -c "GRANT EXECUTE ON FUNCTION occ.stats_reset(), occ.gate(text) TO monitor"
cluster_psql "$new" -U monitor -d app_granted -c "SELECT occ.stats_reset()" >/dev/null
monitor_gates app_granted
echo "restore: a superuser's GRANT on occ.stats_reset(): the owner left it out, a superuser gave it again"

# a database where a superuser created pg_occ first: the list leaves out
# the comment, which only the extension's owner may set, and the GRANT on
# occ.gate, which the owner cannot give there
cluster_psql "$new" -d template1 -c "CREATE EXTENSION pg_occ"
out=$(restore_as_owner app_pre "$base/app.dump" 2>&1) && fail "the owner commented on a superuser's extension"
grep -q "must be owner of extension pg_occ" <<<"$out" || fail "restoring the comment: $out"
restore_as_owner app_pre2 "$base/granted.dump" "$base/app.list"
restore_ledger app_pre2 "$base/granted.dump"
check app_pre2 postgres
echo "restore: into a database where a superuser created pg_occ, with docs/operations.md's list"
# there, the owner's pg_dump works, its ledger rows included
cluster_psql "$new" -U app_owner -d app_pre2 -c "INSERT INTO occ.reservation_ledger VALUES ('stock', 'qty', '1', -1)"
"$CLUSTER_BINDIR/pg_dump" -h "$new/sock" -p 5432 -U app_owner -Fc -f "$base/pre.dump" app_pre2 ||
    fail "the database's owner could not dump a database where a superuser created pg_occ"
echo "restore: the owner's pg_dump of a database where a superuser created pg_occ"

# a split restore whose rows moved in between: a ledger row that would take
# a row past its bound is refused, and the restore stops, nothing broken
restore_as_owner app_moved "$base/granted.dump" "$base/app.list"
cluster_psql "$new" -U app_owner -d app_moved -c "SELECT occ.reserve('stock', 'qty', 1, -8)" >/dev/null
out=$(restore_ledger app_moved "$base/granted.dump" 2>&1) && fail "a ledger row past the bound was restored"
grep -q 'violates check constraint "stock_qty_check"' <<<"$out" || fail "the ledger row past the bound: $out"
[ "$(cluster_psql "$new" -U app_owner -d app_moved -c "SELECT occ.reserved_value('stock', 'qty', 1)")" = 2 ] ||
    fail "the refused ledger row changed the stock"
echo "restore: a ledger row restored after the rows moved, past the bound: refused (23514), the bound holds"

echo "restore: ok"
