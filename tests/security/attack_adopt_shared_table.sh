#!/usr/bin/env bash
# Red-team review of issue 63's server-wide table of adopted sequences
# (src/adopt/shared.rs, core/src/adopted.rs): a role with CREATEDB makes
# nextval() of an adopted sequence hand out the raw sequence (1, 2) in
# another database.
#
# F1: the drop hook forgot a database's entry before DROP DATABASE waited
#     for the database's last session to leave; that session's next
#     statement loaded and published the list again, the entry outlived
#     the database, and CREATE DATABASE … OID (which a role with CREATEDB
#     may run) gave a new database that OID and the dropped one's set.
#     Now the entry goes once the DROP, and a CREATE, is done.
# F2: OID 4294967295 was the table's marker of a dropped database's slot.
#     A database made with that OID published into a slot that then
#     looked free but loaded; the next database whose search ended there
#     (OID 25814 has the same home slot) found its set loaded and empty.
#     Now a slot's key is 64 bits wide and no OID is a marker.
#
# Passes (exit 0) when every nextval() of an adopted sequence in y and in
# the victim database is a Snowflake ID of worker 24; fails (exit 1)
# while an attack works.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/attack_lib.sh"
attack_cluster adoptshared "${SNOWFLAKE_ATTACK_PORT:-16255}" 24
as postgres postgres -c "CREATE ROLE mallory LOGIN CREATEDB" -c "CREATE ROLE alice LOGIN" \
    -c "CREATE DATABASE app OWNER mallory" >/dev/null
as postgres app -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" \
    -c "SELECT snowflake_adopt_sequences()" -c "GRANT CREATE ON SCHEMA public TO mallory" >/dev/null
as mallory app -c "SET client_min_messages = warning" -c "CREATE TABLE t (id bigserial PRIMARY KEY)" \
    -c "CREATE SEQUENCE s1" -c "GRANT USAGE ON SEQUENCE s1 TO alice" >/dev/null

fails=0
# snowflake DB WHO: nextval('s1') twice in one new session of WHO in DB:
# each must be an ID of worker 24 (a raw value is 1, 2, ...).
snowflake() {
    local db="$1" who="$2" out
    out=$(as "$who" "$db" -c "SELECT snowflake_worker_id(nextval('s1')) = 24 AND nextval('s1') > 4194304" 2>&1 || true)
    if [ "$out" != t ]; then
        fails=$((fails + 1)); log "attack: FAILED: nextval('s1') in $db ($who): $out"
    fi
}

# F1: x, a copy of app without s1's adoption, dropped while a session in
# it runs one more statement; y made with x's OID.
as mallory postgres -c "CREATE DATABASE x TEMPLATE app" >/dev/null
as mallory x -c "DROP SEQUENCE s1" -c "SELECT nextval('t_id_seq')" >/dev/null
xoid=$(as postgres postgres -c "SELECT oid FROM pg_database WHERE datname = 'x'")
as mallory x -c "SELECT pg_sleep(2)" -c "SELECT nextval('t_id_seq')" >/dev/null 2>&1 &
late=$!
sleep 1
as mallory postgres -c "DROP DATABASE x" >/dev/null
wait "$late" || true
as mallory postgres -c "CREATE DATABASE y OID = $xoid TEMPLATE app" >/dev/null
snowflake y mallory
snowflake y mallory
log "attack (F1): y, made with dropped x's OID $xoid after x's last session published its list: checked"

# F2: evil with OID 4294967295 publishes; victim (OID 25814, the same home
# slot in the table) is another role's database.
as mallory postgres -c "CREATE DATABASE evil OID = 4294967295 TEMPLATE app" >/dev/null
as mallory evil -c "SELECT nextval('t_id_seq')" >/dev/null
as postgres postgres -c "CREATE DATABASE victim OID = 25814 TEMPLATE app" >/dev/null
snowflake victim alice   # the first session loads and publishes
snowflake victim alice   # a second one takes the table's copy
log "attack (F2): victim (OID 25814) beside evil (OID 4294967295): checked"

[ "$fails" = 0 ] || exit 1
log "attack: no database inherited or lost another's adopted sequences"
