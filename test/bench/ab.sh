#!/bin/bash
# A/B: the benchmark (test/bench/run.sh, this tree's) against two builds of
# pg_occ on one machine, installed in turn between interleaved rounds, so
# that a regression shows before a release: round r runs REF then this tree,
# or this tree then REF, alternately; each run is a whole run.sh in a
# throwaway cluster of its own (its tables in OUT/REF-r and OUT/head-r).
# At the end, OUT/ab.md: per workload, client count and form, the median
# over the rounds of each build's commits/s, p99 and p99 over the ideal FIFO
# wait (N clients / commits/s), and head's ratios to REF's.  Builds REF
# in a git worktree under OUT.  As root, on a machine where test/setup.sh
# has run.
#
# Usage: test/bench/ab.sh REF ROUNDS OUT [run.sh ARGS...]
#   e.g. test/bench/ab.sh 2584fbc 3 /tmp/ab --batch-only --batch-rounds 1 --duration 8
# At the end this tree's build is installed again.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 3 ] || { echo "usage: $0 REF ROUNDS OUT [run.sh ARGS...]" >&2; exit 2; }
ref=$1 rounds=$2 out=$3
shift 3
mkdir -p "$out"
here=$PWD
[ -d "$out/tree-$ref" ] || git worktree add -f --detach "$out/tree-$ref" "$ref" >/dev/null
install_build() { (cd "$1" && make -s install >/dev/null 2>&1) || { echo "ab: make install failed in $1" >&2; exit 1; }; }
trap 'install_build "$here"' EXIT

# summary: medians of commits/s and p99 per workload, form and build
summary() {
    /usr/bin/python3 - "$ref" "$out" <<'PY'
import csv, glob, os, statistics, sys
ref, out = sys.argv[1], sys.argv[2]
runs = {}
for f in glob.glob(os.path.join(out, "*-[0-9]*", "results.csv")):
    build = os.path.basename(os.path.dirname(f)).rsplit("-", 1)[0]
    for row in csv.DictReader(open(f)):
        if row["commits_per_s"]:
            x, p99, n = float(row["commits_per_s"]), float(row["p99_ms"]), int(row["clients"])
            runs.setdefault((row["mode"], n, row["form"]), {}).setdefault(build, []).append(
                (x, p99, p99 / (1000.0 * n / x) if x else 0))
print(f"| workload | clients | form | commits/s {ref} | commits/s head | x | p99 ms {ref} | p99 ms head | x "
      f"| p99 / N/X {ref} | p99 / N/X head |")
print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for (mode, n, form), by in sorted(runs.items()):
    a, b = by.get(ref, [(0, 0, 0)]), by.get("head", [(0, 0, 0)])
    ta, tb = statistics.median(x[0] for x in a), statistics.median(x[0] for x in b)
    pa, pb = statistics.median(x[1] for x in a), statistics.median(x[1] for x in b)
    ia, ib = statistics.median(x[2] for x in a), statistics.median(x[2] for x in b)
    print(f"| {mode} | {n} | {form} | {ta:.0f} | {tb:.0f} | {tb / ta if ta else 0:.3f} | {pa:.0f} | {pb:.0f} "
          f"| {pb / pa if pa else 0:.2f} | {ia:.2f} | {ib:.2f} |")
PY
}
for r in $(seq 1 "$rounds"); do
    order="$ref head"
    [ $((r % 2)) = 1 ] || order="head $ref"
    for v in $order; do
        if [ "$v" = head ]; then install_build "$here"; else install_build "$out/tree-$ref"; fi
        echo "ab: round $r, $v"
        test/bench/run.sh "$@" --out "$out/$v-$r" >"$out/$v-$r.log" 2>&1 ||
            { tail -5 "$out/$v-$r.log" >&2; echo "ab: run.sh failed ($v, round $r)" >&2; exit 1; }
    done
done
summary >"$out/ab.md"
cat "$out/ab.md"
