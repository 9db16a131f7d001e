#!/usr/bin/env bash
# The security layer: every attack of the 0.6.0 security review, and the
# protections that held, on real clusters with three roles (setup.sql):
# alice owns the victim tables, mallory is a plain role with a schema of
# her own, dba is a member of both but not a superuser. scripts/test.sh
# runs it on PostgreSQL 15 and 18 (the layer "security").
#   progress.sql     forged progress rows; rows the conversion cannot change
#   owner_code.sql   the owner's code (index expressions, triggers, CHECK
#                    constraints, forced policies) runs as the owner in the
#                    dry run, the back-fill, the rewrite and the final check
#   collisions.sql   pre-created objects under the conversion's names
#   surface.sql      what held: SECURITY DEFINER only for the registry, pinned search_path,
#                    42501 for non-owners, hostile search_path objects and
#                    identifiers; rewrite_rate's checks; the status view
#   sync_commit.sql  a session's synchronous_commit cannot publish a
#                    reservation no synchronous standby confirmed
#   squat_schema.sql a database owner's own snowflake_id_internal schema
#                    neither blocks nor redirects the install or the
#                    0.7.0 -> 0.8.0 upgrade (issue 46, item 7); then her
#                    pg_dump of that database works (item 8)
#   attack_*.sh      the red-team review of the high-water writers: a
#                    database owner's renamed public schema, her
#                    session_authorization and planner settings, a queued
#                    lock, CREATE/DROP DATABASE loops never make anyone a
#                    superuser or stop minting outside her database
#                    (attack_worker_slots.sh: parallel workers holding every slot stop nothing since issue 46);
#                    attack_schema_rename_bodies.sh: the same rename (or
#                    an overload in her schema) never makes a superuser's
#                    conversion, plan, js_safe or to_jsonb run her code
#   attack_lagging_overflow.sh  70 databases of a CREATEDB role whose
#                    writers die never stop minting in bob's (issue 46)
#   attack_rename_lock.sh  nor do 20 of her databases locked by RENAME
#                    DATABASE in an open transaction
#   attack_starts_review.sh  the red-team review of issue 55's starts: a
#                    far mark in one database never hides another's; a
#                    held mark survives restarts and copies of its
#                    database; a cancelled first call still reads its own
#                    mark; a CREATEDB role's serializable defaults never
#                    make the start-up read wait
#   attack_registry_*.sh  the red-team review of leased worker ids: a
#                    registry database of a plain role, or a schema where
#                    others may create, is refused (her renamed public,
#                    dropped schema, lock queue and overloads never reach
#                    the lease worker); a member's role settings (read-only,
#                    synchronous_commit = local) never change the lease
#                    worker's session; a claim she holds open loses the
#                    holder its lease instead of blocking its renewals;
#                    with the documented CONNECTION LIMIT she cannot take
#                    every connection slot of the registry; claims and
#                    releases she holds open lock no more ids than her
#                    limit allows
#   high_water.sh    the high-water-mark attacks S29-S33 of issue 38: no
#                    plain role's index, key, temp table or lock runs as,
#                    blocks or moves anyone else at a first call
#   public_keys.sql  no role but a superuser reads the key of public IDs
#                    (server files by every function and COPY, settings,
#                    EXPLAIN VERBOSE, error messages)
#   fk_validate.sql  issue 39 F1: the online conversion's foreign-key
#                    validation and SET NOT NULL run the owner's index
#                    predicates and CHECK constraints as the owner
#   hostile_install.sql, hostile_online.sql  issue 39 F3 and F2: exact-typed
#                    operators planted (hostile_ops.sql) before CREATE
#                    EXTENSION, before an upgrade from 0.7.0, and before
#                    every step of the online conversion never run as
#                    another role (each in its own database, hostile_db.sql)
#   adopt.sql        adopted sequences (issue 57): a planted list or
#                    overload never runs as a superuser, defaults of
#                    others are left alone, operators and paths around
#                    the planner never repeat an ID, DISCARD forgets
#   fleet.sql        the fleet check reads only servers owned by a superuser
#                    (or by the non-superuser caller): mallory's server with
#                    a mapping for PUBLIC as postgres never makes her
#                    SUPERUSER; pg_monitor runs it, seeing only SQLSTATEs
# Here: the mark file that mallory's code writes when it runs as a
# superuser must never appear; PGOPTIONS cannot set snowflake_id.*; with
# RUST_BACKTRACE=1 in the server's environment, a cancelled
# snowflake_nextval(count) sends no backtrace to the client (it goes to the
# server log); no log line holds the key of public IDs, with
# log_statement = 'all'; a bulk snowflake_nextval(count) leaves the rest
# of the lead to single-ID callers (no back-pressure wait for them); on a
# third server, where a REPLICATION role and pg_write_server_files reach
# the keys of public IDs, and that snowflake_id.public_keys_file keeps
# them out of their reach. Every section runs even if an earlier one failed, so that a
# run against an older version shows each attack that gets through.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
HERE="$ROOT/tests/security"
BASE=$(state_dir "$ROOT/.run/security" security)
PORT=${SNOWFLAKE_SECURITY_PORT:-16100}
DIR="$BASE/main" SYNC="$BASE/sync"
MARK="$BASE/pwned-by-mallory"
cleanup() { cluster_stop "$DIR"; cluster_stop "$SYNC"; cluster_stop "$BASE/keys"; }
trap cleanup EXIT
mkdir -p "$DIR" "$SYNC"
if is_root; then chown postgres:postgres "$DIR" "$SYNC"; fi
cleanup
rm -f "$MARK"
failed=()

