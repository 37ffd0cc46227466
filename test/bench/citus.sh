#!/bin/bash
#
# citus.sh - hot keys on a Citus cluster (issue 38): the coordinator's row
# lock against occ.retry on the coordinator and against calls delegated to
# the worker that holds the key's row.
#
# A throwaway cluster (a coordinator and two workers on this machine, made
# by the Citus scripts beside the repository: ../shared/citus/cluster.sh,
# after build.sh), each node preloading citus and then pg_occ.  The table
# accounts (id int PRIMARY KEY, v bigint) is distributed by id over 32
# shards; it has ROWS rows (100,000), of which rows 1 to KEYS are hot,
# chosen uniformly by each transaction, which reads its row, works 1 ms
# (pg_sleep) and adds 1 to it (at REPEATABLE READ
# an update of a row changed since the snapshot fails with 40001, as a write
# of the value read + 1 would; the value cannot travel in a setting, as in
# run.sh's body: Citus evaluates current_setting() on the worker).  The
# cold rows make shards of realistic size, read by index: with --rows 16 a
# shard holds 0-3 rows, read by sequential scan, which at SERIALIZABLE
# takes a predicate lock of the whole shard, so that batches of two keys in
# one shard fail each other (1.4 attempts per commit in batch mode).
# Forms, each through the coordinator:
#   lock        READ COMMITTED, SELECT ... FOR UPDATE, in one round trip
#               (test/pgbench/pessimistic_1rt.sql's shape)
#   coord       CALL occ.retry(...) on the coordinator, REPEATABLE READ,
#               queue mode, key 'a:' || id: the gate is the coordinator's
#   coord-rc    the same at READ COMMITTED (v = v + 1 waits for the row
#               instead of failing: no retries, the gate never needed)
#   delegated   CALL bump(id): a procedure distributed by its argument
#               (create_distributed_function, colocated with accounts), so
#               Citus runs the CALL on the worker that holds the row, where
#               the body's occ.retry queues on that worker's gate
#   delegated-batch  the same procedure in batch mode (bump_batch), at
#               SERIALIZABLE (batch mode runs calls at REPEATABLE READ
#               alone); the body's statements all run on that worker
#   delegated-batch-rc  the same at READ COMMITTED (bump_batch_rc): the
#               UPDATE's v = v + 1 waits for the row instead of failing
# Each run lasts WARMUP + DURATION seconds; its commits/s and p99 are those
# of the transactions that ended in the last DURATION seconds, once every
# client's backend on the coordinator and on the workers is warm (at 64
# clients the first transactions wait seconds for new backends to connect
# to the workers and read Citus's metadata: about 8 s on 2 cores, for every
# form); the whole run's are reported beside them.
# Rounds run the forms in turn (reversed every other round); the report
# gives medians of commits/s, attempts per commit (from the occ.stats of
# the node that ran the calls), p99, and the ratio to lock in the same
# round.  After every run the rows must have grown by exactly the commits
# pgbench counted: if not, the script stops with exit status 1.
#
# Usage (as root, pg_occ and Citus installed):
#   test/bench/citus.sh [--clients 64] [--keys 16] [--rows 100000] [--duration 10] [--warmup 10]
#                       [--rounds 3] [--forms "lock coord delegated"]
#                       [--out DIR] [--port 5811] [--set NAME=VALUE]...
# (--set: a setting of every node, reloaded: one a reload can change)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CITUS=${PG_OCC_CITUS:-$(cd "$HERE/../.." && pwd)/../shared/citus}
CLIENTS=64
KEYS=16
ROWS=100000
DURATION=10
WARMUP=10
ROUNDS=3
FORMS="lock coord coord-rc delegated delegated-batch delegated-batch-rc"
OUT=/tmp/pg_occ-citus-bench
PORT=5811
SETTINGS=()
while [ $# -gt 0 ]; do
	case $1 in
		--clients) CLIENTS=$2; shift 2 ;;
		--keys) KEYS=$2; shift 2 ;;
		--rows) ROWS=$2; shift 2 ;;
		--duration) DURATION=$2; shift 2 ;;
		--warmup) WARMUP=$2; shift 2 ;;
		--rounds) ROUNDS=$2; shift 2 ;;
		--forms) FORMS=$2; shift 2 ;;
		--out) OUT=$2; shift 2 ;;
		--port) PORT=$2; shift 2 ;;
		--set) SETTINGS+=("$2"); shift 2 ;;
		*) echo "usage: $0 [--clients N] [--keys N] [--rows N] [--duration S] [--warmup S] [--rounds R] [--forms F] [--out DIR] [--port P] [--set NAME=VALUE]" >&2; exit 2 ;;
	esac
