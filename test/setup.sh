#!/bin/bash
# Installs what pg_occ needs on a fresh Debian 12 machine (as root), then
# builds and installs pg_occ.  Packages already present are not reinstalled.
# Usage: test/setup.sh [--no-install]   (--no-install: build and install only)
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES="postgresql-15 postgresql-server-dev-15 postgresql-15-pgtap libtap-parser-sourcehandler-pgtap-perl gnuplot-nox make gcc"

if [ "${1:-}" != "--no-install" ]; then
    missing=$(for p in $PACKAGES; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done)
    if [ -n "$missing" ]; then
        apt-get update -qq
        # shellcheck disable=SC2086
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing
    fi
fi

make PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config
make PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config install
