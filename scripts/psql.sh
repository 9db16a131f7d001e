#!/usr/bin/env bash
# Connect psql to the demo server that scripts/run.sh started (the running
# one of any major; PG_VERSION picks one when several were started).
# Arguments go to psql: bash scripts/psql.sh -c 'SELECT snowflake_nextval()'
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
found=""
while read -r dir; do
    major=$(cat "$dir/data/PG_VERSION")
    [ -z "${PG_VERSION:-}" ] || [ "$PG_VERSION" = "$major" ] || continue
    demo_running "$dir" || continue
    found=$dir
    break
done < <(demo_dirs)
[ -n "$found" ] || die "no demo server is running${PG_VERSION:+ for PostgreSQL $PG_VERSION}: start one with bash scripts/run.sh (or make run)"
select_pg "$(cat "$found/data/PG_VERSION")"
port=$(sed -n '4p' "$found/data/postmaster.pid")
exec "$(pgbin)/psql" -h "$found" -p "$port" -U postgres "$@"
