#!/bin/bash
# occ.stats over restarts (test/run.sh runs it for each PostgreSQL version),
# in a cluster of its own that preloads pg_occ:
#   - a clean shutdown saves the statistics to pg_stat/pg_occ.stat and the
#     next start loads them: occ.stats and occ.stats_info (dealloc,
#     stats_reset) are equal before and after, and the file is removed once
#     loaded;
#   - a file that is damaged (one byte changed, or cut short), that is not ours, or that
#     another format or PostgreSQL version wrote, or a build whose entries
#     have another layout (with a valid CRC) is ignored with a LOG line
#     that says why, and occ.stats starts empty;
#   - a file with more entries than occ.stats_max (lowered since) keeps the
#     most called, and counts the others as evicted;
#   - an immediate shutdown, and a crash (a backend killed), save nothing:
#     occ.stats starts empty.
# Uses PG_CONFIG (default: pg_config on the PATH); pg_occ must be installed.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=test/cluster.sh
. test/cluster.sh

fail() { echo "persist: FAIL: $*" >&2; exit 1; }
base=$(mktemp -d)
chmod 711 "$base"
trap 'cluster_cleanup; rm -rf "$base"' EXIT
c=$base/c
file=$c/data/pg_stat/pg_occ.stat

cluster_init "$c" "shared_preload_libraries = 'pg_occ'" "occ.stats_max = 100"
cluster_start "$c"
q() { cluster_psql "$c" -d postgres "$@"; }

# what occ.stats and occ.stats_info show, every column
snapshot() {
    q -c "SELECT s FROM occ.stats s ORDER BY userid, dbid, queryid" \
      -c "SELECT i FROM occ.stats_info i"
}

