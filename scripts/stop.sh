#!/usr/bin/env bash
# Stop the server started by scripts/run.sh. Says so when none was running,
# and removes the postmaster.pid a server that died left behind.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
stop_demo_servers
[ "$DEMO_STOPPED" -gt 0 ] || log "no demo server was running"
