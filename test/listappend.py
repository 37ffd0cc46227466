#!/usr/bin/python3
# A Jepsen/Elle-style list-append check of occ.retry (test/batch_storm.sh
# runs it).  Each transaction is 2 to 4 micro-operations on a few keys of
# la (k int, v int[]): read a key's list, or append a value (unique in the
# whole run) to it.  Appends only ever add at the end, so the final lists
# give each key's version order, and every read tells which version it saw:
# from a history of what the clients saw (ops, reads, outcome, invoke and
# complete times) and the final state, the checker infers the dependency
# graph of the committed transactions and looks for the cycles the
# isolation level forbids.
#
#   listappend.py run --isolation LEVEL --clients N --seconds S
#                     [--ungated FRACTION] HISTORY FINAL
#       the workload (needs psycopg, Debian's python3-psycopg): N client
#       threads calling occ.retry in batch mode on the key 'la' for S
#       seconds (a time, not a count: the storm gets the same time however
#       fast the machine), but FRACTION of the calls ungated (contention =>
#       'backoff', no key), beside the batches;
#       the connection from the PG* variables.  A client whose connection
#       dies (terminated, or the server restarting after a SIGKILL) records
#       the call as unknown and reconnects.  Writes the history (JSON lines)
#       and the final state (JSON).
#   listappend.py check --isolation LEVEL HISTORY FINAL
#       the checker (standard library only); exit 1 on any anomaly.
#   listappend.py --self-test
#       the checker on small hand-made histories, good and bad: it must flag
#       exactly the bad ones.
#
# What the checker asserts, for committed transactions (ok, and unknown ones
# whose values are in the final lists; a call that failed did nothing):
#   - each ok append is in its key's final list, once; no value is there
#     twice or in another key; no value of a failed call is there; an
#     unknown call is there whole or not at all;
#   - each read of an ok call is a prefix of its key's final list (else a
#     read of an aborted or unknown value, G1a, or of another order), ends
#     at no other transaction's intermediate append (G1b), and agrees with
#     the call's own earlier reads and appends (internal consistency);
#   - the graph: ww (consecutive appends in a final list), wr (a read ends
#     with T's value), rw (a read misses the next value, appended by T), and
#     real time (T1 completed before T2 was invoked: a call's snapshot is
#     taken after its invocation, so this holds at both levels):
#       serializable: no cycle at all (G0, G1c, G-single, G2);
#       repeatable read, snapshot isolation: no cycle without two adjacent
#       rw edges (G0 and G1c have none, G-single one; G-nonadjacent more,
#       never two in a row).  Why: with a start s and a commit c per
#       transaction, a ww, wr or real-time edge A -> B means c(A) < s(B)
#       (B's snapshot has A, or B would have failed to update A's row), an
#       rw edge A -> B that s(A) < c(B); along a cycle whose rw edges are
#       each followed by another kind, s would grow all the way round.
#     A write skew (two rw edges in a row) is allowed at repeatable read.
# The cycles are found with strongly connected components (Tarjan); real
# time edges go through a chain of relay nodes, one per completion in time
# order, rather than one edge per pair.
import argparse
import bisect
import json
import random
import sys
import threading
import time

# ---------------------------------------------------------------- checker


class Txn:
    __slots__ = ("id", "client", "type", "sqlstate", "message", "ops", "t0", "t1")

    def __init__(self, d):
        self.id = d["id"]
        self.client = d.get("client")
        self.type = d["type"]  # ok, fail, unknown
        self.sqlstate = d.get("sqlstate")
        self.message = d.get("message")  # a failure's error, for the report
        # ["r", key, list read (ok calls) or None] or ["a", key, value]
        self.ops = [(f, int(k), v) for f, k, v in d["ops"]]
        self.t0 = d["t0"]
        self.t1 = d.get("t1")  # None: unknown

    def appends(self):
        return [(k, v) for f, k, v in self.ops if f == "a"]


