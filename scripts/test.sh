#!/usr/bin/env bash
# Command 2: the whole test suite, every layer, from a fresh clone.
#   1. lint: cargo fmt --check, cargo clippy (both crates), shellcheck,
#      the steps' runner and ports (tests/lint/steps.sh, ports.sh),
#      the module graph, links and recipes in the docs, sql/ and META.json,
#      operators a hostile schema could capture (check_sql_operators.py),
#      the Citus source lookup (tests/lint/citus_source.sh), no Rust
#      file over 900 lines
#   2. unit tests of the pure core (fake clock, multithreaded stress)
#   3. #[pg_test]s inside a server with the library preloaded, on the
#      oldest and the newest major requested (15 and 18 by default)
#   4. pg_regress suites against real clusters (preloaded; preloaded with
#      worker_id unset; not preloaded)
#   5. upgrade check: every released version -> HEAD with ALTER EXTENSION
#      UPDATE, regress suites in the upgraded database, catalog equal to a
#      fresh install (tests/upgrade/run.sh)
#   6. security: every attack of the security review and the protections
#      that held (tests/security/run.sh), on PostgreSQL 15 and 18 only
#   7. integration scripts in tests/integration/ (real clusters, pgbench)
#   8. packages: scripts/package.sh builds the tarball and .deb, and
#      tests/package/run.sh installs them into a clean PostgreSQL with no
#      Rust on PATH and runs the regression suites there
#   9. clients: real drivers and ORMs from PyPI and npm (tests/clients/),
#      once, on PostgreSQL 18 (or the last major requested)
#  10. bench smoke: bench/run.sh --smoke, bench/profile.sh,
#      bench/inserts.sh --smoke, bench/public.sh --smoke,
#      bench/adopt.sh --smoke, bench/databases.sh --smoke (on 18) and
#      bench/device.sh selftest at toy sizes,
#      once, on PostgreSQL 18 (or the last major requested), so the
#      benchmark runner cannot rot; its numbers are not checked
# Layers 3-8 run once per supported PostgreSQL major (15-18 by default;
# #[pg_test]s and security on 15 and 18). The steps run side by side,
# SNOWFLAKE_JOBS at a time (default 2; see "The run" below).
# On Debian's PostgreSQL 15, the system's, the layers install this build;
# the run records every snowflake_id file there at its start and puts
# back what it found at its end, also after a failure: the step "system
# PostgreSQL 15's snowflake_id as found" fails unless every file is as
# found, byte for byte, and no other is there (issue 56).
# Every layer runs even when an earlier one failed, except the layers of a
# major whose build and install failed (regress, upgrade, security,
# integration; clients and bench on the major they use): those say "not
# run" and why. The run always ends with its summary, one line per layer
# and major (passed / failed / skipped / not run, with its duration) and
# "summary: N passed, N failed, N skipped", and exits non-zero when
# anything failed or did not run.
# Quick loops: PG_VERSIONS="15 18" for a subset of majors,
# SNOWFLAKE_TEST_LAYERS for a subset of layers, e.g. "regress integration",
# and SNOWFLAKE_IT for a subset of the integration scripts, by name with or
# without .sh, e.g. SNOWFLAKE_IT="toolbox faults" (default: every script in
# tests/integration/; an unknown name is an error). One script on one major:
#   PG_VERSIONS=16 SNOWFLAKE_TEST_LAYERS=integration SNOWFLAKE_IT=faults \
#       bash scripts/test.sh
# The everyday loop, --quick (CONTRIBUTING.md says when it is enough):
# lint, the core's unit and model tests, pg_regress and the security
# layer's fast attacks (SNOWFLAKE_SECURITY_QUICK), on PostgreSQL 18 only;
# 1 min 40 s on two cores once the build is there.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
case "${1:-}" in
    "") ;;
    --quick)
        export SNOWFLAKE_TEST_LAYERS="${SNOWFLAKE_TEST_LAYERS:-lint unit regress security}" \
               PG_VERSIONS="${PG_VERSIONS:-18}" SNOWFLAKE_SECURITY_QUICK=1 ;;
    *) die "usage: bash scripts/test.sh [--quick]" ;;
