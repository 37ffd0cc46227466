#!/bin/bash
#
# run.sh - pg_occ hot-row contention benchmark.
#
# Every transaction reads one hot row, optionally works for work_ms inside
# the transaction (pg_sleep), and writes the value read + 1.  The forms
# (pgbench scripts in test/pgbench/):
#
#   pessimistic     READ COMMITTED + SELECT ... FOR UPDATE (the reference)
#   pgbench-retry   OCC under --isolation, retried at once by pgbench
#                   --max-tries (no backoff)
#   occ-defaults    CALL occ.retry(...) with the defaults of the occ.* settings
#                   (jitter, base, cap, max_attempts); only the isolation is set
#   occ-<jitter>    CALL occ.retry(..., jitter => <jitter>, base, cap) for
#                   none full equal decorrelated bounded multiplicative normal
#   occ-backoff     occ.retry with the defaults, contention => 'backoff'
#   occ-queue       occ.retry with the defaults, contention => 'queue' (key
#                   derived from the body and its parameters)
#   occ-queue-key   the same with key => 'hot:' || id
#   mixed-gate      half occ-queue-key calls, half lock-based writers
#                   (pessimistic_gate.sql) that call occ.gate('hot:1') first
#   mixed-nogate    the same, the writers without occ.gate (pessimistic-1rt)
#   fifo-lock       pessimistic-1rt after pg_advisory_xact_lock(1): PostgreSQL's
#                   own FIFO queue (fifo_lock.sql), no pg_occ: the reference
#                   of queue mode's tail
#
# The client mode's forms are the application's own transactions, run from
# the client: read, work_ms of work in the client (pgbench's \sleep), write.
#
#   client-lock     SELECT ... FOR UPDATE (client_lock.sql, the reference)
#   client-rr-retry REPEATABLE READ, retried at once by the client (pgbench
#                   --max-tries, as an application's retry loop)
#   client-rr-key   the same, beginning with SET LOCAL occ.key = 'hot:1'
#                   (client_rr.sql with keyed=1)
#   client-rr-key-1rt  the same, the SET sent with the SELECT in one round
#                   trip (keyed=2): the gate is then held as long as the lock
#   client-fifo-lock  client-lock after pg_advisory_xact_lock(1), in one round
#                   trip with the SELECT (fifo=1): PostgreSQL's own FIFO
#                   queue, waited for before the first statement, no pg_occ
#
# Their cluster logs errors (log_min_messages = error, without the
# statement), as a server does by default: pg_occ reads the SQLSTATE of a
# failed transaction from the server's log hook.
#
# Modes:
#   contention  queue mode's targets: 16, 64 and 128 clients, 1 ms of work,
#               pessimistic-1rt, fifo-lock, occ-backoff, occ-queue and
#               occ-queue-key side by side, medians of --rounds interleaved
#               rounds; then the guard workloads (1,000 uniform rows, 50% on
#               one row, 1 client, lock-based writers mixed in), each
#               interleaved too.
#   storm       seed 001 ("how not to crash a server"): open-loop Poisson
#               arrivals below the hot row's capacity, a stall of a few
#               seconds (LOCK TABLE hot) in the middle, per-second commits,
#               attempts and latency, and the time each form takes to recover
#               (test/bench/storms.sh describes it and its forms).
#   burst       seed 003 ("Exploring backoff"): N clients, one request each,
#               20% at once and the rest uniformly over a window; latency
#               percentiles per client and requests sent, per strategy.
#   sweep       clients x work_ms x forms, --duration seconds each: commits/s,
#               attempts per commit, p50/p99/max latency, give-ups.
#   fixed-work  seed 000 (AWS, "Exponential Backoff And Jitter"): N clients
#               each commit ONE update (pgbench -t 1); total attempts ("work")
#               and the time until all are done.
#   overhead    1 client, one UPDATE, bare vs CALL occ.retry.
#   client      the application's own transactions (issue 17): client-lock,
#               client-fifo-lock, client-rr-retry, client-rr-key and
#               client-rr-key-1rt at 64 clients, 1 ms of work, side by side
#               in --rounds interleaved rounds, medians; targets for the
#               keyed forms: <= 1.2 attempts per commit, >= 0.97 x
#               client-lock's commits/s, p99 <= 0.5 x client-lock's and
#               <= 1.3 x the ideal wait.
#   keys        queue mode on real transactions (test/bench/keys.sh).
#   batch       batch mode (issue 18) against the row lock and queue mode,
#               durable and not, interleaved (test/bench/batch.sh).
#   escrow      reservable columns (issue 28): an inventory decrement with
#               an order line and 1 or 10 ms of work, occ.reserve and the
#               plain UPDATE that pg_occ runs as one (issue 36) against
#               the row lock, queue and batch mode, durable and not,
#               interleaved, and a sell-out (test/bench/escrow.sh).
#
# The default run is the headline (about 6 minutes): the contention mode's
# hot row at 64 clients for pessimistic-1rt, fifo-lock, pgbench-retry,
# occ-backoff and occ-queue (medians of 3 interleaved rounds, as issue 37's
# targets are stated; no guards), then storm and burst.  --full runs every
# mode (the sweep, fixed work, overhead, the full contention mode, client,
# storm and burst: about 40 minutes); --quick runs them all briefly (CI).
#
# After every run the hot row must have grown by exactly the number of
# commits pgbench counted (and, for occ forms, occ.stats must agree): if
# not, the script stops with exit status 1.
#
# Attempts: pessimistic and client-lock = pgbench transactions;
# pgbench-retry and client-rr-* = transactions + pgbench's "total number of
# retries"; occ-* = sum(attempts) of occ.stats
# (reset before each run; blank without shared_preload_libraries = pg_occ).
#
# Unless --existing is given, the script re-runs itself inside a throwaway
# cluster made by pg_virtualenv.  Output in --out: results.csv, results.md
# (also printed on stdout), *.png (gnuplot) and runs/<run>/pgbench.out.
# Progress goes to stderr.  Needs bash, psql, pgbench, awk, gnuplot.
#
# Usage: test/bench/run.sh [--quick | --full] [options], see usage() below.
# The storm and burst modes live in test/bench/storms.sh, sourced below.

set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SELF="$HERE/$(basename "${BASH_SOURCE[0]}")"
PGB=$(cd "$HERE/../pgbench" && pwd)
ALL_FORMS="pessimistic pessimistic-1rt pgbench-retry occ-defaults occ-backoff occ-queue occ-queue-key occ-none occ-full occ-equal occ-decorrelated occ-bounded occ-multiplicative occ-normal"
# shellcheck source=test/bench/storms.sh
. "$HERE/storms.sh"
# shellcheck source=test/bench/keys.sh
. "$HERE/keys.sh"
# shellcheck source=test/bench/batch.sh
. "$HERE/batch.sh"
# shellcheck source=test/bench/escrow.sh
. "$HERE/escrow.sh"

# Defaults of the modes (the profiles below change some of them)
CLIENTS="1 4 16 64 128"
DURATION=10
WORK="0 1"
FORMS=$ALL_FORMS
FIXED_CLIENTS="1 2 5 10 25 50 75 100"
FIXED_WORK_MS=1
REPS=1
MAX_ATTEMPTS=1000
BASE=1ms
CAP=200ms
ISO="repeatable read"
OUT="$HERE/results"
OVERHEAD_FORMS="bare occ-bare occ-bare-nostats"
OVERHEAD_REPS=5
CONTENTION_CLIENTS="16 64 128"
CONTENTION_FORMS="pessimistic-1rt fifo-lock occ-backoff occ-queue occ-queue-key"
GUARD_CLIENTS=64
ROUNDS=3
CLIENT_CLIENTS=64
CLIENT_WORK_MS=1
CLIENT_FORMS="client-lock client-fifo-lock client-rr-retry client-rr-key client-rr-key-1rt"
# the client forms log errors, as a server does by default (see the header)
CLIENT_PGOPTIONS="-c log_min_messages=error -c log_min_error_statement=panic"
HOT_PCT=100
# storm (seed 001): STORM_CLIENTS connections take requests arriving at
# STORM_RATE per second (Poisson).  On this benchmark's 2-core machine the
# hot row commits about 400/s at 64 and 128 clients in every form but
# pgbench's immediate retry, which falls to 125/s at 64 and 65 to 105/s at
# 128 clients once they all retry at once: 200/s lies between the two, with
# a margin on both sides (see test/bench/README.md, "Retry storms: a stall (seed 001)", for the measurement).
STORM_CLIENTS=128
STORM_RATE=200
STORM_PRE=5
STORM_STALL=3
STORM_POST=12
STORM_LOCK_TIMEOUT=0
STORM_TOLERANCE=1.5
STORM_SLACK_MS=5
STORM_HOLD=3
STORM_ROUNDS=1
STORM_WORK_MS=1
STORM_FIXED=1ms
SEED001_BASE=100ms
SEED001_FACTOR=2.71828
SEED001_CAP=5min
BUDGET=100
BUDGET_RATIO=1
BUDGET_FLOOR=10
# burst (seed 003): 800 clients, 20% in a spike, the rest over 1000 ticks
# of a service that completes one request per tick, scaled down by 4 to
# 200 clients over 250 ticks (one connection each; 800 backends would not
# fit a 2-core machine): the spike is 40 requests, the rest arrive at 64%
# of the row's capacity, as in the seed.  A tick is one commit on the hot
# row at about 400/s: 2.5 ms, so the window is 625 ms.
BURST_CLIENTS=200
BURST_WINDOW_MS=625
BURST_TICK_US=2500
BURST_ROUNDS=3
PROFILE=headline
ONLY=""
DO_GUARDS=1
REPORT_ONLY=0
EXISTING=0
KEEP_LOGS=0
DURABLE=0

