"""profile.py - the breakdown of profile.sh: perf script's stacks (comm, ip,
sym) on stdin; arguments: the run's commits/s, its seconds, the CPUs.

Each sample goes to the first category whose function is on its stack, in
the order below (a leader's path first, so that its bodies and its commit
are not counted as a follower's); the CPU time per commit of a category is
its share of all samples times the CPU time of the run, over its commits.
"""
import sys

# (category, functions any of which puts a sample in it), first match wins
CATEGORIES = [
    ("leader: bodies of the calls it took (occ_lead_member)", {"occ_lead_member"}),
    ("leader: its commit", None),  # CommitTransactionCommand under occ_attempt_run
    ("leader: its own body, taking calls, telling outcomes",
     {"occ_attempt_run", "occ_lead_begin", "occ_lead_end"}),
    ("follower: waiting (occ_batch_join: post, sleep, wake, outcome)", {"occ_batch_join"}),
    ("settings fingerprint (occ_session_fingerprint)", {"occ_session_fingerprint"}),
    ("warm-up before the wait (occ_attempt_warm)", {"occ_attempt_warm"}),
    ("client check (occ_check_client)", {"occ_check_client"}),
    ("rest of occ.retry (arguments, policy, statistics)", {"occ_retry"}),
    ("the CALL's parsing and analysis", {"pg_parse_query", "pg_analyze_and_rewrite_fixedparams",
                                          "pg_analyze_and_rewrite"}),
    ("the rest of the backends (protocol, transaction start, ...)", {"PostgresMain"}),
]


def stacks(lines):
    comm, syms = None, []
    for line in lines:
        if not line.strip():
            if comm is not None:
                yield comm, syms
            comm, syms = None, []
        elif not line[0].isspace():
            comm = line.split()[0]
        else:
            parts = line.split(None, 1)
            syms.append((parts[1] if len(parts) > 1 else "?").split("+")[0].strip())
    if comm is not None:
        yield comm, syms


def category(comm, syms):
    if comm != "postgres":
        return "other processes (%s)" % ("pgbench" if comm == "pgbench" else "kernel, idle, perf, ...")
    names = set(syms)
    for name, funcs in CATEGORIES:
        if funcs is None:
            if "CommitTransactionCommand" in names and "occ_attempt_run" in names:
                return name
        elif names & funcs:
            return name
    return "postgres, outside a query (background processes, ...)"


def main():
    tps, secs, cpus = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
    counts = {}
    total = 0
    for comm, syms in stacks(sys.stdin):
        c = category(comm, syms)
        counts[c] = counts.get(c, 0) + 1
        total += 1
    if total == 0 or tps <= 0:
        sys.exit("profile.py: no samples or no commits")
    usec = secs * cpus / (tps * secs) * 1e6
    print("CPU time per commit, all %d CPUs: %.0f us (%d samples)" % (cpus, usec, total))
    print()
    print("| where | share of samples | us per commit |")
    print("|---|---:|---:|")
    order = [n for n, _ in CATEGORIES] + sorted(c for c in counts if c not in dict(CATEGORIES))
    leader = 0.0
    for c in order:
        if c in counts:
            share = counts[c] / total
            if c.startswith("leader"):
                leader += share
            print("| %s | %.1f%% | %.1f |" % (c, 100 * share, share * usec))
    print("| **the leaders' path, all of it** | %.1f%% | %.1f |" % (100 * leader, leader * usec))


if __name__ == "__main__":
    main()
