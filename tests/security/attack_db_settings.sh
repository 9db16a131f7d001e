#!/usr/bin/env bash
# Red-team attack on the high-water mark: the owner of a database (mallory,
# no other privilege) breaks the high-water writer in her database with
# planner settings of her database, which stops snowflake_nextval()
# server-wide.
#
# The writer is a bootstrap-superuser session in her database, and every
# setting of ALTER DATABASE ... SET applies to it (InitPostgres's
# process_settings) except the seven that WRITER_SETTINGS overrides. Any
# USERSET setting that makes one of its four queries fail or run past
# statement_timeout (10 s) stops every round. Here: GEQO for the 3-way
# join of high_water_table.sql with a pool that cannot be allocated
# (geqo_threshold = 2, geqo_pool_size = 2147483647: "invalid memory alloc
# request size"); a pool that can be allocated but takes seconds to plan
# works too, in any database she owns, with or without the extension (the
# catalog query runs in every database). session_authorization is the
# same hole (attack_session_authorization.sh).
#
# Passes (exit 0) when bob can still mint in his database; fails (exit 1)
# while the attack works.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/attack_lib.sh"
attack_cluster dbset "${SNOWFLAKE_ATTACK_PORT:-16213}" 24
as postgres postgres -c "CREATE ROLE mallory LOGIN" -c "CREATE ROLE bob LOGIN" \
    -c "CREATE DATABASE dbm OWNER mallory" -c "CREATE DATABASE bobdb OWNER bob" >/dev/null
for db in dbm bobdb; do
    as postgres "$db" -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" >/dev/null
done
as postgres bobdb -c "REVOKE CONNECT ON DATABASE bobdb FROM PUBLIC" >/dev/null
as bob bobdb -c "CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), item text)" >/dev/null
as bob bobdb -c "INSERT INTO orders (item) VALUES ('warm-up')" >/dev/null

# The attack: one setting of her own database.
as mallory dbm -c "ALTER DATABASE dbm SET geqo_threshold = 2" \
    -c "ALTER DATABASE dbm SET geqo_pool_size = 2147483647" >/dev/null
log "attack (database settings): $(as mallory dbm -c "SELECT setconfig FROM pg_db_role_setting WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = 'dbm')")"

bob_inserts "database settings" 25
grep -E "invalid memory alloc|could not write the high-water" "$DIR/server.log" \
    | tail -2 >&2 || true
[ "$BOB_ERRS" = 0 ] || die "attack (database settings) WORKS: mallory's ALTER DATABASE SET geqo_* stopped bob's INSERTs ($BOB_ERRS failures)"
log "attack (database settings) refused: bob minted throughout"