usage() {
	cat <<EOF
Usage: $0 [--quick | --full] [options]
  (no option)          the headline run, about 6 minutes: the hot row at 64
                       clients (pessimistic-1rt, fifo-lock, pgbench-retry,
                       occ-backoff, occ-queue; medians of 3 interleaved
                       rounds), the seed 001 stall (storm) and the seed 003
                       burst, with their tables and plots
  --full               every mode: sweep, fixed work, overhead, contention
                       (16, 64, 128 clients, guards, 3 rounds), storm, burst;
                       about 35 minutes
  --quick              CI check (about 3 min): every mode briefly, every form, nothing lost
  --sweep-only | --fixed-work-only | --overhead-only | --contention-only |
  --client-only | --storm-only | --burst-only | --keys-only | --batch-only |
  --escrow-only
                       only these modes (may be combined; with their full
                       settings unless --quick).  Overhead: 1 client, one
                       UPDATE, bare vs CALL occ.retry with stats on and off,
                       interleaved, --duration s each, $OVERHEAD_REPS times;
                       contention: queue mode's targets and guard workloads;
                       client: the application's own transactions with SET
                       LOCAL occ.key against the lock and the client's retries;
                       storm, burst: see the header and storms.sh;
                       keys: see keys.sh; escrow: see escrow.sh
  --keys-clients N     clients of the keys mode (default: $KEYS_CLIENTS)
  --keys-rounds R      its interleaved rounds (default: $KEYS_ROUNDS)
  --batch-clients N    clients of the batch mode (default: $BATCH_CLIENTS)
  --batch-rounds R     its interleaved rounds (default: $BATCH_ROUNDS)
  --escrow-clients N   clients of the escrow mode (default: $ESCROW_CLIENTS)
  --escrow-rounds R    its interleaved rounds (default: $ESCROW_ROUNDS)
  --escrow-forms "..." its forms (default: $ESCROW_FORMS)
  --clients "1 4 16"   sweep client counts          (default: $CLIENTS)
  --duration S         seconds per sweep, overhead and contention run (default: $DURATION)
  --work "0 1"         work_ms values of the sweep  (default: $WORK)
  --forms "..."        forms of the sweep and fixed work (default: all):
                       $ALL_FORMS
  --fixed-clients "N"  fixed-work client counts     (default: $FIXED_CLIENTS)
  --fixed-work-ms MS   work_ms of fixed-work runs   (default: $FIXED_WORK_MS)
  --reps R             fixed-work repetitions, averaged (default: $REPS)
  --contention-clients "16 64 128"  client counts of the contention mode
  --contention-forms "..."  its forms (default: $CONTENTION_FORMS)
  --no-guards          the contention mode without its guard workloads
  --rounds R           interleaved rounds of the contention and client modes (default: $ROUNDS)
  --client-clients "64"  client counts of the client mode (default: $CLIENT_CLIENTS)
  --storm-clients N    connections of the storm mode (default: $STORM_CLIENTS)
  --storm-rate R       arrivals per second, Poisson (default: $STORM_RATE)
  --storm-phases "PRE STALL POST"  seconds before, of and after the stall
                       (default: "$STORM_PRE $STORM_STALL $STORM_POST")
  --storm-forms "..."  (default: $STORM_FORMS)
  --storm-rounds R     (default: $STORM_ROUNDS)
  --lock-timeout I     the bodies' lock_timeout in the storm, 55P03 retried
                       (default: $STORM_LOCK_TIMEOUT, they wait; see storms.sh)
  --fixed-interval I   occ-fixed's and occ-budget's constant delay (default: $STORM_FIXED)
  --budget "C R F"     occ-budget's occ.retry_budget, _ratio, _floor (default: "$BUDGET $BUDGET_RATIO $BUDGET_FLOOR")
  --burst-clients N    requests of the burst, one per client (default: $BURST_CLIENTS)
  --burst-window MS    over which 80% of them arrive (default: $BURST_WINDOW_MS)
  --burst-tick US      seed 003's tick, for the backoff delays (default: $BURST_TICK_US)
  --burst-forms "..."  (default: $BURST_FORMS)
  --burst-rounds R     (default: $BURST_ROUNDS)
  --durable            commits wait for the disk (fsync and synchronous_commit
                       on; the default turns both off, to measure contention)
  --report-only        no runs: the tables and plots again from --out's results.csv
                       (with the same mode options as the run)
  --max-attempts N     occ.retry max_attempts and pgbench --max-tries (default: $MAX_ATTEMPTS)
  --base I --cap I     occ.retry base and cap       (default: $BASE, $CAP)
  --isolation L        of pgbench-retry and occ-*   (default: $ISO)
  --out DIR            output directory             (default: test/bench/results)
  --keep-logs          keep pgbench's per-transaction logs in DIR/runs
  --existing           use the server of PGHOST/PGPORT/... instead of a new cluster
EOF
	exit "${1:-0}"
}

# die MESSAGE: complain on stderr and stop with status 1
die() {
	echo "run.sh: ERROR: $*" >&2
	exit 1
}

# progress MESSAGE: one progress line on stderr
progress() {
	echo "[$(date +%H:%M:%S)] $*" >&2
}

