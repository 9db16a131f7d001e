#!/usr/bin/env bash
# The cost of public IDs (issue 32): snowflake_to_public(id, domain) and
# snowflake_from_public(text, domain) against their peers measured in the
# same run, snowflake_to_base32(id) and snowflake_from_base32(text): the
# keyless text form the public form replaces. One backend runs
#   SELECT count(f(i)) FROM generate_series(1, N) i
# for each function, interleaved, REPS times; the report gives the median
# time per call, the time added over the peer, and the ratio.
#
#   bash bench/public.sh            N = 1000000, 5 repetitions
#   bash bench/public.sh --smoke    toy sizes (CI: the runner must not rot)
#
#   PG_VERSION (18), PUB_N, PUB_REPS, PUB_PORT (17200), PUB_OUT (.run/bench/public.md)
set -euo pipefail
SMOKE=0; [ "${1:-}" = "--smoke" ] && SMOKE=1
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
[ -n "${SNOWFLAKE_PREREQS_DONE:-}" ] || bash "$ROOT/scripts/prereqs.sh" "${PG_VERSION:-18}"
select_pg "${PG_VERSION:-18}"
PORT=${PUB_PORT:-17200}
if [ $SMOKE = 1 ]; then N=20000; REPS=1; else N=${PUB_N:-1000000}; REPS=${PUB_REPS:-5}; fi
DIR=$(state_dir "$ROOT/.run/bench-public" bench-public)
OUT=${PUB_OUT:-$ROOT/.run/bench/public.md}
mkdir -p "$(dirname "$OUT")"
cleanup() { cluster_stop "$DIR"; }
trap cleanup EXIT
[ -n "${BENCH_NO_INSTALL:-}" ] || install_extension
cluster_stop "$DIR"
cluster_init "$DIR" "$PORT" "shared_preload_libraries = 'snowflake_id'" "snowflake_id.worker_id = 1" \
    "jit = off" "max_parallel_workers_per_gather = 0"
# A fixed test key: the benchmark measures, it protects nothing.
write_public_keys "$DIR/data" 1:000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f
cluster_up "$DIR"
q() { "$(pgbin)/psql" -X -q -At -h "$DIR" -p "$PORT" -U postgres -v ON_ERROR_STOP=1 "$@"; }
q -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" >/dev/null
q <<SQL
CREATE FUNCTION bench_ms(q text) RETURNS float8 LANGUAGE plpgsql AS \$\$
DECLARE t0 timestamptz := clock_timestamp();
BEGIN
    EXECUTE q;
    RETURN extract(epoch FROM clock_timestamp() - t0) * 1000;
END \$\$;
-- Inputs of the decoders, made once: text forms of N consecutive IDs.
CREATE TABLE forms AS
SELECT snowflake_to_public(i, 'orders') AS pub, snowflake_to_base32(i) AS b32
  FROM generate_series(383465699634401301, 383465699634401300 + $N) i;
SQL

# name | statement
CASES=(
    "snowflake_to_base32(id)|SELECT count(snowflake_to_base32(i)) FROM generate_series(383465699634401301, 383465699634401300 + $N) i"
    "snowflake_to_public(id, 'orders')|SELECT count(snowflake_to_public(i, 'orders')) FROM generate_series(383465699634401301, 383465699634401300 + $N) i"
    "snowflake_from_base32(text)|SELECT count(snowflake_from_base32(b32)) FROM forms"
    "snowflake_from_public(text, 'orders')|SELECT count(snowflake_from_public(pub, 'orders')) FROM forms"
)
declare -A MS=()
for rep in $(seq 1 "$REPS"); do
    for c in "${CASES[@]}"; do
        name=${c%%|*} sql=${c#*|}
        MS[$name]+="$(q -c "SELECT bench_ms(\$q\$$sql\$q\$)") "
    done
    log "public: repetition $rep of $REPS done"
done
median() { tr ' ' '\n' <<< "$1" | grep . | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
us_per_call() { awk -v ms="$(median "$1")" -v n="$N" 'BEGIN {printf "%.3f", ms * 1000 / n}'; }
{
    echo "### Public IDs: cost per call ($N calls per statement, median of $REPS, PostgreSQL $PG_MAJOR)"
    echo
    echo "| function | µs per call | added over the peer (µs) | ratio to the peer |"
    echo "|---|---:|---:|---:|"
    for pair in "snowflake_to_base32(id)|snowflake_to_public(id, 'orders')" \
                "snowflake_from_base32(text)|snowflake_from_public(text, 'orders')"; do
        peer=${pair%%|*} pub=${pair#*|}
        p=$(us_per_call "${MS[$peer]}") u=$(us_per_call "${MS[$pub]}")
        echo "| $peer | $p | | 1.00× |"
        echo "| $pub | $u | $(awk -v a="$u" -v b="$p" 'BEGIN {printf "%+.3f", a - b}') | $(awk -v a="$u" -v b="$p" 'BEGIN {printf "%.2f×", a / b}') |"
    done
} > "$OUT"
cat "$OUT"
