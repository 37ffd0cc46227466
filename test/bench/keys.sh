# shellcheck shell=bash
#
# keys.sh - the keys mode of test/bench/run.sh (sourced by it): queue mode
# on real transactions, where the contention key must be found, side by side
# with the forms users run today.
#
# Workloads, each with 64 clients (--keys-clients), --duration seconds:
#   tpcb     pgbench's tpcb-like transaction at scale 1, with its parameters
#            (aid, bid, tid, delta): every transaction updates the one
#            branch row.
#   zipf     a read-modify-write of four rows of 10,000 chosen with a
#            zipfian skew (pgbench random_zipfian, 1.01), 1 ms of work.
#   uniform  the hot-row body over 1,000 rows chosen uniformly (no hot
#            value): queue mode must do no harm.
#   hot      the headline's one hot row, 1 ms of work.
# Forms of tpcb and zipf:
#   *-lock        the same statements in a READ COMMITTED function, one
#                 round trip (zipf locks its rows in id order first)
#   *-occ         occ.retry, queue mode, no key: the keys are learned
#   *-occ-key     occ.retry, queue mode, the best key by hand: the branch
#                 (tpcb), the lowest of the four rows (zipf)
#   *-occ-backoff occ.retry, backoff mode
# uniform runs occ-backoff and occ-queue, hot pessimistic-1rt and occ-queue.
# Every round runs every form of every workload once, in alternate order;
# the tables give medians over --keys-rounds rounds and per-round ratios.
# After each run the workload's invariant must hold: tpcb's balances move
# together and its history has one row per commit, zipf's rows grew by four
# per commit, the hot table by one.

KEYS_CLIENTS=64
KEYS_ROUNDS=3
KEYS_TPCB_FORMS="tpcb-lock tpcb-occ tpcb-occ-key tpcb-occ-backoff"
KEYS_ZIPF_FORMS="zipf-lock zipf-occ zipf-occ-key zipf-occ-backoff"

# keys_runs_per_round: pgbench runs in one round of the keys mode
keys_runs_per_round() {
	echo $(($(wc -w <<<"$KEYS_TPCB_FORMS $KEYS_ZIPF_FORMS") + 4))
}

# set_keys_form_args FORM: pgbench arguments of a form of the keys mode
set_keys_form_args() {
	local form=$1 workload=${1%%-*} contention=queue keyprefix=NULL
	case $form in
		*-lock) FORM_ARGS+=(-f "$PGB/${workload}_lock.sql" -D scale=1); return ;;
		*-occ-backoff) contention=backoff ;;
		tpcb-occ-key) keyprefix="'branch:'" ;;
		tpcb-batch) keyprefix="'branch:'"; contention=batch ;;
		*-batch-learned) contention=batch ;;
		zipf-occ-key) keyprefix="'z:'" ;;
	esac
	FORM_ARGS+=(-f "$PGB/${workload}_occ.sql" -D scale=1 -D "iso=$ISO"
		-D "contention=$contention" -D "keyprefix=$keyprefix")
}

# workload_state MODE: what must grow with the commits of MODE's runs
workload_state() {
	case $1 in
		keys-tpcb | batch-tpcb-*) sql "SELECT (SELECT count(*) FROM pgbench_history), (SELECT coalesce(sum(delta), 0) FROM pgbench_history),
		                       (SELECT sum(abalance) FROM pgbench_accounts), (SELECT sum(tbalance) FROM pgbench_tellers),
		                       (SELECT sum(bbalance) FROM pgbench_branches)" | tr '|' ' ' ;;
		keys-zipf | batch-zipf-*) sql "SELECT sum(v) FROM zrows" ;;
		escrow-*) escrow_state ;;
		*) sql "SELECT sum(v) FROM hot" ;;
	esac
}

# workload_grew MODE BEFORE AFTER COMMITS: nothing if the state grew as
# COMMITS commits make it grow, else what went wrong
workload_grew() {
	local b a
	read -r -a b <<<"$2"
	read -r -a a <<<"$3"
	case $1 in
		keys-tpcb | batch-tpcb-*)
			local delta=$((a[1] - b[1]))
			[ $((a[0] - b[0])) -eq "$4" ] || { echo "history grew by $((a[0] - b[0])) rows"; return; }
			[ $((a[2] - b[2])) -eq "$delta" ] && [ $((a[3] - b[3])) -eq "$delta" ] && [ $((a[4] - b[4])) -eq "$delta" ] ||
				echo "balances moved by $((a[2] - b[2])), $((a[3] - b[3])), $((a[4] - b[4])), history by $delta" ;;
		keys-zipf | batch-zipf-*) [ $((a[0] - b[0])) -eq $((4 * $4)) ] || echo "rows grew by $((a[0] - b[0])), not 4 x $4" ;;
		escrow-*) escrow_grew "$2" "$3" "$4" ;;
		*) [ $((a[0] - b[0])) -eq "$4" ] || echo "rows grew by $((a[0] - b[0]))" ;;
	esac
}