# psql_as FILE DIR PORT: run one section; its output goes to BASE/NAME.out.
section() {
    local file="$1" dir="$2" port="$3" name; name=$(basename "$file" .sql)
    if PGHOST="$dir" PGPORT="$port" PGUSER=postgres PGDATABASE=postgres PSQL="$(pgbin)/psql" \
        "$(pgbin)/psql" -X -q -v ON_ERROR_STOP=1 -v mark="$MARK" \
        -v pghost="$dir" -v pgport="$port" -f "$file" >"$BASE/$name.out" 2>&1; then
        log "security: $name: ok ($(grep -c '^ *ok: \| 42[0-9A-Z]\{3\}: \| 5[57][0-9A-Z]\{3\}: ' "$BASE/$name.out" || true) checks)"
    else
        tail -5 "$BASE/$name.out" >&2
        failed+=("$name")
        log "security: $name: FAILED (see $BASE/$name.out)"
    fi
}

PUBLIC_KEY=2b7e151628aed2a6abf7158809cf4f3cef4359d8d580aa4f7f036d6f04fc6a94
# hostile_install.sql installs the released 0.7.0 and upgrades it: its
# install script (the upgrade layer's fixture) and the upgrade scripts go
# next to this build's own (which stays as cargo pgrx install wrote it).
EXTDIR="$("$PG_CONFIG" --sharedir)/extension"
for f in "$ROOT"/tests/upgrade/fixtures/snowflake_id--0.7.0.sql "$ROOT"/sql/snowflake_id--*--*.sql; do
    $SUDO cp "$f" "$EXTDIR/"
done
cluster_init "$DIR" "$PORT" "shared_preload_libraries = 'snowflake_id'" "snowflake_id.worker_id = 11" \
    "log_statement = 'all'" "log_min_messages = debug1"
