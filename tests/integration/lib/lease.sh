# shellcheck shell=bash
# The set-up that tests/integration/leases.sh and lease_promise.sh share:
# a registry server (an ordinary PostgreSQL that does not preload the
# library) and minting servers that lease their worker ids from it, each
# in a directory of its own under $BASE with its socket there. Sourcing
# this file sources scripts/lib.sh (whose fake_clock, setclock and
# fake_start move the clock of a server started by start_faked). It lives
# below tests/integration/lib/ so that scripts/test.sh, which runs every
# tests/integration/*.sh, does not run it as a script of its own.
#   The script sets BASE (state_dir) and calls nodes PORT0 NAME...: NODES,
#       and PORT_OF[NAME] = PORT0 + its index; LEASE[NAME] is set by
#       leased. REGISTRIES (default: reg) names the registry servers, which
#       all_stop stops last.
#   dir_of NODE, conninfo REG DB NODE (NODE's registry connection string,
#       as its own login role lease_NODE), q NODE [psql args...] (psql as
#       postgres, unaligned), fresh NODE, start NODE, start_faked NODE,
#       stop NODE...
#   registry_server REG START ROLE...: REG's cluster, started by START
#       (start or start_faked), with the group role snowflake_lease and a
#       login role per ROLE in it; registry_db REG DB [INIT_ARGS [SCHEMA]]:
#       DB on REG, a registry with the documented grants.
#   mint_init NODE REG DB [postgresql.conf lines...]: a minting server
#       leasing from DB on REG for MINT_TTL (3 s; empty: the default).
#   lease_of, has_lease, leased, stats_of, role_refused NODE: its lease.
#   holder_state, is_state, renewed_at, renewed_since REG DB W ...: the
#       registry's view of worker id W.
#   postmaster_of, lease_worker_of NODE; freeze NODE, thaw [PID]: SIGSTOP
#       and SIGCONT (FROZEN, continued at exit).
#   BG: the script's background clients, killed at exit; stop_own: a
#       function the script may define, run at exit after the clients are
#       killed and before the clusters stop. all_stop: that, now.
source "$(dirname "${BASH_SOURCE[0]}")/../../../scripts/lib.sh"

declare -A PORT_OF=() LEASE=()
NODES=() REGISTRIES=(reg) FROZEN=() BG=()

# nodes PORT0 NAME...: the servers of the script, by name, on PORT0 on.
nodes() {
    local p0="$1" i; shift
    NODES=("$@")
    for i in "${!NODES[@]}"; do PORT_OF[${NODES[$i]}]=$((p0 + i)); done
}
dir_of() { printf '%s/%s' "$BASE" "$1"; }
# conninfo REG DB NODE: NODE's connection string to DB on REG, as its own
# login role (docs/worker-ids.md: one per server, members of snowflake_lease).
conninfo() { echo "host=$(dir_of "$1") port=${PORT_OF[$1]} dbname=$2 user=lease_$3"; }

# Settings of every server (durability as in production: fsync on), and
# of the minting ones; a later line overrides an earlier one. Unix
# sockets only: a TCP port of a script's range may be a client's
# ephemeral port at the moment a server starts.
COMMON=("listen_addresses = ''" "fsync = on" "shared_buffers = '32MB'")
MINT=("shared_preload_libraries = 'snowflake_id'"
      "snowflake_id.worker_id_source = 'registry'")
MINT_TTL=3s

# all_stop: every process the script stopped continued, its clients
# killed, stop_own run, and every cluster under $BASE stopped, the
# registries last (the others release their leases at a clean stop).
all_stop() {
    local pid d n
    for pid in "${FROZEN[@]}"; do kill -CONT "$pid" 2>/dev/null || true; done
    FROZEN=()
    for pid in "${BG[@]}"; do kill "$pid" 2>/dev/null || true; done
    BG=()
    if declare -F stop_own >/dev/null; then stop_own; fi
    for d in "$BASE"/*/; do
        d=${d%/} n=${d##*/}
        if [[ " ${REGISTRIES[*]} " != *" $n "* ]] && [ -f "$d/data/PG_VERSION" ]; then cluster_stop "$d"; fi
    done
    for n in "${REGISTRIES[@]}"; do
        if [ -f "$(dir_of "$n")/data/PG_VERSION" ]; then cluster_stop "$(dir_of "$n")"; fi
    done
}

