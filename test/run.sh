#!/bin/bash
# Runs every pg_occ test, as root on a Debian 12 machine: first, once, the
# documentation's link check (test/links.sh: its self-test, then every
# relative link and anchor of README.md, CHANGELOG.md, docs/ and
# test/bench/README.md; a broken one stops the run), then against each tested
# PostgreSQL version:
#   15  on the host (Debian 12 "bookworm"),
#   17  in a Debian 13 "trixie" root,
#   18  in a Debian "forky" root,
#   19  in a Debian "forky" root with experimental, which has its release
#       candidate (and no pgTAP for it: the root gets 18's, see make_root),
# (a version whose Debian release is the host's own runs on the host).  The
# roots are made with mmdebstrap (installed if missing) from Debian's archive,
# cached as tarballs in /var/cache/pg_occ-roots, unpacked afresh for each run
# and entered with chroot (/proc and /dev mounted, unmounted on exit); pg_occ
# is built there from a copy of this tree.  For each version it
#   installs the build and test packages, builds pg_occ (a compiler warning
#   is an error) and installs it (test/setup.sh), then in a throwaway cluster
#   that preloads pg_occ runs
#     - pg_regress (sql/, expected/) and the isolation specs (test/specs/),
#     - pgTAP (test/tap/) with pg_prove,
#     - the stress check (test/stress.sh) in backoff, queue and batch mode,
#       batch mode's checks with real sessions (test/batch.sh: outcomes,
#       cancels, a terminated leader, session state; test/batch_contract.sh:
#       each caller's records, isolation, failures, limits, leftovers and
#       what differs) and under a storm of
#       cancels, terminations and SIGKILLs (test/batch_storm.sh, with a
#       Jepsen-style list-append history at serializable and repeatable
#       read, test/listappend.py), the
#       interrupt checks of a sleeping and of a queued call, of one that
#       makes a large result, and of a transaction queued by SET LOCAL
#       occ.key (test/interrupt*.sh),
#       occ.retry on a hot standby of the cluster (test/standby.sh), and the
#       adversarial check (test/fuzz.sh: random and hostile arguments and
#       bodies; no XX000, no backend lost), and one tenant against another
#       (test/tenants.sh: the learner's slots, the temperature's),
#     - pg_occ from applications (test/apps.sh): psycopg, Django,
#       SQLAlchemy, node-postgres and pgjdbc (those two skipped in the
#       roots, which have no node and no java), PgBouncer in transaction
#       pooling, and prometheus-postgres-exporter with sql/pg_occ_prometheus.yaml,
#     - the benchmark's quick mode (test/bench/run.sh --quick), which checks
#       the pgbench scripts and the lost-update invariant, not speed,
#     - then the server's log: no crash that no test made (SIGSEGV, SIGABRT,
#       PANIC; the tests kill with SIGKILL only);
#   in a cluster that does not preload it, the not_preloaded test; in one
#   where another extension hooks the planner first (pg_stat_statements),
#   the UPDATE that reserves (escrow_update, test and spec); the
#   packaging checks (test/packaging.sh: META.json, out-of-tree build) and
#   the source checks (test/source.sh: nothing called under spinlocks,
#   compat.h, the docs against the code); and, in clusters of their own,
#   occ.stats over restarts (test/persist.sh), batch mode's leader
#   cancelled, terminated and killed with SIGKILL at each point of a batch
#   (test/batch_kill.sh), reservable columns (escrow) Jepsen style with a
#   hot standby (test/escrow.sh: clients at each isolation level, reserving
#   by occ.reserve and by the plain UPDATE, under cancels, terminations,
#   SIGKILLs and an immediate restart; exactly once,
#   no lost update, the bound never broken, no serialization failure, the
#   standby's values), reservable columns and logical replication
#   (test/logical.sh: a subscriber gets the folded values, never the
#   ledger), the fold after a clean restart and after a crash
#   (test/fold_restart.sh), reservable columns against hostile roles (test/
#   escrow_hostile.sh: a database owner's settings and objects never run as
#   the fold worker's superuser, shares of shared memory, a terminated fold
#   worker started again), a dump restored by the database's owner
#   (test/restore.sh), and, for 15 and 17, pg_occ on a Citus 13.2 cluster of
#   a coordinator and two workers (test/citus.sh, which builds Citus with
#   ../shared/citus/build.sh, cached, and skips where that is absent:
#   occ.retry in queue mode through the coordinator, on a hot row and in
#   transfers between workers, and in a procedure that Citus delegates to
#   the worker of its row; exact counts; occ.make_reservable refused on
#   Citus's tables; the wrong order in shared_preload_libraries).
# Every version runs even if one fails; the exit status is 1 if any failed.
#
# Usage: test/run.sh [--pg VERSION]... [--no-install]
#   --pg VERSION  test this version only (may be repeated); default: all
#   --no-install  install no packages on the host (roots are still made if
#                 missing; they need mmdebstrap)
# Environment: OCC_ROOTS  where the roots are cached (/var/cache/pg_occ-roots;
#                         delete it to make them again with newer packages)
#              OCC_MIRROR the Debian mirror (http://deb.debian.org/debian)
set -euo pipefail
cd "$(dirname "$0")/.."
SELF=$PWD/test/run.sh

