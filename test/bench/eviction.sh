#!/bin/bash
# eviction.sh - what statistics eviction costs a tracked body while new
# bodies keep arriving (issue 9, item 4).
#
# For occ.stats_max = 1000 and 20000 (each in its own throwaway cluster,
# since the setting sizes shared memory), 2 clients call one already tracked
# body (CALL occ.retry('SELECT 1')) while 2 other clients each call a new
# body every time (CALL occ.retry('SELECT <random number>')), which fills
# the table and then forces evictions; a baseline run has no new bodies.
# Prints the tracked body's calls/s and the evictions counted, as a markdown
# table.  Needs pg_occ installed; runs pg_virtualenv.
#
# Usage: test/bench/eviction.sh [SECONDS]   (default 10 per run)
set -euo pipefail
DURATION=${1:-10}
HERE=$(cd "$(dirname "$0")" && pwd)

if [ -z "${OCC_EVICTION_MAX:-}" ]; then
    echo "| occ.stats_max | new bodies | tracked body calls/s | evictions (dealloc) |"
    echo "|---:|---|---:|---:|"
    for max in 1000 20000; do
        OCC_EVICTION_MAX=$max pg_virtualenv -t -o shared_preload_libraries=pg_occ -o occ.stats_max=$max \
            -o max_connections=50 "$HERE/eviction.sh" "$DURATION" 2>/dev/null | grep '^|'
    done
    exit
fi

# inside a cluster: a baseline, then a run with a stream of new bodies
psql -X -q -c "CREATE EXTENSION IF NOT EXISTS pg_occ" >/dev/null
tracked=$(mktemp); fresh=$(mktemp)
trap 'rm -f "$tracked" "$fresh"' EXIT
echo "CALL occ.retry('SELECT 1');" >"$tracked"
printf '%s\n' "\\set n random(1, 1000000000)" "CALL occ.retry('SELECT :n');" >"$fresh"
for stream in no yes; do
    psql -X -q -c "SELECT occ.stats_reset()" >/dev/null
    if [ "$stream" = yes ]; then
        # fill the table first, so that the measured run evicts
        pgbench -n -c 2 -j 2 -t $((OCC_EVICTION_MAX / 2 + 100)) -f "$fresh" >/dev/null 2>&1
        pgbench -n -c 2 -j 1 -T "$DURATION" -f "$fresh" >/dev/null 2>&1 &
    fi
    tps=$(pgbench -n -c 2 -j 1 -T "$DURATION" -f "$tracked" 2>/dev/null | sed -n 's/^tps = \([0-9.]*\).*/\1/p')
    wait
    dealloc=$(psql -X -At -c "SELECT dealloc FROM occ.stats_info")
    printf '| %s | %s | %.0f | %s |\n' "$OCC_EVICTION_MAX" "$stream" "$tps" "$dealloc"
done