# parse_args ARGS...: set the globals above from the command line: first
# the profile (headline, --full or --quick) and the modes it runs, then the
# options, which override the profile's settings
parse_args() {
	local arg modes=""
	for arg in "$@"; do
		case $arg in
			-h | --help) usage 0 ;;
			--quick) PROFILE=quick ;;
			--full) PROFILE=full ;;
			--sweep-only) ONLY="$ONLY sweep" ;;
			--fixed-work-only) ONLY="$ONLY fixed" ;;
			--overhead-only) ONLY="$ONLY overhead" ;;
			--contention-only) ONLY="$ONLY contention" ;;
			--client-only) ONLY="$ONLY client" ;;
			--storm-only) ONLY="$ONLY storm" ;;
			--burst-only) ONLY="$ONLY burst" ;;
			--keys-only) ONLY="$ONLY keys" ;;
			--batch-only) ONLY="$ONLY batch" ;;
			--escrow-only) ONLY="$ONLY escrow" ;;
		esac
	done
	case $PROFILE in
		headline)
			modes="contention storm burst"
			if [ -z "$ONLY" ]; then
				CONTENTION_CLIENTS=64; DO_GUARDS=0
				CONTENTION_FORMS="pessimistic-1rt fifo-lock pgbench-retry occ-backoff occ-queue"
			fi ;;
		full) modes="sweep fixed overhead contention client storm burst keys batch escrow" ;;
		quick)
			modes="sweep fixed overhead contention client storm burst keys batch escrow"
			CLIENTS="1 8"; DURATION=1; FIXED_CLIENTS="1 10"; REPS=1
			CONTENTION_CLIENTS=8; GUARD_CLIENTS=8; ROUNDS=1; CLIENT_CLIENTS=8
			STORM_CLIENTS=8; STORM_RATE=100; STORM_PRE=1; STORM_STALL=1; STORM_POST=1; STORM_HOLD=1
			BURST_CLIENTS=20; BURST_WINDOW_MS=100; BURST_ROUNDS=1
			KEYS_CLIENTS=8; KEYS_ROUNDS=1; BATCH_CLIENTS=8; BATCH_ROUNDS=1
			ESCROW_CLIENTS=8; ESCROW_ROUNDS=1 ;;
	esac
	[ -n "$ONLY" ] && modes=$ONLY
	while [ $# -gt 0 ]; do
		case $1 in
			--report-only) REPORT_ONLY=1 ;;
			--quick | --full | --*-only) ;;
			--clients) CLIENTS=$2; shift ;;
			--duration) DURATION=$2; shift ;;
			--work) WORK=$2; shift ;;
			--forms) FORMS=$2; shift ;;
			--fixed-clients) FIXED_CLIENTS=$2; shift ;;
			--fixed-work-ms) FIXED_WORK_MS=$2; shift ;;
			--reps) REPS=$2; shift ;;
			--contention-clients) CONTENTION_CLIENTS=$2; shift ;;
			--contention-forms) CONTENTION_FORMS=$2; shift ;;
			--no-guards) DO_GUARDS=0 ;;
			--rounds) ROUNDS=$2; shift ;;
			--client-clients) CLIENT_CLIENTS=$2; shift ;;
			--storm-clients) STORM_CLIENTS=$2; shift ;;
			--storm-rate) STORM_RATE=$2; shift ;;
			--storm-phases) read -r STORM_PRE STORM_STALL STORM_POST <<<"$2"; shift ;;
			--storm-forms) STORM_FORMS=$2; shift ;;
			--storm-rounds) STORM_ROUNDS=$2; shift ;;
			--lock-timeout) STORM_LOCK_TIMEOUT=$2; shift ;;
			--fixed-interval) STORM_FIXED=$2; shift ;;
			--budget) read -r BUDGET BUDGET_RATIO BUDGET_FLOOR <<<"$2"; shift ;;
			--burst-clients) BURST_CLIENTS=$2; shift ;;
			--burst-window) BURST_WINDOW_MS=$2; shift ;;
			--burst-tick) BURST_TICK_US=$2; shift ;;
			--burst-forms) BURST_FORMS=$2; shift ;;
			--burst-rounds) BURST_ROUNDS=$2; shift ;;
			--keys-clients) KEYS_CLIENTS=$2; shift ;;
			--keys-rounds) KEYS_ROUNDS=$2; shift ;;
			--batch-clients) BATCH_CLIENTS=$2; shift ;;
			--batch-rounds) BATCH_ROUNDS=$2; shift ;;
			--escrow-clients) ESCROW_CLIENTS=$2; shift ;;
			--escrow-rounds) ESCROW_ROUNDS=$2; shift ;;
			--escrow-forms) ESCROW_FORMS=$2; shift ;;
			--max-attempts) MAX_ATTEMPTS=$2; shift ;;
			--base) BASE=$2; shift ;;
			--cap) CAP=$2; shift ;;
			--isolation) ISO=$2; shift ;;
			--out) OUT=$2; shift ;;
			--keep-logs) KEEP_LOGS=1 ;;
			--existing) EXISTING=1 ;;
			--durable) DURABLE=1 ;;
			-h | --help) usage 0 ;;
			*) echo "unknown option: $1" >&2; usage 2 ;;
		esac
		shift
	done
	DO_SWEEP=0; DO_FIXED=0; DO_OVERHEAD=0; DO_CONTENTION=0; DO_CLIENT=0; DO_STORM=0; DO_BURST=0; DO_KEYS=0; DO_BATCH=0; DO_ESCROW=0
	for arg in $modes; do
		case $arg in
			sweep) DO_SWEEP=1 ;; fixed) DO_FIXED=1 ;; overhead) DO_OVERHEAD=1 ;;
			contention) DO_CONTENTION=1 ;; client) DO_CLIENT=1 ;; storm) DO_STORM=1 ;; burst) DO_BURST=1 ;;
			keys) DO_KEYS=1 ;; batch) DO_BATCH=1 ;; escrow) DO_ESCROW=1 ;;
		esac
	done
	STORM_TOTAL=$((STORM_PRE + STORM_STALL + STORM_POST))
	for f in $FORMS; do
		[[ " $ALL_FORMS " == *" $f "* ]] || die "unknown form '$f'"
	done
	mkdir -p "$OUT"
	OUT=$(cd "$OUT" && pwd)
}

# uses_occ: do the selected forms (or the overhead mode) need the extension?
uses_occ() {
	[ "$DO_OVERHEAD" = 1 ] || [ "$DO_CONTENTION" = 1 ] || [ "$DO_CLIENT" = 1 ] || [ "$DO_STORM" = 1 ] ||
		[ "$DO_BURST" = 1 ] || [ "$DO_KEYS" = 1 ] || [ "$DO_BATCH" = 1 ] || [ "$DO_ESCROW" = 1 ] ||
		{ [ $((DO_SWEEP + DO_FIXED)) -gt 0 ] && [[ " $FORMS " == *" occ-"* ]]; }
}

# enter_cluster ARGS...: re-run this script inside a throwaway cluster, unless
# we are already inside one (or --existing).  The settings keep the server
# log quiet (every serialization failure is an ERROR) and commits off the
# disk's fsync, so that the runs measure contention rather than the disk;
# with --durable, every commit waits for its WAL flush.
enter_cluster() {
	[ "$EXISTING" = 1 ] && return
	[ -n "${OCC_BENCH_CLUSTER:-}" ] && return
	local opts=(-t -o max_connections=300 -o log_min_messages=log)
	if [ "$DURABLE" = 1 ]; then
		opts+=(-o fsync=on -o synchronous_commit=on)
	else
		opts+=(-o synchronous_commit=off)
	fi
	if [ -e "$(pg_config --pkglibdir)/pg_occ.so" ]; then
		opts+=(-o shared_preload_libraries=pg_occ)
	elif uses_occ; then
		die "pg_occ is not installed (make install), or run with --forms 'pessimistic pgbench-retry'"
	fi
	progress "starting a throwaway cluster with pg_virtualenv"
	export OCC_BENCH_CLUSTER=1
	exec pg_virtualenv "${opts[@]}" "$SELF" "$@"
}

# sql QUERY: run one query, print the result unaligned
sql() {
	psql -X -q -A -t -v ON_ERROR_STOP=1 -c "$1"
}

# prepare_db: hot table, extension, and whether occ.stats works (STATS=1)
prepare_db() {
	PGOPTIONS="-c client_min_messages=warning" psql -X -q -v ON_ERROR_STOP=1 -f "$PGB/setup.sql"
	STATS=0
	if uses_occ; then
		PGOPTIONS="-c client_min_messages=warning" sql "CREATE EXTENSION IF NOT EXISTS pg_occ" >/dev/null
		if sql "SELECT occ.stats_reset()" >/dev/null 2>&1; then
			STATS=1
		else
			progress "occ.stats unavailable (pg_occ not preloaded): occ-* attempts left blank"
		fi
	fi
}

# add_occ_defaults SCRIPT CONTENTION: append to FORM_ARGS occ_retry.sql (as
# SCRIPT, which may carry a weight) with the server's occ.* settings, as a
# call that omits them would get, and the given contention mode
add_occ_defaults() {
	FORM_ARGS+=(-f "$1" -D "iso=$ISO" -D "contention=$2"
		-D "max_attempts=$(sql "SHOW occ.max_attempts")" -D "jitter=$(sql "SHOW occ.jitter")"
		-D "base=$(sql "SHOW occ.base_delay")" -D "cap=$(sql "SHOW occ.max_delay")")
}