done
[ "$ROWS" -ge "$KEYS" ] || { echo "citus.sh: --rows must be at least --keys" >&2; exit 2; }
[ -x "$CITUS/cluster.sh" ] || { echo "citus.sh: no Citus scripts in $CITUS (set PG_OCC_CITUS)" >&2; exit 2; }

mkdir -p "$OUT"
DIR=$(mktemp -d /tmp/pg_occ-citus-bench.XXXXXX)
chmod 755 "$DIR"
trap 'bash "$CITUS/cluster.sh" stop "$DIR/data" "$PORT"; rm -rf "$DIR"' EXIT
bash "$CITUS/build.sh" >/dev/null
bash "$CITUS/cluster.sh" start "$DIR/data" "$PORT" >/dev/null
W1=$((PORT + 1)) W2=$((PORT + 2))

q() { psql -X -q -At -h 127.0.0.1 -U postgres -p "$1" -v ON_ERROR_STOP=1 -c "$2"; }
for s in "${SETTINGS[@]}"; do
	for p in "$PORT" "$W1" "$W2"; do
		q "$p" "ALTER SYSTEM SET ${s%%=*} = '${s#*=}'" && q "$p" "SELECT pg_reload_conf()" >/dev/null
	done
done

# Citus propagates CREATE EXTENSION to the workers (and refuses it there)
q "$PORT" "CREATE EXTENSION IF NOT EXISTS pg_occ"
q "$PORT" "SET citus.shard_count = 32;
	CREATE TABLE accounts (id int PRIMARY KEY, v bigint NOT NULL);
	SELECT create_distributed_table('accounts', 'id');
	INSERT INTO accounts SELECT i, 0 FROM generate_series(1, $ROWS) AS i;
	ANALYZE accounts" >/dev/null
# batch mode batches at SERIALIZABLE (its default) and READ COMMITTED, not
# at REPEATABLE READ
for proc in bump bump_batch bump_batch_rc; do
	case $proc in
		bump) mode=queue level='repeatable read' ;;
		bump_batch) mode=batch level=serializable ;;
		bump_batch_rc) mode=batch level='read committed' ;;
	esac
	q "$PORT" "CREATE PROCEDURE $proc(k int) LANGUAGE plpgsql AS \$p\$
	BEGIN
		CALL occ.retry(\$b\$
			SELECT v FROM accounts WHERE id = \$1;
			SELECT pg_sleep(0.001);
			UPDATE accounts SET v = v + 1 WHERE id = \$1
		\$b\$, params => row(k), isolation => '$level', contention => '$mode', key => 'a:' || k);
	END \$p\$;
	SELECT create_distributed_function('$proc(int)', '\$1', colocate_with := 'accounts')" >/dev/null
done

cat >"$DIR/lock.sql" <<'EOF'
\set id random(1, :keys)
BEGIN ISOLATION LEVEL READ COMMITTED \; SELECT v FROM accounts WHERE id = :id FOR UPDATE \; SELECT pg_sleep(0.001) \; UPDATE accounts SET v = v + 1 WHERE id = :id \; COMMIT;
EOF
for level in 'repeatable read' 'read committed'; do
	f=coord; [ "$level" = 'read committed' ] && f=coord-rc
	cat >"$DIR/$f.sql" <<EOF
\\set id random(1, :keys)
CALL occ.retry(\$b\$
    SELECT v FROM accounts WHERE id = \$1;
    SELECT pg_sleep(0.001);
    UPDATE accounts SET v = v + 1 WHERE id = \$1
\$b\$, params => row(:id), isolation => '$level', contention => 'queue', key => 'a:' || :id);
EOF
done
printf '\\set id random(1, :keys)\nCALL bump(:id);\n' >"$DIR/delegated.sql"
printf '\\set id random(1, :keys)\nCALL bump_batch(:id);\n' >"$DIR/delegated-batch.sql"
printf '\\set id random(1, :keys)\nCALL bump_batch_rc(:id);\n' >"$DIR/delegated-batch-rc.sql"

total() { q "$PORT" "SELECT sum(v) FROM accounts"; }
# stats_sum COLUMN: the sum of an occ.stats column over the three nodes
stats_sum() {
	local p s=0
	for p in "$PORT" "$W1" "$W2"; do
		s=$((s + $(q "$p" "SELECT coalesce(sum($1), 0) FROM occ.stats")))
	done
	echo "$s"
}
reset_stats() { local p; for p in "$PORT" "$W1" "$W2"; do q "$p" "SELECT occ.stats_reset()" >/dev/null; done; }