def short(lst):
    """A read or list, abbreviated to its length and last values."""
    if lst is None:
        return "(no row)"
    if len(lst) <= 4:
        return json.dumps(lst)
    return "[%d values: ..., %s]" % (len(lst), ", ".join(map(str, lst[-3:])))


def describe(t):
    times = "%.6f-%s s" % (t.t0 / 1e9, "?" if t.t1 is None else "%.6f" % (t.t1 / 1e9))
    ops = "; ".join("%s %d %s" % (f, k, short(v) if f == "r" else v) for f, k, v in t.ops)
    state = t.type + (" " + t.sqlstate if t.sqlstate else "") + (" \"%s\"" % t.message if t.message else "")
    return "T%s (client %s, %s, %s): %s" % (t.id, t.client, state, times, ops)


def check(history, final, isolation, out=print):
    """Check a history (list of dicts) against the final state ({key: list})
    at an isolation level ('serializable' or 'repeatable read').  Prints a
    summary and the anomalies with out; returns the list of anomalies."""
    txns = [Txn(d) for d in history]
    final = {int(k): list(v) for k, v in final.items()}
    anomalies = []

    def anomaly(kind, text):
        anomalies.append((kind, text))

    # who appended what
    writer = {}  # value -> (txn, key, index of the op in the txn)
    for t in txns:
        for i, (f, k, v) in enumerate(t.ops):
            if f != "a":
                continue
            if v in writer:
                anomaly("bad-history", "value %s appended by T%s and T%s" % (v, writer[v][0].id, t.id))
            writer[v] = (t, k, i)

    # the final lists: each value once, in its own key, from a call that
    # did not fail
    present = set()
    for k, lst in sorted(final.items()):
        for x in lst:
            if x in present:
                anomaly("duplicate", "value %s is in the final lists twice (key %d: %s)" % (x, k, short(lst)))
                continue
            present.add(x)
            if x not in writer:
                anomaly("garbage", "value %s in key %d was never appended" % (x, k))
                continue
            w, wk, _ = writer[x]
            if wk != k:
                anomaly("garbage", "value %s of key %d is in key %d" % (x, wk, k))
            if w.type == "fail":
                anomaly("aborted-write", "value %s of %s is in key %d" % (x, describe(w), k))

    committed = []
    for t in txns:
        mine = [v for _, v in t.appends()]
        there = [v for v in mine if v in present]
        if t.type == "ok":
            for k, v in t.appends():
                if v not in present:
                    anomaly("lost-append", "value %s of %s is not in key %d: %s" % (v, describe(t), k, short(final.get(k, []))))
            committed.append(t)
        elif t.type == "unknown" and there:
            if len(there) != len(mine):
                anomaly("partial", "%s is only partly in the final lists (%s of %s)" % (describe(t), there, mine))
            committed.append(t)

    # the reads of ok calls
    for t in txns:
        if t.type != "ok":
            continue
        mine = {}  # key -> what this call must see next, if known
        own = {}  # key -> values this call appended, in order
        for f, k, v in t.ops:
            if f == "a":
                if k in mine:
                    mine[k] = mine[k] + [v]
                own.setdefault(k, []).append(v)
                continue
            if v is None:
                anomaly("internal", "%s: key %d had no row" % (describe(t), k))
                continue
            lst = final.get(k, [])
            if len(set(v)) != len(v):
                anomaly("duplicate", "%s read a value twice in key %d" % (describe(t), k))
            if v != lst[:len(v)]:
                bad = [x for x in v if x not in present]
                if bad:
                    w = writer.get(bad[0])
                    anomaly("G1a", "%s read %s in key %d, which %s" % (
                        describe(t), bad[0], k, "was never appended" if w is None else "is not in the final lists (%s)" % describe(w[0])))
                else:
                    anomaly("incompatible-order", "%s read %s in key %d, not a prefix of its final list %s" % (describe(t), short(v), k, short(lst)))
                continue
            if k in mine and v != mine[k]:
                anomaly("internal", "%s read %s in key %d, expected %s (its own earlier read and appends)" % (describe(t), short(v), k, short(mine[k])))
            elif k not in mine and own.get(k) and v[-len(own[k]):] != own[k]:
                anomaly("internal", "%s read %s in key %d, without its own appends %s" % (describe(t), short(v), k, own[k]))
            mine[k] = v
            if v:
                w, _, wi = writer[v[-1]]
                if w is not t and any(f2 == "a" and k2 == k for f2, k2, _ in w.ops[wi + 1:]):
                    anomaly("G1b", "%s read %s in key %d, an intermediate state of %s" % (describe(t), short(v), k, describe(w)))

    # the graph: nodes 0..n-1 are the committed transactions, then one relay
    # node per ok completion, in time order
    n = len(committed)
    index = {t.id: i for i, t in enumerate(committed)}
    succ = [dict() for _ in range(n)]  # node -> {node: set of edge kinds}
    why = {}  # (a, b, kind) -> explanation
    counts = {"ww": 0, "wr": 0, "rw": 0, "rt": 0}

    def edge(a, b, kind, text):
        if a == b:
            return
        kinds = succ[a].setdefault(b, set())
        if kind not in kinds:
            kinds.add(kind)
            counts[kind] += 1
            why[(a, b, kind)] = text

    def node_of(x):
        return index.get(writer[x][0].id)

    for k, lst in final.items():
        for x, y in zip(lst, lst[1:]):
            a, b = node_of(x) if x in writer else None, node_of(y) if y in writer else None
            if a is not None and b is not None:
                edge(a, b, "ww", "key %d: %s then %s" % (k, x, y))
    for t in committed:
        if t.type != "ok":
            continue
        r = index[t.id]
        for f, k, v in t.ops:
            if f != "r" or v is None:
                continue
            lst = final.get(k, [])
            if v != lst[:len(v)]:
                continue  # reported above
            if v:
                a = node_of(v[-1])
                if a is not None:
                    edge(a, r, "wr", "key %d: read %s, ending with %s" % (k, short(v), v[-1]))
            if len(v) < len(lst) and lst[len(v)] in writer:
                b = node_of(lst[len(v)])
                if b is not None:
                    edge(r, b, "rw", "key %d: read %s, without %s" % (k, short(v), lst[len(v)]))

    # real time: T -> relay(T) -> the next relays -> each transaction invoked
    # after that completion (after the latest completion before its invoke)
    ends = sorted((t.t1, index[t.id]) for t in committed if t.type == "ok")
    relays = len(ends)
    succ.extend(dict() for _ in range(relays))
    for j, (_, a) in enumerate(ends):
        succ[a][n + j] = {"rt"}
        if j + 1 < relays:
            succ[n + j][n + j + 1] = {"rt"}
    times = [e for e, _ in ends]
    for t in committed:
        j = bisect.bisect_left(times, t.t0) - 1  # last completion < invoke
        if j >= 0:
            succ[n + j][index[t.id]] = {"rt"}
            counts["rt"] += 1
    total = n + relays

    # serializable: the graph itself; repeatable read: the graph of states
    # (node, whether the edge in was rw), where an rw edge may not follow an
    # rw edge: its cycles are the cycles without two adjacent rw edges
    si = isolation != "serializable"

    def successors(s):
        if not si:
            for b, kinds in succ[s].items():
                yield b, min(kinds, key=lambda kind: kind == "rw")
            return
        node, after_rw = divmod(s, 2)
        for b, kinds in succ[node].items():
            if kinds - {"rw"}:
                yield 2 * b, min(kinds - {"rw"})
            if "rw" in kinds and not after_rw:
                yield 2 * b + 1, "rw"

    states = 2 * total if si else total
    cycles = []
    for comp in sccs(states, lambda s: (b for b, _ in successors(s))):
        if len(comp) < 2:
            continue
        cyc = find_cycle(comp, successors, si, n)
        cycles.append(cyc)

    for cyc in cycles[:5]:
        rws = sum(1 for _, _, kind in cyc if kind == "rw")
        rt = any(kind == "rt" for _, _, kind in cyc)
        if rws == 0:
            name = "G0" if all(kind == "ww" for _, _, kind in cyc) else "G1c"
        elif rws == 1:
            name = "G-single"
        else:
            name = "G-nonadjacent" if si else "G2"
        name += "-realtime" if rt else ""
        lines = []
        for a, b, kind in cyc:
            ta, tb = committed[a], committed[b]
            if kind == "rt":
                text = "T%s completed at %.6f s, before T%s was invoked at %.6f s" % (ta.id, ta.t1 / 1e9, tb.id, tb.t0 / 1e9)
            else:
                text = why[(a, b, kind)]
            lines.append("  T%s -%s-> T%s  (%s)" % (ta.id, kind, tb.id, text))
        seen = []
        for a, _, _ in cyc:
            if a not in seen:
                seen.append(a)
        lines += ["    " + describe(committed[a]) for a in seen]
        anomaly(name, "a cycle of %d transactions:\n%s" % (len(seen), "\n".join(lines)))
    if len(cycles) > 5:
        anomaly("more-cycles", "%d more cyclic components not shown" % (len(cycles) - 5))

    kinds = {}
    for t in txns:
        kinds[t.type] = kinds.get(t.type, 0) + 1
    fails = {}
    for t in txns:
        if t.type == "fail":
            fails[t.sqlstate] = fails.get(t.sqlstate, 0) + 1
    unknown_in = sum(1 for t in committed if t.type == "unknown")
    out("listappend: %s: %d transactions: %d ok, %d failed%s, %d unknown (%d of them committed); "
        "%d values in %d keys; edges: %d ww, %d wr, %d rw, %d real-time (through relays); %d forbidden cycles; %d anomalies"
        % (isolation, len(txns), kinds.get("ok", 0), kinds.get("fail", 0),
           " (%s)" % ", ".join("%s x%d" % kv for kv in sorted(fails.items(), key=str)) if fails else "",
           kinds.get("unknown", 0), unknown_in, len(present), sum(1 for v in final.values() if v),
           counts["ww"], counts["wr"], counts["rw"], counts["rt"], len(cycles), len(anomalies)))
    for kind, text in anomalies[:20]:
        out("listappend: ANOMALY %s: %s" % (kind, text))
    if len(anomalies) > 20:
        out("listappend: ... and %d more anomalies" % (len(anomalies) - 20))
    return anomalies