# set_form_args FORM WORK_MS: pgbench arguments of a form in FORM_ARGS
set_form_args() {
	local form=$1 work=$2
	FORM_ARGS=(-D "work_ms=$work" -D "hot_pct=$HOT_PCT" -D "keyprefix=NULL")
	FORM_PGOPTIONS=""
	case $form in
		pessimistic)
			FORM_ARGS+=(-f "$PGB/pessimistic.sql") ;;
		pessimistic-1rt)
			FORM_ARGS+=(-f "$PGB/pessimistic_1rt.sql") ;;
		fifo-lock)
			FORM_ARGS+=(-f "$PGB/fifo_lock.sql") ;;
		bare)
			FORM_ARGS=(-f "$PGB/bare.sql") ;;
		occ-bare)
			FORM_ARGS=(-f "$PGB/occ_bare.sql") ;;
		occ-bare-nostats)
			FORM_ARGS=(-f "$PGB/occ_bare.sql")
			FORM_PGOPTIONS="-c occ.track_stats=off" ;;
		pgbench-retry)
			FORM_ARGS+=(-f "$PGB/occ_pgbench.sql" -D "iso=$ISO" --max-tries="$MAX_ATTEMPTS") ;;
		occ-defaults)
			add_occ_defaults "$PGB/occ_retry.sql" "$(sql "SHOW occ.contention")" ;;
		occ-backoff)
			add_occ_defaults "$PGB/occ_retry.sql" backoff ;;
		occ-queue)
			add_occ_defaults "$PGB/occ_retry.sql" queue ;;
		occ-queue-key)
			add_occ_defaults "$PGB/occ_retry.sql" queue
			FORM_ARGS+=(-D "keyprefix='hot:'") ;;
		mixed-gate)
			# script 1: occ-queue-key for half of the calls; script 2: writers
			add_occ_defaults "$PGB/occ_retry.sql@1" queue
			FORM_ARGS+=(-D "keyprefix='hot:'" -f "$PGB/pessimistic_gate.sql@1") ;;
		mixed-nogate)
			add_occ_defaults "$PGB/occ_retry.sql@1" queue
			FORM_ARGS+=(-D "keyprefix='hot:'" -f "$PGB/pessimistic_1rt.sql@1") ;;
		client-lock | client-fifo-lock)
			FORM_ARGS+=(-f "$PGB/client_lock.sql" -D "fifo=$([ "$form" = client-fifo-lock ] && echo 1 || echo 0)")
			FORM_PGOPTIONS=$CLIENT_PGOPTIONS ;;
		client-rr-retry | client-rr-key | client-rr-key-1rt)
			FORM_ARGS+=(-f "$PGB/client_rr.sql" -D "iso=$ISO" --max-tries="$MAX_ATTEMPTS"
				-D "keyed=$(case $form in client-rr-key) echo 1 ;; client-rr-key-1rt) echo 2 ;; *) echo 0 ;; esac)")
			FORM_PGOPTIONS=$CLIENT_PGOPTIONS ;;
		occ-*)
			FORM_ARGS+=(-f "$PGB/occ_retry.sql" -D "iso=$ISO" -D "max_attempts=$MAX_ATTEMPTS" -D contention=backoff
				-D "jitter=${form#occ-}" -D "base=$BASE" -D "cap=$CAP") ;;
		tpcb-* | zipf-*)
			set_keys_form_args "$form" ;;
	esac
}

# report_value FILE PATTERN: first number after PATTERN in a pgbench report
report_value() {
	awk -v pat="$2" 'index($0, pat) == 1 { s = substr($0, length(pat) + 1); sub(/^[^0-9]*/, "", s); sub(/[^0-9.].*$/, "", s); print s; exit }' "$1"
}

# latency_stats DIR [FILTER]: "p50 p75 p90 p99 max completion" in ms from
# the pgbench logs of committed transactions (nearest-rank percentiles;
# FILTER, an awk condition, selects the log lines); completion is from the
# first start to the last end of any transaction.
latency_stats() {
	local pct span
	pct=$(cat "$1"/log.* | awk "\$3 ~ /^[0-9]+\$/ && (${2:-1}) { print \$3 }" | sort -n |
		awk '{ a[NR] = $1 }
		     function rank(p,  i) { i = int(p * NR); if (i < p * NR) i++; return a[i] / 1000 }
		     END { if (NR) printf "%.2f %.2f %.2f %.2f %.2f", rank(0.50), rank(0.75), rank(0.90), rank(0.99), a[NR] / 1000 }')
	span=$(cat "$1"/log.* | awk '{ e = $5 * 1000000 + $6; if (e > last) last = e }
		$3 ~ /^[0-9]+$/ { s = e - $3; if (!n++ || s < first) first = s }
		END { if (n) printf "%.1f", (last - first) / 1000 }')
	echo "${pct:-- - - - -} ${span:--}"
}

# window_p99 DIR FILTER CONNECT_MS CLIENTS: "done first rest floor", p99s
# in ms of the committed transactions of a -T run that ended by its
# deadline (all of them; those that began in its first second; the others)
# and the rest's FIFO floor: the calls still in flight at the deadline wait
# for pgbench's own stop, which on a small machine adds up to 850 ms to
# every form's, the lock's too.  pgbench's -T clock runs while it connects,
# so the deadline is the first transaction's start + DURATION - the initial
# connection time.  The first second is the warm-up, in which new sessions
# read the catalogs and the keys are still cold; the rest is the steady
# state.  The floor is the p99, over the rest, of the time that the CLIENTS
# commits up to a call's own took (its end - the end of the CLIENTS-th
# commit before it, of any script): what each call would have waited in a
# perfect FIFO queue of CLIENTS sessions, given the run's own commit times.
window_p99() {
	local calls t0 deadline
	calls=$(cat "$1"/log.* | awk "\$3 ~ /^[0-9]+\$/ { printf \"%.0f %.0f %s %d\\n\", \$5 * 1000000 + \$6 - \$3, \$5 * 1000000 + \$6, \$3, (${2:-1}) }" | sort -n)
	read -r t0 deadline < <(awk -v dur="$DURATION" -v conn="$3" \
		'$4 { printf "%.0f %.0f\n", $1, $1 + dur * 1000000 - conn * 1000; exit }' <<<"$calls")
	{
		awk -v t0="$t0" -v deadline="$deadline" '$4 && $2 <= deadline {
			print "done", $3; print ($1 < t0 + 1000000 ? "first" : "rest"), $3 }' <<<"$calls"
		sort -k2,2n <<<"$calls" | awk -v n="$4" -v t0="$t0" -v deadline="$deadline" '
			{ i++; if (i > n && $4 && $1 >= t0 + 1000000 && $2 <= deadline) print "floor", $2 - e[i % n]; e[i % n] = $2 }'
	} | sort -k1,1 -k2,2n | awk '
		{ n[$1]++; v[$1, n[$1]] = $2 }
		function p99(g,  i) {
			if (!n[g]) return "-"
			i = int(0.99 * n[g]); if (i < 0.99 * n[g]) i++
			return sprintf("%.2f", v[g, i] / 1000)
		}
		END { print p99("done"), p99("first"), p99("rest"), p99("floor") }'
}

# script_commits FILE N: transactions of the N-th script in a pgbench report
script_commits() {
	awk -v n="$2" '$1 == "SQL" && $2 == "script" && $3 == n ":" { in_script = 1; next }
		in_script && / transactions \(/ { print $2; exit }' "$1"
}

# occ_stats: "attempts commits gave_up" summed over occ.stats
occ_stats() {
	sql "SELECT coalesce(sum(attempts), 0), coalesce(sum(commits), 0), coalesce(sum(gave_up), 0) FROM occ.stats" | tr '|' ' '
}

# run_one MODE FORM CLIENTS WORK_MS REP: one pgbench run, checked, one CSV row
# (storm runs also write their timeline, see storms.sh)
run_one() {
	local mode=$1 form=$2 clients=$3 work=$4 rep=$5
	local dir="$OUT/runs/$mode-$form-c$clients-w$work-r$rep"
	local length threads before after grew commits failed retries tps attempts filter=1 processed
	local s_commits s_gave_up p50 p75 p90 p99 p99_done="-" p99_first="-" p99_steady="-" p99_floor="-" max completion per_commit occ_commits="" writer_commits=""
	mkdir -p "$dir"
	rm -f "$dir"/log.*
	case $mode in
		fixed) length=(-t 1) ;;
		# burst: each client's first transaction waits for its arrival, the
		# second is the call (occ_storm.sql): an awk condition on the log
		burst) length=(-t 2); filter="\$2 == 2" ;;
		# storm: pgbench's clock starts while it connects, about a second
		# before the first request; the timeline starts with that request
		storm) length=(-T $((STORM_TOTAL + 1)) --rate "$STORM_RATE") ;;
		*) length=(-T "$DURATION") ;;
	esac
	threads=$(( clients < $(nproc) ? clients : $(nproc) ))
	case $mode in
		storm | burst) set_open_form_args "$mode" "$form" "$work" "$clients" ;;
		batch-w*) FORM_ARGS=(-D "work_ms=$work"); FORM_PGOPTIONS=""; set_batch_form_args "$form" ;;
		escrow-*) FORM_ARGS=(-D "work_ms=$work"); FORM_PGOPTIONS=""; set_escrow_form_args "$form" ;;
		*) set_form_args "$form" "$work" ;;
	esac

	sql "VACUUM hot" >/dev/null
	[ "$STATS" = 1 ] && sql "SELECT occ.stats_reset()" >/dev/null
	before=$(workload_state "$mode")
	[ "$mode" = storm ] && storm_begin "$dir" "$clients"
	PGOPTIONS="$FORM_PGOPTIONS" pgbench -n -c "$clients" -j "$threads" "${length[@]}" -l --log-prefix="$dir/log" \
		"${FORM_ARGS[@]}" >"$dir/pgbench.out" 2>"$dir/pgbench.err" ||
		die "pgbench failed ($mode $form, $clients clients), see $dir/pgbench.err: $(tail -3 "$dir/pgbench.err")"
	[ "$mode" = storm ] && storm_end "$dir"
	after=$(workload_state "$mode")

	processed=$(report_value "$dir/pgbench.out" "number of transactions actually processed:")
	commits=$processed
	# a burst client's first transaction is its wait for its arrival
	[ "$mode" = burst ] && commits=$((processed - clients))
	failed=$(report_value "$dir/pgbench.out" "number of failed transactions:")
	retries=$(report_value "$dir/pgbench.out" "total number of retries:")
	tps=$(report_value "$dir/pgbench.out" "tps = ")
	grew=$(workload_grew "$mode" "$before" "$after" "$commits")
	[ -z "$grew" ] ||
		die "LOST OR DOUBLED UPDATES: $mode $form, $clients clients, work $work ms: $grew, pgbench committed $commits"
	if [[ $form == mixed-* ]]; then
		occ_commits=$(script_commits "$dir/pgbench.out" 1)
		writer_commits=$(script_commits "$dir/pgbench.out" 2)
	fi

	case $form in
		pessimistic* | bare | occ-bare-nostats | *-lock | lock) attempts=$((commits + failed)) ;;
		pgbench-retry | client-rr-*) attempts=$((commits + failed + ${retries:-0})) ;;
		reserve* | update) attempts=$((commits + failed)) ;;
		occ-* | mixed-* | *-occ* | queue | batch | *-batch*) attempts=""
			if [ "$STATS" = 1 ]; then
				read -r attempts s_commits s_gave_up <<<"$(occ_stats)"
				# the writers of the mixed forms commit once per transaction
				if [ -n "$writer_commits" ]; then
					attempts=$((attempts + writer_commits))
					s_commits=$((s_commits + writer_commits))
				fi
				# pgbench -T does not count a failure that arrives after the
				# timer (the client just stops), so the server may see up to
				# one more give-up per client; commits must match exactly
				if [ "$s_commits" -ne "$commits" ] || [ "$s_gave_up" -lt "$failed" ] ||
					[ "$s_gave_up" -gt $((failed + clients)) ]; then
					die "occ.stats disagrees with pgbench: $mode $form, $clients clients: commits $s_commits vs $commits, gave_up $s_gave_up vs $failed"
				fi
				failed=$s_gave_up
			fi ;;
	esac

	read -r p50 p75 p90 p99 max completion <<<"$(latency_stats "$dir" "$filter")"
	[ "${length[0]}" = -T ] && [ "$mode" != storm ] &&
		read -r p99_done p99_first p99_steady p99_floor <<<"$(window_p99 "$dir" "$filter" "$(report_value "$dir/pgbench.out" "initial connection time =")" "$clients")"
	[ "$mode" = storm ] && storm_timeline "$dir" "$form" "$rep"
	# the first round's per-client latencies of a burst, for its plot
	[ "$mode" = burst ] && [ "$rep" = 1 ] &&
		cat "$dir"/log.* | awk '$2 == 2 && $3 ~ /^[0-9]+$/ { print $3 / 1000 }' | sort -g >"$OUT/runs/burst-$form-lat"
	[ "$KEEP_LOGS" = 1 ] || rm -f "$dir"/log.* "$dir/events"
	per_commit=$(awk -v a="$attempts" -v c="$commits" 'BEGIN { if (a != "" && c > 0) printf "%.3f", a / c }')
	echo "$mode,$form,$clients,$work,$rep,$commits,$failed,$attempts,$per_commit,$tps,$p50,$p99,$max,$completion,$occ_commits,$writer_commits,$p75,$p90,$p99_steady,$p99_done,$p99_first,$p99_floor" >>"$CSV"
	progress "$RUN_NO/$RUN_TOTAL $mode $form clients=$clients work=${work}ms: $commits commits, $(printf "%.0f" "$tps")/s, attempts/commit ${per_commit:-?}, p99 ${p99}ms, give-ups $failed$(
		[ "$mode" = storm ] && awk -F, -v f="$form" -v r="$rep" '$1 == f && $2 == r { printf ", recovery (p99, p50) %s, %s", $8, $10 }' "$OUT/storm.csv")"
	RUN_NO=$((RUN_NO + 1))
}

