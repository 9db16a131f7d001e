#!/usr/bin/env bash
# Side-by-side benchmark of primary-key generators in one cluster and one
# run, interleaved and repeated. This script only collects samples (into
# report.samples.txt); bench/report.py renders them as Markdown tables of
# medians and ratios (see bench/README.md).
#
#   bash bench/run.sh            full run (about 45 minutes on 2 cores)
#   bash bench/run.sh --smoke    every workload at toy sizes (CI: the runner
#                                must not rot; the numbers mean nothing)
#
#   PG_VERSION   PostgreSQL major (default 18, the only one with uuidv7())
#   BENCH_REPS   repetitions per measurement (default 3; medians reported)
#   BENCH_PORT   port of the benchmark cluster (default 17000)
#   BENCH_OUT    where the Markdown report goes (default .run/bench/report.md);
#                every sample goes beside it, in report.samples.txt
#   BENCH_WORKLOADS  which workloads to run and report (default "1 1b 2 3 4 5")
#   BENCH_SCALING_BACKENDS  backend counts of workload 5 (default "1 2 4 8",
#                on a 16-core machine "1 2 4 8 16 32 64")
#   BENCH_LEAD_BACKENDS  backend counts of workload 5b (default "16")
#   BENCH_CLIENTS  client counts of workload 2 (default "1 2 8 32"; on a
#                16-core machine "1 2 4 8 16 32 64 128")
#   BENCH_PGBENCH_SECONDS  length of each pgbench sample (default 5)
#   BENCH_PAIR_ONLY=1  workload 2 runs only snowflake_nextval() and the floor
#                (a focused, longer check of that ratio:
#                BENCH_PAIR_ONLY=1 BENCH_WORKLOADS=2 BENCH_REPS=25 takes
#                about 20 minutes)
set -euo pipefail
SMOKE=0; [ "${1:-}" = "--smoke" ] && SMOKE=1
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
[ -n "${SNOWFLAKE_PREREQS_DONE:-}" ] || bash "$ROOT/scripts/prereqs.sh" "${PG_VERSION:-18}"
select_pg "${PG_VERSION:-18}"
export PATH="$HOME/.cargo/bin:$PATH"
PORT=${BENCH_PORT:-17000}
REPS=${BENCH_REPS:-3}
if [ $SMOKE = 1 ]; then
    REPS=1; N1=10000; N10=20000; NINS=10000; NRANGE=20000; PGB_T=1; CLIENTS="1 2"
    NSCALE=20000; SCALE_BACKENDS=${BENCH_SCALING_BACKENDS:-"1 2"}
    LEAD_BACKENDS=${BENCH_LEAD_BACKENDS:-"2"}
else
    N1=1000000; N10=10000000; NINS=1000000; NRANGE=10000000; PGB_T=${BENCH_PGBENCH_SECONDS:-5}; CLIENTS=${BENCH_CLIENTS:-"1 2 8 32"}
    NSCALE=1000000; SCALE_BACKENDS=${BENCH_SCALING_BACKENDS:-"1 2 4 8"}
    LEAD_BACKENDS=${BENCH_LEAD_BACKENDS:-"16"}
fi
WORKLOADS=" ${BENCH_WORKLOADS:-1 1b 2 3 4 5b 5} "
want() { [[ "$WORKLOADS" == *" $1 "* ]]; }
# Workload 1 at N = 1M is short and the most sensitive to this machine's
# noise: at least 9 repetitions.
REPS1=$REPS; [ $SMOKE = 1 ] || REPS1=$(( REPS > 9 ? REPS : 9 ))
# So is pgbench (workload 2): at least 9 there too.
REPS2=$REPS1
DIR=$(state_dir "$ROOT/.run/bench" bench)
OUT=${BENCH_OUT:-$DIR/report.md}
mkdir -p "$(dirname "$OUT")"
cleanup() { cluster_stop "$DIR"; }
trap cleanup EXIT

