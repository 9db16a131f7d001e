#!/usr/bin/env bash
# scripts/lib.sh's build_inputs, the hash that lets install_extension skip
# a release build it made already: on a copy of the tree, an edit to any
# file a build reads (a source of either crate, the SQL, the manifests,
# the control file) or to RUSTFLAGS changes it, and files a build does not
# read (docs, tests, target/) leave it alone. A hash that missed an input
# would install a stale library. Part of the lint layer; builds nothing.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
SANDBOX=$(mktemp -d)
trap 'rm -rf "$SANDBOX"' EXIT
for f in Cargo.toml Cargo.lock snowflake_id.control src sql core/src core/Cargo.toml .cargo README.md docs tests/README.md; do
    [ -e "$ROOT/$f" ] || continue
    mkdir -p "$SANDBOX/$(dirname "$f")"
    cp -r "$ROOT/$f" "$SANDBOX/$f"
done
mkdir -p "$SANDBOX/target" "$SANDBOX/core/target"
ROOT="$SANDBOX"
fails=0
base=$(build_inputs)
[ "$(build_inputs)" = "$base" ] || { echo "FAIL: build_inputs differs between two calls on the same tree" >&2; exit 1; }
expect() {  # expect changed|same WHAT
    local now; now=$(build_inputs)
    if { [ "$1" = changed ] && [ "$now" = "$base" ]; } || { [ "$1" = same ] && [ "$now" != "$base" ]; }; then
        echo "FAIL: $2 left the hash $([ "$1" = changed ] && echo unchanged || echo changed)" >&2
        fails=$((fails + 1))
    fi
    base=$now
}
for f in src/lib.rs core/src/lib.rs Cargo.toml Cargo.lock snowflake_id.control core/Cargo.toml \
         "$(cd "$SANDBOX" && ls sql/*.sql | head -1)" "$(cd "$SANDBOX" && find src -name '*.sql' | head -1)"; do
    echo "// edited" >> "$SANDBOX/$f"; expect changed "an edit to $f"
done
echo "new" > "$SANDBOX/src/new_module.rs"; expect changed "a new file in src/"
rm "$SANDBOX/src/new_module.rs"; expect changed "removing a file from src/"
RUSTFLAGS="-C target-cpu=native" expect changed "RUSTFLAGS"
base=$(build_inputs)
echo "x" >> "$SANDBOX/README.md"; expect same "an edit to README.md"
echo "x" >> "$SANDBOX/docs/x.md"; expect same "a new page in docs/"
echo "x" > "$SANDBOX/target/x"; echo "x" > "$SANDBOX/core/target/x"; expect same "files in target/"
[ "$fails" = 0 ] || exit 1
echo "build_inputs: every build input changes the hash, other files do not"
