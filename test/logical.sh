#!/bin/bash
# Reservable columns and logical replication (test/run.sh runs it for each
# PostgreSQL version), in two clusters of our own that preload pg_occ: a
# publisher (wal_level = logical) where a table's column is reservable, and
# a subscriber.
#   - A publication of the table: the subscriber gets its folded values, the
#     fold's UPDATEs, and never a ledger row; its value is the publisher's.
#   - A publication FOR ALL TABLES takes the ledger too (with a warning): the
#     publisher's fold still deletes the rows it folds (the ledger's REPLICA
#     IDENTITY FULL; a table without one may not delete in such a
#     publication), and the subscriber's apply skips the ledger's rows (the
#     ledger's guard fires in replica mode) rather than bring another
#     server's reservations that its own fold would apply a second time; the
#     subscription keeps running, and the subscriber has every order and the
#     publisher's values (0.5.0 refused the rows, and the subscription
#     stopped: 0 orders applied).
#   - The subscriber's schema came from the publisher's (the column declared
#     reservable there too): its occ.reserved_value() follows the applied
#     values (the guard fires ALWAYS and counts the apply's changes; 0.5.0
#     kept the value it had loaded).
# Uses PG_CONFIG (default: pg_config on the PATH); pg_occ must be installed.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=test/cluster.sh
. test/cluster.sh

fail() { echo "logical: FAIL: $*" >&2; exit 1; }
base=$(mktemp -d)
chmod 711 "$base"
trap 'cluster_cleanup; rm -rf "$base"' EXIT
pub=$base/pub sub=$base/sub

cluster_init "$pub" "shared_preload_libraries = 'pg_occ'" "wal_level = logical"
cluster_init "$sub" "shared_preload_libraries = 'pg_occ'"
cluster_start "$pub"
cluster_start "$sub"

schema="CREATE EXTENSION pg_occ;
        CREATE TABLE stock (id int PRIMARY KEY, qty int NOT NULL CHECK (qty >= 0));
        CREATE TABLE orders (id int PRIMARY KEY, item int NOT NULL, n int NOT NULL);"
cluster_psql "$pub" -d postgres -c "CREATE DATABASE app"
cluster_psql "$pub" -d app <<SQL
$schema
INSERT INTO stock SELECT g, 1000 FROM generate_series(1, 3) g;
SELECT occ.make_reservable('stock', 'qty');
CREATE PUBLICATION stock_only FOR TABLE stock, orders;
SQL
# FOR ALL TABLES: a warning that the ledger is in it
cluster_psql "$pub" -d app -c "CREATE PUBLICATION everything FOR ALL TABLES" 2>"$base/warning"
grep -q "WARNING:  a publication FOR ALL TABLES takes occ.reservation_ledger" "$base/warning" ||
    fail "no warning for FOR ALL TABLES: $(cat "$base/warning")"

conninfo="host=$pub/sock port=5432 dbname=app user=postgres"
for db in tables alltables; do
    cluster_psql "$sub" -d postgres -c "CREATE DATABASE $db"
    cluster_psql "$sub" -d "$db" -c "$schema" -c "SELECT occ.make_reservable('stock', 'qty')" >/dev/null
done
cluster_psql "$sub" -d tables -c "CREATE SUBSCRIPTION stock_only CONNECTION '$conninfo' PUBLICATION stock_only"
cluster_psql "$sub" -d alltables -c "CREATE SUBSCRIPTION everything CONNECTION '$conninfo' PUBLICATION everything"

# wait_for DIR DB SQL: until SQL (a boolean) is true, 60 s at most
wait_for() {
    for _ in $(seq 1 600); do
        [ "$(cluster_psql "$1" -d "$2" -c "$3")" = t ] && return 0
        sleep 0.1
    done
    return 1
}
# both subscriptions ready: every table copied and caught up
for db in tables alltables; do
    wait_for "$sub" "$db" "SELECT count(*) > 0 AND bool_and(srsubstate = 'r') FROM pg_subscription_rel" ||
        fail "the subscription of $db is not ready"
