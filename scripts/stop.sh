#!/usr/bin/env bash
# Stop the server started by scripts/run.sh.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
for dir in "$ROOT"/.run/run-* /var/tmp/snowflake_id-"$(printf '%s' "$ROOT" | md5sum | cut -c1-8)"/run-*; do
    [ -f "$dir/data/PG_VERSION" ] || continue
    PG_CONFIG=$(pg_config_for "$(cat "$dir/data/PG_VERSION")") cluster_stop "$dir"
    log "stopped the server in $dir"
done
