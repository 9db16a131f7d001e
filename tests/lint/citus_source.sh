#!/usr/bin/env bash
# shellcheck disable=SC2034  # the variables set here are read by lib.sh's functions
# The Citus source lookup of scripts/lib.sh (citus_tarball, ensure_citus),
# case by case, without a network and without building anything: the
# variable, the cache, the vendored file, a download (curl reads a file://
# URL), a failed download (an unreachable URL) and a wrong checksum, each
# with and without CI=true. Part of the lint layer.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
SANDBOX=$(mktemp -d)
trap 'rm -rf "$SANDBOX"' EXIT
mkdir -p "$SANDBOX/good" "$SANDBOX/bad" "$SANDBOX/vendor"
name="citus-$CITUS_VERSION.tar.gz"
# A stand-in tarball: its sum is the pinned sum for this test.
printf 'stand-in for the Citus source\n' | gzip > "$SANDBOX/good/$name"
printf 'something else\n' | gzip > "$SANDBOX/bad/$name"
CITUS_SHA256=$(sha256_of "$SANDBOX/good/$name")
CITUS_VENDOR_DIR="$SANDBOX/vendor"
# Port 9 (discard) on localhost: nothing listens, the connection is refused.
UNREACHABLE=http://127.0.0.1:9/citus.tar.gz
fails=0
check() {  # check NAME EXPECTED(found|missing) [PATH-or-WHY pattern]
    local what="$1" want="$2" pattern="${3:-}" got
    if citus_tarball 2>/dev/null; then got=found; else got=missing; fi
    if [ "$got" != "$want" ]; then
        echo "FAIL: $what: $got, expected $want (CITUS_TARBALL=$CITUS_TARBALL CITUS_WHY=$CITUS_WHY)" >&2
        fails=$((fails + 1)); return
    fi
    local subject=$CITUS_TARBALL; [ "$got" = found ] || subject=$CITUS_WHY
    if [ -n "$pattern" ] && [[ "$subject" != *"$pattern"* ]]; then
        echo "FAIL: $what: \"$subject\" does not contain \"$pattern\"" >&2
        fails=$((fails + 1)); return
    fi
    echo "ok: $what: $got${pattern:+ ($pattern)}"
}
# skip_or_fail NAME: ensure_citus, as citus.sh calls it, with no build
# and no source (a stand-in pg_config points it at the sandbox): without
# CI, one SKIPPED line and a skip; with CI=true, a failure.
cat > "$SANDBOX/pg_config" <<PGC
#!/bin/sh
[ "\$1" = --pkglibdir ] && echo "$SANDBOX/lib"
PGC
chmod +x "$SANDBOX/pg_config"
mkdir -p "$SANDBOX/lib"
skip_or_fail() {
    local out rc
    out=$( (CI="" PG_CONFIG="$SANDBOX/pg_config" PG_MAJOR=18; ensure_citus) 2>&1) && rc=0 || rc=$?
    if [ $rc != 1 ] || [[ "$out" != *"citus: SKIPPED: "*"SNOWFLAKE_CITUS_TARBALL"* ]] \
            || [ "$(grep -c SKIPPED <<< "$out")" != 1 ]; then
        echo "FAIL: $1: without CI, expected one SKIPPED line and a skip, got rc $rc: $out" >&2
        fails=$((fails + 1)); return
    fi
    out=$( (CI=true PG_CONFIG="$SANDBOX/pg_config" PG_MAJOR=18; ensure_citus; echo "went on") 2>&1) && rc=0 || rc=$?
    if [ $rc = 0 ] || [[ "$out" != *"ERROR:"*"is not available"* ]] || [[ "$out" == *"went on"* ]]; then
        echo "FAIL: $1: with CI=true, expected a failure, got rc $rc: $out" >&2
        fails=$((fails + 1)); return
    fi
    echo "ok: $1: skipped without CI, fails with CI=true"
}
reset() { rm -rf "${CITUS_CACHE_DIR:?}"; CITUS_CACHE_DIR="$SANDBOX/cache"; rm -f "$CITUS_VENDOR_DIR/$name"; unset SNOWFLAKE_CITUS_TARBALL; }

# The lookup itself does not depend on CI; run it both ways anyway.
for ci in "" true; do
    export CI=$ci
    label="CI=${ci:-unset}"
    # 1. The variable, given and right.
    reset; export SNOWFLAKE_CITUS_TARBALL="$SANDBOX/good/$name"; CITUS_URL=$UNREACHABLE
    check "$label: SNOWFLAKE_CITUS_TARBALL" found "$SANDBOX/good/$name"
    # 1b. The variable naming a missing file, or one with the wrong sum:
    # reported, never replaced by another source.
    cp "$SANDBOX/good/$name" "$CITUS_VENDOR_DIR/$name"
    export SNOWFLAKE_CITUS_TARBALL="$SANDBOX/nowhere/$name"
    check "$label: SNOWFLAKE_CITUS_TARBALL, no such file" missing "which is not a file"
    export SNOWFLAKE_CITUS_TARBALL="$SANDBOX/bad/$name"
    check "$label: SNOWFLAKE_CITUS_TARBALL, wrong sum" missing "expected $CITUS_SHA256"
    # 2. The cache, before the vendored file.
    reset; mkdir -p "$CITUS_CACHE_DIR"; cp "$SANDBOX/good/$name" "$CITUS_CACHE_DIR/$name"
    cp "$SANDBOX/good/$name" "$CITUS_VENDOR_DIR/$name"
    check "$label: the cache" found "$CITUS_CACHE_DIR/$name"
    # 3. The vendored file.
    reset; cp "$SANDBOX/good/$name" "$CITUS_VENDOR_DIR/$name"
    check "$label: the vendored file" found "$CITUS_VENDOR_DIR/$name"
    # 3b. A cached file with the wrong sum is passed over.
    mkdir -p "$CITUS_CACHE_DIR"; cp "$SANDBOX/bad/$name" "$CITUS_CACHE_DIR/$name"
    check "$label: a corrupt cache, then the vendored file" found "$CITUS_VENDOR_DIR/$name"
    # 4. A download that works lands in the cache.
    reset; CITUS_URL="file://$SANDBOX/good/$name"
    check "$label: a download" found "$CITUS_CACHE_DIR/$name"
    [ "$(sha256_of "$CITUS_CACHE_DIR/$name")" = "$CITUS_SHA256" ] || { echo "FAIL: the download was not cached" >&2; fails=$((fails + 1)); }
    # 4b. A failed download names the URL.
    reset; CITUS_URL=$UNREACHABLE
    check "$label: an unreachable URL" missing "the download of $UNREACHABLE failed"
    skip_or_fail "$label: an unreachable URL"
    # 4c. A download with the wrong sum names the URL and the expected sum,
    # and leaves nothing in the cache.
    reset; CITUS_URL="file://$SANDBOX/bad/$name"
    check "$label: a wrong checksum" missing "has SHA-256 $(sha256_of "$SANDBOX/bad/$name"), expected $CITUS_SHA256"
    [ ! -e "$CITUS_CACHE_DIR/$name" ] && [ ! -e "$CITUS_CACHE_DIR/$name.part" ] \
        || { echo "FAIL: a mismatching download was kept" >&2; fails=$((fails + 1)); }
    skip_or_fail "$label: a wrong checksum"
done
[ $fails = 0 ] || die "the Citus source lookup failed $fails check(s)"
log "the Citus source lookup: every case as documented"