[ -n "${BENCH_NO_INSTALL:-}" ] || install_extension
cluster_stop "$DIR"
# Enough connections for the largest client or backend count asked for.
max_conn=$(printf '%s\n' 90 $CLIENTS $SCALE_BACKENDS $LEAD_BACKENDS | sort -n | tail -1)
cluster_init "$DIR" "$PORT" "max_connections = $((max_conn + 10))" \
    "shared_preload_libraries = 'snowflake_id'" "snowflake_id.worker_id = 1" \
    "shared_buffers = '1GB'" "max_wal_size = '8GB'" "checkpoint_timeout = '30min'" \
    "autovacuum = off" "synchronous_commit = off" "jit = off" "max_parallel_workers_per_gather = 0"
cluster_start "$DIR" || { tail -20 "$DIR/server.log" >&2; die "benchmark server did not start"; }
q() { "$(pgbin)/psql" -X -q -At -h "$DIR" -p "$PORT" -U postgres -v ON_ERROR_STOP=1 -d bench "$@"; }
"$(pgbin)/createdb" -h "$DIR" -p "$PORT" -U postgres bench

# --- generators ----------------------------------------------------------
# name | SQL expression | column type
GENS=(
    "snowflake_nextval()|snowflake_nextval()|bigint"
    "nextval (bigserial)|nextval('bench_seq')|bigint"
    "Instagram next_id() (PL/pgSQL)|bench_next_id()|bigint"
    "gen_random_uuid()|gen_random_uuid()|uuid"
)
if [ "$PG_MAJOR" -ge 18 ]; then GENS+=("uuidv7()|uuidv7()|uuid"); fi
# The floor: a constant C function (bench/floor.c), called like a generator.
# The constant expression without a call is reported beside it.
FLOOR="floor (constant function)|bench_floor()|bigint"
NOCALL="constant expression (no call)|42::bigint|bigint"
floor_sql=$(bench_floor_sql "$DIR")
q -c "$floor_sql"
q <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION snowflake_id;
CREATE SEQUENCE bench_seq;
CREATE SEQUENCE bench_ig_seq;
-- Instagram's published ID function (2012), shard 5.
CREATE FUNCTION bench_next_id(OUT result bigint) LANGUAGE plpgsql AS $$
DECLARE
    our_epoch bigint := 1314220021721;
    seq_id bigint;
    now_millis bigint;
    shard_id int := 5;
BEGIN
    SELECT nextval('bench_ig_seq') % 1024 INTO seq_id;
    SELECT FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000) INTO now_millis;
    result := (now_millis - our_epoch) << 23;
    result := result | (shard_id << 10);
    result := result | (seq_id);
END $$;
-- Server-side wall time of one statement, in ms.
CREATE FUNCTION bench_ms(q text) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz := clock_timestamp();
BEGIN
    EXECUTE q;
    RETURN extract(epoch FROM clock_timestamp() - t0) * 1000;
END $$;
SQL

ceiling_per_ms=$(q -c "SELECT snowflake_sequence(snowflake_max_id(now())) + 1")

declare -A R=()   # results: R[workload|generator] = list of samples

# rotate LIST-ITEMS by REP so that no generator always runs first.
rotated() { local rep="$1"; shift; local n=$#; local i; for ((i = 0; i < n; i++)); do
    local k=$(( (i + rep) % n + 1 )); printf '%s\n' "${!k}"; done; }

# --- 1. generation in one backend ---------------------------------------
if want 1; then
log "1. generation in one backend: N = $N1 ($REPS1 interleaved repetitions) and $N10 ($REPS)"
for n in "$N1" "$N10"; do
    reps=$REPS; [ "$n" = "$N1" ] && reps=$REPS1
    for ((rep = 0; rep < reps; rep++)); do
        while IFS= read -r g; do
            IFS='|' read -r name expr _ <<< "$g"
            if [ "$name" = "bulk" ]; then
                sql="SELECT count(*) FROM snowflake_nextval($n)"
            else
                sql="SELECT count($expr) FROM generate_series(1, $n)"
            fi
            ms=$(q -c "SELECT bench_ms(\$q\$$sql\$q\$)")
            R["gen$n|$name"]+="$ms "
            sleep 0.2
        done < <(rotated "$rep" "${GENS[@]}" "$FLOOR" "$NOCALL" "bulk|bulk|")
    done
done
fi