def sccs(count, succ_of):
    """Tarjan's strongly connected components, iterative."""
    index = [None] * count
    low = [0] * count
    on = [False] * count
    stack, comps, counter = [], [], 0
    for root in range(count):
        if index[root] is not None:
            continue
        work = [(root, iter(succ_of(root)))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on[root] = True
        while work:
            v, it = work[-1]
            pushed = False
            for w in it:
                if index[w] is None:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on[w] = True
                    work.append((w, iter(succ_of(w))))
                    pushed = True
                    break
                if on[w]:
                    low[v] = min(low[v], index[w])
            if pushed:
                continue
            work.pop()
            if work:
                u = work[-1][0]
                low[u] = min(low[u], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on[w] = False
                    comp.append(w)
                    if w == v:
                        break
                comps.append(comp)
    return comps


def find_cycle(comp, successors, si, n):
    """A shortest closed walk through a transaction of the component comp,
    as [(txn node, txn node, kind)], relay nodes collapsed into rt edges."""
    members = set(comp)
    node = (lambda s: s // 2) if si else (lambda s: s)
    starts = sorted((s for s in comp if node(s) < n), key=node)
    start = starts[0]
    parent = {}
    queue = [start]
    found = False
    for s in queue:
        for b, kind in successors(s):
            if b not in members:
                continue
            if b == start:
                parent[b] = (s, kind)
                found = True
                break
            if b not in parent:
                parent[b] = (s, kind)
                queue.append(b)
        if found:
            break
    path = []  # (from state, to state, kind), backwards
    s = start
    while True:
        p, kind = parent[s]
        path.append((p, s, kind))
        s = p
        if s == start:
            break
    path.reverse()
    # collapse the relays: a run through them is one rt edge
    out, src, kind_in = [], None, None
    for a, b, kind in path:
        if node(a) < n:
            src, kind_in = node(a), kind
        else:
            kind_in = "rt"
        if node(b) < n:
            out.append((src, node(b), kind_in))
    return out


# ---------------------------------------------------------------- self-test


def self_test():
    """Small histories with known anomalies, and valid ones: the checker must
    flag exactly the bad ones, at the levels where they are forbidden."""
    def txn(i, ops, t0, t1, type="ok", sqlstate=None):
        return {"id": i, "client": i, "type": type, "sqlstate": sqlstate, "ops": ops,
                "t0": t0 * 10 ** 9, "t1": None if t1 is None else t1 * 10 ** 9}

    # (name, history, final, kinds expected at serializable, at repeatable read)
    cases = [
        ("valid, serial", [
            txn(1, [["a", 1, 1], ["r", 2, []]], 0, 1),
            txn(2, [["r", 1, [1]], ["a", 1, 2], ["r", 1, [1, 2]]], 2, 3),
            txn(3, [["r", 1, [1, 2]], ["a", 2, 3]], 4, 5),
            txn(4, [["a", 2, 4]], 4, 5, "fail", "57014"),
            txn(5, [["a", 2, 5], ["a", 1, 6]], 4, None, "unknown"),  # committed
            txn(6, [["a", 2, 7]], 4, None, "unknown"),  # did not
        ], {1: [1, 2, 6], 2: [3, 5]}, set(), set()),
        ("valid, concurrent", [
            txn(1, [["r", 1, []], ["a", 2, 1]], 0, 3),
            txn(2, [["a", 1, 2], ["r", 2, []]], 1, 2),
        ], {1: [2], 2: [1]}, {"G2"}, set()),  # write skew: T1 -rw-> T2 -rw-> T1, allowed under SI
        ("G1c", [
            txn(1, [["a", 1, 1], ["r", 2, [2]]], 0, 2),
            txn(2, [["a", 2, 2], ["r", 1, [1]]], 0, 2),
        ], {1: [1], 2: [2]}, {"G1c"}, {"G1c"}),
        ("G0", [
            txn(1, [["a", 1, 1], ["a", 2, 2]], 0, 2),
            txn(2, [["a", 1, 3], ["a", 2, 4]], 0, 2),
        ], {1: [1, 3], 2: [4, 2]}, {"G0"}, {"G0"}),
        ("G-single (read skew)", [
            txn(1, [["r", 1, []], ["r", 2, [3]]], 0, 2),
            txn(2, [["a", 1, 2], ["a", 2, 3]], 0, 2),
        ], {1: [2], 2: [3]}, {"G-single"}, {"G-single"}),
        ("G-single-realtime (a stale read after the append completed)", [
            txn(1, [["a", 1, 5]], 0, 1),
            txn(2, [["r", 1, []], ["r", 2, []]], 2, 3),
        ], {1: [5]}, {"G-single-realtime"}, {"G-single-realtime"}),
        ("G-nonadjacent", [
            txn(1, [["r", 1, []], ["r", 4, [40]]], 0, 9),
            txn(2, [["a", 1, 10], ["a", 2, 20]], 0, 9),
            txn(3, [["r", 2, [20]], ["r", 3, []]], 0, 9),
            txn(4, [["a", 3, 30], ["a", 4, 40]], 0, 9),
        ], {1: [10], 2: [20], 3: [30], 4: [40]}, {"G2"}, {"G-nonadjacent"}),
        ("lost append", [
            txn(1, [["a", 1, 1], ["r", 1, [1]]], 0, 1),
            txn(2, [["r", 1, []]], 2, 3),
        ], {1: []}, {"lost-append", "G1a"}, {"lost-append", "G1a"}),
        ("duplicate", [
            txn(1, [["a", 1, 1], ["r", 2, []]], 0, 1),
        ], {1: [1, 1]}, {"duplicate"}, {"duplicate"}),
        ("aborted write", [
            txn(1, [["a", 1, 1], ["r", 2, []]], 0, 1, "fail", "40001"),
        ], {1: [1]}, {"aborted-write"}, {"aborted-write"}),
        ("G1a (an aborted value read)", [
            txn(1, [["a", 1, 1]], 0, 2, "fail", "57014"),
            txn(2, [["r", 1, [1]]], 0, 2),
        ], {1: []}, {"G1a"}, {"G1a"}),
        ("G1b (an intermediate read)", [
            txn(1, [["a", 1, 1], ["a", 1, 2]], 0, 2),
            txn(2, [["r", 1, [1]]], 0, 2),
        ], {1: [1, 2]}, {"G1b", "G-single"}, {"G1b", "G-single"}),  # T1 -wr-> T2 -rw-> T1 too
        ("internal (its own append unseen)", [
            txn(1, [["a", 1, 1], ["r", 1, []]], 0, 2),
        ], {1: [1]}, {"internal"}, {"internal"}),
        ("partial unknown", [
            txn(1, [["a", 1, 1], ["a", 2, 2]], 0, None, "unknown"),
        ], {1: [1], 2: []}, {"partial"}, {"partial"}),
    ]
    failed = 0
    for name, history, final, want_ser, want_rr in cases:
        for isolation, want in (("serializable", want_ser), ("repeatable read", want_rr)):
            lines = []
            got = {kind for kind, _ in check(history, final, isolation, out=lines.append)}
            if got != want:
                failed += 1
                print("listappend: self-test FAIL: %s at %s: flagged %s, expected %s" % (
                    name, isolation, sorted(got) or "nothing", sorted(want) or "nothing"))
                for line in lines:
                    print("    " + line)
    print("listappend: self-test: %d cases, %d passed, %d failed" % (
        2 * len(cases), 2 * len(cases) - failed, failed))
    return failed == 0


# ---------------------------------------------------------------- workload

KEYS = 5  # keys in use at a time: conflicts are frequent
STRIDE = 30  # the keys in use move on by one every STRIDE appends, so that
# a key gets about STRIDE values: reads stay short, and a call's result
# stays under batch mode's 8 kB (a larger one runs alone)
MAX_KEY = 20000
# the body: one fixed text (calls batch only with the same body), its ops a
# parameter; la_txn (made by batch_storm.sh) runs them in order and returns
# the reads
CALL = ("CALL occ.retry('SELECT la_txn($1) AS r', result => NULL, params => row(%s::jsonb), "
        "isolation => %s, contention => 'batch', key => 'la')")
# the same body, ungated (--ungated): it runs beside the batches
CALL_UNGATED = ("CALL occ.retry('SELECT la_txn($1) AS r', result => NULL, params => row(%s::jsonb), "
                "isolation => %s, contention => 'backoff')")


def run(args):
    import psycopg

    deadline_s = 120  # longest wait for the server to come back

    def connect(name="la"):
        give_up = time.monotonic() + deadline_s
        while True:
            try:
                return psycopg.connect("", autocommit=True, application_name=name)
            except psycopg.OperationalError:
                if time.monotonic() > give_up:
                    raise
                time.sleep(0.1)

    # a row for every key the calls may draw (an UPDATE of a missing row
    # would look like a lost append); a run that would need more ends early.
    # (not as application la: the storm spares this session)
    conn = connect("la-setup")
    conn.execute("INSERT INTO la (k) SELECT generate_series(0, %s) ON CONFLICT DO NOTHING", (MAX_KEY,))
    conn.close()
    end = time.monotonic() + args.seconds

    appends_issued = [0]
    lock = threading.Lock()
    history = []
    errors = []

    def client(c):
        rnd = random.Random(args.seed * 1000 + c)
        seq = 0
        conn = None
        try:
            i = 0
            while time.monotonic() < end:
                i += 1
                ops = []
                for _ in range(rnd.randint(2, 4)):
                    with lock:
                        base = appends_issued[0] // STRIDE
                    k = base + rnd.randrange(KEYS)
                    if k > MAX_KEY:
                        return
                    if rnd.random() < 0.5:
                        ops.append(["r", k, None])
                    else:
                        seq += 1
                        with lock:
                            appends_issued[0] += 1
                        ops.append(["a", k, c * 1000000 + seq])
                rec = {"id": "%d.%d" % (c, i), "client": c, "ops": ops}
                if conn is None:
                    conn = connect()
                rec["t0"] = time.monotonic_ns()
                try:
                    call = CALL_UNGATED if rnd.random() < args.ungated else CALL
                    row = conn.execute(call, (json.dumps([[f, k, v] for f, k, v in ops]), args.isolation)).fetchone()
                    rec["t1"] = time.monotonic_ns()
                    reads = iter(row[0][0]["r"])
                    rec["type"] = "ok"
                    rec["ops"] = [[f, k, next(reads)] if f == "r" else [f, k, v] for f, k, v in ops]
                except psycopg.Error as e:
                    rec["t1"] = time.monotonic_ns()
                    state = e.sqlstate or ""
                    # a lost connection (terminated, or the server crashed)
                    # may have committed or not; an error on a live one is
                    # the call's outcome: it did nothing
                    if conn.closed or conn.broken or state.startswith("08") or state.startswith("57P"):
                        rec["type"], rec["t1"] = "unknown", None
                        rec["sqlstate"] = state or None
                        conn.close()
                        conn = None
                    else:
                        rec["type"], rec["sqlstate"] = "fail", state
                        # an unexpected error, what it said (for the report)
                        if state != "57014":
                            rec["message"] = str(e).splitlines()[0] if str(e) else None
                with lock:
                    history.append(rec)
        except Exception as e:  # noqa: BLE001 (reported, fails the run)
            errors.append("client %d: %r" % (c, e))
        finally:
            if conn is not None:
                conn.close()

    threads = [threading.Thread(target=client, args=(c,)) for c in range(1, args.clients + 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        print("listappend: the workload failed: %s" % "; ".join(errors), file=sys.stderr)
        return False
    with open(args.history, "w") as f:
        for rec in history:
            f.write(json.dumps(rec) + "\n")
    conn = connect("la-setup")
    final = {k: v for k, v in conn.execute("SELECT k, v FROM la WHERE v <> '{}' ORDER BY k")}
    conn.close()
    with open(args.final, "w") as f:
        json.dump(final, f)
    return True


def main():
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(0 if self_test() else 1)
    p = argparse.ArgumentParser(description="list-append workload and checker for occ.retry")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--isolation", required=True)
    r.add_argument("--clients", type=int, default=8)
    r.add_argument("--seconds", type=float, default=30)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--ungated", type=float, default=0)
    r.add_argument("history")
    r.add_argument("final")
    c = sub.add_parser("check")
    c.add_argument("--isolation", required=True)
    c.add_argument("history")
    c.add_argument("final")
    args = p.parse_args()
    sys.stdout.reconfigure(line_buffering=True)
    if args.cmd == "run":
        sys.exit(0 if run(args) else 1)
    with open(args.history) as f:
        history = [json.loads(line) for line in f if line.strip()]
    with open(args.final) as f:
        final = json.load(f)
    sys.exit(1 if check(history, final, args.isolation) else 0)


if __name__ == "__main__":
    main()