VERSIONS="15 17 18 19"

# suite_of VERSION: the Debian release whose packages we test VERSION with;
# RELEASE+experimental: RELEASE, with VERSION's packages from experimental
suite_of() {
    case $1 in
        15) echo bookworm ;;
        17) echo trixie ;;
        18) echo forky ;;
        19) echo forky+experimental ;;
        *) return 1 ;;
    esac
}

die() { echo "test/run.sh: $*" >&2; exit 1; }

# show_diffs: what pg_regress and the isolation tester found, for the log
show_diffs() {
    for f in regression.diffs output_iso/regression.diffs; do
        [ ! -f "$f" ] || { echo "=== $f"; cat "$f"; }
    done >&2
}

# cluster_log_of_virtualenv: the log of pg_virtualenv's cluster (its own
# directory unless run as root)
cluster_log_of_virtualenv() {
    local own=${PGSYSCONFDIR%/postgresql-common}/log/postgresql-$PGVERSION-regress.log
    if [ -f "$own" ]; then echo "$own"; else echo "/var/log/postgresql/postgresql-$PGVERSION-regress.log"; fi
}

# in_cluster: everything that needs the preloading server (PG* set by
# pg_virtualenv); then the server's log must show no crash that no test
# made (the tests kill with SIGKILL only): a worker or backend that died of
# SIGSEGV or SIGABRT between two tests would go unseen otherwise
in_cluster() {
    local log from
    log=$(cluster_log_of_virtualenv)
    from=$(($(wc -l <"$log") + 1))
    in_cluster_tests
    ! tail -n +"$from" "$log" | grep -E "PANIC|TRAP|terminated by signal (6|11)" ||
        die "a crash in the server log $log (above)"
}

in_cluster_tests() {
    make installcheck || { show_diffs; exit 1; }
    psql -X -q -c "CREATE EXTENSION IF NOT EXISTS pg_occ" postgres
    pg_prove --ext .sql -d postgres test/tap/
    test/stress.sh
    CONTENTION=queue CLIENTS=96 test/stress.sh
    CONTENTION=batch CLIENTS=64 test/stress.sh
    test/batch.sh
    test/batch_contract.sh
    test/batch_storm.sh
    test/interrupt.sh
    test/interrupt_queue.sh
    test/interrupt_key.sh
    test/client_gone.sh
    test/interrupt_result.sh
    test/standby.sh
    test/fuzz.sh
    test/tenants.sh
    test/apps.sh
    test/bench/run.sh --quick --existing --out "$(mktemp -d)"
}

# test_here VERSION: every test against this machine's PostgreSQL VERSION
test_here() {
    local v=$1
    export PG_CONFIG=/usr/lib/postgresql/$v/bin/pg_config
    test/setup.sh --pg "$v" --werror ${no_install:+--no-install}
    # the log's lines with their SQLSTATE (%e): a failure's own code
    pg_virtualenv -v "$v" -o shared_preload_libraries=pg_occ -o max_connections=200 \
        -o "log_line_prefix=%m [%p] %e %q%u@%d " "$SELF" --in-cluster
    pg_virtualenv -v "$v" make installcheck REGRESS=not_preloaded ISOLATION= || { show_diffs; exit 1; }
    pg_virtualenv -v "$v" -o shared_preload_libraries=pg_stat_statements,pg_occ \
        make installcheck REGRESS=escrow_update ISOLATION=escrow_update || { show_diffs; exit 1; }
    test/packaging.sh
    test/persist.sh
    test/batch_kill.sh
    test/escrow.sh
    test/logical.sh
    test/fold_restart.sh
    test/escrow_hostile.sh
    test/restore.sh
    # Citus 13.2 builds for 15 and 17 (its scripts: ../shared/citus, which
    # test_in_root copies into the root)
    case $v in 15 | 17) test/citus.sh ;; esac
    test/source.sh
    echo "all pg_occ tests passed on PostgreSQL $v"
}

