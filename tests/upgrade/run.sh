#!/usr/bin/env bash
# Upgrade check: every earlier release must reach this version through
# ALTER EXTENSION ... UPDATE and end up exactly like a fresh install.
#
# The support window is every release with an install script in
# tests/upgrade/fixtures/: the script that release's packages installed,
# byte for byte (RELEASING.md). sql/ holds only the upgrade scripts, and
# every one of them must start from a release in the window. For each
# release <old> in the window:
#   1. install its script next to this build's files and CREATE EXTENSION
#      ... VERSION '<old>', with tables, data and a view that use it;
#   2. ALTER EXTENSION snowflake_id UPDATE (to this version);
#   3. run the regression suites in that upgraded database, and check the
#      old rows and the view still work;
#   4. compare the catalog (every function with its arguments, result,
#      volatility, parallel safety, strictness, security, settings, body,
#      ACL and comment) with a fresh CREATE EXTENSION: they must be equal.
# A missing or incomplete upgrade script fails step 2 or step 4.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
DIR=$(state_dir "$ROOT/.run/upgrade" upgrade)
PORT=${SNOWFLAKE_UPGRADE_PORT:-16050}
PGREGRESS="$(dirname "$("$PG_CONFIG" --pgxs)")/../test/regress/pg_regress"
EXTDIR="$("$PG_CONFIG" --sharedir)/extension"
VERSION=$(project_version)
FIXTURES="$ROOT/tests/upgrade/fixtures"
# The window: the releases with a fixture, oldest first. The fixture of
# this version exists only on a release commit (RELEASING.md): it is no
# starting point, and must equal the install script this build generated
# (but for comments, which name source lines).
mapfile -t window < <(for f in "$FIXTURES"/snowflake_id--*.sql; do
    v=$(basename "$f" .sql); v=${v#snowflake_id--}; [ "$v" = "$VERSION" ] || echo "$v"; done | sort -V)
[ ${#window[@]} -gt 0 ] || die "no release in tests/upgrade/fixtures/ to upgrade from"
[ -f "$EXTDIR/snowflake_id--$VERSION.sql" ] \
    || die "no snowflake_id--$VERSION.sql in $EXTDIR: run cargo pgrx install first"
if [ -f "$FIXTURES/snowflake_id--$VERSION.sql" ]; then
    strip() { grep -vE '^\s*--|^/\*|^\*/|^This file|^The ordering|^$' "$1"; }
    diff <(strip "$FIXTURES/snowflake_id--$VERSION.sql") <(strip "$EXTDIR/snowflake_id--$VERSION.sql") >&2 \
        || die "tests/upgrade/fixtures/snowflake_id--$VERSION.sql differs from the install script this build generates: regenerate it (RELEASING.md)"
fi
# sql/ ships an upgrade path only from a release the window tests.
for f in "$ROOT"/sql/snowflake_id--*--*.sql; do
    from=$(basename "$f" .sql); from=${from#snowflake_id--}; from=${from%%--*}
    [ -f "$FIXTURES/snowflake_id--$from.sql" ] \
        || die "sql/$(basename "$f") starts from $from, which has no fixture in tests/upgrade/fixtures/ (RELEASING.md)"
done

trap 'cluster_stop "$DIR"' EXIT
cluster_stop "$DIR"
cluster_init "$DIR" "$PORT" "shared_preload_libraries = 'snowflake_id'" "snowflake_id.worker_id = 42"
cluster_up "$DIR"

# The extension directory holds exactly this build's install script (as
# cargo pgrx install wrote it), the released install scripts (as packages
# of those releases left them) and the upgrade scripts, with no stale copy
# from an earlier build or run.
for f in "$EXTDIR"/snowflake_id--*.sql; do
    [ "$(basename "$f")" = "snowflake_id--$VERSION.sql" ] || $SUDO rm -f "$f"
done
for v in "${window[@]}"; do
    $SUDO cp "$FIXTURES/snowflake_id--$v.sql" "$EXTDIR/"
done
for f in "$ROOT"/sql/snowflake_id--*--*.sql; do
    $SUDO cp "$f" "$EXTDIR/"
done

catalog() {  # the extension's functions as \df+ would show them, plus ACL and comment
    pq "$DIR" "$PORT" -d "$1" -At -c "
        SELECT p.oid::regprocedure::text, pg_get_function_result(p.oid),
               p.provolatile, p.proparallel, p.proisstrict, p.prosecdef, p.proleakproof,
               p.proconfig, l.lanname, md5(p.prosrc), p.probin, p.proacl,
               obj_description(p.oid, 'pg_proc')
          FROM pg_proc p
          JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
          JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'snowflake_id'
          JOIN pg_language l ON l.oid = p.prolang
         ORDER BY p.oid::regprocedure::text COLLATE \"C\""
    # ... and its relations (views): kind, definition, columns, ACL, comment.
    pq "$DIR" "$PORT" -d "$1" -At -c "
        SELECT c.oid::regclass::text, c.relkind,
               CASE c.relkind WHEN 'v' THEN pg_get_viewdef(c.oid) END,
               (SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ', ' ORDER BY a.attnum)
                  FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped),
               c.relacl, obj_description(c.oid, 'pg_class')
          FROM pg_class c
          JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e'
          JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'snowflake_id'
         ORDER BY c.oid::regclass::text COLLATE \"C\""
    # ... and the row-level security policies on its tables.
    pq "$DIR" "$PORT" -d "$1" -At -c "
        SELECT pol.polrelid::regclass::text, pol.polname, pol.polcmd, pol.polpermissive, pol.polroles::text,
               pg_get_expr(pol.polqual, pol.polrelid), pg_get_expr(pol.polwithcheck, pol.polrelid)
          FROM pg_policy pol
          JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = pol.polrelid AND d.deptype = 'e'
          JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'snowflake_id'
         ORDER BY 1, 2"
}

pq "$DIR" "$PORT" -c "CREATE DATABASE fresh"
pq "$DIR" "$PORT" -d fresh -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id"
catalog fresh > "$DIR/fresh.catalog"

checked=0
for old in "${window[@]}"; do
    db="from_${old//./_}"
    log "upgrade $old -> $VERSION"
    pq "$DIR" "$PORT" -c "CREATE DATABASE $db"
    pq "$DIR" "$PORT" -d "$db" <<SQL
SET client_min_messages = warning;
CREATE EXTENSION snowflake_id VERSION '$old';
CREATE SCHEMA app;
CREATE TABLE app.orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), note text);
INSERT INTO app.orders (note) SELECT 'before upgrade' FROM generate_series(1, 1000);
CREATE VIEW app.order_times AS SELECT id, snowflake_timestamp(id) AS ts FROM app.orders;
SQL
    pq "$DIR" "$PORT" -d "$db" -c "ALTER EXTENSION snowflake_id UPDATE" \
        || die "ALTER EXTENSION snowflake_id UPDATE from $old failed: is sql/snowflake_id--$old--$VERSION.sql missing?"
    got=$(pq "$DIR" "$PORT" -d "$db" -At -c "SELECT extversion FROM pg_extension WHERE extname = 'snowflake_id'")
    [ "$got" = "$VERSION" ] || die "after UPDATE from $old the extension is at $got, not $VERSION"
    # Old rows, the view, and new rows all work after the upgrade.
    read -r n view_n newer < <(pq "$DIR" "$PORT" -d "$db" -At -F ' ' -c "
        INSERT INTO app.orders (note) VALUES ('after upgrade');
        SELECT count(*), (SELECT count(*) FROM app.order_times WHERE ts IS NOT NULL),
               (SELECT id FROM app.orders WHERE note = 'after upgrade')
                 > (SELECT max(id) FROM app.orders WHERE note = 'before upgrade')
          FROM app.orders")
    [ "$n" = 1001 ] && [ "$view_n" = 1001 ] && [ "$newer" = t ] || die "data after the upgrade from $old is wrong ($n, $view_n, $newer)"
    # The regression suites, in the upgraded database.
    if ! "$PGREGRESS" --inputdir="$ROOT/tests/regress" --outputdir="$DIR" --bindir="$(pgbin)" \
            --host="$DIR" --port="$PORT" --user=postgres --use-existing --dbname="$db" \
            surface errors formats layouts convert fleet json >"$DIR/regress.out" 2>&1; then
        cat "$DIR/regress.out" "$DIR/regression.diffs" >&2 2>/dev/null || true
        die "regression suites fail after the upgrade from $old"
    fi
    catalog "$db" > "$DIR/$db.catalog"
    diff -u "$DIR/fresh.catalog" "$DIR/$db.catalog" >&2 \
        || die "the catalog after upgrading from $old differs from a fresh install of $VERSION (above: - fresh, + upgraded)"
    checked=$((checked + 1))
done
[ "$checked" = ${#window[@]} ] || die "upgraded $checked of ${#window[@]} releases"

# 0.7.0 replaces snowflake_nextval(integer) with snowflake_nextval(bigint).
# An object that calls the old one stops the upgrade with 2BP01, naming
# it and what to do, and nothing changes; without it the upgrade goes on.
pq "$DIR" "$PORT" -c "CREATE DATABASE nextval_view"
pq "$DIR" "$PORT" -d nextval_view -c "SET client_min_messages = warning" \
    -c "CREATE EXTENSION snowflake_id VERSION '0.6.0'" \
    -c "CREATE VIEW five_ids AS SELECT * FROM snowflake_nextval(5)"
out=$(pq "$DIR" "$PORT" -d nextval_view -v VERBOSITY=verbose -c "ALTER EXTENSION snowflake_id UPDATE" 2>&1) \
    && die "the upgrade went on although the view five_ids calls snowflake_nextval(integer)"
[[ "$out" == *"2BP01"*"view five_ids"*"Drop them, run ALTER EXTENSION snowflake_id UPDATE again"* ]] \
    || die "the upgrade stopped, but did not name the view and what to do: $out"
got=$(pq "$DIR" "$PORT" -d nextval_view -At -c "SELECT extversion FROM pg_extension WHERE extname = 'snowflake_id'")
[ "$got" = 0.6.0 ] || die "a failed upgrade left the extension at $got"
pq "$DIR" "$PORT" -d nextval_view -c "DROP VIEW five_ids" -c "ALTER EXTENSION snowflake_id UPDATE" \
    -c "CREATE VIEW five_ids AS SELECT * FROM snowflake_nextval(5)" >/dev/null
[ "$(pq "$DIR" "$PORT" -d nextval_view -At -c "SELECT count(*) FROM five_ids")" = 5 ] \
    || die "the view re-created after the upgrade does not return 5 IDs"
log "upgrade: a view calling snowflake_nextval(integer) stops the upgrade with 2BP01 and a HINT; dropped, the upgrade goes on"
echo "$checked" > "$ROOT/.run/upgrade.summary"
log "upgrade: $checked earlier release(s) (${window[0]} to ${window[-1]}) upgrade to $VERSION with the same catalog as a fresh install"
