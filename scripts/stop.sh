#!/usr/bin/env bash
# Stop the server started by scripts/run.sh.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
stop_demo_servers