# fresh NODE: an empty directory for NODE's cluster, owned by postgres.
fresh() {
    local d; d=$(dir_of "$1")
    cluster_stop "$d"; rm -rf "$d"; mkdir -p "$d"
    if is_root; then chown postgres:postgres "$d"; fi
}
start() {
    cluster_start "$(dir_of "$1")" \
        || { tail -30 "$(dir_of "$1")/server.log" >&2; die "$1 did not start (the end of its log is above)"; }
}
# start_faked NODE: start NODE under the script's fake clock (fake_clock).
start_faked() { fake_start "$(dir_of "$1")"; }
stop() { local n; for n in "$@"; do cluster_stop "$(dir_of "$n")"; done; }

# q NODE [psql args...]: psql as postgres on NODE's socket, unaligned.
q() {
    local n="$1"; shift
    timeout 300 "$(pgbin)/psql" -X -q -At -F ' ' -h "$(dir_of "$n")" -p "${PORT_OF[$n]}" -U postgres \
        -v ON_ERROR_STOP=1 "$@"
}

# registry_server REG START ROLE...: a registry cluster, started by START,
# with the lease group role and each ROLE a login role in it (CONNECTION
# LIMIT 3: docs/worker-ids.md "Setting up").
registry_server() {
    local reg="$1" starter="$2" r roles=("CREATE ROLE snowflake_lease NOLOGIN"); shift 2
    fresh "$reg"
    cluster_init "$(dir_of "$reg")" "${PORT_OF[$reg]}" "${COMMON[@]}"
    "$starter" "$reg"
    for r in "$@"; do roles+=("CREATE ROLE $r LOGIN CONNECTION LIMIT 3 IN ROLE snowflake_lease"); done
    q "$reg" "${roles[@]/#/-c}"
}
# registry_db REG DB [INIT_ARGS [SCHEMA]]: DB created on REG, the extension
# in it (in SCHEMA, created for it, as docs/reference.md recommends; else
# in public), snowflake_registry_init(INIT_ARGS), which must return one
# row per id (2^worker_bits, 1024 by default), and the grants of
# docs/worker-ids.md "Setting up" to the lease group role: nothing more.
registry_db() {
    local reg="$1" db="$2" args="${3:-}" schema="${4:-public}" create="CREATE EXTENSION snowflake_id" bits n
    bits=$(sed -nE 's/.*worker_bits *=> *([0-9]+).*/\1/p' <<<"$args")
    if [ "$schema" != public ]; then
        create="CREATE SCHEMA $schema AUTHORIZATION postgres; CREATE EXTENSION snowflake_id SCHEMA $schema"
    fi
    q "$reg" -c "CREATE DATABASE $db"
    n=$(q "$reg" -d "$db" -c "SET client_min_messages = warning" -c "$create" -c "SET search_path = $schema" \
        -c "SELECT snowflake_registry_init($args)" \
        -c "GRANT EXECUTE ON FUNCTION snowflake_registry_claim(uuid,text,integer,text,text,integer,integer,integer,bigint,integer,bigint),
                                      snowflake_registry_renew(integer,uuid,bigint,integer,bigint),
                                      snowflake_registry_release(integer,uuid,bigint) TO snowflake_lease" \
        -c "GRANT USAGE ON SCHEMA $schema TO snowflake_lease")
    [ "$n" = $((1 << ${bits:-10})) ] \
        || die "snowflake_registry_init($args) in $db on $reg returned '$n', expected $((1 << ${bits:-10})) (one row per id)"
}

# mint_init NODE REG DB [postgresql.conf lines...]: a new minting server
# that leases its worker id from DB on REG, for MINT_TTL.
mint_init() {
    local n="$1" reg="$2" db="$3" ttl=(); shift 3
    [ -z "$MINT_TTL" ] || ttl=("snowflake_id.lease_ttl = '$MINT_TTL'")
    fresh "$n"
    cluster_init "$(dir_of "$n")" "${PORT_OF[$n]}" "${COMMON[@]}" "${MINT[@]}" "${ttl[@]}" \
        "snowflake_id.registry = '$(conninfo "$reg" "$db" "$n")'" "$@"
}

lease_of() { q "$1" -c "SELECT lease_worker_id FROM snowflake_stats()"; }
has_lease() { [ -n "$(lease_of "$1" 2>/dev/null)" ]; }
# stats_of NODE: the lease columns of NODE's snowflake_stats(), for messages.
stats_of() {
    q "$1" -c "SELECT format('source %s, lease %s, %s registry errors, last: %s', worker_id_source,
                             coalesce(lease_worker_id::text, 'none'), registry_errors,
                             coalesce(registry_last_error, 'none'))
                 FROM snowflake_stats()" 2>&1 || true
}
# leased NODE: wait until NODE holds a lease (60 s at most); set LEASE[NODE]
# (read by the scripts that source this file).
# shellcheck disable=SC2034
leased() {
    poll_until 60 has_lease "$1" || die "$1: no worker id leased within 60 s of its start, expected one ($(stats_of "$1"))"
    LEASE[$1]=$(lease_of "$1")
}
# role_refused NODE: NODE's last claim was refused by its role's limit.
role_refused() {
    [[ "$(q "$1" -c "SELECT registry_last_error FROM snowflake_stats()" 2>/dev/null)" == *"may hold no more worker-id leases"* ]]
}

