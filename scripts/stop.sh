#!/usr/bin/env bash
# Stop the server started by scripts/run.sh.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
DIR=$(state_dir "$ROOT/.run" run)
cluster_stop "$DIR"
log "stopped the server in $DIR"
