# storms.sh - the retry-storm modes of test/bench/run.sh (sourced by it, not
# run on its own; it uses run.sh's helpers and settings).
#
# storm   seed 001 ("Exponential Backoff or how not to crash a server"):
#         open-loop Poisson arrivals (pgbench --rate) below the hot row's
#         capacity; after STORM_PRE seconds a session holds LOCK TABLE hot IN
#         ACCESS EXCLUSIVE MODE for STORM_STALL seconds: a real stall (ALTER
#         TABLE, VACUUM FULL, REINDEX and CLUSTER take that lock), during
#         which the requests queue up as in a stopped server's backlog; when
#         it ends, every connection runs at once, and each form retries the
#         conflicts by its policy.  Per second: commits, attempts, and the
#         p50 / p99 latency of the requests that arrived in that second
#         (pgbench measures an open-loop request from its scheduled arrival,
#         so the schedule lag is included).  Recovery: the time from the end
#         of the stall until the per-second p99 stays within STORM_TOLERANCE
#         x its pre-stall level + STORM_SLACK_MS for STORM_HOLD consecutive
#         seconds; "never" if not in the run.  The same for the median.
#         With --lock-timeout I the bodies also give up their lock wait after
#         I and retry 55P03 by their policy during the stall, as the seed's
#         clients time out and retry while its server is stopped.  Not the
#         default, because pgbench (15) aborts a client on any error but
#         40001 and 40P01: a call that gives up with 55P03 (occ-budget's
#         retries refused during the stall do; so may a call at the run's
#         deadline) ends the run, and pgbench-retry cannot retry 55P03 at
#         all (it then waits for the lock, which is what an immediate retry
#         of a lock timeout amounts to).
# burst   seed 003 ("Exploring backoff"): N clients make one request each;
#         20% arrive at once at the start, the rest uniformly over a window;
#         latency percentiles per client and the requests sent (attempts),
#         per strategy.

# The forms of the two modes.  All but pgbench-retry run test/pgbench/
# occ_storm.sql (occ.retry with every backoff option a variable).
#
# storm:
#   pgbench-retry  occ_pgbench.sql retried at once by pgbench --max-tries
#                  (its transactions always wait for the lock, see above)
#   occ-fixed      a fixed retry interval: constant backoff, no jitter
#                  (factor 1) of STORM_FIXED.  Seed 001's simulation retries
#                  after a fixed 100 ms, one unloaded response time of its
#                  server (100 ms); one transaction on the hot row takes about
#                  1 ms (its work), hence 1 ms.
#   occ-seed001    seed 001's exponential backoff with normal jitter: the
#                  parameters of its simulation (client.go), MinDelay 100 ms,
#                  Factor 2.71828, Jitter 0.1, MaxDelay 5 min, as occ.retry's
#                  jitter 'normal': delay n = min(cap, base * factor^n) plus
#                  0.1 x that times a standard normal deviate, clamped to
#                  [0, cap] (the seed adds its noise to the running delay, so
#                  it compounds; the mean is the same).  Not rescaled: a
#                  100 ms first delay is about 40 hot-row transactions here.
#   occ-full       full jitter, base BASE, cap CAP, factor 2 (0.1.0's backoff)
#   occ-queue      queue mode
#   occ-budget     occ-fixed with the server-wide retry budget on (pg_occ
#                  0.3.0: occ.retry_budget, _ratio, _floor, set for the
#                  session): retries beyond the budget queue on the key's
#                  gate, so a storm becomes a queue; a call refused while it
#                  holds the gate gives up.  Skipped (with a note) if the
#                  server has no budget.  The ratio is 1 retry per commit,
#                  not the 0.2 of Finagle's RetryBudget: a fixed 1 ms
#                  interval makes about 1.1 retries per commit on the hot row
#                  at half its capacity, so with 0.2 the budget refuses in
#                  steady state and 5% of the calls give up before any stall.
# burst (seed 003's strategies; a "tick" is BURST_TICK, about the time one
# commit takes on the hot row, 1 / its commits per second, as the seed's
# service completes one request per tick):
#   occ-nb   no backoff: retry at once (jitter none, 1 us: base must be > 0)
#   occ-cb   constant backoff: 5 ticks (jitter none, factor 1)
#   occ-urb  uniformly random backoff: U(0, 5 ticks) (full jitter, factor 1)
#   occ-eb   exponential backoff: min(2^attempts, 30) ticks, the first retry
#            after 2 ticks (jitter none, base 2 ticks, factor 2, cap 30
#            ticks; the seed writes max(2^attempts, 30), a typo for the cap)
#   occ-reb  random exponential backoff: U(0, min(2^attempts, 30)) ticks
#            (full jitter, the same base, factor and cap)
#   occ-queue  queue mode
STORM_FORMS="pgbench-retry occ-fixed occ-seed001 occ-full occ-queue occ-budget"
BURST_FORMS="occ-nb occ-cb occ-urb occ-eb occ-reb occ-queue"

