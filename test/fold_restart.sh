#!/bin/bash
# The fold after a restart (test/run.sh runs it for each PostgreSQL version),
# in a cluster of our own that preloads pg_occ: a reservation committed and
# not folded yet (another transaction keeps its row locked, so the fold gives
# up after its lock_timeout and tries again) is folded after
#   - a clean restart (pg_ctl restart -m fast), and
#   - a crash (a backend killed with SIGKILL: the postmaster restarts every
#     process, the launcher of the fold workers included),
# with no reservation made since: a plain SELECT shows the committed value
# again within seconds, and the ledger is empty.
# Uses PG_CONFIG (default: pg_config on the PATH); pg_occ must be installed.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=test/cluster.sh
. test/cluster.sh

fail() { echo "fold_restart: FAIL: $*" >&2; exit 1; }
base=$(mktemp -d)
chmod 711 "$base"
holder=
trap '[ -z "$holder" ] || kill "$holder" 2>/dev/null; cluster_cleanup; rm -rf "$base"' EXIT
c=$base/c

cluster_init "$c" "shared_preload_libraries = 'pg_occ'"
cluster_start "$c"
cluster_psql "$c" -d postgres -c "CREATE DATABASE app"
cluster_psql "$c" -d app <<'SQL'
CREATE EXTENSION pg_occ;
CREATE TABLE stock (id int PRIMARY KEY, qty int NOT NULL CHECK (qty >= 0));
INSERT INTO stock VALUES (1, 100);
SELECT occ.make_reservable('stock', 'qty');
SQL

# wait_for SQL: until SQL (a boolean) is true, 30 s at most
wait_for() {
    for _ in $(seq 1 300); do
        [ "$(cluster_psql "$c" -d app -c "$1" 2>/dev/null)" = t ] && return 0
        sleep 0.1
    done
    return 1
}

# unfolded QTY: reserve -10 while another session keeps the row locked, and
# check that the reservation stays unfolded (the plain SELECT still shows
# QTY); leaves the holder's psql running, its pid in $holder
unfolded() {
    local qty=$1
    cluster_psql "$c" -d app -c "BEGIN; SELECT qty FROM stock WHERE id = 1 FOR UPDATE; SELECT pg_sleep(600)" \
        >/dev/null 2>&1 &
    holder=$!
    wait_for "SELECT EXISTS (SELECT FROM pg_stat_activity WHERE query LIKE '%pg_sleep(600)' AND state = 'active')" ||
        fail "the row's holder did not start"
    cluster_psql "$c" -d app -c "SELECT occ.reserve('stock', 'qty', 1, -10)" >/dev/null
    sleep 1.5
    [ "$(cluster_psql "$c" -d app -c "SELECT qty FROM stock; SELECT count(*) FROM occ.reservation_ledger" | tr '\n' ' ')" = "$qty 1 " ] ||
        fail "the reservation was folded while the row was locked"
}

# folded QTY WHAT: the plain SELECT shows QTY and the ledger is empty
folded() {
    wait_for "SELECT qty = $1 AND NOT EXISTS (SELECT FROM occ.reservation_ledger) FROM stock" ||
        fail "after $2, not folded: $(cluster_psql "$c" -d app -c "SELECT qty FROM stock; TABLE occ.reservation_ledger" | tr '\n' ' ')"
    echo "fold_restart: after $2, the reservation committed before it is folded with no reservation since ($1)"
}

unfolded 100
cluster_stop "$c" fast
wait "$holder" || true
holder=
cluster_start "$c"
folded 90 "a clean restart"

restarts=$(cluster_restarts "$c")
unfolded 90
pid=$(cluster_psql "$c" -d app -c "SELECT pid FROM pg_stat_activity WHERE query LIKE '%pg_sleep(600)' AND state = 'active'")
kill -9 "$pid"
wait "$holder" || true
holder=
cluster_recovered "$c" "$restarts" || fail "the server did not restart after the crash"
folded 80 "a crash"
echo "fold_restart: ok"
