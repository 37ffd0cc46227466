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
# shards; KEYS rows are hot, chosen uniformly by each transaction, which
# reads its row, works 1 ms (pg_sleep) and adds 1 to it (at REPEATABLE READ
# an update of a row changed since the snapshot fails with 40001, as a write
# of the value read + 1 would; the value cannot travel in a setting, as in
# run.sh's body: Citus evaluates current_setting() on the worker).
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
# Rounds run the forms in turn (reversed every other round); the report
# gives medians of commits/s, attempts per commit (from the occ.stats of
# the node that ran the calls), p99, and the ratio to lock in the same
# round.  After every run the rows must have grown by exactly the commits
# pgbench counted: if not, the script stops with exit status 1.
#
# Usage (as root, pg_occ and Citus installed):
#   test/bench/citus.sh [--clients 64] [--keys 16] [--duration 10]
#                       [--rounds 3] [--forms "lock coord delegated"]
#                       [--out DIR] [--port 5811]
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CITUS=${PG_OCC_CITUS:-$(cd "$HERE/../.." && pwd)/../shared/citus}
CLIENTS=64
KEYS=16
DURATION=10
ROUNDS=3
FORMS="lock coord coord-rc delegated delegated-batch"
OUT=/tmp/pg_occ-citus-bench
PORT=5811
while [ $# -gt 0 ]; do
	case $1 in
		--clients) CLIENTS=$2; shift 2 ;;
		--keys) KEYS=$2; shift 2 ;;
		--duration) DURATION=$2; shift 2 ;;
		--rounds) ROUNDS=$2; shift 2 ;;
		--forms) FORMS=$2; shift 2 ;;
		--out) OUT=$2; shift 2 ;;
		--port) PORT=$2; shift 2 ;;
		*) echo "usage: $0 [--clients N] [--keys N] [--duration S] [--rounds R] [--forms F] [--out DIR] [--port P]" >&2; exit 2 ;;
	esac
done
[ -x "$CITUS/cluster.sh" ] || { echo "citus.sh: no Citus scripts in $CITUS (set PG_OCC_CITUS)" >&2; exit 2; }

mkdir -p "$OUT"
DIR=$(mktemp -d /tmp/pg_occ-citus-bench.XXXXXX)
chmod 755 "$DIR"
trap 'bash "$CITUS/cluster.sh" stop "$DIR/data" "$PORT"; rm -rf "$DIR"' EXIT
bash "$CITUS/build.sh" >/dev/null
bash "$CITUS/cluster.sh" start "$DIR/data" "$PORT" >/dev/null
W1=$((PORT + 1)) W2=$((PORT + 2))

q() { psql -X -q -At -h 127.0.0.1 -U postgres -p "$1" -v ON_ERROR_STOP=1 -c "$2"; }

# Citus propagates CREATE EXTENSION to the workers (and refuses it there)
q "$PORT" "CREATE EXTENSION IF NOT EXISTS pg_occ"
q "$PORT" "SET citus.shard_count = 32;
	CREATE TABLE accounts (id int PRIMARY KEY, v bigint NOT NULL);
	SELECT create_distributed_table('accounts', 'id');
	INSERT INTO accounts SELECT i, 0 FROM generate_series(1, $KEYS) AS i" >/dev/null
# batch mode batches at SERIALIZABLE (its default), not at REPEATABLE READ
for mode in queue batch; do
	name=bump level='repeatable read'
	[ "$mode" = batch ] && name=bump_batch level=serializable
	q "$PORT" "CREATE PROCEDURE $name(k int) LANGUAGE plpgsql AS \$p\$
	BEGIN
		CALL occ.retry(\$b\$
			SELECT v FROM accounts WHERE id = \$1;
			SELECT pg_sleep(0.001);
			UPDATE accounts SET v = v + 1 WHERE id = \$1
		\$b\$, params => row(k), isolation => '$level', contention => '$mode', key => 'a:' || k);
	END \$p\$;
	SELECT create_distributed_function('$name(int)', '\$1', colocate_with := 'accounts')" >/dev/null
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
echo "form,round,commits,commits_per_s,attempts_per_commit,batched_share,p99_ms" >"$CSV"
for r in $(seq "$ROUNDS"); do
	forms=$FORMS
	[ $((r % 2)) = 1 ] || forms=$(printf '%s\n' $FORMS | tac | xargs)
	for f in $forms; do
		reset_stats
		before=$(total)
		rm -f "$DIR"/log.*
		pgbench -n -h 127.0.0.1 -p "$PORT" -U postgres -c "$CLIENTS" -j 2 -T "$DURATION" -D "keys=$KEYS" \
			-l --log-prefix="$DIR/log" -f "$DIR/$f.sql" postgres >"$DIR/out" 2>&1 ||
			{ head -20 "$DIR/out" >&2; exit 1; }
		commits=$(awk '/number of transactions actually processed:/ { print $NF }' "$DIR/out")
		commits=${commits%%/*}
		tps=$(awk '/^tps = / { print $3 }' "$DIR/out")
		grew=$(($(total) - before))
		[ "$grew" = "$commits" ] || { echo "citus.sh: LOST OR DOUBLED: $f round $r: rows grew by $grew, pgbench committed $commits" >&2; exit 1; }
		att="" batched=""
		if [ "$f" != lock ]; then
			att=$(awk -v a="$(stats_sum attempts)" -v c="$commits" 'BEGIN { printf "%.3f", a / c }')
			batched=$(awk -v b="$(stats_sum batched)" -v c="$commits" 'BEGIN { printf "%.3f", b / c }')
		fi
		p99=$(cat "$DIR"/log.* | awk '{ print $3 }' | sort -n | awk '{ a[NR] = $1 } END { i = int(0.99 * NR); if (i < 0.99 * NR) i++; printf "%.1f", a[i] / 1000 }')
		echo "$f,$r,$commits,$tps,$att,$batched,$p99" >>"$CSV"
		echo "[$(date +%T)] round $r $f: $commits commits, $tps/s, attempts/commit ${att:--}, batched ${batched:--}, p99 ${p99} ms" >&2
	done
done

# the report: medians over rounds, and the median of the ratios to lock in the same round
python3 - "$CSV" "$CLIENTS" "$KEYS" "$DURATION" "$ROUNDS" <<'PY' | tee "$OUT/results.md"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
clients, keys, duration, rounds = sys.argv[2:6]
lock = {r["round"]: float(r["commits_per_s"]) for r in rows if r["form"] == "lock"}
print(f"### Hot keys on Citus: {keys} keys over 32 shards, {clients} clients, 1 ms of work, "
      f"median of {rounds} interleaved {duration}s rounds")
print()
print("| form | commits/s | x lock | attempts/commit | batched | p99 ms |")
print("|---|---:|---:|---:|---:|---:|")
for form in dict.fromkeys(r["form"] for r in rows):
    rs = [r for r in rows if r["form"] == form]
    x = statistics.median(float(r["commits_per_s"]) for r in rs)
    ratio = statistics.median(float(r["commits_per_s"]) / lock[r["round"]] for r in rs if r["round"] in lock) if lock else 0
    att = [float(r["attempts_per_commit"]) for r in rs if r["attempts_per_commit"]]
    batched = [float(r["batched_share"]) for r in rs if r["batched_share"]]
    p99 = statistics.median(float(r["p99_ms"]) for r in rs)
    print(f"| {form} | {x:.0f} | {ratio:.3f} | {statistics.median(att) if att else 1:.3f} "
          f"| {statistics.median(batched) if batched else 0:.2f} | {p99:.0f} |")
PY