# storm_form_note FORM: one line on what a form does, for the tables
storm_form_note() {
	case $1 in
		pgbench-retry) echo "pgbench --max-tries: immediate retry (waits on the lock)" ;;
		occ-fixed) echo "fixed interval: constant $STORM_FIXED, no jitter" ;;
		occ-seed001) echo "seed 001: normal jitter, $SEED001_BASE x $SEED001_FACTOR^n, cap $SEED001_CAP" ;;
		occ-full) echo "full jitter, $BASE x 2^n, cap $CAP" ;;
		occ-queue) echo "queue mode" ;;
		occ-budget) echo "fixed interval $STORM_FIXED + retry budget $BUDGET (ratio $BUDGET_RATIO, floor $BUDGET_FLOOR/s)" ;;
		occ-nb) echo "NB, no backoff" ;;
		occ-cb) echo "CB, constant 5 ticks" ;;
		occ-urb) echo "URB, U(0, 5 ticks)" ;;
		occ-eb) echo "EB, min(2^n, 30) ticks" ;;
		occ-reb) echo "REB, U(0, min(2^n, 30)) ticks" ;;
	esac
}

# has_budget: does the server have the retry budget (pg_occ 0.3.0)?
has_budget() {
	[ "$(sql "SELECT count(*) FROM pg_settings WHERE name = 'occ.retry_budget'")" = 1 ]
}

# ticks N: N burst ticks as an interval in microseconds
ticks() {
	echo "$(($1 * BURST_TICK_US))us"
}

# set_open_form_args MODE FORM WORK_MS CLIENTS: pgbench arguments of a form
# of the storm or burst mode in FORM_ARGS (and FORM_PGOPTIONS)
set_open_form_args() {
	local mode=$1 form=$2 work=$3 clients=$4 jitter base cap factor contention=backoff
	if [ "$form" = pgbench-retry ]; then
		set_form_args "$form" "$work"
		return
	fi
	FORM_PGOPTIONS=""
	case $form in
		occ-fixed | occ-budget) jitter=none base=$STORM_FIXED cap=$STORM_FIXED factor=1 ;;
		occ-seed001) jitter=normal base=$SEED001_BASE cap=$SEED001_CAP factor=$SEED001_FACTOR ;;
		occ-full) jitter=full base=$BASE cap=$CAP factor=2 ;;
		occ-queue) jitter=full base=$BASE cap=$CAP factor=2 contention=queue ;;
		occ-nb) jitter=none base=1us cap=1us factor=1 ;;
		occ-cb) jitter=none base=$(ticks 5) cap=$(ticks 5) factor=1 ;;
		occ-urb) jitter=full base=$(ticks 5) cap=$(ticks 5) factor=1 ;;
		occ-eb) jitter=none base=$(ticks 2) cap=$(ticks 30) factor=2 ;;
		occ-reb) jitter=full base=$(ticks 2) cap=$(ticks 30) factor=2 ;;
		*) die "unknown $mode form '$form'" ;;
	esac
	[ "$form" = occ-budget ] && FORM_PGOPTIONS="-c occ.retry_budget=$BUDGET -c occ.retry_budget_ratio=$BUDGET_RATIO -c occ.retry_budget_floor=$BUDGET_FLOOR"
	FORM_ARGS=(-f "$PGB/occ_storm.sql" -D "work_ms=$work" -D "iso=$ISO" -D "max_attempts=$MAX_ATTEMPTS"
		-D "jitter=$jitter" -D "base=$base" -D "cap=$cap" -D "factor=$factor" -D "contention=$contention")
	if [ "$mode" = storm ]; then
		# every call gives up at the deadline, a few seconds after the run's
		# end, rather than sleep beyond it (pgbench waits for its calls)
		# (--lock-timeout 0: the bodies wait for the lock, nothing retries 55P03)
		FORM_ARGS+=(-D "lock_timeout=$STORM_LOCK_TIMEOUT" -D phase=1
			-D "retry_on={40001,40P01$([ "$STORM_LOCK_TIMEOUT" = 0 ] || echo ,55P03)}"
			-D nspike=0 -D window_us=0 -D "deadline=$(($(date +%s) + STORM_TOTAL + 12))")
	else
		FORM_ARGS+=(-D lock_timeout=0 -D "retry_on={40001,40P01}" -D phase=0
			-D "nspike=$((clients / 5))" -D "window_us=$((BURST_WINDOW_MS * 1000))" -D "deadline=$(($(date +%s) + 600))")
	fi
}

