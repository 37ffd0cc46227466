#!/bin/bash
# Packaging checks (test/run.sh runs them for each PostgreSQL version):
#   - META.json (PGXN) gives the control file's default_version, as its
#     version and as the version of the extension it provides, whose file
#     is that version's install script;
#   - an out-of-tree (VPATH) build, as Debian's pg_buildext makes it
#     (make -f /path/to/pg_occ/Makefile from another directory), builds
#     pg_occ.so and installs every file (the Prometheus queries file too,
#     where the README says), and writes nothing into the source tree.
# Uses PG_CONFIG (default: pg_config on the PATH).  Needs perl (JSON::PP).
set -euo pipefail
cd "$(dirname "$0")/.."
PG_CONFIG=${PG_CONFIG:-pg_config}

fail() { echo "packaging: FAIL: $*" >&2; exit 1; }

# META.json against the control file
control=$(sed -n "s/^default_version[[:space:]]*=[[:space:]]*'\([^']*\)'.*/\1/p" pg_occ.control)
[ -n "$control" ] || fail "no default_version in pg_occ.control"
read -r meta provides file < <(perl -MJSON::PP -0777 -ne '
    my $m = JSON::PP->new->decode($_);
    my $p = $m->{provides}{pg_occ} // {};
    print join(" ", $m->{version} // "-", $p->{version} // "-", $p->{file} // "-"), "\n"' META.json) ||
    fail "META.json does not parse"
[ "$meta" = "$control" ] || fail "META.json version $meta, pg_occ.control default_version $control"
[ "$provides" = "$control" ] || fail "META.json provides pg_occ version $provides, pg_occ.control default_version $control"
[ "$file" = "sql/pg_occ--$control.sql" ] || fail "META.json provides pg_occ file $file, not sql/pg_occ--$control.sql"
[ -f "$file" ] || fail "META.json provides pg_occ file $file, which does not exist"
echo "packaging: META.json gives version $control, as pg_occ.control does"

# out-of-tree build of a clean copy of the source tree
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/src" "$tmp/build"
tar --exclude=.git --exclude='*.o' --exclude='*.bc' --exclude='*.so' --exclude=./results \
    --exclude=./output_iso --exclude=./test/results -cf - Makefile pg_occ.control src sql |
    tar -C "$tmp/src" -xf -
before=$(cd "$tmp/src" && find . | sort)
(cd "$tmp/build" && make -s -f "$tmp/src/Makefile" PG_CONFIG="$PG_CONFIG" COPT=-Werror >/dev/null &&
    make -s -f "$tmp/src/Makefile" PG_CONFIG="$PG_CONFIG" install DESTDIR="$tmp/inst" >/dev/null) ||
    fail "out-of-tree build"
[ -f "$tmp/build/pg_occ.so" ] || fail "out-of-tree build: no pg_occ.so"
after=$(cd "$tmp/src" && find . | sort)
[ "$before" = "$after" ] || fail "out-of-tree build wrote into the source tree: $(diff <(echo "$before") <(echo "$after") | grep '^>' | head)"
for f in pg_occ.control sql/pg_occ--* sql/pg_occ_prometheus.yaml; do
    [ -f "$tmp/inst$($PG_CONFIG --sharedir)/extension/${f#sql/}" ] || fail "out-of-tree install: no $f"
done
[ -f "$tmp/inst$($PG_CONFIG --pkglibdir)/pg_occ.so" ] || fail "out-of-tree install: no pg_occ.so"
echo "packaging: out-of-tree build and install ok"