CSV=$OUT/results.csv
echo "form,round,commits,commits_per_s,attempts_per_commit,batched_share,p99_ms,run_commits_per_s,run_p99_ms" >"$CSV"
# window: commits/s and p99 (ms) of the logged transactions (pgbench -l:
# latency in us, end in s and us) that ended in the last DURATION s of the
# run, from the first one's start; with ALL, of the whole run
window() {
	cat "$DIR"/log.* | python3 -c '
import sys
warmup, duration = float(sys.argv[1]), float(sys.argv[2])
tx = [(int(f[4]) + int(f[5]) / 1e6, int(f[2]) / 1e3) for f in (l.split() for l in sys.stdin)]
t0 = min(end - lat / 1e3 for end, lat in tx)
if warmup >= 0:
    tx = [(end, lat) for end, lat in tx if t0 + warmup <= end < t0 + warmup + duration]
lats = sorted(lat for _, lat in tx)
span = duration if warmup >= 0 else max(end for end, _ in tx) - t0
print(f"{len(tx) / span:.1f} {lats[max(0, -(-len(lats) * 99 // 100) - 1)]:.1f}")' "$@"
}
for r in $(seq "$ROUNDS"); do
	forms=$FORMS
	[ $((r % 2)) = 1 ] || forms=$(printf '%s\n' $FORMS | tac | xargs)
	for f in $forms; do
		reset_stats
		before=$(total)
		rm -f "$DIR"/log.*
		pgbench -n -h 127.0.0.1 -p "$PORT" -U postgres -c "$CLIENTS" -j 2 -T "$((WARMUP + DURATION))" -D "keys=$KEYS" \
			-l --log-prefix="$DIR/log" -f "$DIR/$f.sql" postgres >"$DIR/out" 2>&1 ||
			{ head -20 "$DIR/out" >&2; exit 1; }
		commits=$(awk '/number of transactions actually processed:/ { print $NF }' "$DIR/out")
		commits=${commits%%/*}
		grew=$(($(total) - before))
		[ "$grew" = "$commits" ] || { echo "citus.sh: LOST OR DOUBLED: $f round $r: rows grew by $grew, pgbench committed $commits" >&2; exit 1; }
		att="" batched=""
		if [ "$f" != lock ]; then
			att=$(awk -v a="$(stats_sum attempts)" -v c="$commits" 'BEGIN { printf "%.3f", a / c }')
			batched=$(awk -v b="$(stats_sum batched)" -v c="$commits" 'BEGIN { printf "%.3f", b / c }')
		fi
		read -r tps p99 < <(window "$WARMUP" "$DURATION")
		read -r run_tps run_p99 < <(window -1 0)
		echo "$f,$r,$commits,$tps,$att,$batched,$p99,$run_tps,$run_p99" >>"$CSV"
		echo "[$(date +%T)] round $r $f: $tps/s, p99 ${p99} ms after ${WARMUP} s ($commits commits, $run_tps/s, p99 $run_p99 ms in the whole run), attempts/commit ${att:--}, batched ${batched:--}" >&2
	done
done

# the report: medians over rounds, and the median of the ratios to lock in the same round
python3 - "$CSV" "$CLIENTS" "$KEYS" "$DURATION" "$WARMUP" "$ROUNDS" "${SETTINGS[*]}" "$ROWS" <<'PY' | tee "$OUT/results.md"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
clients, keys, duration, warmup, rounds, settings, nrows = sys.argv[2:9]
med = statistics.median
print(f"### Hot keys on Citus: {keys} hot keys of {nrows} rows over 32 shards, {clients} clients, 1 ms of work, "
      f"median of {rounds} interleaved rounds of {warmup} s + {duration} s"
      + (f"; every node with {settings}" if settings else ""))
print()
print(f"| form | commits/s | x lock | p99 ms | whole run: commits/s | x lock | p99 ms | attempts/commit | batched |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
def ratio(rs, col):
    lock = {r["round"]: float(r[col]) for r in rows if r["form"] == "lock"}
    return med(float(r[col]) / lock[r["round"]] for r in rs if r["round"] in lock) if lock else 0
for form in dict.fromkeys(r["form"] for r in rows):
    rs = [r for r in rows if r["form"] == form]
    att = [float(r["attempts_per_commit"]) for r in rs if r["attempts_per_commit"]]
    batched = [float(r["batched_share"]) for r in rs if r["batched_share"]]
    print(f"| {form} | {med(float(r['commits_per_s']) for r in rs):.0f} | {ratio(rs, 'commits_per_s'):.3f} "
          f"| {med(float(r['p99_ms']) for r in rs):.0f} "
          f"| {med(float(r['run_commits_per_s']) for r in rs):.0f} | {ratio(rs, 'run_commits_per_s'):.3f} "
          f"| {med(float(r['run_p99_ms']) for r in rs):.0f} "
          f"| {med(att) if att else 1:.3f} | {med(batched) if batched else 0:.2f} |")
PY
