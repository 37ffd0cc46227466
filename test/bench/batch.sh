# shellcheck shell=bash
#
# batch.sh - the batch mode of test/bench/run.sh (sourced by it): batch mode
# (contention => 'batch', issue 18) side by side with the row lock and with
# queue mode, each commit durable (fsync and synchronous_commit on) or not
# (both off), set for each run with ALTER SYSTEM and a reload, so that both
# run in one cluster, interleaved.
#
# Workloads, each with 64 clients (--batch-clients), --duration seconds:
#   instant  the hot counter, an instant body: UPDATE hot SET v = v + 1
#   work     the same with 1 ms of work after the UPDATE
#   tpcb     pgbench's tpcb-like transaction at scale 1
#   zipf     keys mode's four zipfian rows, 1 ms of work
# Forms:
#   lock     the counter as one autocommit UPDATE (its row lock);
#            tpcb-lock, zipf-lock: a READ COMMITTED function
#   queue    occ.retry, queue mode, key 'hot:1' (tpcb-occ-key: the branch;
#            tpcb-occ, zipf-occ: no key, the keys learned)
#   batch    occ.retry, batch mode, the same key (tpcb-batch; and without
#            a key, learned: tpcb-batch-learned, zipf-batch-learned)
# (the occ.retry forms at SERIALIZABLE: batch mode does not batch at
# REPEATABLE READ)
# Targets: durable instant batch >= 5 x lock's commits/s, not durable
# >= 1.5 x; tpcb-batch >= 1.5 x tpcb-lock; work: batch >= 0.97 x queue;
# batch's p99 at or below queue's everywhere.  After each run the
# workload's invariant must hold (as in the keys mode); the batch sizes
# seen (occ.stats' mean_batch_size) are reported.

BATCH_CLIENTS=64
BATCH_ROUNDS=3
# the forms of each workload; the environment may narrow them (an A/B of a
# few forms), an empty list skipping the workload
BATCH_FORMS=${BATCH_FORMS-"lock queue batch"}
BATCH_TPCB_FORMS=${BATCH_TPCB_FORMS-"tpcb-lock tpcb-occ tpcb-occ-key tpcb-batch tpcb-batch-learned"}
BATCH_ZIPF_FORMS=${BATCH_ZIPF_FORMS-"zipf-lock zipf-occ zipf-batch-learned"}

# batch_runs_per_round: pgbench runs in one round of the batch mode
batch_runs_per_round() {
	echo $((4 * $(wc -w <<<"$BATCH_FORMS") + 2 * $(wc -w <<<"$BATCH_TPCB_FORMS $BATCH_ZIPF_FORMS")))
}

# set_batch_form_args FORM WORK_MS: pgbench arguments of a counter form
set_batch_form_args() {
	case $1 in
		lock) FORM_ARGS+=(-f "$PGB/batch_lock.sql") ;;
		*) FORM_ARGS+=(-f "$PGB/batch_occ.sql" -D "iso=$ISO" -D "contention=$1") ;;
	esac
}

# batch_durability on|off|reset: commits wait for the disk, or not, from
# the next connection on (fsync needs a reload, synchronous_commit too as a
# default); reset gives the server its own settings back (--existing)
batch_durability() {
	local how=SET
	[ "$1" != reset ] || how=RESET
	sql "ALTER SYSTEM $how fsync$([ "$how" = SET ] && echo " = $1")" >/dev/null
	sql "ALTER SYSTEM $how synchronous_commit$([ "$how" = SET ] && echo " = $1")" >/dev/null
	sql "SELECT pg_reload_conf()" >/dev/null
	[ "$how" = SET ] || return 0
	# the reload reaches the new connections once the postmaster has read it
	until [ "$(sql "SHOW fsync")" = "$1" ]; do sleep 0.1; done
}

