# Shared helpers for the run and test scripts. Source it; don't run it.
# Works as root (PostgreSQL runs through `runuser -u postgres`) and as a
# normal user (PostgreSQL runs as that user; sudo is used for installs).

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export PG_CONFIG=${PG_CONFIG:-/usr/bin/pg_config}
PGRX_VERSION=0.18.1
PG_MAJOR=15
APT_PACKAGES=(postgresql-15 postgresql-server-dev-15 postgresql-contrib clang libclang-dev
              pkg-config libssl-dev sudo faketime libfaketime make)

log() { printf '\033[1;34m==>\033[0m %s\n' "$*" >&2; }
die() { printf '\033[1;31mERROR:\033[0m %s\n' "$*" >&2; exit 1; }

is_root() { [ "$(id -u)" = 0 ]; }
SUDO=""; is_root || SUDO="sudo"

pgbin() { "$PG_CONFIG" --bindir; }

# Run a PostgreSQL server program as the right OS user.
as_pg() {
    if is_root; then runuser -u postgres -- "$@"; else "$@"; fi
}

# A directory PostgreSQL's OS user owns. Under root it must be reachable by
# the postgres user; if the project lives somewhere postgres can't enter
# (e.g. /root), fall back to /var/tmp.
state_dir() {
    local want="$1" name="$2"
    if is_root && ! runuser -u postgres -- test -x "$(dirname "$want")" 2>/dev/null; then
        want="/var/tmp/snowflake_id-$(printf '%s' "$ROOT" | md5sum | cut -c1-8)/$name"
    fi
    mkdir -p "$want"
    if is_root; then chown postgres:postgres "$want"; fi
    chmod 700 "$want"
    printf '%s\n' "$want"
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

# cluster_start DIR [env assignments for the server...]
cluster_start() {
    local dir="$1"; shift
    as_pg env "$@" "$(pgbin)/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null
}

cluster_stop() {
    local dir="$1"
    if [ -f "$dir/data/postmaster.pid" ]; then
        as_pg "$(pgbin)/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    fi
}

# psql against a cluster: pq DIR PORT [psql args...]
pq() {
    local dir="$1" port="$2"; shift 2
    "$(pgbin)/psql" -X -q -h "$dir" -p "$port" -U postgres -v ON_ERROR_STOP=1 "$@"
}

# Build a release and install it into $PG_CONFIG's PostgreSQL.
install_extension() {
    log "building and installing snowflake_id (release) into $("$PG_CONFIG" --pkglibdir)"
    local sudo_flag=(); is_root || sudo_flag=(--sudo)
    (cd "$ROOT" && cargo pgrx install --release "${sudo_flag[@]}" --pg-config "$PG_CONFIG" >/dev/null) \
        || die "cargo pgrx install failed"
}
