/* pg_occ 0.3.0 -> 0.4.0: hardening (see CHANGELOG.md) */

\echo Use "ALTER EXTENSION pg_occ UPDATE TO '0.4.0'" to load this file. \quit