# storm_begin DIR CLIENTS: start the stall and the attempts sampler in the
# background, before pgbench runs.  The stall waits until pgbench has
# connected its clients (pgbench starts its clock once they all are), then
# STORM_PRE seconds, then holds the table lock for STORM_STALL seconds; it
# writes the epochs at which it got and released the lock to DIR/stall.
# The sampler writes "epoch sum(attempts)" of occ.stats once a second.
storm_begin() {
	local dir=$1 clients=$2 i
	rm -f "$dir/stop" "$dir/stall" "$dir/attempts"
	(
		for i in $(seq 600); do
			[ "$(sql "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgbench'")" -ge "$clients" ] && break
			sleep 0.1
		done
		sleep "$STORM_PRE"
		psql -X -q -A -t -v ON_ERROR_STOP=1 >"$dir/stall" 2>"$dir/stall.err" <<-EOF
			BEGIN;
			LOCK TABLE hot IN ACCESS EXCLUSIVE MODE;
			SELECT 'start', extract(epoch FROM clock_timestamp());
			SELECT pg_sleep($STORM_STALL);
			SELECT 'end', extract(epoch FROM clock_timestamp());
			COMMIT;
		EOF
	) &
	STALL_PID=$!
	SAMPLER_PID=""
	if [ "$STATS" = 1 ]; then
		(
			while [ ! -e "$dir/stop" ]; do
				sql "SELECT extract(epoch FROM clock_timestamp()), coalesce(sum(attempts), 0) FROM occ.stats" | tr '|' ' '
				sleep 1
			done >"$dir/attempts"
		) &
		SAMPLER_PID=$!
	fi
}

# storm_end DIR: stop the sampler, wait for the stall, check that it happened
storm_end() {
	local dir=$1
	touch "$dir/stop"
	[ -n "$SAMPLER_PID" ] && wait "$SAMPLER_PID"
	wait "$STALL_PID" || die "the stall failed, see $dir/stall.err: $(tail -3 "$dir/stall.err")"
	grep -q '^end|' "$dir/stall" || die "the stall did not happen during the run, see $dir/stall"
}

# storm_timeline DIR FORM REP: per-second timeline of a storm run, appended
# to $OUT/storm-timeline.csv (form, rep, second, commits, failed, attempts,
# arrivals, p50_ms, p99_ms), and one row in $OUT/storm.csv with the stall,
# the pre-stall latency and the recovery time.  Seconds count from the
# first request's arrival to the last whole second of the run (pgbench's
# -T clock starts while it connects its clients, a little before).  Commits
# and give-ups count in the second in which the call ended, latencies in
# the second in which the request arrived (a give-up: in the second in
# which it ended, pgbench does not log when it arrived), attempts per
# second are sum(attempts) of occ.stats sampled once a second (calls count
# when they end) or, for pgbench-retry, its transactions and retries.
storm_timeline() {
	local dir=$1 form=$2 rep=$3 t0 nsec events sampled=0
	events="$dir/events"
	# a log line is "client tx latency script epoch us lag [retries]", its
	# latency counted from the request's scheduled arrival
	read -r t0 nsec <<<"$(cat "$dir"/log.* | awk '
		{ e = $5 * 1000000 + $6; if (e > last) last = e }
		$3 ~ /^[0-9]+$/ { s = e - $3; if (t0 == "" || s < t0) t0 = s }
		END { if (t0 != "") printf "%.0f %d", t0, (last - t0) / 1000000 }')"
	# (pgbench may still wait for calls after its -T: they do not count)
	[ "$nsec" -le "$STORM_TOTAL" ] || nsec=$STORM_TOTAL
	[ -n "$t0" ] || die "storm run $form: no transaction in the log"
	# events: arrival second, latency ms (1e12: a give-up), end second, attempts
	cat "$dir"/log.* | awk -v t0="$t0" '
		{ e = $5 * 1000000 + $6 - t0; n = NF >= 8 ? 1 + $8 : 1 }
		$3 ~ /^[0-9]+$/ { printf "%d %.3f %d %d\n", (e - $3) / 1000000, $3 / 1000, e / 1000000, n }
		$3 == "failed" { printf "%d 1e12 %d %d\n", e / 1000000, e / 1000000, n }' >"$events"
	[ "$form" != pgbench-retry ] && [ -s "$dir/attempts" ] && sampled=1
	{
		# latencies sorted by arrival second, then the other events, then
		# the sampler's "epoch sum(attempts)" lines
		awk '{ print "L", $1, $2 }' "$events" | sort -k2,2n -k3,3g
		awk '{ print "E", $3, ($2 < 1e12 ? 1 : 0), ($2 < 1e12 ? 0 : 1), $4 }' "$events"
		if [ "$sampled" = 1 ]; then awk '{ print "S", $1, $2 }' "$dir/attempts"; fi
	} | awk -v form="$form" -v rep="$rep" -v nsec="$nsec" -v t0="$t0" -v sampled="$sampled" '
		function flush(  i50, i99) {
			if (n == 0) return
			i50 = int(0.50 * n); if (i50 < 0.50 * n) i50++
			i99 = int(0.99 * n); if (i99 < 0.99 * n) i99++
			p50[cur] = lat[i50]; p99[cur] = lat[i99]; arr[cur] = n; n = 0
		}
		BEGIN { cur = -1 }
		$1 == "L" { if ($2 + 0 != cur) { flush(); cur = $2 + 0 } lat[++n] = $3; next }
		$1 == "E" { commits[$2] += $3; failed[$2] += $4; if (form == "pgbench-retry") att[$2] += $5; next }
		$1 == "S" { st[++ns] = $2 - t0 / 1000000; sv[ns] = $3; next }
		END { flush()
		      # sampled attempts: the rate of the sampling interval that
		      # holds the middle of the second
		      for (s = 0; s < nsec && sampled; s++)
		        for (i = 2; i <= ns; i++)
		          if (st[i - 1] <= s + 0.5 && s + 0.5 < st[i]) { att[s] = sprintf("%.0f", (sv[i] - sv[i - 1]) / (st[i] - st[i - 1])); break }
		      for (s = 0; s < nsec; s++)
		        printf "%s,%d,%d,%d,%d,%s,%d,%s,%s\n", form, rep, s, commits[s], failed[s], (s in att) ? att[s] : "", arr[s],
		          (s in p50) ? p50[s] : "", (s in p99) ? p99[s] : "" }' >>"$OUT/storm-timeline.csv"
	storm_recovery "$dir" "$form" "$rep" "$t0" "$nsec" >>"$OUT/storm.csv"
}

# storm_recovery DIR FORM REP T0 NSEC: "form,rep,stall_start_s,stall_end_s,
# pre_p50_ms,pre_p99_ms,threshold_ms,recovery_s,after_p99_ms,recovery_p50_s"
# of one run.
# pre-stall: the requests that arrived from second 1 to the last whole
# second before the stall; threshold: STORM_TOLERANCE x the pre-stall p99
# + STORM_SLACK_MS (the machine's noise: a per-second median of 3 ms
# wanders to 5 ms at times);
# recovered: from the first whole second after the stall's end whose p99,
# and that of the STORM_HOLD - 1 seconds after it, are within the threshold
# (a give-up counts as an infinite latency, in the second in which it
# ended; a second in which no request arrived fails: it was never served,
# pgbench was still busy with older ones); the
# recovery time is from the stall's end to that second's start (0 if the
# first whole second after the stall is fine).  after_p99: the p99 of the
# requests that arrived after the stall.  recovery_p50: the same for the
# per-second median against STORM_TOLERANCE x the pre-stall median (the bulk
# of the requests served as before the stall, whatever the tail does).
storm_recovery() {
	local dir=$1 form=$2 rep=$3 t0=$4 nsec=$5 start end
	start=$(awk -F'|' -v t0="$t0" '$1 == "start" { printf "%.3f", $2 - t0 / 1000000 }' "$dir/stall")
	end=$(awk -F'|' -v t0="$t0" '$1 == "end" { printf "%.3f", $2 - t0 / 1000000 }' "$dir/stall")
	{
		awk -v s="$start" -v e="$end" '
			$1 >= 1 && $1 + 1 <= s { print "P", $2 }
			$1 >= e { print "A", $2 }' "$dir/events" | sort -k1,1 -k2,2g
		awk -F, -v form="$form" -v rep="$rep" '$1 == form && $2 == rep { print "T", $3, $5, $7, $9, $8 }' "$OUT/storm-timeline.csv"
	} | awk -v s="$start" -v e="$end" -v tol="$STORM_TOLERANCE" -v slack="$STORM_SLACK_MS" -v hold="$STORM_HOLD" -v nsec="$nsec" '
		function pct(a, n, p,  i) { if (n == 0) return ""; i = int(p * n); if (i < p * n) i++; return a[i] }
		$1 == "P" { pre[++np] = $2; next }
		$1 == "A" { aft[++na] = $2; next }
		$1 == "T" { arr[$2] = $4; p99[$2] = $5; p50[$2] = $6; next }
		# recovered(P, THR): the time from the stall to the first second
		# that begins HOLD seconds with per-second percentile P within THR
		function recovered(p, thr,  b, k, ok) {
			for (b = int(e) + 1; b + hold <= nsec; b++) {
				ok = 1
				for (k = b; k < b + hold; k++)
					if (arr[k] == 0 || p[k] == "" || p[k] > thr) { ok = 0; break }
				if (ok) return sprintf("%.1f", (b - e > 0) ? b - e : 0)
			}
			return "never"
		}
		END {
			pre50 = pct(pre, np, 0.50); pre99 = pct(pre, np, 0.99); thr = tol * pre99 + slack
			after = pct(aft, na, 0.99)
			printf "%.2f,%.2f,%s,%s,%.3f,%s,%s,%s\n", s, e, pre50, pre99, thr, recovered(p99, thr),
				(after >= 1e12 ? "inf" : after), recovered(p50, tol * pre50 + slack)
		}' | sed "s/^/$form,$rep,/"
}

# storm: every storm form once per round, in alternate order
storm() {
	echo "form,rep,second,commits,failed,attempts,arrivals,p50_ms,p99_ms" >"$OUT/storm-timeline.csv"
	echo "form,rep,stall_start_s,stall_end_s,pre_p50_ms,pre_p99_ms,threshold_ms,recovery_s,after_p99_ms,recovery_p50_s" >"$OUT/storm.csv"
	STORM_RUN_FORMS=$STORM_FORMS
	if [[ " $STORM_FORMS " == *" occ-budget "* ]] && ! has_budget; then
		progress "storm: the server has no retry budget (pg_occ < 0.3.0 or not preloaded): occ-budget skipped"
		STORM_RUN_FORMS=$(tr ' ' '\n' <<<"$STORM_FORMS" | grep -vx occ-budget | xargs)
	fi
	# shellcheck disable=SC2086 # a list of forms
	in_rounds storm "$STORM_ROUNDS" "$STORM_CLIENTS" $STORM_RUN_FORMS
}

# burst: every burst form once per round, in alternate order
burst() {
	# shellcheck disable=SC2086 # a list of forms
	in_rounds burst "$BURST_ROUNDS" "$BURST_CLIENTS" $BURST_FORMS
}

# in_rounds MODE ROUNDS CLIENTS FORM...: run every form once per round, in
# alternate order (in_turn), with the storm's work per transaction
in_rounds() {
	local mode=$1 rounds=$2 clients=$3 rep form
	shift 3
	for rep in $(seq "$rounds"); do
		for form in $(in_turn "$rep" "$@"); do
			run_one "$mode" "$form" "$clients" "$STORM_WORK_MS" "$rep"
		done
	done
}

# storm_table: recovery per form (markdown)
storm_table() {
	echo
	echo "### Seed 001: a ${STORM_STALL}s stall under open-loop arrivals ($STORM_RATE requests/s, Poisson, $STORM_CLIENTS connections, ${STORM_WORK_MS} ms of work, $([ "$STORM_LOCK_TIMEOUT" = 0 ] && echo "the bodies wait for the lock" || echo "lock_timeout $STORM_LOCK_TIMEOUT, 55P03 retried"))"
	echo
	echo "Latency: of the requests that arrived in a second, from their arrival (schedule lag included; a give-up counts as infinite). Recovered: the p99 (p50) of $STORM_HOLD consecutive seconds within $STORM_TOLERANCE x the pre-stall p99 (p50) + $STORM_SLACK_MS ms; the time from the end of the stall (1 s resolution; \"never\": not within the ${STORM_POST}s after it). Commits/s, attempts/commit and give-ups over the whole run."
	echo
	echo "| form | retry | pre-stall p50 / p99 ms | p99 of arrivals after the stall ms | recovery s (p99) | recovery s (p50) | commits/s | attempts/commit | give-ups |"
	echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
	local form
	for form in $STORM_RUN_FORMS; do
		awk -F, -v form="$form" -v note="$(storm_form_note "$form")" '
			function ms(v) { return v == "" ? "-" : v >= 1e12 ? "give-ups" : sprintf("%.1f", v) }
			FILENAME ~ /storm.csv$/ && $1 == form { n++; pre = pre (n > 1 ? ", " : "") ms($5) " / " ms($6)
				after = after (n > 1 ? ", " : "") ($9 == "inf" ? "give-ups" : sprintf("%.0f", $9)); rec = rec (n > 1 ? ", " : "") $8
				rec50 = rec50 (n > 1 ? ", " : "") $10 }
			FILENAME ~ /results.csv$/ && $1 == "storm" && $2 == form { c += $6; a += $8; g += $7; s += $10; m++ }
			END { printf "| %s | %s | %s | %s | %s | %s | %.0f | %s | %d |\n", form, note, pre, after, rec, rec50, (m ? s / m : 0),
				((c > 0 && a > 0) ? sprintf("%.2f", a / c) : "-"), g }' "$OUT/storm.csv" "$CSV"
	done
}

# burst_table: seed 003's table (markdown), medians over the rounds
burst_table() {
	echo
	echo "### Seed 003: a burst of $BURST_CLIENTS requests ($((BURST_CLIENTS / 5)) at once, the rest uniformly over ${BURST_WINDOW_MS} ms; 1 tick = $((BURST_TICK_US))us; median of $BURST_ROUNDS rounds)"
	echo
	echo "Latency per request (one per client) from its arrival; all done: from the first arrival to the last commit; requests sent: every execution of the transaction (sum(attempts) of occ.stats)."
	echo
	echo "| form | strategy | p50 ms | p75 ms | p90 ms | p99 ms | all done ms | max ms | requests sent | per client | give-ups |"
	echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
	local form
	summarize burst "$STORM_WORK_MS" p50_ms p75_ms p90_ms p99_ms max_ms attempts completion_ms give_ups |
		while read -r form clients p50 p75 p90 p99 max att done gu; do
			awk -v f="$form" -v note="$(storm_form_note "$form")" -v n="$clients" \
				-v p50="$p50" -v p75="$p75" -v p90="$p90" -v p99="$p99" -v max="$max" -v att="$att" -v done="$done" -v gu="$gu" '
				function fmt(v) { return v == "-" ? v : v >= 100 ? sprintf("%.0f", v) : sprintf("%.3g", v) }
				BEGIN { printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", f, note, fmt(p50), fmt(p75), fmt(p90), fmt(p99), fmt(done),
					fmt(max), fmt(att), att == "-" ? "-" : sprintf("%.2f", att / n), gu }'
		done
}

# storm_plot: the timelines, one line per form, the stall shaded
storm_plot() {
	local data="$OUT/runs/plot-storm.dat" forms="" form i=0 s e ncols
	read -r s e <<<"$(awk -F, 'NR > 1 && $2 == 1 { s += $3; e += $4; n++ } END { if (n) printf "%.2f %.2f", s / n, e / n }' "$OUT/storm.csv")"
	[ -n "$s" ] || return 0
	# one block of columns per form: commits attempts p99, first round
	# (a p99 of 1e12, some requests gave up, is drawn at the run's length)
	awk -F, -v forms="$STORM_RUN_FORMS" -v top="$((STORM_TOTAL * 1000))" '
		NR == 1 { next }
		$2 == 1 { c[$1, $3] = $4; a[$1, $3] = ($6 == "" ? "?" : $6); p[$1, $3] = ($9 == "" ? "?" : $9 > top ? top : $9); if ($3 > max) max = $3 }
		END { n = split(forms, f, " "); line = "second"
		      for (i = 1; i <= n; i++) line = line " " f[i] " " f[i] " " f[i]; print line
		      for (t = 0; t <= max; t++) { line = t
		        for (i = 1; i <= n; i++) line = line " " ((f[i], t) in c ? c[f[i], t] " " a[f[i], t] " " p[f[i], t] : "? ? ?")
		        print line } }' "$OUT/storm-timeline.csv" >"$data"
	ncols=$(wc -w <<<"$STORM_RUN_FORMS")
	gnuplot <<EOF 2>&1 | { grep -v "empty x range\|empty y range" || true; } >&2
set terminal $TERMINAL size 1000,1000 noenhanced
set output '$OUT/storm-timeline.png'
$(line_styles)
set datafile missing '?'
set grid
set key outside right
set object 1 rect from $s, graph 0 to $e, graph 1 behind fc rgb 'gray85' fs solid noborder
set xrange [0:$STORM_TOTAL]
set lmargin 12
set multiplot layout 3,1 title 'Seed 001: $STORM_RATE requests/s (Poisson), ${STORM_STALL}s LOCK TABLE stall (shaded), $STORM_CLIENTS connections'
set ylabel 'commits/s'
plot for [i=0:$((ncols - 1))] '$data' using (\$1 + 0.5):(column(2 + 3 * i)) with linespoints pt 7 ps 0.4 title columnheader(2 + 3 * i)
set ylabel 'attempts/s'
set logscale y
plot for [i=0:$((ncols - 1))] '$data' using (\$1 + 0.5):(column(3 + 3 * i) > 0 ? column(3 + 3 * i) : 1/0) with linespoints pt 7 ps 0.4 title columnheader(3 + 3 * i)
set ylabel 'p99 latency (ms) of arrivals (top: give-ups)'
set xlabel 'seconds since the start (commits, attempts: by end of the call; latency: by arrival)'
plot for [i=0:$((ncols - 1))] '$data' using (\$1 + 0.5):(column(4 + 3 * i)) with linespoints pt 7 ps 0.4 title columnheader(4 + 3 * i)
unset multiplot
EOF
}

# burst_plot: per-client latency, sorted (the seed's per-strategy view), of
# the first round, and the requests sent (median of the rounds)
burst_plot() {
	local data="$OUT/runs/plot-burst.dat" bars="$OUT/runs/plot-burst-requests.dat" form n
	: >"$data"
	: >"$bars"
	for form in $BURST_FORMS; do
		[ -s "$OUT/runs/burst-$form-lat" ] || continue
		n=$(wc -l <"$OUT/runs/burst-$form-lat")
		{ echo "\"$form\""; awk -v n="$n" '{ printf "%.4f %s\n", NR / n, $1 }' "$OUT/runs/burst-$form-lat"; echo; echo; } >>"$data"
	done
	summarize burst "$STORM_WORK_MS" attempts | awk '{ print "\"" $1 "\"", $3 }' >"$bars"
	[ -s "$data" ] || return 0
	gnuplot <<EOF 2>&1 | { grep -v "empty x range\|empty y range" || true; } >&2
set terminal $TERMINAL size 1100,500 noenhanced
set output '$OUT/burst.png'
$(line_styles)
set grid
set multiplot layout 1,2 title 'Seed 003: a burst of $BURST_CLIENTS requests, 20% at once, the rest over ${BURST_WINDOW_MS} ms'
set xlabel 'fraction of clients, sorted by latency (first round)'
set ylabel 'latency ms'
set logscale y
set key right bottom
plot for [i=0:*] '$data' index i using 1:2 with lines title columnheader(1)
unset logscale y
set xlabel ''
set ylabel 'requests sent (attempts, median of the rounds)'
set yrange [0:*]
set style fill solid 0.6
set boxwidth 0.6
set xtics rotate by -30
unset key
plot '$bars' using 0:2:xtic(1) with boxes lc rgb 'steelblue'
unset multiplot
EOF
}