# Sustained rate at the lead bound: 10M IDs with max_lead = 100ms, so the
# bound is hit after a fraction of the burst. Clock-backed rate = IDs not
# borrowed from the future (N - lead at the end * 4096) per ms of wall time.
# generate_series streams here (in the target list, not FROM, which
# materialises all N rows before the first call): the statement's wall time
# is then all generation, which the rate needs.
if want 1b; then
log "1b. 10M-ID burst against the lead bound (max_lead = 100ms)"
q -c "ALTER SYSTEM SET snowflake_id.max_lead = '100ms'" -c "SELECT pg_reload_conf()" >/dev/null
sleep 1.5
for ((rep = 0; rep < REPS; rep++)); do
    sleep 1.2   # let the lead of the previous burst drain
    line=$(q <<SQL
SELECT pg_backend_pid() AS pid \gset
SELECT split_part(pg_read_file('/proc/' || :pid || '/stat'), ' ', 14)::bigint
     + split_part(pg_read_file('/proc/' || :pid || '/stat'), ' ', 15)::bigint AS t0 \gset
SELECT waits AS w0 FROM (SELECT backpressure_waits AS waits FROM snowflake_stats()) s \gset
SELECT bench_ms('SELECT count(snowflake_nextval()) FROM (SELECT generate_series(1, $N10)) s') AS ms,
       extract(epoch FROM snowflake_timestamp(snowflake_nextval()) - clock_timestamp()) * 1000 AS lead \gset
SELECT :ms, :lead,
       split_part(pg_read_file('/proc/' || :pid || '/stat'), ' ', 14)::bigint
     + split_part(pg_read_file('/proc/' || :pid || '/stat'), ' ', 15)::bigint - :t0,
       (SELECT backpressure_waits FROM snowflake_stats()) - :w0;
SQL
)
    IFS='|' read -r ms lead ticks waits <<< "$line"
    cpu=$(( ticks * 1000 / $(getconf CLK_TCK) ))
    R["lead|ms"]+="$ms "; R["lead|lead"]+="$lead "; R["lead|cpu"]+="$cpu "; R["lead|waits"]+="$waits "
done
q -c "ALTER SYSTEM RESET snowflake_id.max_lead" -c "SELECT pg_reload_conf()" >/dev/null
fi

# --- 2. concurrent calls ------------------------------------------------
# A 5 s pgbench sample on this kind of machine moves by 10-20% with the
# neighbours' load, which drifts over the half minute a repetition takes.
# So snowflake_nextval() and the floor always run back to back (their order
# alternating), the rest rotate around them, and every ratio in this table
# is the median of the per-repetition ratios: each compares two runs made
# under the same conditions. The TPS columns stay plain medians.
pgbench_order() {
    local rep=$1 pair=("${GENS[0]}" "$FLOOR")
    (( rep % 2 )) && pair=("$FLOOR" "${GENS[0]}")
    if [ -n "${BENCH_PAIR_ONLY:-}" ]; then printf '%s\n' "${pair[@]}"; return; fi
    while IFS= read -r g; do
        if [ "$g" = PAIR ]; then printf '%s\n' "${pair[@]}"; else printf '%s\n' "$g"; fi
    done < <(rotated "$rep" PAIR "${GENS[@]:1}" "$NOCALL")
}
if want 2; then
log "2. pgbench -M prepared 'SELECT f()': clients $CLIENTS, ${PGB_T}s each, $REPS2 repetitions"
for c in $CLIENTS; do
    j=$(( c < 2 ? c : 2 ))
    for ((rep = 0; rep < REPS2; rep++)); do
        while IFS= read -r g; do
            IFS='|' read -r name expr _ <<< "$g"
            echo "SELECT $expr;" > "$DIR/select.sql"
            "$(pgbin)/pgbench" -n -M prepared -h "$DIR" -p "$PORT" -U postgres -c "$c" -j "$j" -T "$PGB_T" \
                -f "$DIR/select.sql" bench > "$DIR/pgbench.out" 2>&1 || { cat "$DIR/pgbench.out" >&2; die "pgbench failed for $name"; }
            pgbench_ok "$DIR/pgbench.out" "pgbench had failures for $name"
            tps=$(sed -nE 's/^tps = ([0-9.]+) .*without initial connection time.*/\1/p' "$DIR/pgbench.out")
            [ -n "$tps" ] || { cat "$DIR/pgbench.out" >&2; die "no tps from pgbench"; }
            R["pgb$c|$name"]+="$tps "
        done < <(pgbench_order "$rep")
    done