write_public_keys "$DIR/data" "1:$PUBLIC_KEY"
cluster_up "$DIR" RUST_BACKTRACE=1
section "$HERE/setup.sql" "$DIR" "$PORT"
[ ${#failed[@]} = 0 ] || die "the security layer's setup failed"
for s in progress owner_code collisions surface public_keys fk_validate hostile_install hostile_online fleet squat_schema adopt; do
    section "$HERE/$s.sql" "$DIR" "$PORT"
done

if [ -e "$MARK" ]; then
    failed+=("mark")
    log "security: FAILED: mallory's code ran $(wc -l < "$MARK") time(s) as $(sort -u "$MARK" | tr '\n' ' ')and wrote $MARK"
fi

if grep -qi "$PUBLIC_KEY" "$DIR/server.log"; then
    failed+=("key-in-log"); log "security: FAILED: a log line holds the key of public IDs:"
    grep -i "$PUBLIC_KEY" "$DIR/server.log" | head -3 >&2
else
    log "security: no log line holds the key of public IDs ($(grep -c "statement:" "$DIR/server.log") statements logged)"
fi

# Issue 46, item 8: a database's owner dumps her database as
# docs/durability.md says (pg_dump --enable-row-security: the conversion
# progress has row-level security), and the dump carries the high-water
# mark. On 0.8.0 as first written: "permission denied for table
# snowflake_registry".
if ! out=$("$(pgbin)/pg_dump" --enable-row-security -h "$DIR" -p "$PORT" -U mallory -d sq_upgrade 2>&1); then
    failed+=("owner-dump"); log "security: FAILED: the database owner's pg_dump failed: $(tail -3 <<< "$out")"
elif ! grep -q "^COPY snowflake_id_internal.snowflake_high_water " <<< "$out"; then
    failed+=("owner-dump"); log "security: FAILED: the database owner's dump carries no high-water mark"
else
    log "security: the database owner's pg_dump --enable-row-security works and carries the mark"
fi

# Issue 46, item 7: a database left on a version before 0.8.0 (no
# high-water mark there) is named in the log and counted in
# snowflake_stats().
pq "$DIR" "$PORT" -c "CREATE DATABASE old07" >/dev/null
pq "$DIR" "$PORT" -d old07 -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id VERSION '0.7.0'" >/dev/null
named_old() {
    pq "$DIR" "$PORT" -d old07 -c "SELECT snowflake_nextval()" >/dev/null 2>&1 || true
    grep -q 'database "old07" has the extension at a version before 0.8.0' "$DIR/server.log"
}
if poll_until 60 named_old; then
    log "security: a database left on 0.7.0 is named in the log after $POLL_MS ms"
else
    failed+=("old-version"); log "security: FAILED: no log line names the database left on 0.7.0"
fi
n_old=$(pq "$DIR" "$PORT" -At -c "SELECT old_version_databases FROM snowflake_stats()" 2>&1)
if [ "$n_old" = 1 ]; then
    log "security: snowflake_stats().old_version_databases counts it"
else
    failed+=("old-version-stats"); log "security: FAILED: snowflake_stats().old_version_databases is '$n_old', not 1"
fi

# PGOPTIONS cannot set snowflake_id.* for a plain role.
if out=$(PGOPTIONS="-c snowflake_id.worker_id=7" "$(pgbin)/psql" -X -h "$DIR" -p "$PORT" -U mallory -d postgres \
        -At -c "SHOW snowflake_id.worker_id" 2>&1); then
    failed+=("pgoptions"); log "security: FAILED: PGOPTIONS set snowflake_id.worker_id for mallory: $out"
elif [[ "$out" != *"FATAL:"*"snowflake_id.worker_id"* ]]; then
    failed+=("pgoptions"); log "security: FAILED: PGOPTIONS was refused, but not as expected: $out"
else
    log "security: PGOPTIONS: refused"
fi

# No Rust backtrace in a client's message: a snowflake_nextval(count)
# cancelled by statement_timeout while it sleeps on back-pressure.
out=$("$(pgbin)/psql" -X -h "$DIR" -p "$PORT" -U mallory -d postgres -v VERBOSITY=verbose \
      -c "SET statement_timeout = '300ms'" -c "SELECT count(*) FROM snowflake_nextval(100000000)" 2>&1 || true)
if [[ "$out" != *"57014"* ]]; then
    failed+=("backtrace"); log "security: FAILED: the burst was not cancelled: $out"
elif grep -qiE 'backtrace|^ *[0-9]+: |rust_begin_unwind|\.rs:[0-9]+' <<< "$out"; then
    failed+=("backtrace"); log "security: FAILED: the client got a Rust backtrace:"; printf '%s\n' "$out" | head -20 >&2
elif ! grep -q "snowflake_id: Rust backtrace" "$DIR/server.log"; then
    failed+=("backtrace"); log "security: FAILED: no Rust backtrace in the server log with RUST_BACKTRACE=1"
else
    log "security: a cancelled call's backtrace went to the server log only"
fi

# The high-water-mark attacks (S29-S33), and the red-team review of the
# mark's writers: each on a cluster of its own.
# The scripts on the writers' background workers, and the red-team review
# of the lease worker and the worker-id registry (attack_registry_*.sh),
# which do not differ between majors, run on the newest one only (CI's
# time budget).
writers=(attack_schema_rename attack_session_authorization attack_lock_queue attack_db_settings attack_db_lock attack_adopt_shared_table
         attack_lagging_overflow attack_rename_lock attack_worker_slots attack_starts_review attack_adopt_lock_queue
         attack_registry_owner attack_registry_overload attack_registry_settings attack_registry_sync_commit
         attack_registry_lock_queue attack_registry_row_lock attack_registry_connections
         attack_registry_adopt_lock attack_registry_token_reuse attack_registry_pool_lock)
if [ "$PG_MAJOR" != 18 ]; then
    log "security: ${writers[*]}: skipped (run on 18)"
    writers=()
fi
# SNOWFLAKE_SECURITY_QUICK=1 (scripts/test.sh --quick): the SQL sections
# and the attack scripts that take seconds, not those that wait for
# rounds of the mark, for leases or for a bulk call (the whole layer runs
# in CI).
QUICK=${SNOWFLAKE_SECURITY_QUICK:-0}
if [ "$QUICK" = 1 ]; then
    writers=(attack_starts_review attack_adopt_lock_queue attack_adopt_shared_table attack_registry_owner attack_registry_row_lock
             attack_registry_token_reuse attack_registry_adopt_lock)
    log "security (quick): the SQL sections and ${writers[*]} only"
fi
out="$(state_dir "$ROOT/.run/security-attacks" security-attacks)"
rm -rf "$out"; mkdir -p "$out"
run_one() {  # run_one SCRIPT: its output to $out/SCRIPT.log, "ok|FAILED (N s)" to $out/SCRIPT.result
    local started=$SECONDS r
    if bash "$HERE/$1.sh" > "$out/$1.log" 2>&1; then r=ok; else r=FAILED; fi
    echo "$r ($((SECONDS - started)) s)" > "$out/$1.result"
}
report() {  # report SCRIPT: its output, then its line; records a failure
    cat "$out/$1.log" >&2
    local result; result=$(cat "$out/$1.result" 2>/dev/null || echo "FAILED (it ended without a result)")
    log "security: $1.sh: $result"
    [[ "$result" == ok* ]] || failed+=("$1")
}
slow=(high_water); [ "$QUICK" = 1 ] && slow=()
for s in "${slow[@]}" attack_schema_rename_bodies; do run_one "$s"; report "$s"; done
# The attack scripts mostly wait (bob INSERTs every 0.5 s, each with a
# 15 s statement timeout, for 25-40 s; a registry renews on its own
# schedule), each on clusters, ports and directories of its own, so
# SNOWFLAKE_SECURITY_JOBS of them (default 2) run at a time: about 3
# minutes of CI's hour. Each one's output is printed whole when it ends.
jobs_at_once=${SNOWFLAKE_SECURITY_JOBS:-2}
attacks=()   # PID:SCRIPT of each one running
reap() {  # reap: wait for a running script to end, and report it
    local i
    wait -n "${attacks[@]%%:*}" 2>/dev/null || true
    for i in "${!attacks[@]}"; do
        if [ -f "$out/${attacks[$i]#*:}.result" ] || ! kill -0 "${attacks[$i]%%:*}" 2>/dev/null; then
            wait "${attacks[$i]%%:*}" 2>/dev/null || true
            report "${attacks[$i]#*:}"; unset "attacks[$i]"; attacks=("${attacks[@]}"); return
        fi
    done
}
for s in "${writers[@]}"; do
    while [ "${#attacks[@]}" -ge "$jobs_at_once" ]; do reap; done
    run_one "$s" &
    attacks+=("$!:$s")
done
while [ "${#attacks[@]}" -gt 0 ]; do reap; done

# A bulk call leaves part of the lead to everyone else (issue 39, F7). In
# 0.7.0 mallory's one snowflake_nextval(100000000) took the whole
# max_lead for as long as it ran, and every other caller slept on
# back-pressure. Now one snowflake_nextval(count) call takes IDs only up to
# snowflake_id.bulk_lead_share of max_lead ahead of the clock (50 % of
# 1 s here), so while it runs, alice's 200 single-ID statements never
# reach the lead bound: no back-pressure wait is counted while they run,
# and none of her IDs is further ahead of the clock than the share. Her
# statements' time, with and without the bulk call, is reported, never
# asserted. The same for an adopted sequence's INCREMENT BY (issue 63).
psql_as() { local who="$1"; shift; "$(pgbin)/psql" -X -q -h "$DIR" -p "$PORT" -U "$who" -d postgres -At -v ON_ERROR_STOP=1 "$@"; }
stat() { psql_as postgres -c "SELECT $1 FROM snowflake_stats()"; }
singles() {  # alice's 200 single-ID statements: each ID's lead over the clock read after it, in ms
    for _ in $(seq 200); do
        echo "SELECT round(extract(epoch FROM snowflake_timestamp(snowflake_nextval()) - clock_timestamp()) * 1000);"
    done | psql_as alice
}
ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
bulk_share() {
    bulk_ok=1
    out=$(psql_as mallory -c "SET snowflake_id.bulk_lead_share = 100" 2>&1 || true)
    if [[ "$out" != *"cannot be changed now"* ]]; then
        bulk_ok=0; log "security: FAILED: mallory's SET snowflake_id.bulk_lead_share was not refused as a server setting: $out"
    fi
    share=$(psql_as postgres -c "SELECT coalesce(current_setting('snowflake_id.bulk_lead_share', true), '50')")
    max_lead=$(stat max_lead_ms)
    t=$(date +%s%N); singles >/dev/null; alone=$(ms_since "$t")
    # bulk_beside WHAT SQL: while mallory's SQL runs ahead of the clock,
    # alice's 200 statements count no back-pressure wait and none of her IDs
    # runs further ahead than the share. SQL takes far longer than alice's
    # statements however busy the machine; it is cancelled then.
    bulk_beside() {
        local what="$1" sql="$2" bulk pid w0 w1 leads beside running furthest
        psql_as mallory -c "SET statement_timeout = '600s'" -c "$sql" >"$BASE/bulk.out" 2>&1 &
        bulk=$!
        bulk_ahead() { [ "$(stat "coalesce(lead_ms, 0)::int")" -ge 100 ]; }   # the bulk call runs ahead of the clock
        poll_until 60 bulk_ahead || { bulk_ok=0; log "security: FAILED: $what never ran 100 ms ahead of the clock in 60 s"; }
        pid=$(psql_as postgres -c "SELECT pid FROM pg_stat_activity WHERE usename = 'mallory' AND state = 'active'
                                     AND query = \$q\$$sql\$q\$")
        w0=$(stat backpressure_waits)
        t=$(date +%s%N); leads=$(singles); beside=$(ms_since "$t")
        w1=$(stat backpressure_waits)
        running=$(psql_as postgres -c "SELECT count(*) FROM pg_stat_activity WHERE pid = ${pid:-0} AND state = 'active'")
        [ -n "$pid" ] && psql_as postgres -c "SELECT pg_cancel_backend($pid)" >/dev/null
        wait "$bulk" || true
        furthest=$(printf '%s\n' "$leads" | sort -n | tail -1)
        log "security: alice's 200 statements took $alone ms alone and $beside ms beside $what" \
            "(ratio $(awk -v a="$alone" -v b="$beside" 'BEGIN {printf "%.1f", b / (a > 0 ? a : 1)}')," \
            "reported only); her IDs ran at most $furthest ms ahead (share $share % of $max_lead ms);" \
            "back-pressure waits while they ran: $((w1 - w0))"
        if [ -z "$pid" ] || [ "$running" != 1 ]; then
            bulk_ok=0; log "security: FAILED: $what was not running throughout alice's statements (pid '${pid}'): $(cat "$BASE/bulk.out")"
        fi
        if [ $((w1 - w0)) != 0 ]; then
            bulk_ok=0; log "security: FAILED: $((w1 - w0)) back-pressure wait(s) while alice's statements ran beside $what"
        fi
        if [ "$furthest" -gt $((max_lead * share / 100 + 5)) ]; then
            bulk_ok=0; log "security: FAILED: alice's IDs ran $furthest ms ahead of the clock: $what took more than its share"
        fi
    }
    # 200M IDs: ~49 s at the format's ceiling.
    bulk_beside "mallory's bulk call" "SELECT count(*) FROM snowflake_nextval(200000000)"
    # Issue 63: nextval() of an adopted sequence with INCREMENT BY 1024 takes
    # 2048 IDs a call, and counts against the same share (on 97fb84c a loop of
    # them pushed the generator to max_lead: 200,000 single IDs took 148-406
    # ms instead of 29-35 ms). 800M IDs: ~200 s at the ceiling.
    psql_as mallory -c "CREATE SEQUENCE mal.big INCREMENT BY 1024" >/dev/null
    psql_as postgres -c "SELECT snowflake_adopt_sequence('mal.big')" >/dev/null
    bulk_beside "mallory's adopted INCREMENT BY 1024" "SELECT count(nextval('mal.big')) FROM generate_series(1, 400000)"
    [ "$bulk_ok" = 1 ] || failed+=("bulk-share")
}
if [ "$QUICK" = 1 ]; then log "security (quick): bulk-share skipped"; else bulk_share; fi

# The keys of public IDs and the roles PostgreSQL gives the data
# directory (issue 39, F8), on a server of their own. With the keys in the
# data directory (the default), a REPLICATION role's base backup holds them
# and a member of pg_write_server_files replaces them: both shown here, and
# documented in docs/security.md. With snowflake_id.public_keys_file
# naming a file outside the data directory that the server may read but not
# write, the base backup holds no key, the member of pg_write_server_files
# can neither replace that file nor make the server use one she wrote into
# the data directory, and a plain role can neither read nor set the
# setting (it is read at server start only).
KEYS="$BASE/keys" KEYDIR="$BASE/keydir" KPORT=$((PORT + 2))
keys_ok=1
keyfail() { keys_ok=0; log "security: FAILED: $*"; }
kq() { local who="$1"; shift; "$(pgbin)/psql" -X -q -h "$KEYS" -p "$KPORT" -U "$who" -d postgres -At -v ON_ERROR_STOP=1 "$@"; }
public42() { kq mallory -c "SELECT snowflake_to_public(42, 'orders')" 2>&1 || true; }
holds_key() { grep -rlqi "$PUBLIC_KEY" "$1"; }
basebackup() {
    rm -rf "$BASE/backup"
    as_pg "$(pgbin)/pg_basebackup" -h "$KEYS" -p "$KPORT" -U repl -D "$BASE/backup" -X none -c fast >/dev/null 2>&1 \
        || keyfail "pg_basebackup as a REPLICATION role failed"
}
mkdir -p "$KEYS"; if is_root; then chown postgres:postgres "$KEYS"; fi
cluster_init "$KEYS" "$KPORT" "shared_preload_libraries = 'snowflake_id'" "snowflake_id.worker_id = 13"
write_public_keys "$KEYS/data" "1:$PUBLIC_KEY"
cluster_up "$KEYS"
kq postgres -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" \
    -c "CREATE ROLE mallory LOGIN" -c "CREATE ROLE repl LOGIN REPLICATION" \
    -c "CREATE ROLE writer LOGIN IN ROLE pg_write_server_files" >/dev/null
want=$(public42)
# 1. In the data directory.
basebackup
if holds_key "$BASE/backup"; then
    log "security: keys in the data directory: a REPLICATION role's base backup holds them (documented)"
else
    keyfail "the base backup of a REPLICATION role holds no key, but docs/security.md says it does"
fi
kq writer -c "COPY (SELECT '1:' || repeat('ab', 32)) TO '$KEYS/data/snowflake_id.public_keys'" >/dev/null \
    || keyfail "a member of pg_write_server_files could not write into the data directory"
if [ "$(public42)" != "$want" ]; then
    log "security: keys in the data directory: a member of pg_write_server_files replaced them (documented)"
else
    keyfail "pg_write_server_files did not replace the keys in the data directory, but docs/security.md says it can"
fi
# 2. Outside the data directory, readable but not writable by the server.
cluster_stop "$KEYS"
if [ -d "$KEYDIR" ]; then chmod -R u+w "$KEYDIR"; rm -rf "$KEYDIR"; fi
mkdir -p "$KEYDIR"
printf '1:%s\n' "$PUBLIC_KEY" > "$KEYDIR/public_keys"
if is_root; then
    chown root:postgres "$KEYDIR" "$KEYDIR/public_keys"; chmod 750 "$KEYDIR"; chmod 640 "$KEYDIR/public_keys"
else
    chmod 500 "$KEYDIR"; chmod 400 "$KEYDIR/public_keys"
fi
as_pg rm -f "$KEYS/data/snowflake_id.public_keys"
echo "snowflake_id.public_keys_file = '$KEYDIR/public_keys'" | as_pg tee -a "$KEYS/data/postgresql.conf" >/dev/null
cluster_up "$KEYS"
got=$(public42)
[ "$got" = "$want" ] || keyfail "public IDs do not use the keys of snowflake_id.public_keys_file: $got"
basebackup
if holds_key "$BASE/backup"; then
    keyfail "with the keys outside the data directory, a REPLICATION role's base backup still holds them"
fi
out=$(kq writer -c "COPY (SELECT '1:' || repeat('ab', 32)) TO '$KEYDIR/public_keys'" 2>&1) \
    && keyfail "a member of pg_write_server_files replaced the keys outside the data directory"
grep -q "Permission denied" <<< "$out" || keyfail "writing the keys file was refused, but not by the file system: $out"
kq writer -c "COPY (SELECT '1:' || repeat('ab', 32)) TO '$KEYS/data/snowflake_id.public_keys'" >/dev/null \
    || keyfail "a member of pg_write_server_files could not write into the data directory"
got=$(public42)
[ "$got" = "$want" ] || keyfail "a keys file written into the data directory replaced the configured one: $got"
out=$(kq mallory -c "SHOW snowflake_id.public_keys_file" 2>&1) && keyfail "a plain role reads snowflake_id.public_keys_file: $out"
out=$(kq mallory -c "SET snowflake_id.public_keys_file = '/tmp/mine'" 2>&1) || true
[[ "$out" == *"cannot be changed without restarting the server"* ]] \
    || keyfail "SET snowflake_id.public_keys_file was not refused as a server-start setting: $out"
cluster_stop "$KEYS"
if [ "$keys_ok" = 1 ]; then
    log "security: with snowflake_id.public_keys_file outside the data directory: no key in a base backup, pg_write_server_files cannot replace it, a plain role can neither read nor set it"
else
    failed+=("public-keys-file")
fi

# A server whose synchronous standby never answers.
cluster_init "$SYNC" $((PORT + 1)) "shared_preload_libraries = 'snowflake_id'" "snowflake_id.worker_id = 12" \
    "snowflake_id.max_lead = '1ms'"
cluster_up "$SYNC"
section "$HERE/setup.sql" "$SYNC" $((PORT + 1))
"$(pgbin)/psql" -X -q -h "$SYNC" -p $((PORT + 1)) -U postgres -d postgres \
    -c "ALTER SYSTEM SET synchronous_standby_names = 'nobody'" -c "SELECT pg_reload_conf()" >/dev/null
section "$HERE/sync_commit.sql" "$SYNC" $((PORT + 1))

[ ${#failed[@]} = 0 ] || die "the security layer failed: ${failed[*]}"
echo "every attack refused, every protection held" > "$ROOT/.run/security.summary"
log "security: every attack refused, every protection held"
