#!/usr/bin/env bash
# The many-core measurements of issue 17 on a bare borrowed machine: one
# with many cores, no package registry, no compiler and no cargo, where
# commands run as root (the `device` tool of this workplace). Two steps:
#
#   bash bench/device.sh pack          here: builds the extension into
#       PostgreSQL 18 (the wheel of .cache/pg/), the benchmarks' floor
#       function and the core's thread-scaling example, and puts what the
#       other machine needs into .device/ (git-ignored; about 45 MB)
#   bash bench/device.sh run PART...   there, in a copy of the working tree
#       with .device/ carried beside it: makes the non-root `postgres` OS
#       user the server needs, puts the packed PostgreSQL where
#       scripts/lib.sh looks for it, and runs the PARTs:
#
#     scaling   the core's thread scaling (core/examples/scaling.rs) and
#               bench/run.sh workloads 5 and 5b: 1M IDs in each of 1-64
#               backends with max_lead = 1h, and 16 backends at the default
#               max_lead (about 5 minutes on 16 cores; nextval's 127M IDs
#               are most of it)
#     pgbench   bench/run.sh workload 2, snowflake_nextval() and the floor
#               only, at 1-128 clients (about 7 minutes)
#     inserts   bench/inserts.sh at 1, 16, 64 and 128 clients (about 8
#               minutes)
#     starts    bench/databases.sh's starts at 1,000 databases
#               (BENCH_DEVICE_DBS): ten crash restarts and ten starts
#               without the state file, the first ID after each (issue
#               55; about 3 minutes)
#
#   --smoke (after the PARTs) runs each at toy sizes; `bash bench/device.sh
#   selftest` packs, copies the tracked tree to a scratch directory and runs
#   every part there with --smoke, without cargo or a compiler on PATH (the
#   test suite's bench layer runs it, so the packed path cannot rot).
#
# Reports go to $OUT (the device tool brings that folder back) or, where it
# is unset, to .run/device/. BENCH_DEVICE_SCALE_BACKENDS, ..._LEAD_BACKENDS,
# ..._CLIENTS, ..._INSERT_CLIENTS and BENCH_DEVICE_REPS override the
# defaults below (repetitions: 2 for workload 5, 5 for pgbench, 2 for the
# inserts, 3 for the core).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
PACK="$ROOT/.device"
PG_MAJOR_DEVICE=18

pack() {
    [ -n "${SNOWFLAKE_PREREQS_DONE:-}" ] || bash "$ROOT/scripts/prereqs.sh" "$PG_MAJOR_DEVICE"
    select_pg "$PG_MAJOR_DEVICE"
    export PATH="$HOME/.cargo/bin:$PATH"
    install_extension
    local pgdir; pgdir=$(cd "$("$PG_CONFIG" --bindir)/.." && pwd)
    rm -rf "$PACK" && mkdir -p "$PACK"
    log "packing PostgreSQL ${PG_WHEEL[$PG_MAJOR_DEVICE]} with snowflake_id into $PACK"
    cp -a "$pgdir" "$PACK/pg"
    "${CC:-clang}" -O2 -fPIC -shared -Wno-ignored-attributes -I"$("$PG_CONFIG" --includedir-server)" \
        "$ROOT/bench/floor.c" -o "$PACK/bench_floor.so" || die "could not build bench/floor.c"
    (cd "$ROOT" && cargo build -q --release -p snowflake_id_core --example scaling) \
        || die "could not build the scaling example"
    cp "$ROOT/target/release/examples/scaling" "$PACK/scaling"
    # What was packed, and when: a second pack of the same commit is
    # copied into place again.
    printf '%s packed %s\n' "$(git -C "$ROOT" describe --always --dirty)" "$(date -u +%FT%TZ)" > "$PACK/commit"
    log "packed $(du -sh "$PACK" | cut -f1): carry .device (device tool: carry [\".device\"])"
}

# Make the packed PostgreSQL the one scripts/lib.sh selects for major 18,
# and the postgres OS user that runs it.
unpack() {
    [ -x "$PACK/pg/bin/pg_config" ] || die "no packed PostgreSQL in $PACK: run 'bash bench/device.sh pack' first"
    command -v runuser >/dev/null || die "runuser (util-linux) is missing: the server cannot be started as postgres"
    if ! id postgres >/dev/null 2>&1; then
        useradd --system --no-create-home --shell /usr/sbin/nologin postgres \
            || die "could not create the postgres OS user"
    fi
    # The server runs as postgres: it must reach the tree (on a bare
    # borrowed machine the copy may sit under /root).
    local d="$ROOT"
    while [ "$d" != "/" ]; do chmod o+x "$d"; d=$(dirname "$d"); done
    local dest; dest="$(shared_dir "$ROOT/.cache/pg" cache-pg)/${PG_WHEEL[$PG_MAJOR_DEVICE]}"
    if ! cmp -s "$PACK/commit" "$dest/packed-commit"; then
        rm -rf "$dest" && mkdir -p "$dest"
        cp -a "$PACK/pg" "$dest/postgresql-packed"
        cp "$PACK/commit" "$dest/packed-commit"
        chmod -R a+rX "$dest"
    fi
    export SNOWFLAKE_PREREQS_DONE=1 BENCH_NO_INSTALL=1 BENCH_FLOOR_SO="$PACK/bench_floor.so"
    select_pg "$PG_MAJOR_DEVICE"
}

