#!/usr/bin/env bash
# Red-team attack on the worker-id registry (0.8.0 leases): the owner of
# the registry database (mallory, a plain role: no grant, no membership)
# makes two servers lease ONE worker id at once, and they mint duplicate
# IDs; on the way she reads every server's secret lease token and runs her
# code as the lease role (snowflake_lease).
#
# The lease worker looks the extension's schema up once per connection
# (SCHEMA_SQL in src/lease/worker.rs: its NAME, from pg_extension) and then
# sends "SELECT ... FROM <name>.snowflake_registry_renew(...)" on that
# connection for as long as it lives. docs/worker-ids.md installs the
# extension in the registry database's default schema, "public", which
# since PostgreSQL 15 belongs to the database's owner (pg_database_owner):
# she renames it, creates a new "public" and plants her own
# snowflake_registry_renew and snowflake_registry_claim of the exact
# argument types there. Every connected lease worker calls hers from its
# next request on: hers records the token it is given (and current_user),
# passes the first server's renewals through to the real function (it
# runs as snowflake_lease, which may), answers the second server's with no
# row ("lost"), and its claim hands out the first server's worker id.
# The same rename also captures snowflake_registry_release.
#
# The database's owner can also DROP SCHEMA public CASCADE (it cascades to
# the extension and its registry tables: every reservation is gone), and,
# on PostgreSQL 16 and later, ANALYZE and VACUUM FULL the registry's table
# to queue every renewal behind her lock. The lease worker therefore
# refuses a registry whose database is not a superuser's (and one whose
# extension schema is not, or where another role may create: see
# attack_registry_overload.sh), before every request, with a message that
# says why.
#
# Passes (exit 0) when the servers refuse her registry, none of her
# functions ever runs, and, once the database belongs to a superuser,
# the servers lease distinct ids from it; fails (exit 1) while the attack
# works.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/registry_lib.sh"
registry_scaffold owner "${SNOWFLAKE_ATTACK_PORT:-16220}"   # the registry; minting server N on the port + N
# ------------------------------------------------------------------------
registry_up mallory
minter_up 1; minter_up 2
refused_owner() { [[ "$(last_error "$1")" == *"registry refused: its owner mallory is not a superuser"* ]]; }
for n in 1 2; do
    poll_until 30 refused_owner "$n" \
        || die "attack (registry owner) WORKS: server $n did not refuse the registry of mallory, a plain role; its lease: '$(lease_of "$n")', its last error: '$(last_error "$n")'"
done
log "attack (registry owner): both servers refuse a registry database owned by mallory: $(last_error 1)"
w1=0

# The attack: a few statements of the database owner.
rs mallory registry >/dev/null <<SQL
ALTER SCHEMA public RENAME TO public_was;
CREATE SCHEMA public;
GRANT USAGE ON SCHEMA public TO PUBLIC;
CREATE TABLE public.loot (fn text, who text, worker integer, token uuid);
GRANT INSERT ON public.loot TO PUBLIC;
CREATE FUNCTION public.snowflake_registry_renew(w integer, t uuid, e bigint, ttl integer, f bigint)
RETURNS TABLE (reserved_until_ms bigint) LANGUAGE plpgsql AS \$f\$
BEGIN
    INSERT INTO public.loot VALUES ('renew', current_user, w, t);
    IF w = $w1 THEN   -- server 1 keeps its lease: the real renewal
        RETURN QUERY SELECT r.reserved_until_ms FROM public_was.snowflake_registry_renew(w, t, e, ttl, f) r;
    END IF;
END \$f\$;
CREATE FUNCTION public.snowflake_registry_claim(t uuid, h text, p integer, s text, d text, pref integer,
                                                wb integer, sb integer, ep bigint, ttl integer, f bigint)
RETURNS TABLE (worker_id integer, lease_epoch bigint, floor_ms bigint, reserved_until_ms bigint)
LANGUAGE plpgsql AS \$f\$
BEGIN
    INSERT INTO public.loot VALUES ('claim', current_user, $w1, t);
    RETURN QUERY SELECT $w1, 1::bigint, NULL::bigint,
                        (extract(epoch FROM clock_timestamp()) * 1000)::bigint + 3600000;
END \$f\$;
SQL

# A few lease periods: still no lease, and none of her functions ran.
sleep_until_ms=$(( $(date +%s%N) / 1000000 + 4000 ))
quiet() { [ $(( $(date +%s%N) / 1000000 )) -ge "$sleep_until_ms" ]; }
poll_until 30 quiet
for n in 1 2; do
    no_lease "$n" || die "attack (registry owner) WORKS: server $n leased worker id $(lease_of "$n") from mallory's registry"
    ms "$n" -c "SELECT snowflake_nextval()" >/dev/null 2>&1 \
        && die "attack (registry owner) WORKS: server $n mints under mallory's registry"
done
loot=$(rs postgres registry -c "SELECT string_agg(DISTINCT fn || ' as ' || who, ', ') || format(' (%s distinct tokens)', count(DISTINCT token))
                                 FROM public.loot" 2>/dev/null || true)
[ -z "$loot" ] || die "attack (registry owner) WORKS: her functions ran: $loot"
log "attack (registry owner): her renamed public and her functions never ran"

# The administrator gives the database to a superuser and puts the
# extension's schema back: the servers lease two ids from it and mint.
rs postgres registry -c "ALTER DATABASE registry OWNER TO postgres" \
    -c "DROP SCHEMA public CASCADE" -c "ALTER SCHEMA public_was RENAME TO public" >/dev/null
leased 1; leased 2
[ "$(lease_of 1)" != "$(lease_of 2)" ] || die "both servers hold worker id $(lease_of 1) from the superuser's registry"
mints 1 || die "server 1 cannot mint from the superuser's registry"
mints 2 || die "server 2 cannot mint from the superuser's registry"
log "attack (registry owner) refused: the superuser's registry leases ids $(lease_of 1) and $(lease_of 2)"
