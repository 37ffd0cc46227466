#!/bin/bash
# Runs every pg_occ test on a fresh Debian 12 machine, as root:
#   installs the build and test packages, builds and installs pg_occ
#   (test/setup.sh), then in
#   a throwaway cluster that preloads pg_occ runs
#     - pg_regress (sql/, expected/) and the isolation specs (test/specs/),
#     - pgTAP (test/tap/) with pg_prove,
#     - the stress check (test/stress.sh) in backoff and in queue mode, and the
#       interrupt checks of a sleeping and of a queued call (test/interrupt*.sh),
#     - the benchmark's quick mode (test/bench/run.sh --quick), which checks
#       the pgbench scripts and the lost-update invariant, not speed;
#   and in a cluster that does not preload it, the not_preloaded test.
# Usage: test/run.sh [--no-install]
set -euo pipefail
cd "$(dirname "$0")/.."
export PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config

# in_cluster: everything that needs the preloading server (PG* set by pg_virtualenv)
in_cluster() {
    make installcheck
    psql -X -q -c "CREATE EXTENSION IF NOT EXISTS pg_occ" postgres
    pg_prove --ext .sql -d postgres test/tap/
    test/stress.sh
    CONTENTION=queue CLIENTS=96 test/stress.sh
    test/interrupt.sh
    test/interrupt_queue.sh
    test/bench/run.sh --quick --existing --out "$(mktemp -d)"
}

if [ "${1:-}" = "--in-cluster" ]; then
    in_cluster
    exit
fi

test/setup.sh "$@"

pg_virtualenv -v 15 -o shared_preload_libraries=pg_occ -o occ.stats_max=100 -o max_connections=200 \
    "$0" --in-cluster
pg_virtualenv -v 15 make installcheck REGRESS=not_preloaded ISOLATION=
echo "all pg_occ tests passed"