# calls from two roles in two databases; some retried, one gives up, one
# fails; and more bodies than occ.stats_max, so that entries are evicted
q -c "CREATE EXTENSION pg_occ" -c "CREATE ROLE occ_persist" -c "CREATE DATABASE occ_persist2"
cluster_psql "$c" -d occ_persist2 -c "CREATE EXTENSION pg_occ"
q <<'SQL'
CREATE SEQUENCE s;
CREATE FUNCTION fail_until(n int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF nextval('s') < n THEN RAISE USING ERRCODE = '40001', MESSAGE = 'simulated'; END IF;
END $$;
CALL occ.retry('SELECT fail_until(3)', base => '1ms', jitter => 'none');
\set ON_ERROR_STOP 0
CALL occ.retry('SELECT fail_until(100)', max_attempts => 2, base => '1ms');
CALL occ.retry('SELECT 1/0');
\set ON_ERROR_STOP 1
DO $$ BEGIN FOR i IN 1..120 LOOP CALL occ.retry(format('SELECT %s', i)); END LOOP; END $$;
SET ROLE occ_persist;
CALL occ.retry('SELECT ''é'' || repeat(''x'', 2000)');
SQL
cluster_psql "$c" -d occ_persist2 -c "CALL occ.retry('SELECT 2')" -c "CALL occ.retry('SELECT 2')"

before=$(snapshot)
entries=$(q -c "SELECT count(*) FROM occ.stats")
dealloc=$(q -c "SELECT dealloc FROM occ.stats_info")
if [ "$entries" -lt 50 ] || [ "$dealloc" = 0 ]; then
    fail "expected entries and evictions, got $entries and $dealloc"
fi

# a clean restart keeps everything
cluster_stop "$c"
[ -f "$file" ] || fail "no $file after a clean shutdown"
saved=$base/pg_occ.stat
cp "$file" "$saved"
cluster_start "$c"
after=$(snapshot)
[ "$before" = "$after" ] || fail "occ.stats changed over a restart: $(diff <(echo "$before") <(echo "$after"))"
[ ! -e "$file" ] || fail "$file is still there once loaded"
echo "persist: $entries entries (and $dealloc evicted) equal before and after a clean restart"

# start with the saved file changed by change_file (a command run on the
# file), and expect occ.stats empty and a LOG line with why
start_with() {
    local why=$1
    shift
    cluster_stop "$c"
    cp "$saved" "$file"
    chown --reference="$c/data" "$file"
    "$@" "$file"
    : >"$(cluster_log "$c")"
    cluster_start "$c"
    [ "$(q -c "SELECT count(*) FROM occ.stats")" = 0 ] || fail "occ.stats is not empty after: $why"
    [ "$(q -c "SELECT dealloc FROM occ.stats_info")" = 0 ] || fail "dealloc is not 0 after: $why"
    grep -q "LOG:  ignoring the pg_occ statistics in file \"pg_stat/pg_occ.stat\": $why" "$(cluster_log "$c")" ||
        fail "no LOG line '$why': $(cat "$(cluster_log "$c")")"
    [ ! -e "$file" ] || fail "$file is still there after: $why"
    echo "persist: ignored, with a LOG line: $why"
}
flip_byte() { # the last entry's last byte of text, just before the CRC
    local off byte
    off=$(($(stat -c %s "$1") - 5))
    byte=$(od -An -tu1 -j "$off" -N1 "$1" | tr -d ' ')
    printf '%b' "\\$(printf %03o $((255 - byte)))" | dd of="$1" bs=1 seek="$off" conv=notrunc status=none
}
truncate_tail() { truncate -s -100 "$1"; }
not_ours() { echo "some other extension's statistics" >"$1"; }
format_99() { printf '\143' | dd of="$1" bs=1 seek=4 conv=notrunc status=none; }
start_with "its checksum does not match" flip_byte
start_with "it ends early" truncate_tail
start_with "it is not a pg_occ statistics file" not_ours
other_layout() { # the header's layout fingerprint changed, the CRC made valid again
    /usr/bin/python3 - "$1" <<'PY'
import struct, sys
def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF
data = bytearray(open(sys.argv[1], "rb").read()[:-4])
layout, = struct.unpack_from("<I", data, 12)      # after magic, format, pg_major
struct.pack_into("<I", data, 12, layout ^ 1)
open(sys.argv[1], "wb").write(bytes(data) + struct.pack("<I", crc32c(data)))
PY
}
start_with "another build of pg_occ, with another layout of entries, wrote it" other_layout
start_with "it has format 99 for PostgreSQL $("${PG_CONFIG:-pg_config}" --version | sed 's/^PostgreSQL \([0-9]*\).*/\1/'), not" format_99

# occ.stats_max lowered across a restart keeps the most called entries: 100
# bodies called twice and, made after them, 50 called once, saved with room
# for 200, loaded with room for 100
cluster_stop "$c"
echo "occ.stats_max = 200" >>"$c/data/postgresql.conf"
cluster_start "$c"
q -c "SELECT occ.stats_reset()" >/dev/null
q -c "DO \$\$ BEGIN FOR i IN 1..100 LOOP CALL occ.retry(format('SELECT %s', 1000 + i));
        CALL occ.retry(format('SELECT %s', 1000 + i)); END LOOP;
        FOR i IN 1..50 LOOP CALL occ.retry(format('SELECT %s', 2000 + i)); END LOOP; END \$\$"
cluster_stop "$c"
echo "occ.stats_max = 100" >>"$c/data/postgresql.conf"
cluster_start "$c"
kept=$(q -c "SELECT count(*), min(calls), (SELECT dealloc FROM occ.stats_info) FROM occ.stats")
[ "$kept" = "100|2|50" ] ||
    fail "occ.stats_max lowered from 200 to 100: expected the 100 bodies called twice kept and 50 evicted (100|2|50), got $kept"
echo "persist: occ.stats_max lowered to 100 keeps the 100 most called of 150 entries, 50 counted as evicted"

# an immediate shutdown saves nothing: the next start recovers, as after a
# crash, and occ.stats starts empty
q -c "CALL occ.retry('SELECT 1')"
cluster_stop "$c" immediate
[ ! -e "$file" ] || fail "$file was written by an immediate shutdown"
cluster_start "$c"
[ "$(q -c "SELECT count(*) FROM occ.stats")" = 0 ] || fail "occ.stats is not empty after an immediate shutdown"
echo "persist: an immediate shutdown starts occ.stats empty"

# a crash saves nothing: a server process killed makes the postmaster
# reinitialise shared memory, and occ.stats starts empty
q -c "CALL occ.retry('SELECT 1')"
[ "$(q -c "SELECT count(*) FROM occ.stats")" = 1 ] || fail "the call before the crash is not counted"
q -c "SELECT pg_sleep(600)" >/dev/null 2>&1 &
sleeper=$!
for _ in $(seq 1 300); do
    pid=$(q -c "SELECT pid FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(600)'")
    [ -z "$pid" ] || break
    sleep 0.1
done
[ -n "$pid" ] || fail "the sleeping backend did not show up"
kill -KILL "$pid"
wait "$sleeper" || true
cluster_recovered "$c" 0 || fail "the server did not come back after the crash"
grep -q "terminated by signal 9" "$(cluster_log "$c")" || fail "no crash in the log"
[ "$(q -c "SELECT count(*) FROM occ.stats")" = 0 ] || fail "occ.stats is not empty after a crash"
echo "persist: a crash (a backend killed) starts occ.stats empty"

echo "persist: ok"