# make_root VERSION SUITE: print the path of a tarball of a Debian SUITE root
# with the packages test/setup.sh needs for VERSION, made if not cached
make_root() {
    local v=$1 suite=$2 dir=${OCC_ROOTS:-/var/cache/pg_occ-roots}
    local mirror=${OCC_MIRROR:-http://deb.debian.org/debian}
    local tarball=$dir/$suite.tar release=${suite%+experimental} packages opts sources stamp try
    packages=$(test/setup.sh --pg "$v" --print-packages)
    opts=(--variant=apt "--include=${packages// /,}")
    sources=("$mirror")
    # the mirror's Release file of testing can be past its Valid-Until date
    [ "$release" != forky ] || opts+=('--aptopt=Acquire::Check-Valid-Until "false"')
    if [ "$release" != "$suite" ]; then
        # VERSION's server, client and libpq from experimental, the rest
        # from RELEASE; and pgTAP, which experimental lacks for VERSION,
        # from RELEASE's package for 18: pgTAP is SQL only, and its build
        # makes the same files for every PostgreSQL from 11 on
        sources=("deb $mirror $release main" "deb $mirror experimental main")
        opts+=("--setup-hook=mkdir -p \"\$1/etc/apt/preferences.d\" && printf '%s\\n' 'Package: libpq5 libpq-dev postgresql-$v postgresql-client-$v postgresql-server-dev-$v' 'Pin: release a=experimental' 'Pin-Priority: 500' >\"\$1/etc/apt/preferences.d/postgresql-$v\""
               "--customize-hook=chroot \"\$1\" sh -ec 'cd /tmp && apt-get download -q postgresql-18-pgtap && dpkg-deb -x postgresql-18-pgtap_*.deb pgtap && cp pgtap/usr/share/postgresql/18/extension/pgtap* /usr/share/postgresql/$v/extension/ && rm -rf pgtap postgresql-18-pgtap_*.deb'")
    fi
    stamp="mmdebstrap ${opts[*]} $release ${sources[*]}"
    mkdir -p "$dir"
    exec 9>"$dir/.lock"
    flock 9 # one maker at a time
    if [ -f "$tarball" ] && [ "$(cat "$tarball.stamp" 2>/dev/null)" = "$stamp" ]; then
        echo "$tarball"
        return
    fi
    if ! command -v mmdebstrap >/dev/null; then
        [ -z "$no_install" ] || die "mmdebstrap is needed to make the $suite root"
        test/setup.sh --apt mmdebstrap >&2
    fi
    local start=$SECONDS
    echo "making the Debian $suite root for PostgreSQL $v: $tarball" >&2
    # a network error is tried again, twice
    for try in 1 2 3; do
        rm -f "$dir/.$suite.new.tar"
        ! mmdebstrap "${opts[@]}" "$release" "$dir/.$suite.new.tar" "${sources[@]}" >&2 || break
        [ "$try" -lt 3 ] || die "could not make the $suite root"
        echo "test/run.sh: mmdebstrap failed (try $try of 3), again in 20 s" >&2
        sleep 20
    done
    mv "$dir/.$suite.new.tar" "$tarball"
    echo "$stamp" >"$tarball.stamp"
    echo "made the $suite root in $((SECONDS - start)) s" >&2
    exec 9>&-
    echo "$tarball"
}

# leave_root: end what still runs in the root (only this run's processes can),
# unmount, and remove the root
leave_root() {
    [ -n "${root:-}" ] || return 0
    local p pids mounted
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        pids=$(for p in /proc/[0-9]*; do
                   [ "$(readlink "$p/root" 2>/dev/null)" != "$root" ] || echo "${p#/proc/}"
               done)
        [ -n "$pids" ] || break
        # shellcheck disable=SC2086
        kill -KILL $pids 2>/dev/null || true
        sleep 0.5
    done
    ! mountpoint -q "$root/dev" || umount -R "$root/dev" || umount -R -l "$root/dev" || true
    ! mountpoint -q "$root/proc" || umount "$root/proc" || umount -l "$root/proc" || true
    mounted=$(awk -v r="$root/" 'index($5, r) == 1 { print $5 }' /proc/self/mountinfo)
    if [ -z "$mounted" ]; then
        rm -rf --one-file-system "$root"
    else
        echo "test/run.sh: still mounted, $root not removed: $mounted" >&2
    fi
    root=
}

# test_in_root VERSION SUITE: every test against PostgreSQL VERSION in a
# fresh Debian SUITE root
test_in_root() {
    local v=$1 suite=$2 tarball start rc=0
    [ -z "${OCC_IN_ROOT:-}" ] || die "PostgreSQL $v needs Debian $suite, but this is a $OCC_IN_ROOT root"
    tarball=$(make_root "$v" "$suite")
    start=$SECONDS
    trap leave_root EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    root=$(realpath "$(mktemp -d /var/tmp/pg_occ-"$suite".XXXXXX)")
    tar -C "$root" -xf "$tarball"
    mount -t proc proc "$root/proc"
    # /dev with /dev/pts and /dev/shm; rslave: unmounting here does not
    # propagate back to the host's /dev
    mount --rbind /dev "$root/dev"
    mount --make-rslave "$root/dev"
    # a copy of the tree, without this machine's build products
    mkdir "$root/pg_occ"
    tar -C . --exclude=.git --exclude='*.o' --exclude='*.bc' --exclude='*.so' \
        --exclude=./results --exclude=./output_iso --exclude=./tmp_check --exclude=./log \
        --exclude=./test/results --exclude='./regression.*' -cf - . | tar -C "$root/pg_occ" -xf -
    # test/citus.sh's Citus scripts, beside the tree as here
    [ ! -d ../shared/citus ] || { mkdir -p "$root/shared" && cp -a ../shared/citus "$root/shared/"; }
    echo "Debian $suite root ready in $((SECONDS - start)) s: $root"
    # in the background, so that a signal reaches our traps at once
    chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        HOME=/root LANG=C.UTF-8 OCC_IN_ROOT="$suite" /pg_occ/test/run.sh --pg "$v" --no-install &
    wait $! || rc=$?
    leave_root
    return $rc
}

versions=()
no_install=
while [ $# -gt 0 ]; do
    case $1 in
        --in-cluster) in_cluster; exit ;;
        --pg) [ $# -ge 2 ] || die "--pg needs a version"; versions+=("$2"); shift 2 ;;
        --no-install) no_install=1; shift ;;
        *) echo "usage: $0 [--pg VERSION]... [--no-install]" >&2; exit 2 ;;
    esac