# count_runs: total number of runs, for the progress lines
count_runs() {
	local nforms nclients nwork nfixed
	nforms=$(wc -w <<<"$FORMS"); nclients=$(wc -w <<<"$CLIENTS")
	nwork=$(wc -w <<<"$WORK"); nfixed=$(wc -w <<<"$FIXED_CLIENTS")
	echo $(( DO_SWEEP * nforms * nclients * nwork + DO_FIXED * nforms * nfixed * REPS +
		DO_OVERHEAD * $(wc -w <<<"$OVERHEAD_FORMS") * OVERHEAD_REPS +
		DO_CONTENTION * ROUNDS * ($(wc -w <<<"$CONTENTION_CLIENTS") * $(wc -w <<<"$CONTENTION_FORMS") + 8 * DO_GUARDS) +
		DO_CLIENT * ROUNDS * $(wc -w <<<"$CLIENT_CLIENTS") * $(wc -w <<<"$CLIENT_FORMS") +
		DO_STORM * STORM_ROUNDS * $(wc -w <<<"$STORM_FORMS") + DO_BURST * BURST_ROUNDS * $(wc -w <<<"$BURST_FORMS") +
		DO_KEYS * KEYS_ROUNDS * $(keys_runs_per_round) + DO_BATCH * BATCH_ROUNDS * $(batch_runs_per_round) +
		DO_ESCROW * ESCROW_ROUNDS * $(escrow_runs_per_round) ))
}

# sweep: every work value x client count x form, for DURATION seconds each
sweep() {
	local work clients form
	for work in $WORK; do
		for clients in $CLIENTS; do
			for form in $FORMS; do
				run_one sweep "$form" "$clients" "$work" 1
			done
		done
	done
}

# fixed_work: N clients, one commit each, REPS times per form and N
fixed_work() {
	local rep clients form
	for rep in $(seq "$REPS"); do
		for clients in $FIXED_CLIENTS; do
			for form in $FORMS; do
				run_one fixed "$form" "$clients" "$FIXED_WORK_MS" "$rep"
			done
		done
	done
}

# in_turn REP FORM...: the forms in order in odd rounds, reversed in even
# ones, so that no form always runs first (after a VACUUM) or last
in_turn() {
	local rep=$1
	shift
	if [ $((rep % 2)) = 1 ]; then echo "$*"; else printf '%s\n' "$@" | tac | xargs; fi
}

# contention: queue mode against the lock and against backoff on the hot row
# (1 ms of work), then the guard workloads where backoff is fine: one body
# over 1,000 uniformly chosen rows, half of the calls on the hot row, one
# client (no work, rows chosen uniformly: the cost of an uncontended call),
# and lock-based writers mixed in.  Every round runs
# every form of every workload once, so drifts of the machine hit all alike.
contention() {
	local rep clients form forms
	for rep in $(seq "$ROUNDS"); do
		# shellcheck disable=SC2086 # a list of forms
		forms=$(in_turn "$rep" $CONTENTION_FORMS)
		for clients in $CONTENTION_CLIENTS; do
			for form in $forms; do
				HOT_PCT=100 run_one contention "$form" "$clients" 1 "$rep"
			done
		done
		[ "$DO_GUARDS" = 1 ] || continue
		for form in $(in_turn "$rep" occ-backoff occ-queue); do
			HOT_PCT=0 run_one guard-uniform "$form" "$GUARD_CLIENTS" 1 "$rep"
		done
		for form in $(in_turn "$rep" occ-backoff occ-queue-key); do
			HOT_PCT=50 run_one guard-halfhot "$form" "$GUARD_CLIENTS" 1 "$rep"
		done
		for form in $(in_turn "$rep" occ-backoff occ-queue); do
			HOT_PCT=0 run_one guard-single "$form" 1 0 "$rep"
		done
		for form in $(in_turn "$rep" mixed-gate mixed-nogate); do
			HOT_PCT=100 run_one guard-mixed "$form" "$GUARD_CLIENTS" 1 "$rep"
		done
	done
}

