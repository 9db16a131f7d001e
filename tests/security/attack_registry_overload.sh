#!/usr/bin/env bash
# Red-team attack on the worker-id registry (0.8.0 leases): a role with
# CREATE on the schema of the extension in the registry database (eve:
# not a member, not the owner; e.g. every role in a database upgraded from
# PostgreSQL 14 or older, where PUBLIC keeps CREATE on "public") stops
# every leased server with two CREATE FUNCTION statements.
#
# The lease worker calls <schema>.snowflake_registry_renew(...) and
# _claim(...) by name, with exactly typed arguments. An exact match cannot
# be captured, but an overload with one more argument that has a DEFAULT
# matches the same call just as well: PostgreSQL refuses the call
# ("function ... is not unique", 42725). Every renewal and every claim
# fails, and the fleet stops minting (55000) within a lease.
#
# The lease worker now refuses a registry where any role but a superuser
# may create in the extension's schema, checked before every request: a
# database upgraded from PostgreSQL 14 or older, where PUBLIC keeps CREATE
# on "public", is refused from the start, with a message naming PUBLIC;
# and once the administrator revokes it, eve cannot create the overloads.
#
# Passes (exit 0) when a schema where PUBLIC may create is refused, and,
# once revoked, the server keeps its lease through eve's attempt; fails
# (exit 1) while the attack works.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/registry_lib.sh"
registry_scaffold overload "${SNOWFLAKE_ATTACK_PORT:-16245}"   # the registry; minting server N on the port + N
# ------------------------------------------------------------------------
registry_up
rs postgres postgres -c "CREATE ROLE eve LOGIN" >/dev/null
# As in a database upgraded from PostgreSQL 14 or older.
rs postgres registry -c "GRANT CREATE ON SCHEMA public TO PUBLIC" >/dev/null
minter_up 1
refused_public() { [[ "$(last_error 1)" == *"PUBLIC may create objects in the extension's schema public"* ]]; }
poll_until 30 refused_public \
    || die "attack (registry overload) WORKS: server 1 did not refuse a registry where PUBLIC may create in the extension's schema; lease '$(lease_of 1)', last error '$(last_error 1)'"
no_lease 1 || die "attack (registry overload) WORKS: server 1 leased worker id $(lease_of 1) from a schema where PUBLIC may create"
log "attack (registry overload): refused while PUBLIC may create in the schema: $(last_error 1)"
rs postgres registry -c "REVOKE CREATE ON SCHEMA public FROM PUBLIC" >/dev/null
leased 1
log "attack (registry overload): server 1 holds worker id $(lease_of 1)"

# The attack: eve's two overloads, each with one more, defaulted argument.
rs eve registry >/dev/null 2>&1 <<'SQL' || log "attack (registry overload): eve may not create in public"
CREATE FUNCTION public.snowflake_registry_renew(integer, uuid, bigint, integer, bigint, integer DEFAULT 0)
RETURNS TABLE (reserved_until_ms bigint) LANGUAGE sql AS 'SELECT NULL::bigint WHERE false';
CREATE FUNCTION public.snowflake_registry_claim(uuid, text, integer, text, text, integer, integer, integer,
                                                bigint, integer, bigint, integer DEFAULT 0)
RETURNS TABLE (worker_id integer, lease_epoch bigint, floor_ms bigint, reserved_until_ms bigint)
LANGUAGE sql AS 'SELECT NULL::integer, NULL::bigint, NULL::bigint, NULL::bigint WHERE false';
SQL

poll_until 8 no_lease 1 || true
log "attack (registry overload): server 1: lease $(lease_of 1 || true); $(last_error 1)"
no_lease 1 && die "attack (registry overload) WORKS: server 1 lost its lease: $(last_error 1)"
mints 1 || die "attack (registry overload) WORKS: server 1 cannot mint"
log "attack (registry overload) refused"

# A plain role that is a member of the schema's owner has its rights
# (CREATE in the schema, ALTER on its functions) without being a
# superuser: the registry is refused while she is one, checked before
# every request.
rs postgres registry -c "GRANT postgres TO eve" >/dev/null
refused_member() { [[ "$(last_error 1)" == *"eve may create objects in the extension's schema public"* ]]; }
poll_until 30 refused_member \
    || die "attack (registry overload) WORKS: server 1 still uses a registry whose schema owner's rights eve has (a member of postgres); last error '$(last_error 1)'"
log "attack (registry overload): refused while eve is a member of the schema's owner: $(last_error 1)"
rs postgres registry -c "REVOKE postgres FROM eve" >/dev/null
poll_until 30 has_lease 1 || die "server 1 did not lease again after eve left the owner's role: $(last_error 1)"
mints 1 || die "server 1 cannot mint after eve left the owner's role"
log "attack (registry overload) refused: server 1 mints again under worker id $(lease_of 1)"
