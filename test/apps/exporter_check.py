#!/usr/bin/python3
# The checking half of test/apps/exporter.sh: scrapes the exporter's
# /metrics once and compares it with occ.stats and occ.stats_info, read
# directly with psycopg and aggregated here (independently of the queries
# file's SQL):
#   - every (datname, rolname) of occ.stats has its series, equal to the sums
#     of its rows: counters (..._total), times in seconds (occ.stats has
#     milliseconds), maxima, and the attempts histogram: cumulative buckets
#     le="1","2","4","8","16","+Inf", _count = +Inf bucket, _sum = attempts;
#   - the calls that exporter.sh made in its database give the exact numbers
#     it expects (EXPECT_* below);
#   - the metric types are right (counter, gauge, histogram), labels are
#     only server, datname, rolname (and le; rel and col for the reservable
#     columns), and no label value holds a
#     body's text;
#   - occ.key_stats the same way, per (datname, rolname), and the 3
#     transactions with SET LOCAL occ.key that exporter.sh made;
#   - occ.reservations (pg_occ 0.5.0) per (datname, rel, col), and the
#     reservations that exporter.sh made (2 taken, 1 refused);
#   - occ.stats_info: dealloc and stats_reset; the retry budget columns
#     (pg_occ 0.3.0) when the installed occ.stats_info has them, else no
#     pg_occ_budget series at all (said loudly);
#   - the exporter reported no scrape error.
# Usage: exporter_check.py URL DATABASE  (PG* variables for the connection)
import math
import re
import sys
import urllib.request

import psycopg

url, db = sys.argv[1], sys.argv[2]
sys.stdout.reconfigure(line_buffering=True)  # in order with the failures on stderr
checks = 0


def check(what, cond, got=None):
    global checks
    if not cond:
        print(f"exporter: FAIL: {what}" + ("" if got is None else f" (got {got!r})"), file=sys.stderr)
        sys.exit(1)
    checks += 1


def close(a, b):
    return a == b or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


# --- one scrape, parsed (Prometheus text format 0.0.4) -----------------------
text = urllib.request.urlopen(url, timeout=30).read().decode()
types = {}
samples = []  # (name, {label: value}, value)
label_re = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
for line in text.splitlines():
    if line.startswith("# TYPE "):
        _, _, name, typ = line.split(" ", 3)
        types[name] = typ
    elif line and not line.startswith("#"):
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$', line)
        check(f"a sample line parses: {line}", m)
        labels = dict((k, v.replace('\\"', '"').replace('\\\\', '\\')) for k, v in label_re.findall(m.group(2) or ""))
        samples.append((m.group(1), labels, float(m.group(3))))
occ = [s for s in samples if s[0].startswith("pg_occ_")]
print(f"exporter: scraped {len(samples)} samples, {len(occ)} of them pg_occ_*")


def value(name, **labels):
    found = [v for n, ls, v in samples if n == name and all(ls.get(k) == x for k, x in labels.items())]
    check(f"one sample {name}{labels}", len(found) == 1, found)
    return found[0]


# --- occ.stats, read directly, aggregated per (datname, rolname) -------------
conn = psycopg.connect(dbname=db, autocommit=True)  # the exporter's database
rows = conn.execute("""
    SELECT coalesce(d.datname, ''), coalesce(r.rolname, ''), s.query, s.calls, s.commits, s.gave_up, s.errors,
           s.attempts, s.serialization_failures, s.deadlocks, s.other_failures, s.queued,
           s.total_sleep_time, s.total_wait_time, s.total_time, s.max_sleep_time, s.max_wait_time,
           s.max_attempts, s.attempts_histogram
      FROM occ.stats s LEFT JOIN pg_database d ON d.oid = s.dbid LEFT JOIN pg_roles r ON r.oid = s.userid""").fetchall()
groups = {}
texts = set()
for (datname, rolname, query, *nums, hist) in rows:
    texts.add(query)
    g = groups.setdefault((datname, rolname), {"bodies": 0, "sums": [0] * 12, "maxes": [0, 0, 0], "hist": [0] * 6})
    g["bodies"] += 1
    g["sums"] = [a + b for a, b in zip(g["sums"], nums[:12])]
    g["maxes"] = [max(a, b) for a, b in zip(g["maxes"], nums[12:])]
    g["hist"] = [a + b for a, b in zip(g["hist"], hist)]
check("occ.stats has rows", groups)

counters = ["calls", "commits", "gave_up", "errors", "attempts", "serialization_failures", "deadlocks",
            "other_failures", "queued", "sleep_seconds", "wait_seconds", "time_seconds"]
for name in counters:
    check(f"pg_occ_stats_{name}_total is a counter", types.get(f"pg_occ_stats_{name}_total") == "counter",
          types.get(f"pg_occ_stats_{name}_total"))
