# shellcheck shell=bash
#
# escrow.sh - the escrow mode of test/bench/run.sh (sourced by it): a
# reservable inventory counter (occ.reserve, issue 28) side by side with the
# row lock, queue mode and batch mode, each commit durable (fsync and
# synchronous_commit on) or not (both off), set per run as batch.sh does.
#
# The workload (test/pgbench/escrow_*.sql): one product sold one item per
# transaction, which also inserts an order line and does work_ms (1 and 10)
# of other work (pg_sleep), ESCROW_CLIENTS (64) clients, --duration seconds.
# Forms:
#   lock         READ COMMITTED: UPDATE stock_lock first, then the order line
#                and the work (the row lock held through both)
#   queue        occ.retry, queue mode, key 'stock:1' (the same body)
#   batch        occ.retry, batch mode, the same key
#   reserve      READ COMMITTED: occ.reserve(stock, qty, 1, -1), the order
#                line, the work
#   reserve-ser  the same at SERIALIZABLE (serialization failures would
#                show as pgbench errors: there must be none)
#   update       READ COMMITTED: the lock's plain UPDATE stock SET qty =
#                qty - 1 WHERE id = 1 on the reservable table, which pg_occ
#                runs as the same reservation (issue 36), the order line,
#                the work
# (occ.retry forms at SERIALIZABLE, as in batch.sh).  Targets (issue 28):
# reserve >= 10 x lock's commits/s with 10 ms of work, >= 3 x with 1 ms;
# p99 within 2 x the work; (issue 36) update >= 0.95 x reserve's commits/s
# (the median of the ratios in the same round), durable and not, each
# work.  ESCROW_FORMS (--escrow-forms) picks the forms; the tables need
# lock, the UPDATE's target reserve.  After each run, the stock's value (column plus
# ledger, in one snapshot) must have fallen by exactly the order lines
# inserted, which must equal pgbench's commits; and never below zero (the
# sell-out run at the end: a small stock, every form, exactly the stock
# sold and the rest refused).

ESCROW_CLIENTS=64
ESCROW_ROUNDS=3
ESCROW_FORMS="lock queue batch reserve reserve-ser update"
ESCROW_WORK="1 10"

# escrow_runs_per_round: pgbench runs in one round of the escrow mode
escrow_runs_per_round() {
	echo $((2 * $(wc -w <<<"$ESCROW_WORK") * $(wc -w <<<"$ESCROW_FORMS")))
}

# set_escrow_form_args FORM: pgbench arguments of a form (after work_ms)
set_escrow_form_args() {
	case $1 in
		lock) FORM_ARGS+=(-f "$PGB/escrow_lock.sql") ;;
		queue | batch) FORM_ARGS+=(-f "$PGB/escrow_occ.sql" -D "iso=serializable" -D "contention=$1") ;;
		reserve) FORM_ARGS+=(-f "$PGB/escrow_reserve.sql" -D "iso=read committed") ;;
		reserve-ser) FORM_ARGS+=(-f "$PGB/escrow_reserve.sql" -D "iso=serializable") ;;
		update) FORM_ARGS+=(-f "$PGB/escrow_update.sql" -D "iso=read committed") ;;
	esac
}

# escrow_state: "order lines, units of stock left" (both tables, the
# reservable one as its column plus its ledger, in one snapshot)
escrow_state() {
	sql "SELECT (SELECT count(*) FROM orders),
	            (SELECT qty FROM stock_lock WHERE id = 1) + (SELECT qty FROM stock WHERE id = 1) +
	            (SELECT coalesce(sum(delta), 0) FROM occ.reservation_ledger WHERE rel = 'stock'::regclass)" | tr '|' ' '
}

# escrow_grew BEFORE AFTER COMMITS: nothing if COMMITS sales happened
# exactly, else what went wrong
escrow_grew() {
	local b a
	read -r -a b <<<"$1"
	read -r -a a <<<"$2"
	[ $((a[0] - b[0])) -eq "$3" ] || { echo "order lines grew by $((a[0] - b[0]))"; return; }
	[ $((b[1] - a[1])) -eq "$3" ] || echo "stock fell by $((b[1] - a[1]))"
}

# escrow_sellout: a stock of 500 units and ESCROW_CLIENTS clients of each
# form selling at once: exactly 500 sold, never below zero (a client stops
# at its first refused sale: 23514, or the lock's CHECK violation); the
# forms among ESCROW_FORMS that sell one unit a transaction
escrow_sellout() {
	local form state
	for form in $ESCROW_FORMS; do
		case $form in lock | reserve | reserve-ser | update) ;; *) continue ;; esac
		sql "TRUNCATE orders; SELECT occ.drop_reservable('stock', 'qty');
		     UPDATE stock SET qty = $([ "$form" = lock ] && echo 0 || echo 500) WHERE id = 1;
		     UPDATE stock_lock SET qty = $([ "$form" = lock ] && echo 500 || echo 0) WHERE id = 1;
		     SELECT occ.make_reservable('stock', 'qty')" >/dev/null
		FORM_ARGS=(-D work_ms=1)
		set_escrow_form_args "$form"
		pgbench -n -c "$ESCROW_CLIENTS" -j "$(nproc)" -T 5 "${FORM_ARGS[@]}" >"$OUT/runs/sellout-$form.out" 2>&1 || true
		state=$(escrow_state)
		[ "$state" = "500 0" ] || die "SELL-OUT BROKEN: $form: order lines and stock left $state, not 500 0"
		echo "$form" >>"$OUT/runs/sellout.csv"
		progress "sell-out $form: 500 sold of 500, none below zero"
	done
	sql "TRUNCATE orders; SELECT occ.drop_reservable('stock', 'qty');
	     UPDATE stock SET qty = 1000000000000; UPDATE stock_lock SET qty = 1000000000000;
	     SELECT occ.make_reservable('stock', 'qty')" >/dev/null
}