esac
LAYERS=${SNOWFLAKE_TEST_LAYERS:-"lint unit pgtest regress upgrade security integration package clients bench"}
read -r -a VERSIONS <<< "${PG_VERSIONS:-$PG_SUPPORTED}"
for v in "${VERSIONS[@]}"; do
    [[ " $PG_SUPPORTED " == *" $v "* ]] || die "PG_VERSIONS: $v is not a supported major ($PG_SUPPORTED)"
done
has() { [[ " $LAYERS " == *" $1 "* ]]; }
# The integration scripts to run: all of them unless SNOWFLAKE_IT names some.
INTEGRATION=()
if [ -n "${SNOWFLAKE_IT:-}" ]; then
    read -r -a wanted <<< "$SNOWFLAKE_IT"
    for name in "${wanted[@]}"; do
        t="$ROOT/tests/integration/${name%.sh}.sh"
        [ -f "$t" ] || die "SNOWFLAKE_IT: no tests/integration/${name%.sh}.sh (have: $(cd "$ROOT/tests/integration" && echo *.sh))"
        INTEGRATION+=("$t")
    done
else
    INTEGRATION=("$ROOT"/tests/integration/*.sh)
fi
# The layers that run once: on PostgreSQL 18, or the last major requested.
once_pg=18; [[ " ${VERSIONS[*]} " == *" 18 "* ]] || once_pg=${VERSIONS[-1]}

# --- The plan and the summary ----------------------------------------------
source "$ROOT/scripts/steps.sh"
has lint && plan "lint"
has unit && plan "unit"
# The #[pg_test]s on the oldest and the newest major requested: they call
# the generator as Rust, which is the same code on every major (the SQL
# surface runs on every major through pg_regress), and each major costs a
# test build of its own (about a minute).
pgtest_major() { [ "$1" = "${VERSIONS[0]}" ] || [ "$1" = "${VERSIONS[-1]}" ]; }
for v in "${VERSIONS[@]}"; do
    has pgtest && pgtest_major "$v" && plan "PG $v pg_test"
    if has regress || has upgrade || has security || has integration || { has clients && [ "$v" = "$once_pg" ]; }; then
        plan "PG $v build and install"
    fi
    has regress && plan "PG $v pg_regress"
    has upgrade && plan "PG $v upgrade"
    has security && [[ " 15 18 " == *" $v "* ]] && plan "PG $v security"
    if has integration; then
        for t in "${INTEGRATION[@]}"; do plan "PG $v integration $(basename "$t")"; done
    fi
    has package && plan "PG $v packages"
done
has clients && plan "clients (PG $once_pg)"
has bench && plan "bench smoke (PG $once_pg)"
# Debian's PostgreSQL 15 is the system's, and may hold a snowflake_id of
# the user's or of scripts/run.sh (another version, a release build)
# that this run replaces (build and install; the upgrade and security
# layers add and remove install scripts). At its start the run records
# every snowflake_id file of that PostgreSQL's library and extension
# directories, a copy of each with its mode and owner, in
# .run/system-pg15/; at its end, after a failure or an interrupt too, it
# puts back what it found (issue 56): each file written beside its place
# and renamed into it (a server that has the library loaded keeps
# running, and its new connections load the file put back), every other
# snowflake_id file there removed. The step fails unless the files are
# then those recorded (path, mode, owner, sha256) and no others.
SYSTEM_STEP="system PostgreSQL $SYSTEM_PG_MAJOR's snowflake_id as found"
SYSTEM_RECORD="$ROOT/.run/system-pg$SYSTEM_PG_MAJOR"
SYSTEM_PG=""
if [[ " ${VERSIONS[*]} " == *" $SYSTEM_PG_MAJOR "* ]]; then
    SYSTEM_PG=1; plan "$SYSTEM_STEP"; at_exit "$SYSTEM_STEP" system_pg_as_found
fi
# system_pg_dirs: the library and extension directories of Debian's
# PostgreSQL 15 (where its package puts them, before it is installed).
system_pg_dirs() {
    if [ -x "$SYSTEM_PG_CONFIG" ]; then
        "$SYSTEM_PG_CONFIG" --pkglibdir; echo "$("$SYSTEM_PG_CONFIG" --sharedir)/extension"
    else
        echo "/usr/lib/postgresql/$SYSTEM_PG_MAJOR/lib"; echo "/usr/share/postgresql/$SYSTEM_PG_MAJOR/extension"
    fi
}
# record_system_pg: SYSTEM_RECORD/dirs (where), manifest (snowflake_files
# there) and files/ (a copy of each file and link, at its own path), made
# whole under another name and then renamed: without a whole record
# nothing is put back or removed.
record_system_pg() {
    local tmp="$SYSTEM_RECORD.new" f what d copies dirs=()
    if [ -e "$SYSTEM_RECORD" ]; then
        $SUDO rm -rf "$SYSTEM_RECORD.previous" && $SUDO mv "$SYSTEM_RECORD" "$SYSTEM_RECORD.previous"
        log "an earlier run did not put back what it found of snowflake_id in PostgreSQL $SYSTEM_PG_MAJOR: its record is now $SYSTEM_RECORD.previous/"
    fi
    $SUDO rm -rf "$tmp" && mkdir -m 700 "$tmp"
    mapfile -t dirs < <(system_pg_dirs)
    printf '%s\n' "${dirs[@]}" > "$tmp/dirs"
    snowflake_files "${dirs[@]}" > "$tmp/manifest"
    while IFS=$'\t' read -r f what; do
        case "$what" in
            file\ *|link\ *) mkdir -p "$tmp/files$(dirname "$f")" && $SUDO cp -a "$f" "$tmp/files$f" ;;
        esac
    done < "$tmp/manifest"
    # The copies are the files recorded (none changed while copied).
    copies=$(for d in "${dirs[@]}"; do
        snowflake_files "$tmp/files$d" | while IFS= read -r f; do printf '%s\n' "${f#"$tmp/files"}"; done
    done)
    [ "$copies" = "$(grep -P '\t(file|link) ' "$tmp/manifest" || true)" ] \
        || die "the copies in $tmp/ of PostgreSQL $SYSTEM_PG_MAJOR's snowflake_id files differ from the files"
    mv "$tmp" "$SYSTEM_RECORD"
    log "PostgreSQL $SYSTEM_PG_MAJOR: recorded $(wc -l < "$SYSTEM_RECORD/manifest") snowflake_id file(s) of ${dirs[*]}, to put back at the end"
}
# system_pg_as_found: the step. Puts back each recorded file that differs
# now (by rename), removes the snowflake_id files the run added, and
# checks that the files are those recorded and no others.
system_pg_as_found() {
    local f what tmp n=0 put=0 removed=0 before after dirs=()
    local -A was=() is=()
    [ -f "$SYSTEM_RECORD/manifest" ] \
        || die "no record was made at the start of the run of what PostgreSQL $SYSTEM_PG_MAJOR held of snowflake_id (see the log): nothing put back"
    mapfile -t dirs < <(sort -u "$SYSTEM_RECORD/dirs" <(system_pg_dirs))
    while IFS=$'\t' read -r f what; do was[$f]=$what; done < "$SYSTEM_RECORD/manifest"
    while IFS=$'\t' read -r f what; do is[$f]=$what; done < <(snowflake_files "${dirs[@]}")
    # Added by the run: removed (a file or a link; anything else stays,
    # and fails the check below).
    for f in "${!is[@]}"; do
        [ -z "${was[$f]+x}" ] || continue
        case "${is[$f]}" in
            file\ *|link\ *) $SUDO rm -f "$f" || die "could not remove $f"; log "removed $f (not there before the run)"; removed=$((removed + 1)) ;;
        esac
    done
    # There before: written beside its place and renamed into it where it
    # differs now. Copying over a library a server has loaded crashes it.
    for f in "${!was[@]}"; do
        n=$((n + 1))
        [ "${is[$f]:-}" != "${was[$f]}" ] || continue
        case "${was[$f]}" in file\ *|link\ *) ;; *) continue ;; esac
        tmp="$(dirname "$f")/.$(basename "$f").as-found.$$"
        $SUDO cp -a "$SYSTEM_RECORD/files$f" "$tmp" || die "could not write $tmp"
        $SUDO mv -fT "$tmp" "$f" || { $SUDO rm -f "$tmp"; die "could not rename $tmp to $f"; }
        put=$((put + 1))
    done
    [ "$put" = 0 ] || log "PostgreSQL $SYSTEM_PG_MAJOR: put back $put snowflake_id file(s) as the run found them"
    before=$(sort "$SYSTEM_RECORD/manifest"); after=$(snowflake_files "${dirs[@]}" | sort)
    if [ "$after" != "$before" ]; then
        diff -u <(echo "$before") <(echo "$after") | tail -n +3 >&2 || true
        die "PostgreSQL $SYSTEM_PG_MAJOR's snowflake_id files are not as the run found them (above: - found, + now); the files found are kept in $SYSTEM_RECORD/files/"
    fi
    $SUDO rm -rf "$SYSTEM_RECORD"
    if [ "$n" = 0 ]; then
        note "none there before the run, none after ($removed removed)"
    else
        note "$n file(s) as found, sha256 equal ($put put back, $removed removed)"
    fi
}
# A demo server of scripts/run.sh that runs now must still run, and mint,
# when the tests are done: no step may replace its library under it or
# stop it (issue 45).
DEMOS=(); declare -A DEMO_PID=() DEMO_LOG=()
while read -r d; do
    if demo_running "$d"; then
        DEMOS+=("$d"); DEMO_PID[$d]=$(head -1 "$d/data/postmaster.pid")
        DEMO_LOG[$d]=$(stat -c %s "$d/server.log" 2>/dev/null || echo 0)
        plan "demo server $(basename "$d") still mints"
    fi
done < <(demo_dirs)

trap summary EXIT
mkdir -p "$ROOT/.run"
[ -z "$SYSTEM_PG" ] || record_system_pg

# The lint's clippy builds the default feature, PostgreSQL 15: cargo-pgrx
# must know that major too, whatever PG_VERSIONS says (--quick runs 18).
PREREQ_MAJORS=("${VERSIONS[@]}")
if has lint && [[ " ${VERSIONS[*]} " != *" $SYSTEM_PG_MAJOR "* ]]; then PREREQ_MAJORS+=("$SYSTEM_PG_MAJOR"); fi
bash "$ROOT/scripts/prereqs.sh" "${PREREQ_MAJORS[@]}"
export PATH="$HOME/.cargo/bin:$PATH"
cd "$ROOT"

# --- The layers -----------------------------------------------------------
lint_layer() {
    log "lint: cargo fmt --check, cargo clippy, shellcheck, module graph, file lengths, docs"
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets --features pg_test -q -- -D warnings
    # sql/ holds the upgrade scripts only: the install script of this
    # version is generated (cargo pgrx install, package), and those of
    # past releases are the upgrade layer's fixtures (RELEASING.md).
    installs=$(cd "$ROOT" && git ls-files sql | grep -vE '^sql/snowflake_id--[^-]+--[^-]+\.sql$' || true)
    [ -z "$installs" ] || die "sql/ holds files other than upgrade scripts (install scripts of releases go to tests/upgrade/fixtures/): $installs"
    # META.json names this version and a file that exists.
    python3 - "$ROOT" "$(project_version)" <<'PY' || die "META.json does not match the project"
import json, pathlib, sys
root, version = pathlib.Path(sys.argv[1]), sys.argv[2]
meta = json.loads((root / "META.json").read_text())
bad = [] if meta["version"] == version else [f"version {meta['version']}, Cargo.toml says {version}"]
for name, p in meta["provides"].items():
    bad += [f"{name}: version {p['version']}"] if p["version"] != version else []
    bad += [f"{name}: no file {p['file']}"] if not (root / p["file"]).is_file() else []
    bad += [f"{name}: no docfile {p['docfile']}"] if "docfile" in p and not (root / p["docfile"]).is_file() else []
sys.exit("META.json: " + "; ".join(bad) if bad else 0)
PY
    # Every upgrade script refuses to be run by hand with psql.
    unguarded=$(grep -L '^\\echo Use "ALTER EXTENSION snowflake_id UPDATE' "$ROOT"/sql/snowflake_id--*--*.sql || true)
    [ -z "$unguarded" ] || die "upgrade scripts without the \\echo ... \\quit guard: $unguarded"
    # An upgrade script's copy of src/*/sql/*.sql is generated, never edited.
    python3 "$ROOT/scripts/upgrade_script.py" --check || die "an upgrade script differs from its sources"
    # No operator in SQL bound at install or run with the caller's
    # search_path that a hostile schema could capture (issue 39, F2/F3).
    python3 "$ROOT/scripts/check_sql_operators.py" || die "SQL with operators a schema in search_path could capture"
    mapfile -t shell_scripts < <(git -C "$ROOT" ls-files '*.sh')
    (cd "$ROOT" && shellcheck -x -S warning "${shell_scripts[@]}") \
        || die "shellcheck found problems in the scripts above"
    # The rooms of src/ run one way, no import cycle, the bottom modules
    # depend on nothing (CONTRIBUTING.md).
    python3 "$ROOT/scripts/module_graph.py" || die "the module graph is not one-way"
    # No Rust file over 900 lines (issue 56): split a long one by subject.
    local long
    long=$(cd "$ROOT" && git ls-files '*.rs' | while IFS= read -r f; do
        [ ! -f "$f" ] || awk -v f="$f" 'END { if (NR > 900) print f " (" NR " lines)" }' "$f"
    done)
    [ -z "$long" ] || die "Rust files over 900 lines: $long"
    # Every relative link resolves; documented recipes equal the tested files.
    python3 "$ROOT/scripts/check_docs.py" || die "the documentation has the problems above"
    # The summary of this script, after a failed step too (issue 45), and
    # its steps side by side (issue 64).
    bash "$ROOT/tests/lint/steps.sh"
    # Each step's ports its own, below the ephemeral range (issue 64).
    bash "$ROOT/tests/lint/ports.sh"
    # The hash that lets a major's release build be installed again
    # without a rebuild covers every input of the build.
    bash "$ROOT/tests/lint/build_inputs.sh"
    # Where the Citus source comes from, case by case (no network needed).
    bash "$ROOT/tests/lint/citus_source.sh" > "$ROOT/.run/citus-source.log" 2>&1 \
        || { cat "$ROOT/.run/citus-source.log" >&2; die "the Citus source lookup is broken"; }
}

unit_layer() {
    log "unit tests of the pure core"
    cargo test -q -p snowflake_id_core --release > "$ROOT/.run/unit.log" 2>&1 \
        || { grep -E "^test |panicked|^failures" "$ROOT/.run/unit.log" | tail -40 >&2; die "core unit tests failed; see .run/unit.log"; }
    grep -E "^test result" "$ROOT/.run/unit.log" >&2
    note "$(grep -E '^test result' "$ROOT/.run/unit.log" | awk '{p += $4; f += $6} END {print p " passed, " f " failed in " NR " test binaries"}')"
}

pgtest_layer() {
    log "PostgreSQL $PG_MAJOR: #[pg_test]s (library preloaded, worker_id 42)"
    local args=(); if is_root; then args=(--runas postgres --pgdata "$(state_dir "$ROOT/.run/pgtest" pgtest)/data"); fi
    # cargo-pgrx is registered with a private copy of this major
    # (scripts/prereqs.sh): its in-place install touches no running server.
    cargo pgrx test "pg$PG_MAJOR" "${args[@]}" > "$ROOT/.run/pgtest-$PG_MAJOR.log" 2>&1 || true
    grep -E "^test result|FAILED|panicked" "$ROOT/.run/pgtest-$PG_MAJOR.log" >&2 || true
    grep -q "^test result: ok" "$ROOT/.run/pgtest-$PG_MAJOR.log" || die "pg_test failed; see .run/pgtest-$PG_MAJOR.log"
    note "$(grep -E '^test result' "$ROOT/.run/pgtest-$PG_MAJOR.log" | tail -1)"
}

regress_layer() { bash "$ROOT/tests/regress/run.sh"; note "$(cat "$ROOT/.run/regress.summary")"; }
upgrade_layer() {
    bash "$ROOT/tests/upgrade/run.sh"
    note "$(cat "$ROOT/.run/upgrade.summary") earlier release(s) -> HEAD, catalog equal to a fresh install"
}
security_layer() { bash "$ROOT/tests/security/run.sh"; note "$(cat "$ROOT/.run/security.summary")"; }
integration_script() { log "PostgreSQL $PG_MAJOR: integration $(basename "$1")"; bash "$1"; }
# Last for a major: on Debian's PostgreSQL the .deb goes into a private
# dpkg root (tests/package/run.sh), never into the system's PostgreSQL.
package_layer() {
    SNOWFLAKE_PREREQS_DONE=1 bash "$ROOT/scripts/package.sh" "$PG_MAJOR"
    bash "$ROOT/tests/package/run.sh" "$PG_MAJOR"
    note "$(cat "$ROOT/.run/package.summary")"
}

clients_layer() {
    log "client layer on PostgreSQL $PG_MAJOR: psycopg, asyncpg, SQLAlchemy, Django, node-postgres, Knex"
    SNOWFLAKE_PREREQS_DONE=1 bash "$ROOT/tests/clients/run.sh"
    note "$(cat "$ROOT/.run/clients.summary")"
}

bench_layer() {
    local bench_pg=$PG_MAJOR
    log "bench smoke on PostgreSQL $bench_pg: bench/run.sh --smoke, bench/profile.sh, bench/inserts.sh --smoke, bench/public.sh --smoke, bench/adopt.sh --smoke"
    SNOWFLAKE_PREREQS_DONE=1 PG_VERSION=$bench_pg BENCH_OUT="$ROOT/.run/bench-smoke.md" \
        bash "$ROOT/bench/run.sh" --smoke > "$ROOT/.run/bench-smoke.log" 2>&1 \
        || { tail -40 "$ROOT/.run/bench-smoke.log" >&2; die "bench/run.sh --smoke failed; see .run/bench-smoke.log"; }
    for section in "### 1. Generation" "### 1b." "### 2. pgbench" "### 3. Inserts" "### 4. Range scan" \
                   "### 5b. Many backends" "### 5. Many backends"; do
        grep -qF "$section" "$ROOT/.run/bench-smoke.md" || die "the smoke report has no \"$section\" section"
    done
    SNOWFLAKE_PREREQS_DONE=1 PG_VERSION=$bench_pg BENCH_NO_INSTALL=1 BENCH_PROFILE_N=5000 BENCH_PROFILE_TXNS=200 \
        bash "$ROOT/bench/profile.sh" > "$ROOT/.run/profile-smoke.log" 2>&1 \
        || { tail -40 "$ROOT/.run/profile-smoke.log" >&2; die "bench/profile.sh failed; see .run/profile-smoke.log"; }
    grep -qE '^\| snowflake_nextval\(\) \| [0-9]+ ' "$ROOT/.run/profile-smoke.log" \
        || die "bench/profile.sh reported no instruction count for snowflake_nextval()"
    grep -qE '^\| snowflake_nextval\(\) \| [0-9]+ \| [+-][0-9]+ \| [0-9.]+× \|$' "$ROOT/.run/profile-smoke.log" \
        || die "bench/profile.sh reported no instructions per pgbench transaction for snowflake_nextval()"
    SNOWFLAKE_PREREQS_DONE=1 PG_VERSION=$bench_pg BENCH_NO_INSTALL=1 INS_OUT="$ROOT/.run/inserts-smoke.md" \
        bash "$ROOT/bench/inserts.sh" --smoke > "$ROOT/.run/inserts-smoke.log" 2>&1 \
        || { tail -40 "$ROOT/.run/inserts-smoke.log" >&2; die "bench/inserts.sh --smoke failed; see .run/inserts-smoke.log"; }
    grep -qE '^\| snowflake_nextval\(\), 8 hash partitions \| [0-9]+ \| [0-9.]+ \|' "$ROOT/.run/inserts-smoke.md" \
        || die "bench/inserts.sh reported no insert rate for the hash-partitioned table"
    SNOWFLAKE_PREREQS_DONE=1 PG_VERSION=$bench_pg BENCH_NO_INSTALL=1 PUB_OUT="$ROOT/.run/public-smoke.md" \
        bash "$ROOT/bench/public.sh" --smoke > "$ROOT/.run/public-smoke.log" 2>&1 \
        || { tail -40 "$ROOT/.run/public-smoke.log" >&2; die "bench/public.sh --smoke failed; see .run/public-smoke.log"; }
    grep -qE "^\| snowflake_to_public\(id, 'orders'\) \| [0-9.]+ \| [+-][0-9.]+ \|" "$ROOT/.run/public-smoke.md" \
        || die "bench/public.sh reported no cost per call for snowflake_to_public()"
    # What adopted sequences cost a statement that calls no nextval().
    SNOWFLAKE_PREREQS_DONE=1 PG_VERSION=$bench_pg BENCH_NO_INSTALL=1 \
        bash "$ROOT/bench/adopt.sh" --smoke > "$ROOT/.run/adopt-smoke.log" 2>&1 \
        || { tail -40 "$ROOT/.run/adopt-smoke.log" >&2; die "bench/adopt.sh --smoke failed; see .run/adopt-smoke.log"; }
    grep -qE '^\| preloaded, switch on and a sequence adopted .*\| [0-9]+ \| [0-9.]+ \|' "$ROOT/.run/adopt-smoke.log" \
        || die "bench/adopt.sh reported no instructions per transaction for the adopting database"
    # The high-water mark by number of databases (PostgreSQL 18 only).
    if [ "$bench_pg" = 18 ]; then
        SNOWFLAKE_PREREQS_DONE=1 BENCH_NO_INSTALL=1 DBS_OUT="$ROOT/.run/databases-smoke.md" \
            bash "$ROOT/bench/databases.sh" --smoke > "$ROOT/.run/databases-smoke.log" 2>&1 \
            || { tail -40 "$ROOT/.run/databases-smoke.log" >&2; die "bench/databases.sh --smoke failed; see .run/databases-smoke.log"; }
        grep -qE '^\| 2 \| -?[0-9.]+ \| [0-9.]+ \([0-9.]+\) \|' "$ROOT/.run/databases-smoke.md" \
            || die "bench/databases.sh reported no row for 2 databases"
    fi
    # The many-core runs happen on a borrowed machine without cargo or a
    # compiler: pack for it (PostgreSQL 18) and run every part from the pack.
    device=""
    if [ "$bench_pg" = 18 ]; then
        SNOWFLAKE_PREREQS_DONE=1 bash "$ROOT/bench/device.sh" selftest > "$ROOT/.run/device-selftest.log" 2>&1 \
            || { tail -40 "$ROOT/.run/device-selftest.log" >&2; die "bench/device.sh selftest failed; see .run/device-selftest.log"; }
        device=" and device pack"
    fi
    note "runner, profiler, insert study$device ok"
}

# --- The run --------------------------------------------------------------
# The steps run side by side, SNOWFLAKE_JOBS at a time (scripts/steps.sh,
# run_queue; default 2, for CI's two cores; 1 runs them one after another,
# with their output as it comes). What keeps two steps from meeting:
#  - every step has its own ports (below 32768, outside Linux's ephemeral
#    range; tests/lint/ports.sh), clusters (state_dir) and files
#    (.run/steps/);
#  - a step waits for what it needs: a major's steps for its build and
#    install;
#  - MUTEXES: cargo (one build directory), extN (a step that writes
#    PostgreSQL N's extension directory), regress (pg_regress's port, also
#    used by the packages step), and one word per kind of step (a script
#    keeps its ports on every major);
#  - "alone": a step that times something keeps its bound on a machine no
#    other step loads (ALONE below). They run last, one after another.
# The order: the builds first (everything waits for them), then the
# longest steps first (tests/README.md, "Step times"), so the run ends
# with short steps on both jobs.
ALONE=" security lease_promise.sh lease_clock.sh convert_estimate.sh "
with_pg() { select_pg "$1"; shift; "$@"; }
# kind NAME: the step's name without its major, one word.
kind() { local k=${1#PG [0-9][0-9] }; k=${k#integration }; printf '%s' "${k// /_}"; }
declare -A RECORDED=()
while IFS=$'\t' read -r n secs; do RECORDED[$n]=$secs; done < <(recorded_times)
FIRST=() REST=() LAST=()
# add WHERE NAME NEEDS MUTEXES COMMAND...: queue a step into FIRST, REST
# (ordered by recorded time) or LAST (the steps run alone).
add() {
    local where="$1" name="$2" k mutex
    k=$(kind "$2"); mutex="$4 $k"
    [[ "$ALONE" != *" $k "* ]] || { where=LAST; mutex="$mutex alone"; }
    queue "$name" "$3" "$mutex" "${@:5}"
    case "$where" in FIRST) FIRST+=("$name") ;; LAST) LAST+=("$name") ;; *) REST+=("$name") ;; esac
}
for v in "${VERSIONS[@]}"; do
    if [[ " ${STEPS[*]} " == *" PG $v build and install "* ]]; then
        add FIRST "PG $v build and install" "" "cargo ext$v" with_pg "$v" install_extension
    fi
done
has lint && add FIRST "lint" "" "cargo" lint_layer
has unit && add FIRST "unit" "" "cargo" unit_layer
for v in "${VERSIONS[@]}"; do
    need="PG $v build and install"
    has pgtest && pgtest_major "$v" && add FIRST "PG $v pg_test" "" "cargo" with_pg "$v" pgtest_layer
    has regress && add REST "PG $v pg_regress" "$need" "regress" with_pg "$v" regress_layer
    has upgrade && add REST "PG $v upgrade" "$need" "ext$v" with_pg "$v" upgrade_layer
    # The security layer on the oldest and the newest major.
    if has security && [[ " 15 18 " == *" $v "* ]]; then add REST "PG $v security" "$need" "ext$v" with_pg "$v" security_layer; fi
    if has integration; then
        for t in "${INTEGRATION[@]}"; do
            n=$(basename "$t"); it_need=$need; it_mutex=""
            case "$n" in
                # A test build of its own (cargo pgrx package --features
                # failpoints): cargo-pgrx copies the build directory's one
                # library after the build, which another build would replace.
                crashpoints.sh) it_mutex="cargo" ;;
                # pg_upgrade from PostgreSQL 17 installs this build there
                # unless PostgreSQL 17's own step did.
                toolbox.sh)
                    if [[ " ${STEPS[*]} " == *" PG 17 build and install "* ]]; then it_need="$need|PG 17 build and install"
                    else it_mutex="cargo ext17"; fi ;;
            esac
            add REST "PG $v integration $n" "$it_need" "$it_mutex" with_pg "$v" integration_script "$t"
        done
    fi
    # The package test checks that the major's extension directory is as
    # it found it: no step that writes there runs beside it.
    has package && add REST "PG $v packages" "" "cargo regress ext$v" with_pg "$v" package_layer
done
if has clients; then add REST "clients (PG $once_pg)" "PG $once_pg build and install" "" with_pg "$once_pg" clients_layer; fi
# The bench installs the build it needs (by rename; no cargo build once
# the major's step built it) and builds an example of the core with cargo.
has bench && add REST "bench smoke (PG $once_pg)" "PG $once_pg build and install" "ext$once_pg" with_pg "$once_pg" bench_layer
for n in "${!Q_NEEDS[@]}"; do
    [ -z "${Q_NEEDS[$n]}" ] || Q_WHY[$n]="the build and install of PostgreSQL $(sed -E 's/PG ([0-9]+) build and install/\1/g; s/\|/ or /g' <<< "${Q_NEEDS[$n]}") failed"
done
# Each major unpacked here, once, not by two steps at a time (select_pg:
# pg_config_for's lookup of an unpacked wheel fails inside it, by design).
for v in "${VERSIONS[@]}"; do select_pg "$v"; done
# by_time NAME...: longest recorded first (unrecorded: 30 s).
by_time() { local n; for n in "$@"; do printf '%s\t%s\n' "${RECORDED[$n]:-30}" "$n"; done | sort -t$'\t' -k1,1nr -s | cut -f2; }
mapfile -t REST < <(by_time "${REST[@]}")
mapfile -t LAST < <(by_time "${LAST[@]}")
QUEUE=("${FIRST[@]}" "${REST[@]}" "${LAST[@]}")
run_queue

select_pg "$once_pg"

# demo_mints DIR PID LOG_BYTES: the demo server in DIR is the same
# postmaster, none of its processes died since the log had LOG_BYTES,
# and it mints.
demo_mints() {
    local dir="$1" pid_before="$2" since="$3" pid port id died
    demo_running "$dir" || die "the demo server in $dir is not running any more (see $dir/server.log)"
    pid=$(head -1 "$dir/data/postmaster.pid"); port=$(sed -n '4p' "$dir/data/postmaster.pid")
    [ "$pid" = "$pid_before" ] || die "the demo server in $dir was restarted (postmaster $pid_before, now $pid)"
    died=$(tail -c +"$((since + 1))" "$dir/server.log" | grep -E "terminated by signal" | head -1 || true)
    [ -z "$died" ] || die "a process of the demo server in $dir died during the tests: $died"
    id=$(select_pg "$(cat "$dir/data/PG_VERSION")" && pq "$dir" "$port" -Atc "SELECT snowflake_nextval()") \
        || die "the demo server in $dir does not mint"
    note "postmaster $pid still up, minted $id"
}
# Before the demo servers' check: a demo server on PostgreSQL 15 must
# still mint after it.
[ -z "$SYSTEM_PG" ] || step "$SYSTEM_STEP" system_pg_as_found
for d in "${DEMOS[@]}"; do step "demo server $(basename "$d") still mints" demo_mints "$d" "${DEMO_PID[$d]}" "${DEMO_LOG[$d]}"; done
exit 0