for name in ["bodies", "max_sleep_seconds", "max_wait_seconds", "max_attempts"]:
    check(f"pg_occ_stats_{name} is a gauge", types.get(f"pg_occ_stats_{name}") == "gauge")
check("pg_occ_stats_attempts_per_call is a histogram", types.get("pg_occ_stats_attempts_per_call") == "histogram")

for (datname, rolname), g in groups.items():
    lab = {"datname": datname, "rolname": rolname}
    check(f"{lab}: bodies", value("pg_occ_stats_bodies", **lab) == g["bodies"])
    sums = g["sums"][:9] + [t / 1000 for t in g["sums"][9:]]  # the three times: ms -> s
    for name, expected in zip(counters, sums):
        got = value(f"pg_occ_stats_{name}_total", **lab)
        check(f"{lab}: pg_occ_stats_{name}_total = {expected}", close(got, expected), got)
    for name, expected in zip(["max_sleep_seconds", "max_wait_seconds", "max_attempts"],
                              [g["maxes"][0] / 1000, g["maxes"][1] / 1000, g["maxes"][2]]):
        got = value(f"pg_occ_stats_{name}", **lab)
        check(f"{lab}: pg_occ_stats_{name} = {expected}", close(got, expected), got)
    cumulative = [sum(g["hist"][:i + 1]) for i in range(6)]
    for le, expected in zip(["1", "2", "4", "8", "16", "+Inf"], cumulative):
        got = value("pg_occ_stats_attempts_per_call_bucket", le=le, **lab)
        check(f"{lab}: bucket le={le} = {expected} (cumulative)", got == expected, got)
    check(f"{lab}: _count = +Inf bucket = {cumulative[-1]}",
          value("pg_occ_stats_attempts_per_call_count", **lab) == cumulative[-1])
    check(f"{lab}: _sum = attempts = {g['sums'][4]}",
          value("pg_occ_stats_attempts_per_call_sum", **lab) == g["sums"][4])
print(f"exporter: pg_occ_stats_* equal occ.stats for {len(groups)} (datname, rolname) groups, {len(rows)} bodies")

# --- batch mode (pg_occ 0.4.0), per (datname, rolname), where occ.stats has it ----
has_batch = conn.execute("SELECT count(*) FROM information_schema.columns WHERE table_schema = 'occ'"
                         " AND table_name = 'stats' AND column_name = 'batched'").fetchone()[0] == 1
if has_batch:
    batch = {}
    for datname, rolname, batched, mean in conn.execute("""
        SELECT coalesce(d.datname, ''), coalesce(r.rolname, ''), coalesce(s.batched, 0), coalesce(s.mean_batch_size, 0)
          FROM occ.stats s LEFT JOIN pg_database d ON d.oid = s.dbid LEFT JOIN pg_roles r ON r.oid = s.userid"""):
        b = batch.setdefault((datname, rolname), [0, 0.0])
        b[0] += batched
        b[1] += batched * mean
    for name in ["calls_total", "size_calls_total"]:
        check(f"pg_occ_batch_{name} is a counter", types.get(f"pg_occ_batch_{name}") == "counter")
    for (datname, rolname), (calls, sizes) in batch.items():
        lab = {"datname": datname, "rolname": rolname}
        got = value("pg_occ_batch_calls_total", **lab)
        check(f"{lab}: pg_occ_batch_calls_total = {calls}", got == calls, got)
        got = value("pg_occ_batch_size_calls_total", **lab)
        check(f"{lab}: pg_occ_batch_size_calls_total = {sizes}", close(got, sizes), got)
    print(f"exporter: pg_occ_batch_* equal occ.stats for {len(batch)} groups,"
          f" {sum(c for c, _ in batch.values())} calls batched")
else:
    check("no pg_occ_batch series without the batch columns",
          not [s for s in occ if s[0].startswith("pg_occ_batch_")])
    print("exporter: *** the installed occ.stats has no batched column: pg_occ_batch_* not checked ***")

# --- occ.key_stats (pg_occ 0.4.0), per (datname, rolname) ------------------------
keys = {}
for datname, rolname, *nums in conn.execute("""
    SELECT coalesce(d.datname, ''), coalesce(r.rolname, ''), s.transactions, s.commits, s.serialization_failures,
           s.deadlocks, s.other_failures, s.queued, s.total_wait_time, s.max_wait_time
      FROM occ.key_stats s LEFT JOIN pg_database d ON d.oid = s.dbid LEFT JOIN pg_roles r ON r.oid = s.userid"""):
    k = keys.setdefault((datname, rolname), [0] * 9)
    k[:8] = [k[0] + 1] + [a + b for a, b in zip(k[1:8], nums[:7])]
    k[8] = max(k[8], nums[7])
