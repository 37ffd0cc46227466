#!/bin/bash
# Source checks (test/run.sh runs them with the packaging checks):
#   - between SpinLockAcquire and SpinLockRelease, src/**/*.c reads and writes
#     shared memory only: no clock, no exp(), no error report, no
#     allocation, no other lock (PostgreSQL's rule for spinlocks, which are
#     held for a few instructions and not released by an error);
#   - compat.h defines pg_noreturn only where c.h has none (#ifndef), so a
#     minor release that backports it does not make a redefinition;
#   - the documentation says one hot-key admission in OCC_PROBE_ONE_IN is a
#     probe, as src/policy/policy.c counts it;
#   - no source file is longer than 700 lines (a longer one is several), and
#     each folder of src/ has a header named after it that says what the
#     folder owns.
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
    }' src/*.c src/*/*.c)
[ -z "$under" ] || fail "calls under a spinlock:
$under"
echo "source: nothing but shared memory under spinlocks"

awk '/^#ifndef pg_noreturn$/ { guarded = 1 }
     /^#define pg_noreturn / { exit !guarded }' src/compat.h ||
    fail "src/compat.h defines pg_noreturn without #ifndef pg_noreturn"
echo "source: pg_noreturn defined only where c.h has none"

probe=$(sed -n 's/^#define OCC_PROBE_ONE_IN \([0-9]*\).*/\1/p' src/policy/policy.c)
[ -n "$probe" ] || fail "no OCC_PROBE_ONE_IN in src/policy/policy.c"
docs=$(cat README.md docs/*.md | tr '\n' ' ' | grep -o 'except one in [0-9]*' | grep -o '[0-9]*$' | sort -u)
[ "$docs" = "$probe" ] ||
    fail "the documentation says one hot-key admission in ${docs:-(nothing)} runs optimistically, src/policy/policy.c $probe"
echo "source: the documentation gives policy.c's probe rate, one in $probe"

long=$(wc -l src/*.[ch] src/*/*.[ch] | awk '$2 != "total" && $1 > 700 { print $2 " (" $1 " lines)" }')
[ -z "$long" ] || fail "source files over 700 lines: $long"
for dir in src/*/; do
    name=$(basename "$dir")
    [ -f "$dir$name.h" ] || fail "$dir has no header $dir$name.h"
    grep -q "^ \* $name.h\$" "$dir$name.h" || fail "$dir$name.h does not open with its header comment"
done
echo "source: no file over 700 lines; each folder of src/ has its header"