# client_mode: the application's own transactions (issue 17), the forms in
# turn in every round, as in the contention mode
client_mode() {
	local rep clients form
	for rep in $(seq "$ROUNDS"); do
		for clients in $CLIENT_CLIENTS; do
			# shellcheck disable=SC2086 # a list of forms
			for form in $(in_turn "$rep" $CLIENT_FORMS); do
				run_one client "$form" "$clients" "$CLIENT_WORK_MS" "$rep"
			done
		done
	done
}

# client_table: the client mode's forms against client-lock, from the
# medians and the paired ratios of each round
client_table() {
	echo
	echo "### The application's own transactions: ${CLIENT_CLIENTS// /, } clients, $CLIENT_WORK_MS ms of work in the client, median of $ROUNDS interleaved ${DURATION}s rounds"
	echo
	echo "x client-lock: the median over rounds of the ratio to client-lock in the same round. p99: of the transactions done by the deadline; rest: of those that began a second or more into the run (the first second is the warm-up: new sessions, a cold key); ideal = N clients / X commits/s; FIFO floor: the p99, over the rest, of the time that the N commits up to each transaction's own took (what a perfect FIFO queue would have made it wait with the run's own commit times). Targets for client-rr-key and client-rr-key-1rt: attempts/commit <= 1.2, commits/s >= 0.97 x client-lock, p99 <= 0.5 x client-lock and <= 1.3 x ideal, the rest's p99 <= 1.1 x ideal. client-fifo-lock is PostgreSQL's own FIFO queue, without pg_occ (client-lock after pg_advisory_xact_lock, waited for before the first statement as SET LOCAL occ.key waits before the snapshot): the tail and the commits that a FIFO queue has on this machine."
	echo
	echo "| form | clients | commits/s | x client-lock | attempts/commit | p99 ms | p99 x client-lock | p99 / ideal | rest p99 ms | x client-lock | rest p99 / ideal | FIFO floor / ideal | give-ups | targets |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
	join -j1 <(summarize client "$CLIENT_WORK_MS" commits_per_s attempts_per_commit p99_done_ms give_ups p99_steady_ms p99_floor_ms | awk '{ print $1 "/" $2, $0 }' | sort) \
		<(join -j1 <(join -j1 <(paired_ratio client "$CLIENT_WORK_MS" client-lock commits_per_s | awk '{ print $1 "/" $2, $3 }' | sort) \
			<(paired_ratio client "$CLIENT_WORK_MS" client-lock p99_done_ms | awk '{ print $1 "/" $2, $3 }' | sort)) \
			<(paired_ratio client "$CLIENT_WORK_MS" client-lock p99_steady_ms | awk '{ print $1 "/" $2, $3 }' | sort)) |
		cut -d' ' -f2- | awk -v order="$CLIENT_FORMS" 'BEGIN { n = split(order, o, " "); for (i = 1; i <= n; i++) r[o[i]] = i }
			{ print (($1 in r) ? r[$1] : 99), $0 }' | sort -k3,3n -k1,1n | cut -d' ' -f2- | awk '
		# form clients commits/s attempts p99 give-ups p99_rest floor x_commits x_p99 x_p99_rest
		{ verdict = ""; ideal = 1000 * $2 / $3
		  if ($1 ~ /^client-rr-key/)
			verdict = ($4 <= 1.2 && $9 >= 0.97 && $10 <= 0.5 && $5 <= 1.3 * ideal && $7 <= 1.1 * ideal) ? "met" : "missed:" ($4 > 1.2 ? " attempts" : "") ($9 < 0.97 ? " commits" : "") ($10 > 0.5 ? " p99 x lock" : "") ($5 > 1.3 * ideal ? " p99" : "") ($7 > 1.1 * ideal ? " steady p99" : "")
		  printf "| %s | %d | %.0f | %.3f | %.3f | %.0f | %.3f | %.3f | %s | %s | %s | %s | %d | %s |\n", $1, $2, $3, $9, $4, $5, $10, $5 / ideal, $7 == "-" ? "-" : sprintf("%.0f", $7), $7 == "-" ? "-" : sprintf("%.3f", $11), per($7, ideal), per($8, ideal), $6, verdict }
		# a p99 that the run has no calls for (--quick has no rest) is "-"
		function per(v, d) { return v == "-" ? "-" : sprintf("%.3f", v / d) }'
}

# contention_tables: queue mode's targets and guards, from the medians
contention_tables() {
	local fifo=""
	[[ " $CONTENTION_FORMS " == *" fifo-lock "* ]] &&
		fifo=" fifo-lock is PostgreSQL's own FIFO queue, without pg_occ (pessimistic-1rt after pg_advisory_xact_lock): the tail that a FIFO queue has on this machine."
	echo
	echo "### Hot row: ${CONTENTION_CLIENTS// /, } clients, 1 ms of work, median of $ROUNDS interleaved ${DURATION}s rounds"
	echo
	echo "Ideal FIFO wait = N clients / X commits/s of the same run. x pessimistic-1rt: the median over rounds of the ratio to pessimistic-1rt in the same round. p99: of the calls done by the deadline (those in flight then wait for pgbench's own stop, for every form); first s: of those that began in the run's first second (new sessions, cold keys); rest: the others (the steady state). FIFO floor: the p99, over the rest, of the time that the N commits up to each call's own took, which is what a perfect FIFO queue would have made those calls wait with the run's own commit times: the commit rate's drift alone puts it above 1 (a rest p99 at the floor is a queue that kept its order). Targets for the queue forms: commits/s >= 0.97 x pessimistic-1rt, attempts/commit <= 1.2, p99 <= 1.3 x ideal, the rest's p99 <= 1.1 x ideal, 0 give-ups.$fifo"
	echo
	echo "| form | clients | commits/s | x pessimistic-1rt | attempts/commit | p99 ms | ideal ms | p99 / ideal | first s p99 / ideal | rest p99 / ideal | FIFO floor / ideal | give-ups | targets |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
	join -j1 <(summarize contention 1 commits_per_s attempts_per_commit p99_done_ms give_ups p99_first_ms p99_steady_ms p99_floor_ms | awk '{ print $1 "/" $2, $0 }' | sort) \
		<(paired_ratio contention 1 pessimistic-1rt commits_per_s | awk '{ print $1 "/" $2, $3 }' | sort) |
		cut -d' ' -f2- | awk -v order="$CONTENTION_FORMS" 'BEGIN { n = split(order, o, " "); for (i = 1; i <= n; i++) r[o[i]] = i }
			{ print (($1 in r) ? r[$1] : 99), $0 }' | sort -k3,3n -k1,1n | cut -d' ' -f2- | awk '
		{ form[NR] = $1; n[NR] = $2; x[NR] = $3; a[NR] = $4; p[NR] = $5; g[NR] = $6; f[NR] = $7; s[NR] = $8; fl[NR] = $9; q[NR] = $10 }
		END { for (i = 1; i <= NR; i++) {
			ratio = q[i]; ideal = 1000 * n[i] / x[i]; verdict = ""
			if (form[i] ~ /^occ-queue/)
				verdict = (ratio >= 0.97 && a[i] <= 1.2 && p[i] <= 1.3 * ideal && s[i] <= 1.1 * ideal && g[i] == 0) ? "met" : "missed:" (ratio < 0.97 ? " commits" : "") (a[i] > 1.2 ? " attempts" : "") (p[i] > 1.3 * ideal ? " p99" : "") (s[i] > 1.1 * ideal ? " steady p99" : "") (g[i] > 0 ? " give-ups" : "")
			printf "| %s | %d | %.0f | %.3f | %.3f | %.0f | %.0f | %.3f | %s | %s | %s | %d | %s |\n", form[i], n[i], x[i], ratio, a[i], p[i], ideal, p[i] / ideal, per(f[i], ideal), per(s[i], ideal), per(fl[i], ideal), g[i], verdict } }
		# a p99 that the run has no calls for (--quick has no rest) is "-"
		function per(v, d) { return v == "-" ? "-" : sprintf("%.3f", v / d) }'
	[ "$DO_GUARDS" = 1 ] || return 0
	echo
	echo "### Queue mode: guard workloads, $GUARD_CLIENTS clients (1 for single), median of $ROUNDS interleaved rounds"
	echo
	echo "x backoff: the median over rounds of the ratio to occ-backoff in the same round."
	echo
	echo "| workload | form | commits/s | x backoff | attempts/commit | p99 ms | give-ups | target |"
	echo "|---|---|---:|---:|---:|---:|---:|---|"
	local mode work
	for mode in guard-uniform guard-halfhot guard-single; do
		work=1; [ "$mode" = guard-single ] && work=0
		join -j1 <(summarize "$mode" "$work" commits_per_s attempts_per_commit p99_ms give_ups | awk '{ print $1, $0 }' | sort) \
			<(paired_ratio "$mode" "$work" occ-backoff commits_per_s | awk '{ print $1, $3 }' | sort) |
			cut -d' ' -f2- | awk -v mode="$mode" '
			{ form[NR] = $1; x[NR] = $3; a[NR] = $4; p[NR] = $5; g[NR] = $6; q[NR] = $7 }
			END { for (i = 1; i <= NR; i++) { ratio = q[i]; t = ""
				if (form[i] != "occ-backoff") {
					if (mode == "guard-uniform") t = ratio >= 0.9 ? "met (>= 0.9 x backoff)" : "missed (< 0.9 x backoff)"
					if (mode == "guard-halfhot") t = a[i] <= 1.2 ? "met (<= 1.2 attempts)" : "missed (> 1.2 attempts)"
					if (mode == "guard-single") t = "within noise if near 1"
				}
				printf "| %s | %s | %.0f | %.3f | %.3f | %.1f | %d | %s |\n", substr(mode, 7), form[i], x[i], ratio, a[i], p[i], g[i], t } }'
	done
	summarize guard-mixed 1 commits_per_s occ_commits writer_commits p99_ms give_ups | awk '
		{ share = ($4 + $5) > 0 ? $4 / ($4 + $5) : 0
		  verdict = $1 == "mixed-gate" ? (share >= 0.25 && share <= 0.75 ? "both served" : "one class starved") : "reference, without occ.gate"
		  printf "| mixed | %s | %.0f | | | %.1f | %d | %s: occ.retry %d, writers %d commits (occ.retry share %.2f) |\n", $1, $3, $6, $7, verdict, $4, $5, share }'
}