# keys_learned WORKLOAD: what queue mode learned for the body of the form
# that ran last (occ.stats' learned_key, from 0.4.0), into learned.csv
keys_learned() {
	local learned
	learned=$(sql "SELECT string_agg(learned_key, '; ') FROM occ.stats" 2>/dev/null) || return 0
	echo "$1,${learned:-none}" >>"$OUT/runs/learned.csv"
}

# keys: every round, each workload's forms in turn
keys() {
	local rep form
	progress "keys: pgbench -i -s 1 and the tables of the workloads"
	PGOPTIONS="-c client_min_messages=warning" pgbench -i -s 1 -q >/dev/null 2>&1 || die "pgbench -i failed"
	PGOPTIONS="-c client_min_messages=warning" psql -X -q -v ON_ERROR_STOP=1 -f "$PGB/keys_setup.sql" >/dev/null
	rm -f "$OUT/runs/learned.csv"
	for rep in $(seq "$KEYS_ROUNDS"); do
		# shellcheck disable=SC2086 # lists of forms
		for form in $(in_turn "$rep" $KEYS_TPCB_FORMS); do
			run_one keys-tpcb "$form" "$KEYS_CLIENTS" 0 "$rep"
			[ "$form" = tpcb-occ ] && keys_learned tpcb
		done
		# shellcheck disable=SC2086
		for form in $(in_turn "$rep" $KEYS_ZIPF_FORMS); do
			run_one keys-zipf "$form" "$KEYS_CLIENTS" 1 "$rep"
			[ "$form" = zipf-occ ] && keys_learned zipf
		done
		for form in $(in_turn "$rep" occ-backoff occ-queue); do
			HOT_PCT=0 run_one keys-uniform "$form" "$KEYS_CLIENTS" 1 "$rep"
			[ "$form" = occ-queue ] && keys_learned uniform
		done
		for form in $(in_turn "$rep" pessimistic-1rt occ-queue); do
			HOT_PCT=100 run_one keys-hot "$form" "$KEYS_CLIENTS" 1 "$rep"
		done
	done
}

# keys_table MODE WORK REF: a workload's forms, medians, and the ratios of
# commits/s and p99 to REF's in the same round
keys_table() {
	local mode=$1 work=$2 ref=$3
	echo "| form | commits/s | x $ref | attempts/commit | p99 ms | p99 / $ref's | give-ups |"
	echo "|---|---:|---:|---:|---:|---:|---:|"
	join -j1 <(summarize "$mode" "$work" commits_per_s attempts_per_commit p99_ms give_ups | awk '{ print $1, $0 }' | LC_ALL=C sort) \
		<(paired_ratio "$mode" "$work" "$ref" commits_per_s | awk '{ print $1, $3 }' | LC_ALL=C sort) |
		join -j1 - <(paired_ratio "$mode" "$work" "$ref" p99_ms | awk '{ print $1, $3 }' | LC_ALL=C sort) |
		awk '{ printf "| %s | %.0f | %.3f | %.3f | %.0f | %.2f | %d |\n", $1, $4, $8, $5, $6, $9, $7 }'
}

# keys_tables: the keys mode's tables and targets
keys_tables() {
	local w
	echo
	echo "### Keys: real transactions, $KEYS_CLIENTS clients, median of $KEYS_ROUNDS interleaved ${DURATION}s rounds"
	echo
	echo "Targets (issue 16): the learned key (*-occ) at >= 0.9 x the commits/s, <= 1.2 attempts per commit and <= 1.3 x the p99 of the best key by hand (*-occ-key), and a p99 below the lock's (*-lock); uniform: occ-queue >= 0.9 x occ-backoff; hot: as in the headline."
	for w in tpcb zipf; do
		echo
		echo "#### $w, against the best key by hand"
		echo
		keys_table "keys-$w" "$([ $w = tpcb ] && echo 0 || echo 1)" "$w-occ-key"
		echo
		echo "#### $w, against the lock"
		echo
		keys_table "keys-$w" "$([ $w = tpcb ] && echo 0 || echo 1)" "$w-lock"
	done
	echo
	echo "#### uniform (1,000 rows), against backoff"
	echo
	keys_table keys-uniform 1 occ-backoff
	echo
	echo "#### hot row, against the lock"
	echo
	keys_table keys-hot 1 pessimistic-1rt
	if [ -f "$OUT/runs/learned.csv" ]; then
		echo
		echo "What queue mode learned (occ.stats learned_key after each run of the form without a key):"
		echo
		awk -F, '{ printf "- %s: %s\n", $1, $2 }' "$OUT/runs/learned.csv"
	fi
}
