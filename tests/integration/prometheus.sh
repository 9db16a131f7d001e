#!/usr/bin/env bash
# Prometheus (PostgreSQL 15 only; Debian's prometheus 2.42 and
# prometheus-postgres-exporter 0.11): the files in contrib/prometheus/.
#  1. promtool check rules, and promtool test rules on alerts_test.yaml:
#     each alert fires on the series that should fire it and stays silent
#     on the others.
#  2. A real postgres_exporter scrapes a real server with queries.yaml:
#     the generator's metrics and a fleet problem (an unreachable
#     postgres_fdw server) appear; a real backward clock step (libfaketime)
#     moves snowflake_clock_steps_back and the largest step; an unsafe
#     configuration change across a restart sets snowflake_disabled with
#     its state label. The exporter connects as snowflake_monitor, a member
#     of pg_monitor and nothing more (contrib/prometheus/queries.yaml): its
#     fleet check reads this server through a superuser's foreign server,
#     reports the unreachable one by SQLSTATE only, and never reads
#     mallory's server (a plain role's, with a user mapping for PUBLIC as
#     postgres: issue 39, F4). Every process started is stopped by PID.
# SNOWFLAKE_IT_PROM_MAJOR runs it on another major than 15.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
if [ "$PG_MAJOR" != "${SNOWFLAKE_IT_PROM_MAJOR:-15}" ]; then
    skip_test "runs on ${SNOWFLAKE_IT_PROM_MAJOR:-15}"
fi
apt_ensure prometheus prometheus-postgres-exporter
CONTRIB="$ROOT/contrib/prometheus"
BASE=$(state_dir "$ROOT/.run/it-prometheus" it-prometheus)
PORT=${SNOWFLAKE_IT_PROM_PORT:-25900}
EXPORTER_PORT=$((PORT + 1))
DIR="$BASE/c"
EXPORTER_PID=""
cleanup() {
    if [ -n "$EXPORTER_PID" ]; then kill "$EXPORTER_PID" 2>/dev/null || true; wait "$EXPORTER_PID" 2>/dev/null || true; fi
    cluster_stop "$DIR"
}
trap cleanup EXIT
mkdir -p "$DIR"; is_root && chown postgres:postgres "$DIR"
cluster_stop "$DIR"

# 1. The rules.
(cd "$CONTRIB" && promtool check rules alerts.yaml >/dev/null && promtool test rules alerts_test.yaml >"$BASE/promtool.out" 2>&1) \
    || { cat "$BASE/promtool.out" >&2; die "promtool: the alert rules or their tests fail"; }
log "prometheus: promtool check rules and test rules: every alert fires when it should and only then"

# 2. A real exporter.
FT=/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1
[ -f "$FT" ] || die "libfaketime is missing (apt package libfaketime)"
echo "+0" > "$BASE/faketime"; chmod 644 "$BASE/faketime"
start() {
    cluster_start "$DIR" LD_PRELOAD="$FT" FAKETIME_TIMESTAMP_FILE="$BASE/faketime" FAKETIME_NO_CACHE=1 \
        FAKETIME_DONT_FAKE_MONOTONIC=1 || { tail -20 "$DIR/server.log" >&2; die "the server did not start"; }
}
cluster_init "$DIR" "$PORT" "shared_preload_libraries = 'snowflake_id'" "snowflake_id.worker_id = 7"
start
q() { pq "$DIR" "$PORT" -At "$@"; }
q -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" -c "CREATE EXTENSION postgres_fdw" \
  -c "CREATE ROLE snowflake_monitor LOGIN IN ROLE pg_monitor" \
  -c "CREATE SERVER nowhere FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '127.0.0.1', port '1', dbname 'postgres')" \
  -c "CREATE USER MAPPING FOR postgres SERVER nowhere OPTIONS (user 'postgres')" \
  -c "CREATE USER MAPPING FOR snowflake_monitor SERVER nowhere OPTIONS (user 'snowflake_monitor', password 'secret')" \
  -c "GRANT USAGE ON FOREIGN SERVER nowhere TO snowflake_monitor" \
  -c "CREATE SERVER self FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '$DIR', port '$PORT', dbname 'postgres')" \
  -c "CREATE USER MAPPING FOR snowflake_monitor SERVER self OPTIONS (user 'snowflake_monitor', password_required 'false')" \
  -c "GRANT USAGE ON FOREIGN SERVER self TO snowflake_monitor" \
  -c "CREATE ROLE mallory LOGIN" -c "GRANT USAGE ON FOREIGN DATA WRAPPER postgres_fdw TO mallory" >/dev/null
pq "$DIR" "$PORT" -U mallory -d postgres \
  -c "CREATE SERVER mal FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '$DIR', port '$PORT', dbname 'postgres')" \
  -c "CREATE USER MAPPING FOR PUBLIC SERVER mal OPTIONS (user 'postgres')" >/dev/null
q -c "SELECT count(*) FROM snowflake_nextval(1000)" >/dev/null