# overhead: uncontended cost of occ.retry, 1 client, one UPDATE: the forms
# take turns, OVERHEAD_REPS rounds, so that drifts of a shared machine hit
# them alike; the report gives medians and ratios to the bare statement
overhead() {
	local rep form
	for rep in $(seq "$OVERHEAD_REPS"); do
		for form in $OVERHEAD_FORMS; do
			run_one overhead "$form" 1 0 "$rep"
		done
	done
}

# overhead_table: commits/s of the overhead forms and their ratio to bare
overhead_table() {
	echo
	echo "### Uncontended overhead: 1 client, one UPDATE, median of $OVERHEAD_REPS interleaved ${DURATION}s runs"
	echo
	echo "| form | commits/s | ratio to bare | p50 ms | p99 ms |"
	echo "|---|---:|---:|---:|---:|"
	summarize overhead 0 commits_per_s p50_ms p99_ms | awk '
		NR == 1 { bare = $3 }
		{ printf "| %s | %.0f | %.3f | %.3g | %.3g |\n", $1, $3, $3 / bare, $4, $5 }'
}

# summarize MODE WORK_MS COLUMNS...: median of the named CSV columns per
# form and client count, over the rows (rounds, repetitions) of MODE and
# WORK_MS (blank if any blank); prints "form clients median1 median2 ..."
# lines in CSV order.  Medians, because the machine is shared and noisy.
summarize() {
	local mode=$1 work=$2
	shift 2
	awk -F, -v mode="$mode" -v work="$work" -v cols="$*" '
		function median(k, j,  a, i, t, x, cnt_) {
			cnt_ = cnt[k]
			for (i = 1; i <= cnt_; i++) a[i] = val[k, j, i]
			for (i = 2; i <= cnt_; i++) { x = a[i]; for (t = i - 1; t >= 1 && a[t] > x; t--) a[t + 1] = a[t]; a[t + 1] = x }
			return cnt_ % 2 ? a[(cnt_ + 1) / 2] : (a[cnt_ / 2] + a[cnt_ / 2 + 1]) / 2
		}
		NR == 1 { for (i = 1; i <= NF; i++) idx[$i] = i; n = split(cols, c, " "); next }
		$1 != mode || $4 != work { next }
		{ k = $2 " " $3; if (!(k in cnt)) order[++m] = k; cnt[k]++
		  # a column that an older CSV lacks is "-"
		  for (j = 1; j <= n; j++) { v = (c[j] in idx) ? $(idx[c[j]]) : ""; if (v == "" || v == "-") bad[k, j] = 1; val[k, j, cnt[k]] = v + 0 } }
		END { for (o = 1; o <= m; o++) { k = order[o]; line = k
		        for (j = 1; j <= n; j++) line = line " " (((k, j) in bad) ? "-" : sprintf("%.6g", median(k, j)))
		        print line } }' "$CSV"
}

# paired_ratio MODE WORK_MS REF COLUMN: per form and client count, the
# median over rounds of COLUMN / REF's COLUMN in the same round (a paired
# comparison, which the machine's drifts between rounds do not blur);
# prints "form clients ratio" lines
paired_ratio() {
	awk -F, -v mode="$1" -v work="$2" -v ref="$3" -v col="$4" '
		NR == 1 { for (i = 1; i <= NF; i++) idx[$i] = i; next }
		$1 != mode || $4 != work { next }
		{ k = $2 " " $3; if (!(k in seen)) { seen[k] = 1; order[++m] = k }
		  v[k, $5] = $(idx[col]); if ($2 == ref) r[$3, $5] = $(idx[col]); reps[$5] = 1 }
		END { for (o = 1; o <= m; o++) { k = order[o]; split(k, f, " "); n = 0
		        for (rp in reps) if (((k, rp) in v) && ((f[2], rp) in r) && r[f[2], rp] > 0) a[++n] = v[k, rp] / r[f[2], rp]
		        for (i = 2; i <= n; i++) { x = a[i]; for (t = i - 1; t >= 1 && a[t] > x; t--) a[t + 1] = a[t]; a[t + 1] = x }
		        printf "%s %.4f\n", k, n == 0 ? 0 : (n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2) } }' "$CSV"
}

# markdown_table MODE WORK_MS TITLE HEADERS COLUMNS: a markdown table
markdown_table() {
	local mode=$1 work=$2 title=$3 headers=$4
	shift 4
	echo
	echo "### $title"
	echo
	echo "| form | clients | ${headers// / | } |" | tr '_' ' '
	echo "|---|---:|$(for _ in "$@"; do printf -- '---:|'; done)"
	summarize "$mode" "$work" "$@" | awk '
		function fmt(v) { return v == "-" ? v : v >= 100 ? sprintf("%.0f", v) : sprintf("%.3g", v) }
		{ line = "| " $1 " | " $2; for (i = 3; i <= NF; i++) line = line " | " fmt($i); print line " |" }'
}

# line_styles: ten distinguishable colours and point types for gnuplot
line_styles() {
	local i=1 colour
	for colour in black red blue dark-green orange dark-violet dark-cyan brown magenta gray50; do
		echo "set linetype $i lc rgb '$colour' lw 1.5 pt $i"
		i=$((i + 1))
	done
	echo "set linetype cycle 10"
}

# plot MODE WORK_MS COLUMN YLABEL TITLE PNG: one line per form against clients
plot() {
	local mode=$1 work=$2 col=$3 ylabel=$4 title=$5 png=$6 data logx="" xlabel
	data="$OUT/runs/plot-$mode-w$work-$col.dat"
	summarize "$mode" "$work" "$col" | awk '
		{ if (!($1 in seen)) { seen[$1] = 1; forms[++nf] = $1 }
		  if (!($2 in xs)) { xs[$2] = 1; x[++nx] = $2 }
		  y[$1, $2] = ($3 == "-" ? "?" : $3) }
		END { line = "clients"; for (f = 1; f <= nf; f++) line = line " " forms[f]; print line
		      for (i = 1; i <= nx; i++) { line = x[i]
		        for (f = 1; f <= nf; f++) line = line " " (((forms[f], x[i]) in y) ? y[forms[f], x[i]] : "?")
		        print line } }' | { IFS= read -r header; echo "$header"; sort -n; } >"$data"
	if [ "$mode" = fixed ]; then xlabel="N clients, one commit each"; else logx="set logscale x 2"; xlabel="clients"; fi
	gnuplot <<EOF 2>&1 | { grep -v "empty x range" || true; } >&2
set terminal $TERMINAL size 900,560 noenhanced
set output '$OUT/$png'
set title '$title'
set xlabel '$xlabel'
$(line_styles)
set ylabel '$ylabel'
set key outside right
set grid
set datafile missing '?'
$logx
plot for [i=2:$(head -1 "$data" | wc -w)] '$data' using 1:i with linespoints title columnheader(i)
EOF
}