done
fi

# --- 3. inserts ---------------------------------------------------------
if want 3; then
log "3. inserts: $NINS rows in one statement and with pgbench -c 8; index size after load and after 20% churn"
idx=0; declare -A TBL=()
for g in "${GENS[@]}"; do
    IFS='|' read -r name expr type <<< "$g"
    t="ins_$idx"; TBL[$name]=$t; idx=$((idx + 1))
    q -c "CREATE TABLE $t (id $type PRIMARY KEY DEFAULT $expr, v int NOT NULL)"
done
for ((rep = 0; rep < REPS; rep++)); do
    while IFS= read -r g; do
        IFS='|' read -r name _ _ <<< "$g"; t=${TBL[$name]}
        q -c "TRUNCATE $t" -c "CHECKPOINT"
        ms=$(q -c "SELECT bench_ms('INSERT INTO $t (v) SELECT i FROM generate_series(1, $NINS) i')")
        R["ins1|$name"]+="$ms "
    done < <(rotated "$rep" "${GENS[@]}")
done
for g in "${GENS[@]}"; do
    IFS='|' read -r name _ _ <<< "$g"; t=${TBL[$name]}
    R["size_load|$name"]=$(q -c "SELECT pg_relation_size('${t}_pkey')")
    q -c "SELECT setseed(0.5)" -c "DELETE FROM $t WHERE random() < 0.2" -c "VACUUM $t" \
      -c "INSERT INTO $t (v) SELECT i FROM generate_series(1, $((NINS / 5))) i" >/dev/null
    R["size_churn|$name"]=$(q -c "SELECT pg_relation_size('${t}_pkey')")
done
per_client=$((NINS / 8))
for ((rep = 0; rep < REPS; rep++)); do
    while IFS= read -r g; do
        IFS='|' read -r name _ _ <<< "$g"; t=${TBL[$name]}
        q -c "TRUNCATE $t" -c "CHECKPOINT"
        echo "INSERT INTO $t (v) VALUES (:client_id);" > "$DIR/insert.sql"
        start=$(date +%s%N)
        "$(pgbin)/pgbench" -n -M prepared -h "$DIR" -p "$PORT" -U postgres -c 8 -j 2 -t "$per_client" \
            -f "$DIR/insert.sql" bench > "$DIR/pgbench.out" 2>&1 || { cat "$DIR/pgbench.out" >&2; die "pgbench insert failed for $name"; }
        pgbench_ok "$DIR/pgbench.out" "pgbench insert had failures for $name"
        R["ins8|$name"]+="$(( ($(date +%s%N) - start) / 1000000 )) "
        [ "$(q -c "SELECT count(*) FROM $t")" = $((per_client * 8)) ] || die "pgbench inserted the wrong number of rows into $t"
    done < <(rotated "$rep" "${GENS[@]}")
done
fi

# --- 4. range scan ------------------------------------------------------
if want 4; then
log "4. range scan: one hour of $NRANGE rows over 10 days, snowflake bounds vs created_at index"
q <<SQL
SET client_min_messages = warning;
CREATE TABLE rs_snowflake (id bigint PRIMARY KEY, payload int NOT NULL);
INSERT INTO rs_snowflake
SELECT snowflake_compose(timestamptz '2026-01-01 00:00+00' + i * (interval '10 days' / $NRANGE), 1, 0), i
  FROM generate_series(0, $NRANGE - 1) i;
CREATE TABLE rs_created_at (id bigserial PRIMARY KEY, created_at timestamptz NOT NULL, payload int NOT NULL);
INSERT INTO rs_created_at (created_at, payload)
SELECT timestamptz '2026-01-01 00:00+00' + i * (interval '10 days' / $NRANGE), i
  FROM generate_series(0, $NRANGE - 1) i;