DATA_SOURCE_NAME="host=$DIR port=$PORT user=snowflake_monitor dbname=postgres sslmode=disable" \
    prometheus-postgres-exporter --extend.query-path="$CONTRIB/queries.yaml" \
    --web.listen-address="127.0.0.1:$EXPORTER_PORT" --disable-default-metrics --disable-settings-metrics \
    >"$BASE/exporter.log" 2>&1 &
EXPORTER_PID=$!
scrape() {  # the snowflake metrics, once the exporter answers (60 s at most)
    for _ in $(seq 1 300); do
        if curl -fsS "http://127.0.0.1:$EXPORTER_PORT/metrics" -o "$BASE/metrics" 2>/dev/null \
            && grep -q '^snowflake_generating' "$BASE/metrics"; then
            grep '^snowflake' "$BASE/metrics"
            return 0
        fi
        sleep 0.2
    done
    tail -20 "$BASE/exporter.log" >&2
    die "postgres_exporter served no snowflake metrics"
}
value() { awk -v m="$1" 'index($0, m) == 1 {print $NF; exit}' <<< "$2"; }

m=$(scrape)
[ "$(value 'snowflake_generating{server=' "$m")" = 1 ] && grep -q 'state="ok"' <<< "$m" \
    || { echo "$m" >&2; die "the exporter does not show a generating server in state ok"; }
[ "$(value 'snowflake_worker_id{' "$m")" = 7 ] || die "snowflake_worker_id is not 7"
[ "$(value 'snowflake_clock_steps_back{' "$m")" = 0 ] || die "a clock step before any"
grep -q '^snowflake_fleet_unreachable{node="nowhere",server=.*} 1$' <<< "$m" \
    || { grep fleet <<< "$m" >&2 || true; die "the unreachable postgres_fdw server is not a fleet problem (the exporter: $(grep -o "snowflake_fleet pq: .*" "$BASE/exporter.log" | tail -1))"; }
grep -q '^snowflake_fleet_duplicate_worker_id{node="local = self",server=.*} 0$' <<< "$m" \
    || { grep fleet <<< "$m" >&2 || true; die "no fleet row for this server, read through the foreign server self"; }
nodes=$(sed -n 's/^snowflake_fleet_unreachable{node="\([^"]*\)".*/\1/p' <<< "$m" | sort | paste -sd,)
[ "$nodes" = "local = self,nowhere" ] || die "the monitor's fleet check read the nodes $nodes, not local = self and nowhere"
left=$(value 'snowflake_id_space_remaining_seconds{' "$m")
awk -v s="$left" 'BEGIN {exit !(s > 60 * 365 * 86400)}' || die "the ID space reports $left s left"
grep -q '^snowflake_reservations_written{.*} [1-9]' <<< "$m" || die "no reservation written"
problem=$(q -c "SET ROLE snowflake_monitor" -c "SELECT problem FROM snowflake_fleet_check() WHERE node = 'nowhere'")
[ "$problem" = "cannot read snowflake_node (SQLSTATE 08001; the message is shown to the server's owner)" ] \
    || die "the monitor sees another problem for nowhere: $problem"
[ "$(q -c "SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'")" = f ] || die "mallory became SUPERUSER"
log "prometheus: the exporter (pg_monitor) shows state ok, worker 7, nodes $nodes (nowhere unreachable, by SQLSTATE only; mallory's server unread), $(awk -v s="$left" 'BEGIN {printf "%.0f", s / 86400 / 365}') years of ID space"

# A real backward clock step of one hour.
echo "-1h" > "$BASE/faketime"
q -c "SELECT snowflake_nextval()" >/dev/null 2>&1
m=$(scrape)
steps=$(value 'snowflake_clock_steps_back{' "$m") largest=$(value 'snowflake_largest_step_back_seconds{' "$m")
[ "$steps" = 1 ] && awk -v s="$largest" 'BEGIN {exit !(s > 3500 && s < 3700)}' \
    || { grep step <<< "$m" >&2 || true; die "the clock step did not show: steps $steps, largest $largest s"; }
log "prometheus: after a clock step of -1 h: snowflake_clock_steps_back 0 -> $steps, largest step $largest s"

# An unsafe configuration change across a restart disables generation.
cluster_stop "$DIR"; echo "+0" > "$BASE/faketime"
echo "snowflake_id.epoch = '2025-01-01'" | as_pg tee -a "$DIR/data/postgresql.conf" >/dev/null
start
m=""
for _ in $(seq 1 120); do   # the exporter reconnects after the restart (60 s at most)
    m=$(scrape)
    grep -q '^snowflake_disabled{.*state="disabled: configuration changed"} 1$' <<< "$m" && break
    sleep 0.5
done
grep -q '^snowflake_disabled{.*state="disabled: configuration changed"} 1$' <<< "$m" \
    || { grep -E 'disabled|generating' <<< "$m" >&2 || true; die "the exporter does not show the disabled state"; }
[ "$(value 'snowflake_generating{' "$m")" = 0 ] || die "a disabled server still reports generating"
log "prometheus: after an epoch change across a restart: snowflake_disabled 1, state \"disabled: configuration changed\""
log "prometheus: ok"
trap - EXIT
cleanup
rm -rf "$BASE"
