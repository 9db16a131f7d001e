#!/usr/bin/env bash
# The client layer: real drivers and ORMs from PyPI and npm against a real
# server (PostgreSQL 18 or the major given as PG_MAJOR by scripts/test.sh):
# psycopg 3, asyncpg, SQLAlchemy 2 (sync and async), Django 5, node-postgres
# and Knex; and interop with other generators' own libraries
# (@sapphire/snowflake, npm sonyflake, sonyflake-py), whose IDs the server
# decodes as they do. The recipes in recipes/ are the files
# docs/clients.md shows.
# Packages are installed once, into .cache/clients/ (pinned versions).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
HERE="$ROOT/tests/clients"
CACHE="$ROOT/.cache/clients"
PORT=${SNOWFLAKE_CLIENTS_PORT:-25860}
DIR=$(state_dir "$ROOT/.run/clients" clients)
mkdir -p "$CACHE"
# PHP, Java, Go and Ruby come from Debian (pinned by Debian 12's release):
# PHP 8.2 with pdo_pgsql, OpenJDK 17 with pgjdbc 42.5, Go 1.19 with pgx v4
# and lib/pq, Ruby 3.1 with ActiveRecord 6.1 and the pg gem.
apt_ensure php-cli php-pgsql default-jdk-headless libpostgresql-jdbc-java golang-go \
    golang-github-jackc-pgx-v4-dev golang-github-lib-pq-dev ruby-activerecord ruby-pg \
    libhibernate3-java libjavassist-java libslf4j-java
if [ ! -x "$CACHE/venv/bin/python" ] || ! cmp -s "$HERE/requirements.txt" "$CACHE/venv/requirements.txt"; then
    log "clients: installing the Python packages (PyPI) into $CACHE/venv"
    rm -rf "$CACHE/venv"
    python3 -m venv "$CACHE/venv"
    "$CACHE/venv/bin/pip" install -q --disable-pip-version-check -r "$HERE/requirements.txt" \
        || die "could not install the PyPI packages of tests/clients/requirements.txt: $(grep -v '^#' "$HERE/requirements.txt" | tr '\n' ' ')"
    cp "$HERE/requirements.txt" "$CACHE/venv/requirements.txt"
fi
if [ ! -d "$CACHE/node/node_modules" ] || ! cmp -s "$HERE/package.json" "$CACHE/node/package.json"; then
    log "clients: installing the Node.js packages (npm) into $CACHE/node"
    rm -rf "$CACHE/node" && mkdir -p "$CACHE/node"
    cp "$HERE/package.json" "$CACHE/node/"
    (cd "$CACHE/node" && npm install --silent --no-audit --no-fund >/dev/null) \
        || die "could not install the npm packages of tests/clients/package.json: $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(" ".join(k+"@"+v for k,v in d.get("dependencies",{}).items()))' "$HERE/package.json")"
fi

cleanup() { cluster_stop "$DIR"; }
trap cleanup EXIT
cluster_stop "$DIR"
cluster_init "$DIR" "$PORT" "shared_preload_libraries = 'snowflake_id'" "snowflake_id.worker_id = 21" \
    "listen_addresses = '127.0.0.1'"
# The keys of public IDs (a test key): recipes/*public_ids*.
write_public_keys "$DIR/data" 1:000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f
cluster_up "$DIR"
pq "$DIR" "$PORT" -c "CREATE DATABASE clients" -c "SET client_min_messages = warning" >/dev/null
pq "$DIR" "$PORT" -d clients -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id"

export SNOWFLAKE_HOST=127.0.0.1 SNOWFLAKE_PORT=$PORT SNOWFLAKE_DB=clients
export SNOWFLAKE_DSN="host=127.0.0.1 port=$PORT user=postgres dbname=clients"
export SNOWFLAKE_URL="postgresql://postgres@127.0.0.1:$PORT/clients"
log "clients: Python"
(cd "$HERE" && "$CACHE/venv/bin/python" test_python.py) || die "a Python client test failed"
log "clients: Django, converting a project's keys"
pq "$DIR" "$PORT" -c "CREATE DATABASE convert" >/dev/null
pq "$DIR" "$PORT" -d convert -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id"
rm -rf "$DIR/django_convert"
for stage in legacy widen check; do
    (cd "$HERE" && SNOWFLAKE_CONVERT_DB=convert "$CACHE/venv/bin/python" test_django_convert.py "$stage" "$DIR/django_convert") \
        || die "the Django conversion test failed at stage $stage"