CREATE INDEX ON rs_created_at (created_at);
VACUUM ANALYZE rs_snowflake;
VACUUM ANALYZE rs_created_at;
SQL
hours=5
for ((rep = 0; rep < REPS; rep++)); do
    for ((h = 0; h < hours; h++)); do
        a="timestamptz '2026-01-01 00:00+00' + interval '$((h * 41 + rep * 7 + 3)) hours'"
        b="$a + interval '1 hour'"
        s1="SELECT count(*), sum(payload) FROM rs_snowflake WHERE id >= snowflake_min_id($a) AND id < snowflake_min_id($b)"
        s2="SELECT count(*), sum(payload) FROM rs_created_at WHERE created_at >= $a AND created_at < $b"
        [ "$(q -c "$s1")" = "$(q -c "$s2")" ] || die "range scans disagree for hour $h"
        if (( (rep + h) % 2 )); then order=("$s1" "$s2"); else order=("$s2" "$s1"); fi
        for s in "${order[@]}"; do
            ms=$(q -c "SELECT bench_ms(\$q\$$s\$q\$)")
            if [ "$s" = "$s1" ]; then R["range|sf"]+="$ms "; else R["range|ca"]+="$ms "; fi
        done
    done
done
q -c "EXPLAIN (COSTS OFF) SELECT count(*) FROM rs_snowflake WHERE id >= snowflake_min_id(now()) AND id < snowflake_min_id(now() + interval '1 hour')" \
    | grep -q "Index" || die "the snowflake range scan does not use the primary-key index"
R["range_size|sf"]=$(q -c "SELECT pg_total_relation_size('rs_snowflake')")
R["range_size|ca"]=$(q -c "SELECT pg_total_relation_size('rs_created_at')")
fi

# at_once N SCRIPT: N backends run SCRIPT once each, started together;
# prints pgbench's rate in transactions per second, connection time
# excluded (workloads 5 and 5b).
at_once() {
    "$(pgbin)/pgbench" -n -h "$DIR" -p "$PORT" -U postgres -c "$1" -j "$1" -t 1 \
        -f "$2" bench > "$DIR/pgbench.out" 2>&1 || { cat "$DIR/pgbench.out" >&2; die "pgbench failed on $2"; }
    pgbench_ok "$DIR/pgbench.out" "pgbench had failures on $2"
    local tps; tps=$(sed -nE 's/^tps = ([0-9.]+) .*without initial connection time.*/\1/p' "$DIR/pgbench.out")
    [ -n "$tps" ] || { cat "$DIR/pgbench.out" >&2; die "no tps from pgbench"; }
    echo "$tps"
}

# --- 5b. many backends at the default lead bound -------------------------
# N backends each take NSCALE IDs at once with the default max_lead: the
# format allows N * NSCALE / 4096 ms of clock, less the lead it may borrow,
# and the wall time is compared with that bound. Two statements: the one of
# workload 5 (generate_series in FROM materialises its rows before the
# first call, time in which the clock runs but no ID is taken) and the
# streaming one of 1b (only generation). Before each run the lead of the
# previous one drains. Before workload 5, which leaves a lead of seconds.
if want 5b; then
log "5b. $NSCALE IDs in each of $LEAD_BACKENDS concurrent backends (default max_lead)"
lead_now() { q -c "SELECT coalesce(lead_ms, 0) FROM snowflake_stats()"; }
max_lead_ms=$(q -c "SELECT max_lead_ms FROM snowflake_stats()")
for n in $LEAD_BACKENDS; do
    for ((rep = 0; rep < REPS; rep++)); do
        for form in from stream; do
            if [ $form = from ]; then
                echo "SELECT count(snowflake_nextval()) FROM generate_series(1, $NSCALE);" > "$DIR/lead.sql"
            else
                echo "SELECT count(snowflake_nextval()) FROM (SELECT generate_series(1, $NSCALE)) s;" > "$DIR/lead.sql"
            fi
            sleep "$(awk -v l="$(lead_now)" 'BEGIN {print (l > 0 ? l / 1000 : 0) + 0.2}')"
            w0=$(q -c "SELECT backpressure_waits FROM snowflake_stats()")
            tps=$(at_once "$n" "$DIR/lead.sql")
            R["leadN$n|$form|ms"]+="$(awk -v t="$tps" -v n="$n" 'BEGIN {printf "%.1f", n * 1000 / t}') "
            R["leadN$n|$form|lead"]+="$(lead_now) "
            R["leadN$n|$form|waits"]+="$(( $(q -c "SELECT backpressure_waits FROM snowflake_stats()") - w0 )) "
        done
    done