# The machine, in one line; the kernel's clock source says whether the
# backends' millisecond cache is used there (only on "tsc").
machine() {
    printf '%s, %s CPUs, %s, kernel %s (clock source %s), PostgreSQL %s, snowflake_id %s (%s)\n' \
        "$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)" "$(nproc)" \
        "$(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)" "$(uname -r)" \
        "$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null || echo unknown)" \
        "$("$PG_CONFIG" --version | cut -d' ' -f2)" "$(project_version)" "$(cat "$PACK/commit" 2>/dev/null || echo '?')"
}

run_parts() {
    local smoke=() parts=() p
    for p in "$@"; do
        if [ "$p" = --smoke ]; then smoke=(--smoke); else parts+=("$p"); fi
    done
    [ ${#parts[@]} -gt 0 ] || die "usage: bash bench/device.sh run scaling|pgbench|inserts|starts... [--smoke]"
    unpack
    local out="${OUT:-$ROOT/.run/device}"; mkdir -p "$out"
    machine | tee "$out/machine.txt"
    local threads ids
    for p in "${parts[@]}"; do
        case "$p" in
        scaling)
            threads="1,2,4,8,16,32,64"; ids=1000000
            [ ${#smoke[@]} = 0 ] || { threads="1,2"; ids=20000; }
            log "thread scaling of the core ($threads threads)"
            "$PACK/scaling" --ids "$ids" --threads "$threads" --reps "${BENCH_DEVICE_REPS:-3}" \
                | tee "$out/scaling-core.md"
            BENCH_WORKLOADS="5b 5" BENCH_REPS=${BENCH_DEVICE_REPS:-2} BENCH_OUT="$out/scaling.md" \
                BENCH_SCALING_BACKENDS="${BENCH_DEVICE_SCALE_BACKENDS:-1 2 4 8 16 32 64}" \
                BENCH_LEAD_BACKENDS="${BENCH_DEVICE_LEAD_BACKENDS:-16}" \
                bash "$ROOT/bench/run.sh" "${smoke[@]}"
            ;;
        pgbench)
            BENCH_WORKLOADS=2 BENCH_PAIR_ONLY=1 BENCH_REPS=${BENCH_DEVICE_REPS:-5} BENCH_OUT="$out/pgbench.md" \
                BENCH_CLIENTS="${BENCH_DEVICE_CLIENTS:-1 2 4 8 16 32 64 128}" \
                bash "$ROOT/bench/run.sh" "${smoke[@]}"
            ;;
        inserts)
            INS_CLIENTS="${BENCH_DEVICE_INSERT_CLIENTS:-1 16 64 128}" INS_REPS=${BENCH_DEVICE_REPS:-2} \
                INS_SECONDS=5 INS_PREFILL=5000000 INS_OUT="$out/inserts.md" \
                bash "$ROOT/bench/inserts.sh" "${smoke[@]}"
            ;;
        starts)
            DBS_PARTS=starts DBS_COUNTS="${BENCH_DEVICE_DBS:-1000}" DBS_OUT="$out/starts.md" \
                bash "$ROOT/bench/databases.sh" "${smoke[@]}"
            ;;
        *) die "unknown part '$p' (scaling, pgbench, inserts or starts)" ;;
        esac
    done
    log "reports in $out"
}

# pack, then every part with --smoke in a scratch copy of the tracked tree,
# with neither cargo nor a C compiler reachable: what the borrowed machine
# will run, as it will run it.
selftest() {
    pack
    local scratch; scratch=$(shared_dir "$ROOT/.run/device-selftest" device-selftest)
    rm -rf "$scratch" && mkdir -p "$scratch"
    # What the device tool sends: tracked files and untracked, unignored ones.
    git -C "$ROOT" ls-files -z --cached --others --exclude-standard \
        | (cd "$ROOT" && xargs -0 cp --parents -t "$scratch")
    cp -a "$PACK" "$scratch/.device"
    local nobin="$scratch/.nobin"; mkdir -p "$nobin"
    printf '#!/bin/sh\necho "$0 must not be needed on the device" >&2; exit 1\n' > "$nobin/cargo"
    chmod +x "$nobin/cargo"; cp "$nobin/cargo" "$nobin/clang"; cp "$nobin/cargo" "$nobin/cc"
    (cd "$scratch" && PATH="$nobin:$PATH" HOME="$scratch/.home" OUT="$scratch/out" CC=false \
        bash bench/device.sh run scaling pgbench inserts --smoke) || die "the packed benchmarks failed"
    for f in machine.txt scaling-core.md scaling.md pgbench.md inserts.md; do
        [ -s "$scratch/out/$f" ] || die "the packed run wrote no $f"
    done
    grep -qF "### 5b. Many backends" "$scratch/out/scaling.md" || die "no workload 5b in the packed run"
    log "selftest: the packed benchmarks ran without cargo or a compiler"
}

case "${1:-}" in
pack) pack ;;
run) shift; run_parts "$@" ;;
selftest) selftest ;;
*) die "usage: bash bench/device.sh pack | run PART... [--smoke] | selftest" ;;
esac
