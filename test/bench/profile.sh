#!/bin/bash
# profile.sh - where a batched call's time goes (issue 25, item 2): the hot
# counter in batch mode (test/pgbench/batch_occ.sql, an instant body, key
# 'hot:1', SERIALIZABLE), CLIENTS clients, commits not durable (fsync and
# synchronous_commit off, so that the CPU, not the disk, is measured),
# sampled by perf (Debian's linux-perf: perf record -a -g) for SECONDS after
# a warm-up of 4 s.  Prints the commits/s, the batch sizes, and the CPU time
# per commit of the whole machine, of the leaders' path (their attempts:
# their own body, the bodies of the calls they took, the commit, the
# outcomes told) and of the bodies they ran for others, then the
# followers' costs that profile.py names (the CALL's parsing, the wait, the
# settings' fingerprint, ...), each as a share of all samples.  Needs root
# (perf -a), pg_occ installed; runs pg_virtualenv.  No timing in a unit test:
# run it by hand, on a machine with nothing else running.
#
# Usage: test/bench/profile.sh [CLIENTS [SECONDS [OUT]]]   (default 64, 8, a temporary directory)
set -euo pipefail
CLIENTS=${1:-64}
DURATION=${2:-8}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)

if [ -z "${OCC_PROFILE_IN:-}" ]; then
    command -v perf >/dev/null || { echo "profile.sh: perf not found (apt-get install linux-perf)" >&2; exit 1; }
    OUT=${3:-$(mktemp -d)}
    mkdir -p "$OUT"
    OCC_PROFILE_IN=1 OCC_PROFILE_OUT=$OUT pg_virtualenv -t -o shared_preload_libraries=pg_occ \
        -o max_connections=$((CLIENTS + 20)) "$0" "$CLIENTS" "$DURATION" 2>/dev/null
    exit
fi

# inside the cluster
cd "$ROOT"
psql -X -q -c "CREATE EXTENSION IF NOT EXISTS pg_occ" \
    -c "CREATE TABLE hot (id int PRIMARY KEY, v bigint)" -c "INSERT INTO hot VALUES (1, 0)" >/dev/null
psql -X -q -c "ALTER SYSTEM SET fsync = off" -c "ALTER SYSTEM SET synchronous_commit = off" \
    -c "SELECT pg_reload_conf()" >/dev/null
until [ "$(psql -X -At -c "SHOW fsync")" = off ]; do sleep 0.1; done
bench() {
    pgbench -n -c "$CLIENTS" -j 4 -T "$1" -f test/pgbench/batch_occ.sql \
        -D iso=serializable -D contention=batch -D work_ms=0 2>/dev/null | sed -n 's/^tps = \([0-9.]*\).*/\1/p'
}
bench 4 >/dev/null
psql -X -q -c "SELECT occ.stats_reset()" >/dev/null
data=$OCC_PROFILE_OUT/perf.data
tps=$(perf record -q -a -g -o "$data" -- bash -c "$(declare -f bench); CLIENTS=$CLIENTS bench $DURATION" 2>/dev/null)
sizes=$(psql -X -At -c "SELECT sum(batched) || ' of ' || sum(calls) || ' calls batched, mean batch size ' ||
                               round((sum(batched * mean_batch_size) / nullif(sum(batched), 0))::numeric, 1)
                          FROM occ.stats")
echo "batch mode, instant body, $CLIENTS clients, not durable: $tps commits/s; $sizes"
perf script -i "$data" -F comm,ip,sym 2>/dev/null | python3 "$HERE/profile.py" "$tps" "$DURATION" "$(nproc)"