done
log "clients: Node.js"
(cd "$HERE" && NODE_PATH_CLIENTS="$CACHE/node/node_modules" node test_node.js) || die "a Node.js client test failed"
(cd "$HERE" && NODE_PATH_CLIENTS="$CACHE/node/node_modules" node test_public_ids.js) || die "the Express public-ID test failed"
log "clients: PHP (PDO)"
(cd "$HERE" && php test_php.php) || die "the PHP client test failed"
log "clients: Java (pgjdbc)"
rm -rf "$DIR/java" && mkdir -p "$DIR/java"
javac -cp /usr/share/java/postgresql.jar -d "$DIR/java" "$HERE"/java/*.java || die "the Java client test does not compile"
java -cp "$DIR/java:/usr/share/java/postgresql.jar" TestJdbc || die "the Java client test failed"
log "clients: Go (pgx v4, database/sql with lib/pq)"
# Debian's Go packages are a GOPATH tree; no module download.
(cd "$HERE/go" && GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE="$CACHE/go-build" GOFLAGS='' \
    go build -o "$DIR/goclient" .) || die "the Go client test does not compile"
"$DIR/goclient" || die "the Go client test failed"
log "clients: Ruby (ActiveRecord)"
(cd "$HERE" && ruby test_ruby.rb) || die "the Ruby client test failed"
log "clients: Rust (tokio-postgres, sqlx, diesel)"
(cd "$HERE/rust" && CARGO_TARGET_DIR="$CACHE/rust-target" cargo build --locked -q) \
    || die "the Rust client test does not build (from crates.io: tokio-postgres 0.7.18, sqlx 0.9.0, diesel 2.3.14)"
"$CACHE/rust-target/debug/snowflake-id-rust-clients" || die "the Rust client test failed"
log "clients: adopted sequences: each tool's own migrations, then its ORM (issue 57)"
pq "$DIR" "$PORT" -c "CREATE DATABASE adopt" >/dev/null
pq "$DIR" "$PORT" -d adopt -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" >/dev/null
pq "$DIR" "$PORT" -d adopt -f "$HERE/recipes/adopt_sequences.sql" >/dev/null
export SNOWFLAKE_ADOPT_DB=adopt
rm -rf "$DIR/django_adopt"
(cd "$HERE" && "$CACHE/venv/bin/python" test_adopt.py django "$DIR/django_adopt") || die "the Django adoption test failed"
(cd "$HERE" && "$CACHE/venv/bin/python" test_adopt.py sqlalchemy) || die "the SQLAlchemy adoption test failed"
(cd "$HERE" && ruby test_adopt_ruby.rb) || die "the ActiveRecord adoption test failed"
(cd "$HERE" && php test_adopt_php.php) || die "the PHP (PDO) adoption test failed"
# Hibernate 3.6 and what it needs, all from Debian.
HIB_CP=$(printf '/usr/share/java/%s.jar:' hibernate3 hibernate-commons-annotations geronimo-jpa_2.0_spec \
    geronimo-jta-1.2-spec dom4j slf4j-api slf4j-nop antlr commons-collections3 javassist postgresql)
rm -rf "$DIR/hibernate" && mkdir -p "$DIR/hibernate"
javac -nowarn -cp "$HIB_CP" -d "$DIR/hibernate" "$HERE"/hibernate/*.java || die "the Hibernate adoption test does not compile"
java -cp "$DIR/hibernate:$HIB_CP" HibernateAdopt || die "the Hibernate adoption test failed"
log "clients: schema tools see no drift with the switch on (issue 63)"
# A stock database and one with the extension in a schema of its own (as
# docs/reference.md installs it) and the switch on, per tool, owned by a
# role that is no superuser; it runs the tools.
pq "$DIR" "$PORT" -c "CREATE ROLE app LOGIN" >/dev/null
SCHEMA_TOOLS="typeorm drizzle mikroorm sequelize knex alembic django peewee rails"
for t in $SCHEMA_TOOLS; do
    pq "$DIR" "$PORT" -c "CREATE DATABASE st_${t}_stock OWNER app" -c "CREATE DATABASE st_${t}_switch OWNER app" >/dev/null
    pq "$DIR" "$PORT" -d "st_${t}_switch" -f "$HERE/recipes/install_own_schema.sql" >/dev/null
done
rm -rf "$DIR/schema_tools" && mkdir -p "$DIR/schema_tools"
(cd "$HERE" && NODE_PATH_CLIENTS="$CACHE/node/node_modules" node test_schema_tools.js) \
    || die "a Node.js schema tool sees drift with the switch on (test_schema_tools.js)"
(cd "$HERE" && "$CACHE/venv/bin/python" test_schema_tools.py "$DIR/schema_tools") \
    || die "a Python schema tool sees drift with the switch on (test_schema_tools.py)"
(cd "$HERE" && ruby test_schema_tools.rb) || die "the Rails schema dump differs with the switch on (test_schema_tools.rb)"
log "clients: IDs made by other generators' libraries, decoded by the server"
(cd "$HERE" && "$CACHE/venv/bin/python" test_interop.py) || die "the sonyflake-py interop test failed"
(cd "$HERE" && NODE_PATH_CLIENTS="$CACHE/node/node_modules" node test_interop.js) || die "a Node.js interop test failed"
echo "python: psycopg asyncpg SQLAlchemy Django (and a converted Django project); node: pg knex;" \
    "public IDs: Django, Express; php: PDO; java: pgjdbc; go: pgx lib/pq; ruby: ActiveRecord; rust: tokio-postgres sqlx diesel;" \
    "interop: @sapphire/snowflake, sonyflake (npm), sonyflake-py;" \
    "adopted sequences: Django migrate, SQLAlchemy Identity()/Sequence(), ActiveRecord create_table, PDO lastInsertId(), Hibernate 3.6 pooled/pooled-lo and validate;" \
    "schema tools, no drift: TypeORM, drizzle-kit, MikroORM, Sequelize, knex, Alembic, Django, peewee, Rails" \
    > "$ROOT/.run/clients.summary"
log "clients: ok"
trap - EXIT
cleanup
