#!/usr/bin/env bash
# Fuzzing with sqlsmith (Debian's package) against a preloaded server with
# the extension created, for SNOWFLAKE_FUZZ_SECONDS (default 60: CI's
# hour) in SNOWFLAKE_FUZZ_STREAMS sqlsmith processes at once (default 2,
# seeds 42, 43, ...: fixed, so a longer run only extends the same streams;
# two streams for 60 s ran 32,115 queries here, one for 120 s 28,258) on
# PostgreSQL 18 only (other majors skip it). sqlsmith runs as an ordinary
# role, so that it cannot terminate backends or change the configuration,
# with tables whose bigint keys come from snowflake_nextval(), so that its
# random queries meet snowflake IDs. Asserted: the server never crashed
# (same postmaster, no crash restart in the log), each sqlsmith kept
# working and ran queries, no assertion failure, and none of our functions
# raised XX000 (the log records the SQLSTATE and source location of every
# error: ours come from Rust files).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
if [ "$PG_MAJOR" != 18 ]; then
    skip_test "runs on 18"
fi
command -v sqlsmith >/dev/null || die "sqlsmith is not installed (apt install sqlsmith)"
SECS=${SNOWFLAKE_FUZZ_SECONDS:-60}
BASE=$(state_dir "$ROOT/.run/it-fuzz" it-fuzz)
PORT=${SNOWFLAKE_IT_FUZZ_PORT:-15700}
DIR=$(state_dir "$BASE/cluster" it-fuzz/cluster)
q() { timeout 120 "$(pgbin)/psql" -X -q -h "$DIR" -p "$PORT" -U postgres -v ON_ERROR_STOP=1 "$@"; }
cleanup() { cluster_stop "$DIR"; }
trap cleanup EXIT
cluster_stop "$DIR"
cluster_init "$DIR" "$PORT" "shared_preload_libraries = 'snowflake_id'" "snowflake_id.worker_id = 3" \
    "log_line_prefix = '%m [%p] %e '" "log_error_verbosity = verbose" "statement_timeout = '2s'" "track_functions = 'all'"
cluster_up "$DIR"
q <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION snowflake_id;
CREATE ROLE fuzz LOGIN;
CREATE DATABASE fuzz OWNER fuzz;
SQL
q -d fuzz <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION snowflake_id;
SET ROLE fuzz;
CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), placed timestamptz NOT NULL DEFAULT now(), note text);
INSERT INTO orders (note) SELECT md5(g::text) FROM generate_series(1, 2000) g;
INSERT INTO orders (id, placed, note) VALUES (0, '2024-01-01+00', 'zero'), (9223372036854775807, 'infinity', 'max');
CREATE TABLE codes AS SELECT id, snowflake_to_base32(id) AS code, snowflake_to_text(id) AS txt FROM orders;
-- Relations sqlsmith will read, each calling our functions on the data.
CREATE VIEW decoded AS
    SELECT o.id, o.note, d.ts, d.worker_id, d.sequence, snowflake_timestamp(o.id) AS ts2,
           snowflake_worker_id(o.id) AS w2, snowflake_sequence(o.id) AS s2
      FROM orders o, snowflake_decode(o.id) d;
CREATE VIEW foreign_decoded AS
    SELECT o.id, t.ts AS twitter_ts, p.worker_id AS pgedge_node,
           (snowflake_decode(o.id, '2015-01-01+00', 42, 10, 12)).sequence AS explicit_seq
      FROM orders o, snowflake_decode(o.id, 'twitter') t, snowflake_decode(o.id, 'pgedge') p;
CREATE VIEW bounds AS
    SELECT placed, snowflake_min_id(placed) AS lo, snowflake_max_id(placed) AS hi,
           snowflake_min_id(placed, '2020-01-01+00', 41, 10, 12) AS lo_explicit,
           snowflake_compose(placed, 1, 2) AS composed
      FROM orders WHERE placed < 'infinity';
CREATE VIEW texts AS
    SELECT id, snowflake_from_base32(code) AS back, code, txt FROM codes;
SQL
postmaster=$(head -1 "$DIR/data/postmaster.pid")

# STREAMS sqlsmith processes at once, each with its own fixed seed (42,
# 43, ...): one sqlsmith and its backend keep about one core busy, so on
# CI's two cores two streams run as many queries in half the time.
STREAMS=${SNOWFLAKE_FUZZ_STREAMS:-2}
log "sqlsmith for ${SECS}s as an ordinary role, $STREAMS streams"
declare -A pid_of=()   # seed -> its sqlsmith's PID; its output in sqlsmith.SEED.out
for seed in $(seq 42 $((41 + STREAMS))); do
    timeout --signal=INT "$SECS" sqlsmith --target="host=$DIR port=$PORT user=fuzz dbname=fuzz" --seed="$seed" \
        --verbose >"$BASE/sqlsmith.$seed.out" 2>&1 &
    pid_of[$seed]=$!
done
queries=0
for seed in "${!pid_of[@]}"; do
    out="$BASE/sqlsmith.$seed.out"
    rc=0; wait "${pid_of[$seed]}" || rc=$?
    [ "$rc" = 0 ] || [ "$rc" = 124 ] || { tail -30 "$out" >&2; die "sqlsmith (seed $seed) failed (exit $rc)"; }
    n=$(grep -oE 'queries: [0-9]+' "$out" | tail -1 | grep -oE '[0-9]+' || echo 0)
    [ "$n" -gt 0 ] || { tail -30 "$out" >&2; die "sqlsmith (seed $seed) ran no query"; }
    queries=$((queries + n))
done

[ "$(head -1 "$DIR/data/postmaster.pid")" = "$postmaster" ] || die "the postmaster changed: the server crashed"
! grep -qE "terminated by signal|was terminated by|all server processes terminated|TRAP:|PANIC" "$DIR/server.log" \
    || { grep -E "terminated by signal|TRAP:|PANIC" "$DIR/server.log" | head >&2; die "the server crashed or failed an assertion"; }
# An XX000 whose LOCATION is one of our Rust files.
internal=$(awk '/ XX000 ERROR:/ {e = $0; next} e != "" && /LOCATION:/ { if ($0 ~ /\.rs:/) print e; e = "" }' "$DIR/server.log")
[ -z "$internal" ] || { echo "$internal" | head >&2; die "our functions raised XX000"; }
ours_errors=$(grep -cE 'LOCATION: .*\.rs:' "$DIR/server.log" || true)
calls=$(q -d fuzz -At -c "SELECT coalesce(sum(calls), 0) || ' calls of ' || count(*) || ' of our functions'
                            FROM pg_stat_user_functions WHERE funcname LIKE 'snowflake\_%'") \
    || die "the server does not answer after fuzzing"
log "fuzz: ${queries} queries in ${SECS}s from $STREAMS streams ($calls), no crash, no assertion failure, no XX000 from our functions ($ours_errors errors of ours, all with specific SQLSTATEs)"
trap - EXIT
cleanup
rm -rf "$BASE"   # self-cleaning on success; kept for inspection on failure