done
# shellcheck disable=SC2206
[ ${#versions[@]} -gt 0 ] || versions=($VERSIONS)
for v in "${versions[@]}"; do
    suite_of "$v" >/dev/null || die "PostgreSQL $v is not tested here; tested versions: $VERSIONS"
done

# the link check, once: not again in the runs of this script that follow
# (one per version, in a root or not)
if [ -z "${OCC_LINKS_CHECKED:-}" ] && [ -z "${OCC_IN_ROOT:-}" ]; then
    if ! command -v python3 >/dev/null; then
        [ -z "$no_install" ] || die "python3 is needed for test/links.sh"
        test/setup.sh --apt python3
    fi
    test/links.sh || die "broken links in the documentation (above)"
    export OCC_LINKS_CHECKED=1
fi

# several versions: one run of this script for each, then a summary
if [ ${#versions[@]} -gt 1 ]; then
    summary=() failed=0 tails=$(mktemp -d)
    for v in "${versions[@]}"; do
        start=$SECONDS
        echo "=== PostgreSQL $v (Debian $(suite_of "$v"))"
        # the output of a version that fails is shown again at the end,
        # where a log cut to its tail still has it
        if "$SELF" --pg "$v" ${no_install:+--no-install} 2>&1 | tee "$tails/$v"; then
            result=passed
        else
            result=FAILED
            failed=1
        fi
        summary+=("PostgreSQL $v (Debian $(suite_of "$v")): $result in $((SECONDS - start)) s")
        [ $result = FAILED ] || rm -f "$tails/$v"
    done
    for f in "$tails"/*; do
        [ -f "$f" ] || continue
        # the failure's own lines first: a server log printed after it
        # can push them out of the tail
        echo "=== what PostgreSQL ${f##*/}'s run, which failed, reported as failing"
        grep -E -n "FAIL|^not ok|ANOMALY|anomalies|^test/run\.sh:|^[+-][^+-]" "$f" | head -n 80 || true
        echo "=== the last 60 lines of PostgreSQL ${f##*/}'s run"
        tail -n 60 "$f"
    done
    rm -rf "$tails"
    printf '%s\n' "=== summary" "${summary[@]}"
    [ $failed = 0 ] || die "some versions failed"
    echo "all pg_occ tests passed on PostgreSQL ${versions[*]}"
    exit
fi

v=${versions[0]}
suite=$(suite_of "$v")
# shellcheck disable=SC1091
host_suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
if [ "$suite" = "$host_suite" ] || [ "$suite" = "${OCC_IN_ROOT:-}" ]; then
    test_here "$v"
else
    test_in_root "$v" "$suite"
fi
