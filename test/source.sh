#!/bin/bash
# Source checks (test/run.sh runs them with the packaging checks):
#   - between SpinLockAcquire and SpinLockRelease, src/*.c reads and writes
#     shared memory only: no clock, no exp(), no error report, no
#     allocation, no other lock (PostgreSQL's rule for spinlocks, which are
#     held for a few instructions and not released by an error);
#   - compat.h defines pg_noreturn only where c.h has none (#ifndef), so a
#     minor release that backports it does not make a redefinition;
#   - the README and docs/ say one hot-key admission in OCC_PROBE_ONE_IN is
#     a probe, as src/policy.c counts it.
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "source: FAIL: $*" >&2; exit 1; }

# calls under a spinlock: file:line: text
under=$(awk '
    FNR == 1 { held = 0 }
    /SpinLockAcquire\(/ { held = 1; next }
    /SpinLockRelease\(/ { held = 0; next }
    held && /(GetCurrentTimestamp|exp|ereport|elog|palloc|psprintf|LWLockAcquire|CHECK_FOR_INTERRUPTS)[[:space:]]*\(/ {
        print FILENAME ":" FNR ": " $0
    }' src/*.c)
[ -z "$under" ] || fail "calls under a spinlock:
$under"
echo "source: nothing but shared memory under spinlocks"

awk '/^#ifndef pg_noreturn$/ { guarded = 1 }
     /^#define pg_noreturn / { exit !guarded }' src/compat.h ||
    fail "src/compat.h defines pg_noreturn without #ifndef pg_noreturn"
echo "source: pg_noreturn defined only where c.h has none"

probe=$(sed -n 's/^#define OCC_PROBE_ONE_IN \([0-9]*\).*/\1/p' src/policy.c)
[ -n "$probe" ] || fail "no OCC_PROBE_ONE_IN in src/policy.c"
readme=$(cat README.md docs/*.md | tr '\n' ' ' | grep -o 'except one in [0-9]*' | grep -o '[0-9]*$' | sort -u)
[ "$readme" = "$probe" ] ||
    fail "README.md and docs/ say one hot-key admission in ${readme:-(nothing)} runs optimistically, src/policy.c $probe"
echo "source: the documentation gives policy.c's probe rate, one in $probe"