key_counters = ["transactions", "commits", "serialization_failures", "deadlocks", "other_failures", "queued",
                "wait_seconds"]
for name in key_counters:
    check(f"pg_occ_key_stats_{name}_total is a counter", types.get(f"pg_occ_key_stats_{name}_total") == "counter")
for name in ["keys", "max_wait_seconds"]:
    check(f"pg_occ_key_stats_{name} is a gauge", types.get(f"pg_occ_key_stats_{name}") == "gauge")
for (datname, rolname), k in keys.items():
    lab = {"datname": datname, "rolname": rolname}
    check(f"{lab}: keys", value("pg_occ_key_stats_keys", **lab) == k[0])
    for name, expected in zip(key_counters, k[1:7] + [k[7] / 1000]):
        got = value(f"pg_occ_key_stats_{name}_total", **lab)
        check(f"{lab}: pg_occ_key_stats_{name}_total = {expected}", close(got, expected), got)
    got = value("pg_occ_key_stats_max_wait_seconds", **lab)
    check(f"{lab}: pg_occ_key_stats_max_wait_seconds = {k[8] / 1000}", close(got, k[8] / 1000), got)
mine_keys = {"datname": db, "rolname": conn.execute("SELECT current_user").fetchone()[0]}
got = tuple(value(f"pg_occ_key_stats_{name}_total", **mine_keys) for name in key_counters[:3])
check(f"{db}: SET LOCAL occ.key: 3 transactions, 2 commits, 1 serialization failure", got == (3, 2, 1), got)
print(f"exporter: pg_occ_key_stats_* equal occ.key_stats for {len(keys)} groups")

# --- exporter.sh's own calls, exactly -------------------------------------------
user = conn.execute("SELECT current_user").fetchone()[0]
mine = {"datname": db, "rolname": user}
# 3 x 1 attempt, 2 x 2 attempts (queue mode), 1 x 4, 1 x 6, 1 give-up after 2, 1 refused (0)
# (exporter.sh's storm, if any, is a body of its own: 'SELECT fail_until(1000)')
storm = [r for r in rows if r[0] == db and r[2] == "SELECT fail_until(1000)"]
expected = {"calls": 9, "commits": 7, "gave_up": 1, "errors": 1, "attempts": 19, "serialization_failures": 12}
if storm:
    s_calls, s_attempts, s_failures, hist = storm[0][3], storm[0][7], storm[0][8], storm[0][-1]
    check("the storm: one call that gave up", (s_calls, storm[0][5]) == (1, 1), storm[0])
    expected.update(calls=10, gave_up=2, attempts=19 + s_attempts, serialization_failures=12 + s_failures)
for name, n in expected.items():
    check(f"{db}: pg_occ_stats_{name}_total = {n}", value(f"pg_occ_stats_{name}_total", **mine) == n,
          value(f"pg_occ_stats_{name}_total", **mine))
check(f"{db}: queued calls > 0", value("pg_occ_stats_queued_total", **mine) > 0)
want = [3, 6, 7, 8, 8, 8]  # cumulative: 3 x 1 attempt, 3 x 2, 1 x 4, 1 x 6
if storm:
    want = [w + sum(hist[:i + 1]) for i, w in enumerate(want)]
buckets = [value("pg_occ_stats_attempts_per_call_bucket", le=le, **mine) for le in ["1", "2", "4", "8", "16", "+Inf"]]
check(f"{db}: buckets 1, 2, 4, 8, 16, +Inf = {want}", buckets == want, buckets)
got = (value("pg_occ_stats_attempts_per_call_count", **mine), value("pg_occ_stats_attempts_per_call_sum", **mine))
check(f"{db}: _count {want[-1]}, _sum {expected['attempts']}", got == (want[-1], expected["attempts"]), got)
print(f"exporter: {db}: {expected}, buckets {[int(b) for b in buckets]}: as made"
      + (f" (with the storm: {s_attempts} attempts, gave up)" if storm else ""))

# --- labels: only server, datname, rolname, le (rel, col for reservations); no body text
for name, labels, _ in occ:
    allowed = {"server", "datname", "rolname"} | ({"le"} if name.endswith("_bucket") else set())
    if name.startswith(("pg_occ_stats_info_", "pg_occ_budget_")):
        allowed = {"server"}
    if name.startswith("pg_occ_reservations_"):
        allowed = {"server", "datname", "rel", "col"}
    check(f"{name}: labels {sorted(labels)} within {sorted(allowed)}", set(labels) <= allowed, labels)
    for v in labels.values():
        check(f"{name}: no label holds a body's text ({v!r})",
              not any(t in v for t in texts if t) and "SELECT" not in v.upper(), v)