# escrow_mode: every round, durable and not, each work, each form in turn
escrow_mode() {
	local rep form durable work
	progress "escrow: the stock, its lock twin and the order lines"
	PGOPTIONS="-c client_min_messages=warning" psql -X -q -v ON_ERROR_STOP=1 -f "$PGB/escrow_setup.sql" >/dev/null
	rm -f "$OUT/runs/sellout.csv"
	for rep in $(seq "$ESCROW_ROUNDS"); do
		for durable in $(in_turn "$rep" on off); do
			batch_durability "$durable"
			for work in $ESCROW_WORK; do
				# shellcheck disable=SC2086 # a list of forms
				for form in $(in_turn "$rep" $ESCROW_FORMS); do
					run_one "escrow-w$work-$([ "$durable" = on ] && echo durable || echo fast)" "$form" "$ESCROW_CLIENTS" "$work" "$rep"
				done
			done
		done
	done
	batch_durability reset
	escrow_sellout
}

# escrow_update_table: the UPDATE form against occ.reserve (issue 36), for
# each durability and work: the medians, the median of the ratios of
# commits/s and p99 in the same round, and the target (>= 0.95 x)
escrow_update_table() {
	local d w
	grep -q ',update,' "$CSV" && grep -q ',reserve,' "$CSV" || return 0
	echo
	echo "#### The UPDATE form against occ.reserve (issue 36)"
	echo
	echo "x reserve: the median over rounds of the ratio to reserve in the same round. Target: update >= 0.95 x reserve's commits/s."
	echo
	echo "| durability | work ms | update commits/s | reserve commits/s | x reserve | update p99 ms | reserve p99 ms | p99 x reserve | give-ups | target |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
	for d in durable fast; do
		for w in $ESCROW_WORK; do
			join -j1 <(summarize "escrow-w$w-$d" "$w" commits_per_s p99_ms give_ups | awk '$1 == "update" || $1 == "reserve" { print $1, $3, $4, $5 }' | LC_ALL=C sort) \
				<(join -j1 <(paired_ratio "escrow-w$w-$d" "$w" reserve commits_per_s | awk '{ print $1, $3 }' | LC_ALL=C sort) \
					<(paired_ratio "escrow-w$w-$d" "$w" reserve p99_ms | awk '{ print $1, $3 }' | LC_ALL=C sort)) |
				awk -v d="$d" -v w="$w" '
				# form commits/s p99 give-ups x_commits x_p99
				{ c[$1] = $2; p[$1] = $3; g[$1] = $4; x[$1] = $5; xp[$1] = $6 }
				END { if (!("update" in c) || !("reserve" in c)) exit
				      printf "| %s | %s | %.0f | %.0f | %.3f | %.0f | %.0f | %.2f | %d | %s |\n", d, w, c["update"], c["reserve"],
				             x["update"], p["update"], p["reserve"], xp["update"], g["update"],
				             (x["update"] >= 0.95 ? "met (>= 0.95 x)" : "missed (< 0.95 x)") }'
		done
	done
}

# escrow_tables: the escrow mode's tables and targets
escrow_tables() {
	local w d
	echo
	echo "### Escrow: an inventory decrement with an order line and other work, $ESCROW_CLIENTS clients, median of $ESCROW_ROUNDS interleaved ${DURATION}s rounds"
	echo
	echo "Durable: fsync and synchronous_commit on; fast: both off. Targets (issue 28): reserve >= 10 x lock's commits/s with 10 ms of work, >= 3 x with 1 ms; p99 within 2 x the work; the bound never broken. (Issue 36) update, the plain UPDATE that pg_occ runs as a reservation: >= 0.95 x reserve's commits/s, durable and not."
	for d in durable fast; do
		for w in $ESCROW_WORK; do
			echo
			echo "#### $w ms of work, $d, against the lock"
			echo
			keys_table "escrow-w$w-$d" "$w" lock
		done
	done
	escrow_update_table
	if [ -f "$OUT/runs/sellout.csv" ]; then
		echo
		echo "Sell-out (500 units, $ESCROW_CLIENTS clients at once, 1 ms of work): exactly 500 sold, the stock at 0, never below, for $(xargs <"$OUT/runs/sellout.csv" | sed 's/ /, /g')."
	fi
}