# batch_sizes RUN FORM: the batch sizes the form's last run (RUN, no comma
# in it) saw, into batch_sizes.csv: calls batched out of all, and their
# mean batch size
batch_sizes() {
	local sizes
	sizes=$(sql "SELECT coalesce(sum(batched), 0) || ',' || coalesce(sum(calls), 0) || ',' ||
	                    coalesce(round((sum(batched * mean_batch_size) / nullif(sum(batched), 0))::numeric, 1)::text, '-')
	               FROM occ.stats" 2>/dev/null) || return 0
	echo "$1,$2,$sizes" >>"$OUT/runs/batch_sizes.csv"
}

# batch_mode: every round, each workload's forms in turn
batch_mode() {
	local rep form durable work d
	# batch mode batches at SERIALIZABLE (and READ COMMITTED), not at
	# REPEATABLE READ: every occ.retry form of this mode, queue mode's too,
	# runs at SERIALIZABLE (run_one's forms read ISO)
	local ISO=serializable
	progress "batch: pgbench -i -s 1 and the tables of the workloads"
	PGOPTIONS="-c client_min_messages=warning" pgbench -i -s 1 -q >/dev/null 2>&1 || die "pgbench -i failed"
	PGOPTIONS="-c client_min_messages=warning" psql -X -q -v ON_ERROR_STOP=1 -f "$PGB/keys_setup.sql" >/dev/null
	rm -f "$OUT/runs/batch_sizes.csv"
	for rep in $(seq "$BATCH_ROUNDS"); do
		for durable in $(in_turn "$rep" on off); do
			batch_durability "$durable"
			for work in 0 1; do
				# shellcheck disable=SC2086 # a list of forms
				for form in $(in_turn "$rep" $BATCH_FORMS); do
					run_one "batch-w$work-$([ "$durable" = on ] && echo durable || echo fast)" "$form" "$BATCH_CLIENTS" "$work" "$rep"
					[ "$form" = batch ] && batch_sizes "$([ "$work" = 0 ] && echo instant || echo "1 ms") ($([ "$durable" = on ] && echo durable || echo fast))" "$form"
				done
			done
		done
		for durable in $(in_turn "$rep" on off); do
			batch_durability "$durable"
			d=$([ "$durable" = on ] && echo durable || echo fast)
			# shellcheck disable=SC2086
			for form in $(in_turn "$rep" $BATCH_TPCB_FORMS); do
				run_one "batch-tpcb-$d" "$form" "$BATCH_CLIENTS" 0 "$rep"
				case $form in *-batch*) batch_sizes "tpcb-like ($d) $form" "$form" ;; esac
			done
			# shellcheck disable=SC2086
			for form in $(in_turn "$rep" $BATCH_ZIPF_FORMS); do
				run_one "batch-zipf-$d" "$form" "$BATCH_CLIENTS" 1 "$rep"
				case $form in *-batch*) batch_sizes "zipf ($d) $form" "$form" ;; esac
			done
		done
	done
	batch_durability reset
}

# batch_table MODE WORK REF: a workload's forms, medians, and the ratios of
# commits/s and p99 to REF's in the same round
batch_table() {
	keys_table "$@"
}

# batch_tables: the batch mode's tables, targets and batch sizes
batch_tables() {
	local w d
	echo
	echo "### Batch mode: $BATCH_CLIENTS clients, median of $BATCH_ROUNDS interleaved ${DURATION}s rounds"
	echo
	echo "Durable: fsync and synchronous_commit on; fast: both off. Targets (issue 18): instant body, batch >= 5 x lock's commits/s durable and >= 1.5 x fast; tpcb-like: tpcb-batch >= 1.5 x tpcb-lock; 1 ms of work: batch >= 0.97 x queue; batch's p99 at or below queue's."
	for d in durable fast; do
		for w in 0 1; do
			echo
			echo "#### $([ $w = 0 ] && echo "instant body" || echo "1 ms of work"), $d, against the lock"
			echo
			batch_table "batch-w$w-$d" "$w" lock
			echo
			echo "Against queue mode:"
			echo
			batch_table "batch-w$w-$d" "$w" queue
		done
	done
	for d in durable fast; do
		echo
		echo "#### tpcb-like at scale 1, $d, against the READ COMMITTED function"
		echo
		batch_table "batch-tpcb-$d" 0 tpcb-lock
		echo
		echo "Against queue mode with the branch as key:"
		echo
		batch_table "batch-tpcb-$d" 0 tpcb-occ-key
		echo
		echo "Against queue mode without a key (learned), as batch mode without one (issue 25: at least its commits/s, p99 at most 1.2 x):"
		echo
		batch_table "batch-tpcb-$d" 0 tpcb-occ
		echo
		echo "#### zipf (four zipfian rows, 1 ms of work), $d, against the READ COMMITTED function"
		echo
		batch_table "batch-zipf-$d" 1 zipf-lock
		echo
		echo "Against queue mode without a key (learned):"
		echo
		batch_table "batch-zipf-$d" 1 zipf-occ
	done
	if [ -f "$OUT/runs/batch_sizes.csv" ]; then
		echo
		echo "Batch sizes seen (occ.stats after each batch run: calls that committed in a batch with others, of all calls, and the mean size of their batches):"
		echo
		awk -F, '{ printf "- %s round %d: %s of %s calls batched, mean batch size %s\n", $1, ++n[$1], $3, $4, $5 }' "$OUT/runs/batch_sizes.csv"
	fi
}