occ_lines = "\n".join(line for line in text.splitlines() if line.startswith("pg_occ_"))
check("no body text anywhere in the pg_occ_* samples",
      not any(t in occ_lines for t in texts if t and len(t) > 8), [t for t in texts if t in occ_lines])

# --- occ.stats_info, and the retry budget if this pg_occ has it -------------------
dealloc, reset = conn.execute("SELECT dealloc, extract(epoch FROM stats_reset)::float8 FROM occ.stats_info").fetchone()
check("pg_occ_stats_info_dealloc_total is a counter", types.get("pg_occ_stats_info_dealloc_total") == "counter")
check(f"pg_occ_stats_info_dealloc_total = {dealloc}", value("pg_occ_stats_info_dealloc_total") == dealloc)
check(f"pg_occ_stats_info_reset_timestamp_seconds = {reset}",
      close(value("pg_occ_stats_info_reset_timestamp_seconds"), reset))
budget_cols = [c for (c,) in conn.execute(
    "SELECT column_name FROM information_schema.columns WHERE table_schema = 'occ' AND table_name = 'stats_info'"
    " AND column_name IN ('budget_tokens', 'budget_refusals', 'last_storm') ORDER BY 1")]
if budget_cols:
    check("occ.stats_info has all three budget columns", len(budget_cols) == 3, budget_cols)
    tokens, refusals, storm = conn.execute(
        "SELECT budget_tokens, budget_refusals, coalesce(extract(epoch FROM last_storm)::float8, 0)"
        " FROM occ.stats_info").fetchone()
    check("pg_occ_budget_refusals_total is a counter", types.get("pg_occ_budget_refusals_total") == "counter")
    check(f"pg_occ_budget_refusals_total = {refusals}", value("pg_occ_budget_refusals_total") == refusals)
    got = value("pg_occ_budget_tokens")
    if tokens is None:  # no budget (occ.retry_budget = 0): NULL, which the exporter shows as NaN
        check("pg_occ_budget_tokens is NaN when occ.stats_info.budget_tokens is NULL", math.isnan(got), got)
    else:  # tokens refill with time: between the scrape and now they can only have grown
        check(f"pg_occ_budget_tokens <= {tokens}", got <= tokens + 1e-9, got)
    check(f"pg_occ_budget_last_storm_timestamp_seconds = {storm}",
          close(value("pg_occ_budget_last_storm_timestamp_seconds"), storm))
    print(f"exporter: retry budget: tokens {tokens}, refusals {refusals}, last storm {storm}: exported")
else:
    check("no pg_occ_budget series without the budget columns",
          not [s for s in occ if s[0].startswith("pg_occ_budget_")], [s for s in occ if s[0].startswith("pg_occ_budget_")])
    print("exporter: *** the installed occ.stats_info has no budget columns (budget_tokens, budget_refusals,"
          " last_storm): pg_occ_budget_* not checked ***")

# --- occ.reservations (pg_occ 0.5.0), per (datname, rel, col) --------------------
res = conn.execute("""
    SELECT current_database(), rel::text, col::text, count(*), sum(in_flight), sum(reservations), sum(refusals),
           sum(waits)
      FROM occ.reservations GROUP BY 1, 2, 3""").fetchall()
for name in ["reservations", "refusals", "waits"]:
    check(f"pg_occ_reservations_{name}_total is a counter", types.get(f"pg_occ_reservations_{name}_total") == "counter")
for name in ["rows", "in_flight"]:
    check(f"pg_occ_reservations_{name} is a gauge", types.get(f"pg_occ_reservations_{name}") == "gauge")
for datname, rel, col, *nums in res:
    lab = {"datname": datname, "rel": rel, "col": col}
    for name, expected in zip(["rows", "in_flight", "reservations_total", "refusals_total", "waits_total"], nums):
        got = value(f"pg_occ_reservations_{name}", **lab)
        check(f"{lab}: pg_occ_reservations_{name} = {expected}", close(got, expected), got)
got = tuple(value(f"pg_occ_reservations_{name}", datname=db, rel="exporter_stock", col="qty")
            for name in ["rows", "in_flight", "reservations_total", "refusals_total"])
check(f"{db}: exporter_stock.qty: 1 row, none in flight, 2 reservations, 1 refusal", got == (1, 0, 2, 1), got)
print(f"exporter: pg_occ_reservations_* equal occ.reservations for {len(res)} columns")

check("the exporter loaded the queries file", value("pg_exporter_user_queries_load_error") == 0)
check("the exporter reported no scrape error", value("pg_exporter_last_scrape_error") == 0)
print(f"exporter: {checks} passed, 0 failed")