# The registry's view of worker id W in DB on REG.
holder_state() { q "$1" -d "$2" -c "SELECT state FROM snowflake_registry_holders WHERE worker_id = $3"; }
is_state() { [ "$(holder_state "$1" "$2" "$3")" = "$4" ]; }
renewed_at() { q "$1" -d "$2" -c "SELECT renewed_at FROM snowflake_registry_holders WHERE worker_id = $3"; }
# renewed_since REG DB W TIME [SECONDS]: W's lease renewed more than
# SECONDS (0) after TIME (renewed_at as read before; empty: never).
renewed_since() {
    [ "$(q "$1" -d "$2" -c "SELECT renewed_at > coalesce(nullif('$4', '')::timestamptz, '-infinity') + interval '${5:-0} s'
                              FROM snowflake_registry_holders WHERE worker_id = $3")" = t ]
}

postmaster_of() { head -1 "$(dir_of "$1")/data/postmaster.pid"; }
# lease_worker_of NODE: the PID of NODE's "snowflake_id lease" background
# worker (its process title).
lease_worker_of() {
    local pm pid; pm=$(postmaster_of "$1")
    pid=$(ps -o pid=,args= --ppid "$pm" | awk '/snowflake_id lease/ {print $1}')
    [ "$(wc -w <<<"$pid")" = 1 ] \
        || die "$1: expected one 'snowflake_id lease' process among the children of postmaster $pm, found '$pid' ($(ps -o pid=,args= --ppid "$pm" | paste -sd ';'))"
    echo "$pid"
}
all_stopped() { local p; for p in "$@"; do [[ "$(ps -o stat= -p "$p")" == T* ]] || return 1; done; }
# freeze NODE: SIGSTOP its postmaster, then each of its children (a stopped
# postmaster forks no new one), and wait until all are stopped.
freeze() {
    local pm k kids=(); pm=$(postmaster_of "$1")
    kill -STOP "$pm"; FROZEN+=("$pm")
    for k in $(pgrep -P "$pm"); do
        if kill -STOP "$k" 2>/dev/null; then FROZEN+=("$k"); kids+=("$k"); fi
    done
    poll_until 30 all_stopped "$pm" "${kids[@]}" \
        || die "$1: not every process stopped within 30 s of SIGSTOP: $(ps -o pid=,stat=,args= -p "$(IFS=,; echo "$pm,${kids[*]}")" | paste -sd ';')"
}
# thaw [PID]: SIGCONT every frozen process but PID.
thaw() {
    local p keep=()
    for p in "${FROZEN[@]}"; do
        if [ "$p" = "${1:-}" ]; then keep+=("$p"); else kill -CONT "$p" 2>/dev/null || true; fi
    done
    FROZEN=("${keep[@]}")
}