done
fi

# --- 5. many backends at once -------------------------------------------
# N backends each run SELECT count(f()) FROM generate_series(1, NSCALE) at
# the same moment (one pgbench transaction per client, connection time
# excluded); the aggregate rate is N * NSCALE IDs over the wall time.
# max_lead = 1h, so back-pressure never engages and the shared state's
# contention is what is measured. Last, because it leaves IDs leading the
# clock by a few seconds.
if want 5; then
log "5. $NSCALE IDs in each of $SCALE_BACKENDS concurrent backends (max_lead = 1h)"
q -c "ALTER SYSTEM SET snowflake_id.max_lead = '1h'" -c "SELECT pg_reload_conf()" >/dev/null
sleep 1
scale_gens=("${GENS[0]}" "$FLOOR" "${GENS[1]}")
for n in $SCALE_BACKENDS; do
    for ((rep = 0; rep < REPS; rep++)); do
        while IFS= read -r g; do
            IFS='|' read -r name expr _ <<< "$g"
            echo "SELECT count($expr) FROM generate_series(1, $NSCALE);" > "$DIR/scale.sql"
            tps=$(at_once "$n" "$DIR/scale.sql")
            R["scale$n|$name"]+="$(awk -v t="$tps" -v m="$NSCALE" 'BEGIN {printf "%.1f", t * m / 1000}') "
        done < <(rotated "$rep" "${scale_gens[@]}")
    done
done
q -c "ALTER SYSTEM RESET snowflake_id.max_lead" -c "SELECT pg_reload_conf()" >/dev/null
fi

# --- samples, then the report ------------------------------------------
# Collecting ends here: every sample goes into the samples file, with the
# facts about the run the report needs; bench/report.py renders the tables.
SAMPLES=${OUT%.md}.samples.txt
settings=""
for v in BENCH_WORKLOADS BENCH_REPS BENCH_PGBENCH_SECONDS BENCH_PAIR_ONLY BENCH_SCALING_BACKENDS \
    BENCH_LEAD_BACKENDS BENCH_CLIENTS; do
    if [ -n "${!v:-}" ]; then settings+="$v=\"${!v}\" "; fi
done
gen_names=()
for g in "${GENS[@]}"; do IFS='|' read -r name _ _ <<< "$g"; gen_names+=("$name"); done
{
    meta() { printf 'meta|%s\t%s\n' "$1" "$2"; }
    meta pg_version "$("$PG_CONFIG" --version | cut -d' ' -f2)"
    meta project_version "$(project_version)"
    meta nproc "$(nproc)"
    meta cpu_model "$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)"
    meta mem "$(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
    meta smoke "$SMOKE"; meta settings "$settings"; meta workloads "$WORKLOADS"
    meta reps "$REPS"; meta reps1 "$REPS1"; meta reps2 "$REPS2"; meta hours "${hours:-5}"
    meta n1 "$N1"; meta n10 "$N10"; meta nins "$NINS"; meta nrange "$NRANGE"
    meta clients "$CLIENTS"; meta pgb_t "$PGB_T"; meta ceiling_per_ms "$ceiling_per_ms"
    meta nscale "$NSCALE"; meta scale_backends "$SCALE_BACKENDS"
    meta lead_backends "$LEAD_BACKENDS"; meta max_lead_ms "${max_lead_ms:-1000}"
    meta gens "$(IFS=';'; echo "${gen_names[*]}")"
    meta floor "${FLOOR%%|*}"; meta nocall "${NOCALL%%|*}"
    # Every sample, in the order measured: the spread behind each median.
    for k in "${!R[@]}"; do printf '%s\t%s\n' "$k" "${R[$k]% }"; done | sort
} > "$SAMPLES"
python3 "$ROOT/bench/report.py" "$SAMPLES" > "$OUT"

cat "$OUT"
log "report written to $OUT (every sample in $SAMPLES)"