done
for db in tables alltables; do
    wait_for "$sub" "$db" "SELECT sum(qty) = 3000 FROM stock" || fail "the initial copy did not arrive in $db"
    # the subscriber's entries, loaded before the changes arrive
    [ "$(cluster_psql "$sub" -d "$db" -c "SELECT sum(occ.reserved_value('stock', 'qty', id)) FROM stock")" = 3000 ] ||
        fail "the subscriber's reserved values before the changes"
done

# 90 reservations on the publisher, each with an order, in transactions of
# their own, while both subscriptions run
for i in $(seq 1 30); do
    for id in 1 2 3; do
        echo "BEGIN; SELECT occ.reserve('stock', 'qty', $id, -$id); INSERT INTO orders VALUES ($((i * 3 + id)), $id, $id); COMMIT;"
    done
done | cluster_psql "$pub" -d app >/dev/null
expected=$((3000 - 30 * 6))
wait_for "$pub" app "SELECT sum(qty) = $expected AND NOT EXISTS (SELECT FROM occ.reservation_ledger) FROM stock" ||
    fail "the publisher's fold did not fold (in a publication FOR ALL TABLES): $(grep 'pg_occ fold\|ERROR' "$(cluster_log "$pub")" | tail -3)"
echo "logical: the publisher folded its 90 reservations, in a publication FOR ALL TABLES too"

# each subscriber: the folded values, every order, no ledger row, its
# reserved values those of its rows, its subscription running
for db in tables alltables; do
    wait_for "$sub" "$db" "SELECT sum(qty) = $expected AND (SELECT count(*) = 90 FROM orders) FROM stock" ||
        fail "$db: the subscriber's values: $(cluster_psql "$sub" -d "$db" -c 'SELECT array_agg(qty ORDER BY id) FROM stock; SELECT count(*) FROM orders' | tr '\n' ' ')"
    [ "$(cluster_psql "$sub" -d "$db" -c "SELECT count(*) FROM occ.reservation_ledger")" = 0 ] ||
        fail "$db: ledger rows on the subscriber"
    [ "$(cluster_psql "$sub" -d "$db" -c "SELECT array_agg(qty ORDER BY id) FROM stock")" = \
      "$(cluster_psql "$pub" -d app -c "SELECT array_agg(qty ORDER BY id) FROM stock")" ] ||
        fail "$db: the subscriber's rows differ from the publisher's"
    [ "$(cluster_psql "$sub" -d "$db" -c "SELECT bool_and(occ.reserved_value('stock', 'qty', id) = qty) FROM stock")" = t ] ||
        fail "$db: the subscriber's reserved values are stale: $(cluster_psql "$sub" -d "$db" -c "SELECT array_agg(occ.reserved_value('stock', 'qty', id) ORDER BY id) FROM stock")"
    [ "$(cluster_psql "$sub" -d "$db" -c "SELECT count(*) FROM pg_stat_subscription s JOIN pg_subscription p ON p.oid = s.subid JOIN pg_database d ON d.oid = p.subdbid WHERE d.datname = current_database() AND s.pid IS NOT NULL AND s.relid IS NULL")" = 1 ] ||
        fail "$db: the subscription stopped: $(cluster_psql "$sub" -d "$db" -c "TABLE pg_stat_subscription" | tr "\n" " ") $(grep ERROR "$(cluster_log "$sub")" | tail -3)"
done
! grep -q "occ.reservation_ledger is not for logical replication" "$(cluster_log "$sub")" ||
    fail "the subscriber's apply refused the ledger's rows"
echo "logical: both subscribers (the table's publication, FOR ALL TABLES) have the publisher's folded values ($expected in all), the 90 orders, no ledger row, reserved values that follow the applied ones, and run on"
echo "logical: ok"
