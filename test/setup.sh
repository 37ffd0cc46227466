#!/bin/bash
# Installs what pg_occ needs on a fresh Debian machine (as root), then
# builds and installs pg_occ for one PostgreSQL version (default 15, the
# version of Debian 12).  Packages already present are not reinstalled.
# Usage: test/setup.sh [--pg VERSION] [--no-install] [--werror] | --print-packages | --apt PACKAGE...
#   --no-install      build and install only
#   --werror          rebuild everything; a compiler warning fails the build
#                     (test/run.sh)
#   --print-packages  print the Debian packages needed, and stop
#   --apt PACKAGE...  install these Debian packages only (test/run.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

# apt_install PACKAGE...: install from Debian's archive.  On a machine just
# booted, apt's daily jobs can hold its locks for a while: wait for the
# dpkg lock, and try the whole again a few times (apt-get update does not
# wait for its own lock).
apt_install() {
    local try
    for try in 1 2 3 4 5 6; do
        if apt-get -o DPkg::Lock::Timeout=300 update -qq &&
           DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq "$@"; then
            return
        fi
        echo "test/setup.sh: apt-get failed (try $try of 6), again in 20 s" >&2
        sleep 20
    done
    echo "test/setup.sh: could not install $*" >&2
    exit 1
}

pg=15
install=yes
copt=
while [ $# -gt 0 ]; do
    case $1 in
        --pg) pg=$2; shift 2 ;;
        --no-install) install=no; shift ;;
        --werror) copt=-Werror; shift ;;
        --print-packages) install=print; shift ;;
        --apt) shift; apt_install "$@"; exit ;;
        *) echo "usage: $0 [--pg VERSION] [--no-install] [--werror] [--print-packages] [--apt PACKAGE...]" >&2; exit 2 ;;
    esac
done

# PostgreSQL 19's release candidate (Debian experimental) has no pgTAP
# package: test/run.sh puts 18's in its root
pgtap=postgresql-$pg-pgtap
[ "$pg" != 19 ] || pgtap=
PACKAGES="postgresql-$pg postgresql-server-dev-$pg${pgtap:+ $pgtap} libtap-parser-sourcehandler-pgtap-perl gnuplot-nox make gcc perl procps"
# test/apps.sh: real clients and ORMs (Django 3.2, Debian 12's, needs
# psycopg2), a pooler and a metrics exporter
PACKAGES="$PACKAGES python3-psycopg python3-psycopg2 python3-django python3-sqlalchemy libpostgresql-jdbc-java"
PACKAGES="$PACKAGES pgbouncer prometheus-postgres-exporter"
# test/citus.sh: what Citus 13.2's build needs (it supports 15 and 17 of
# ours), in test/run.sh's root too, which has no network
case $pg in
    15 | 17) PACKAGES="$PACKAGES libicu-dev libzstd-dev liblz4-dev libkrb5-dev" ;;
esac

case $install in
    print) echo "$PACKAGES"; exit ;;
    yes)
        missing=$(for p in $PACKAGES; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done)
        # test/apps.sh's node-postgres test needs node and npm; any will do
        # (not in --print-packages: Debian's npm would add some 450 packages
        # to test/run.sh's roots, where that test is skipped)
        command -v node >/dev/null || missing="$missing nodejs"
        command -v npm >/dev/null || missing="$missing npm"
        # and its JDBC test a JDK (java's source launcher needs its compiler;
        # not in --print-packages either: some 250 MB in each root)
        command -v javac >/dev/null || missing="$missing default-jdk-headless"
        if [ -n "$missing" ]; then
            # shellcheck disable=SC2086
            apt_install $missing
        fi
        ;;
esac

[ -z "$copt" ] || make PG_CONFIG="/usr/lib/postgresql/$pg/bin/pg_config" clean
make PG_CONFIG="/usr/lib/postgresql/$pg/bin/pg_config" ${copt:+COPT=$copt}
make PG_CONFIG="/usr/lib/postgresql/$pg/bin/pg_config" install
