#!/usr/bin/env bash
# A hot standby built the way most are, with pg_basebackup -R: it copies
# postgresql.conf, so the standby has the primary's worker id. While it is
# in recovery it must not mint IDs (they could equal the primary's):
#  1. snowflake_nextval() and snowflake_nextval(count) fail with 25006 and
#     a HINT; snowflake_accept_configuration() too; snowflake_stats() says
#     "standby: in recovery";
#  2. decoding and range functions work on the replicated rows;
#  3. after pg_ctl promote, generation starts, also in a session that was
#     refused while the server was still a standby.
# (Failover ordering of IDs, which needs WAL-logged reservations, is not
# covered here: see the README's "What is not guaranteed".)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
BASE=$(state_dir "$ROOT/.run/it-standby" it-standby)
PORT=${SNOWFLAKE_IT_STANDBY_PORT:-15150}
PRIMARY="$BASE/primary"; STANDBY="$BASE/standby"; SPORT=$((PORT + 1))
mkdir -p "$PRIMARY" "$STANDBY"; is_root && chown postgres:postgres "$PRIMARY" "$STANDBY"
trap 'cluster_stop "$STANDBY"; cluster_stop "$PRIMARY"' EXIT
cluster_stop "$STANDBY"; cluster_stop "$PRIMARY"
p() { pq "$PRIMARY" "$PORT" -At "$@"; }
s() { pq "$STANDBY" "$SPORT" -At "$@"; }

cluster_init "$PRIMARY" "$PORT" "shared_preload_libraries = 'snowflake_id'" \
    "snowflake_id.worker_id = 11" "wal_level = replica" "max_wal_senders = 4"
cluster_start "$PRIMARY" || { tail -20 "$PRIMARY/server.log" >&2; die "primary did not start"; }
p -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" \
  -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), v int)" \
  -c "INSERT INTO t (v) SELECT g FROM generate_series(1, 1000) g"

log "standby: pg_basebackup -R from the primary (same postgresql.conf, same worker id)"
basebackup_standby "$PRIMARY" "$PORT" "$STANDBY" "$SPORT"
grep -q "^snowflake_id.worker_id = 11" "$STANDBY/data/postgresql.conf" || die "the standby's configuration was not copied"
cluster_start "$STANDBY" || { tail -20 "$STANDBY/server.log" >&2; die "standby did not start"; }
p -c "INSERT INTO t (v) SELECT g FROM generate_series(1001, 2000) g"
replayed() { [ "$(s -c "SELECT count(*) FROM t" 2>/dev/null || true)" = 2000 ]; }
poll_until 120 replayed || true   # asserted below
[ "$(s -c "SELECT pg_is_in_recovery()")" = t ] || die "the standby is not in recovery"
[ "$(s -c "SELECT count(*) FROM t")" = 2000 ] || die "the standby did not replay the rows"

log "1. on the standby, minting is refused with 25006"
for call in "SELECT snowflake_nextval()" "SELECT snowflake_nextval(100)" "SELECT snowflake_accept_configuration()"; do
    out=$(s -c '\set VERBOSITY verbose' -c "$call" 2>&1 || true)
    grep -q "ERROR:  25006: cannot mint snowflake IDs during recovery" <<<"$out" || die "$call on the standby: $out"
    grep -q "HINT:  Mint IDs on the primary" <<<"$out" || die "$call: no HINT: $out"
done
[ "$(s -c "SELECT state FROM snowflake_stats()")" = "standby: in recovery" ] || die "stats state on the standby"

log "2. decoding and range functions work on the standby"
read -r n w11 inrange < <(s -F ' ' -c "
    SELECT count(*), count(*) FILTER (WHERE d.worker_id = 11),
           count(*) FILTER (WHERE t.id BETWEEN snowflake_min_id(d.ts) AND snowflake_max_id(d.ts))
      FROM t, snowflake_decode(t.id) d")
[ "$n" = 2000 ] && [ "$w11" = 2000 ] && [ "$inrange" = 2000 ] || die "decoding on the standby: $n $w11 $inrange"

log "3. promotion: generation starts, also in a session refused before"
"$(pgbin)/psql" -X -q -At -h "$STANDBY" -p "$SPORT" -U postgres >"$BASE/session.out" 2>&1 <<'SQL' &
SELECT snowflake_nextval();
DO $$ BEGIN WHILE pg_is_in_recovery() LOOP PERFORM pg_sleep(0.05); END LOOP; END $$;
SELECT 'after promotion: ' || snowflake_worker_id(snowflake_nextval());
SQL
session=$!
# Promote once the session has been refused (it then waits for the end of
# recovery).
refused() { grep -q "cannot mint snowflake IDs during recovery" "$BASE/session.out"; }
poll_until 60 refused || die "session: no refusal before promotion in 60 s: $(cat "$BASE/session.out")"
cluster_stop "$PRIMARY"
as_pg "$(pgbin)/pg_ctl" -D "$STANDBY/data" -w promote >/dev/null
wait "$session" || true
grep -q "cannot mint snowflake IDs during recovery" "$BASE/session.out" || die "session: no refusal before promotion: $(cat "$BASE/session.out")"
grep -qx "after promotion: 11" "$BASE/session.out" || die "session: no ID after promotion: $(cat "$BASE/session.out")"
[ "$(s -c "SELECT pg_is_in_recovery()")" = f ] || die "still in recovery after promote"
s -c "INSERT INTO t (v) SELECT g FROM generate_series(2001, 3000) g"
[ "$(s -c "SELECT count(*) FILTER (WHERE snowflake_worker_id(id) = 11) FROM t")" = 3000 ] || die "after promotion"
[ "$(s -c "SELECT state FROM snowflake_stats()")" = ok ] || die "stats state after promotion"
log "   refused (25006, HINT) in recovery; decoders work; minting after promotion"
