#!/usr/bin/env bash
# Red-team attack on the high-water mark: the owner of a database (mallory,
# no other privilege) makes the high-water writer in her database run as
# herself, which stops snowflake_nextval() server-wide.
#
# The writer connects as the bootstrap superuser with no user named
# (BackgroundWorkerInitializeConnectionByOid(db, InvalidOid)), so
# PostgreSQL takes the InitializeSessionUserIdStandalone() path, which
# does NOT pin session_authorization at PGC_S_OVERRIDE as a client
# backend's InitializeSessionUserId() does. ALTER DATABASE ... SET
# session_authorization (a USERSET parameter, which the database owner may
# set) then applies to the writer; its assign hook's check passes because
# the authenticated user is a superuser; WRITER_SETTINGS then sets role =
# none, which means "the session user": mallory. Her writer fails with
# "permission denied for table snowflake_high_water", every round fails,
# and every snowflake_nextval() on the server fails with 55000.
# (Client sessions in her database are not affected: theirs is pinned.)
#
# Passes (exit 0) when the writer in her database still writes and bob can
# mint in his; fails (exit 1) while the attack works.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/attack_lib.sh"
attack_cluster sessauth "${SNOWFLAKE_ATTACK_PORT:-16212}" 23
as postgres postgres -c "CREATE ROLE mallory LOGIN" -c "CREATE ROLE bob LOGIN" \
    -c "CREATE DATABASE dbm OWNER mallory" -c "CREATE DATABASE bobdb OWNER bob" >/dev/null
for db in dbm bobdb; do
    as postgres "$db" -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" >/dev/null
done
as postgres bobdb -c "REVOKE CONNECT ON DATABASE bobdb FROM PUBLIC" >/dev/null
as bob bobdb -c "CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), item text)" >/dev/null
as bob bobdb -c "INSERT INTO orders (item) VALUES ('warm-up')" >/dev/null

# The attack: one setting of her own database.
as mallory dbm -c "ALTER DATABASE dbm SET session_authorization = 'mallory'" >/dev/null
log "attack (session_authorization): $(as mallory dbm -c "SELECT setconfig FROM pg_db_role_setting WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = 'dbm')")"

bob_inserts "session_authorization" 25
grep -E "permission denied for table snowflake_high_water|could not write the high-water" "$DIR/server.log" \
    | tail -2 >&2 || true
[ "$BOB_ERRS" = 0 ] || die "attack (session_authorization) WORKS: mallory's ALTER DATABASE stopped bob's INSERTs ($BOB_ERRS failures)"
log "attack (session_authorization) refused: bob minted throughout"