# bars MODE WORK_MS CLIENTS TITLE PNG: commits/s, attempts per commit and
# p99 latency per form (medians), as bars: the contention mode at one client
# count (the headline)
bars() {
	local mode=$1 work=$2 clients=$3 title=$4 png=$5 data
	data="$OUT/runs/plot-$mode-bars.dat"
	summarize "$mode" "$work" commits_per_s attempts_per_commit p99_ms |
		awk -v n="$clients" '$2 == n { print "\"" $1 "\"", $3, $4, $5 }' >"$data"
	[ -s "$data" ] || return 0
	gnuplot <<EOF 2>&1 | { grep -v "empty x range" || true; } >&2
set terminal $TERMINAL size 1200,420 noenhanced
set output '$OUT/$png'
set style fill solid 0.6
set boxwidth 0.6
set grid ytics
set xtics rotate by -30
unset key
set multiplot layout 1,3 title '$title'
set title 'commits/s'
set yrange [0:*]
plot '$data' using 0:2:xtic(1) with boxes lc rgb 'steelblue'
set title 'attempts per commit (log)'
set logscale y
set yrange [0.5:*]
plot '$data' using 0:3:xtic(1) with boxes lc rgb 'dark-orange'
set title 'p99 latency (ms, log)'
set yrange [1:*]
plot '$data' using 0:4:xtic(1) with boxes lc rgb 'dark-red'
unset multiplot
EOF
}

# report: markdown tables (results.md, stdout) and plots
report() {
	local work png
	[ -f "$OUT/storm.csv" ] || DO_STORM=0
	[ "$DO_STORM" = 1 ] && STORM_RUN_FORMS=$(for f in $STORM_FORMS; do awk -F, -v f="$f" '$1 == f { print f; exit }' "$OUT/storm.csv"; done | xargs)
	{
		echo "## pg_occ hot-row benchmark ($(date -u +%Y-%m-%d), $(nproc) cores, isolation $ISO, base $BASE, cap $CAP, max attempts $MAX_ATTEMPTS, commits $([ "$DURABLE" = 1 ] && echo "durable: fsync and synchronous_commit on" || echo "not durable: synchronous_commit off")$([ $((DO_BATCH + DO_ESCROW)) -gt 0 ] && echo "; the batch and escrow modes set durability per run"))"
		[ "$DO_CONTENTION" = 1 ] && contention_tables
		[ "$DO_CLIENT" = 1 ] && client_table
		[ "$DO_STORM" = 1 ] && storm_table
		[ "$DO_BURST" = 1 ] && burst_table
		[ "$DO_KEYS" = 1 ] && keys_tables
		[ "$DO_BATCH" = 1 ] && batch_tables
		[ "$DO_ESCROW" = 1 ] && escrow_tables
		if [ "$DO_SWEEP" = 1 ]; then
			for work in $WORK; do
				markdown_table sweep "$work" "Sweep, work_ms = $work, ${DURATION}s per run" \
					"commits/s attempts/commit p50_ms p99_ms max_ms give-ups" \
					commits_per_s attempts_per_commit p50_ms p99_ms max_ms give_ups
			done
		fi
		[ "$DO_OVERHEAD" = 1 ] && overhead_table
		if [ "$DO_FIXED" = 1 ]; then
			markdown_table fixed "$FIXED_WORK_MS" "Fixed work: N clients commit one update each (work_ms = $FIXED_WORK_MS, median of $REPS)" \
				"attempts completion_ms give-ups" attempts completion_ms give_ups
		fi
	} | tee "$OUT/results.md"

	TERMINAL=pngcairo
	gnuplot -e "set terminal pngcairo" 2>/dev/null || TERMINAL=png
	if [ "$DO_SWEEP" = 1 ]; then
		for work in $WORK; do
			plot sweep "$work" commits_per_s "commits/s" "Throughput, work_ms=$work" "throughput-w$work.png"
			plot sweep "$work" attempts_per_commit "attempts per commit" "Attempts per commit, work_ms=$work" "attempts-w$work.png"
			plot sweep "$work" p99_ms "p99 latency (ms)" "p99 latency, work_ms=$work" "p99-w$work.png"
		done
	fi
	if [ "$DO_CONTENTION" = 1 ]; then
		if [ "$(wc -w <<<"$CONTENTION_CLIENTS")" = 1 ]; then
			bars contention 1 "$CONTENTION_CLIENTS" "Hot row: $CONTENTION_CLIENTS clients, 1 ms of work" "hotrow-c$CONTENTION_CLIENTS.png"
		else
			plot contention 1 p99_ms "p99 latency (ms)" "Queue mode: p99 latency, work_ms=1" "contention-p99.png"
			plot contention 1 attempts_per_commit "attempts per commit" "Queue mode: attempts per commit, work_ms=1" "contention-attempts.png"
		fi
	fi
	if [ "$DO_CLIENT" = 1 ] && [ "$(wc -w <<<"$CLIENT_CLIENTS")" = 1 ]; then
		bars client "$CLIENT_WORK_MS" "$CLIENT_CLIENTS" "Client-side transactions: $CLIENT_CLIENTS clients, $CLIENT_WORK_MS ms of work in the client" "client-c$CLIENT_CLIENTS.png"
	fi
	[ "$DO_STORM" = 1 ] && storm_plot
	[ "$DO_BURST" = 1 ] && burst_plot
	if [ "$DO_FIXED" = 1 ]; then
		plot fixed "$FIXED_WORK_MS" attempts "total attempts (work)" "Fixed work: total attempts" "fixed-work-attempts.png"
		plot fixed "$FIXED_WORK_MS" completion_ms "time until all done (ms)" "Fixed work: completion time" "fixed-work-completion.png"
	fi
	{
		echo
		echo "Tables: $OUT/results.md (printed above); data: $OUT/results.csv$([ "$DO_STORM" = 1 ] && echo ", $OUT/storm.csv, $OUT/storm-timeline.csv")"
		echo "Plots:"
		for png in "$OUT"/*.png; do
			[ ! -e "$png" ] || echo "  $png"
		done
	} >&2
}

main() {
	parse_args "$@"
	if [ "$REPORT_ONLY" = 1 ]; then
		CSV="$OUT/results.csv"
		[ -f "$CSV" ] || die "no $CSV to report on"
		mkdir -p "$OUT/runs"
		report
		return
	fi
	enter_cluster "$@"
	command -v gnuplot >/dev/null || die "gnuplot is missing (apt-get install gnuplot-nox)"
	rm -rf "$OUT/runs" "$OUT"/*.png "$OUT/storm.csv" "$OUT/storm-timeline.csv"
	mkdir -p "$OUT/runs"
	CSV="$OUT/results.csv"
	echo "mode,form,clients,work_ms,rep,commits,give_ups,attempts,attempts_per_commit,commits_per_s,p50_ms,p99_ms,max_ms,completion_ms,occ_commits,writer_commits,p75_ms,p90_ms,p99_steady_ms,p99_done_ms,p99_first_ms,p99_floor_ms" >"$CSV"
	prepare_db
	RUN_NO=1
	RUN_TOTAL=$(count_runs)
	[ "$DO_SWEEP" = 1 ] && sweep
	[ "$DO_FIXED" = 1 ] && fixed_work
	[ "$DO_OVERHEAD" = 1 ] && prepare_db && overhead
	[ "$DO_CONTENTION" = 1 ] && prepare_db && contention
	[ "$DO_CLIENT" = 1 ] && prepare_db && client_mode
	[ "$DO_STORM" = 1 ] && prepare_db && storm
	[ "$DO_BURST" = 1 ] && prepare_db && burst
	[ "$DO_KEYS" = 1 ] && prepare_db && keys
	[ "$DO_BATCH" = 1 ] && prepare_db && batch_mode
	[ "$DO_ESCROW" = 1 ] && prepare_db && escrow_mode
	report
}

main "$@"
