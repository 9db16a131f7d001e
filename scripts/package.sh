#!/usr/bin/env bash
# Release artifacts, one set per PostgreSQL major (`make package`):
#   dist/snowflake_id-<version>-pg<NN>-linux-<arch>.tar.gz
#       lib/snowflake_id.so, extension/snowflake_id.control and *.sql, and
#       install.sh, which copies them into the directories `pg_config`
#       reports (--pkglibdir, --sharedir/extension). No Rust needed.
#   dist/postgresql-<NN>-snowflake-id_<version>-1_<debarch>.deb
#       for Debian's and apt.postgresql.org's PostgreSQL packages
#       (/usr/lib/postgresql/NN/lib, /usr/share/postgresql/NN/extension),
#       built with dpkg-deb; dependencies from dpkg-shlibdeps.
#   dist/SHA256SUMS over every artifact in dist/.
# Usage: scripts/package.sh [major...]   (default: PG_VERSIONS, else all
# supported majors). Each major is built with `cargo pgrx package` against
# that major's pg_config. tests/package/run.sh installs and tests them.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
read -r -a VERSIONS <<< "${*:-${PG_VERSIONS:-$PG_SUPPORTED}}"
for v in "${VERSIONS[@]}"; do
    [[ " $PG_SUPPORTED " == *" $v "* ]] || die "$v is not a supported major ($PG_SUPPORTED)"
done
[ -n "${SNOWFLAKE_PREREQS_DONE:-}" ] || bash "$ROOT/scripts/prereqs.sh" "${VERSIONS[@]}"
export PATH="$HOME/.cargo/bin:$PATH"

VERSION=$(project_version)
DEB_REVISION=1
MAINTAINER="${DEBFULLNAME:-snowflake_id developers} <${DEBEMAIL:-snowflake-id@example.org}>"
ARCH=$(uname -m)
DEBARCH=$(dpkg --print-architecture)
DIST=$(shared_dir "${SNOWFLAKE_DIST:-$ROOT/dist}" dist)
WORK="$ROOT/target/package"
# Reproducible archives: file times from the last commit.
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$ROOT" log -1 --format=%ct 2>/dev/null || date +%s)}

# The tarball's installer, for the major it was built for.
write_installer() {
    local major="$1" out="$2"
    cat > "$out" <<EOF
#!/bin/sh
# Install snowflake_id $VERSION for PostgreSQL $major into the directories of
# the PostgreSQL that pg_config describes. No Rust toolchain is needed.
#   ./install.sh [path/to/pg_config]   (default: \$PG_CONFIG, else pg_config on PATH)
# DESTDIR=/some/root ./install.sh stages the files under that root instead.
set -eu
here=\$(cd "\$(dirname "\$0")" && pwd)
PG_CONFIG=\${1:-\${PG_CONFIG:-pg_config}}
version=\$("\$PG_CONFIG" --version) || { echo "install.sh: cannot run \$PG_CONFIG" >&2; exit 1; }
major=\$(echo "\$version" | sed -E 's/^PostgreSQL ([0-9]+).*/\\1/')
if [ "\$major" != "$major" ]; then
    echo "install.sh: this package is for PostgreSQL $major, but \$PG_CONFIG is \$version" >&2
    exit 1
fi
libdir=\${DESTDIR:-}\$("\$PG_CONFIG" --pkglibdir)
extdir=\${DESTDIR:-}\$("\$PG_CONFIG" --sharedir)/extension
install -d "\$libdir" "\$extdir"
# Each file is written under a temporary name beside its target and
# renamed into place: a server that has the old library loaded keeps its
# mapping (writing over it in place would crash that server).
put() { # put FILE DIR MODE
    tmp="\$2/.\$(basename "\$1").new.\$\$"
    install -m "\$3" "\$1" "\$tmp" && mv -f "\$tmp" "\$2/\$(basename "\$1")"
}
put "\$here/lib/snowflake_id.so" "\$libdir" 755
for f in "\$here"/extension/*; do put "\$f" "\$extdir" 644; done
echo "installed snowflake_id $VERSION into \$libdir and \$extdir"
echo "next: shared_preload_libraries = 'snowflake_id' and snowflake_id.worker_id in postgresql.conf,"
echo "      restart the server, then CREATE EXTENSION snowflake_id;"
EOF
    chmod 755 "$out"
}

tar_reproducible() { # tar_reproducible OUT.tar.gz DIR NAME
    tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
        -C "$2" -cf - "$3" | gzip -n -9 > "$1"
}

for v in "${VERSIONS[@]}"; do
    select_pg "$v"
    log "PostgreSQL $v: packages of the release build ($PG_CONFIG)"
    stage="$WORK/pg$v/stage"
    rm -rf "$WORK/pg$v" && mkdir -p "$stage"
    # The release build of this major (scripts/lib.sh build_release):
    # the one the test command installed when the sources are the same.
    build_release
    cp -a "$STAGE/." "$stage/"
    lib="$stage$("$PG_CONFIG" --pkglibdir)"
    ext="$stage$("$PG_CONFIG" --sharedir)/extension"
    [ -f "$lib/snowflake_id.so" ] && [ -f "$ext/snowflake_id--$VERSION.sql" ] && [ -f "$ext/snowflake_id.control" ] \
        || die "cargo pgrx package left no library, control file or install script under $stage"
    strip --strip-unneeded "$lib/snowflake_id.so"

    # 1. Tarball laid out for pg_config's directories.
    name="snowflake_id-$VERSION-pg$v-linux-$ARCH"
    tdir="$WORK/pg$v/tar/$name"
    mkdir -p "$tdir/lib" "$tdir/extension"
    cp "$lib/snowflake_id.so" "$tdir/lib/"
    cp "$ext"/snowflake_id* "$tdir/extension/"
    cp "$ROOT/README.md" "$ROOT/CHANGELOG.md" "$ROOT/LICENSE" "$tdir/"
    mkdir -p "$tdir/docs" && cp "$ROOT"/docs/*.md "$tdir/docs/"
    write_installer "$v" "$tdir/install.sh"
    find "$tdir" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
    tar_reproducible "$DIST/$name.tar.gz" "$WORK/pg$v/tar" "$name"

    # 2. Debian package for Debian's PostgreSQL layout.
    pkg="postgresql-$v-snowflake-id"
    root="$WORK/pg$v/deb/$pkg"
    install -d "$root/DEBIAN" "$root/usr/lib/postgresql/$v/lib" \
        "$root/usr/share/postgresql/$v/extension" "$root/usr/share/doc/$pkg"
    install -m 644 "$lib/snowflake_id.so" "$root/usr/lib/postgresql/$v/lib/"
    install -m 644 "$ext"/snowflake_id* "$root/usr/share/postgresql/$v/extension/"
    gzip -n -9 < "$ROOT/CHANGELOG.md" > "$root/usr/share/doc/$pkg/changelog.gz"
    gzip -n -9 < "$ROOT/README.md" > "$root/usr/share/doc/$pkg/README.md.gz"
    install -d "$root/usr/share/doc/$pkg/docs"
    for d in "$ROOT"/docs/*.md; do
        gzip -n -9 < "$d" > "$root/usr/share/doc/$pkg/docs/$(basename "$d").gz"
    done
    {
        printf 'Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n'
        printf 'Upstream-Name: snowflake_id\n\nFiles: *\n'
        printf 'Copyright: %s\n' "$(sed -n 's/^Copyright (c) //p' "$ROOT/LICENSE")"
        printf 'License: PostgreSQL\n'
        sed '1,/^Copyright/d' "$ROOT/LICENSE" | sed -e 's/^$/./' -e 's/^/ /' | sed '1d'
    } > "$root/usr/share/doc/$pkg/copyright"
    {
        printf '%s (%s) unstable; urgency=medium\n\n' "$pkg" "$VERSION-$DEB_REVISION"
        printf '  * snowflake_id %s; the upstream changes are in changelog.gz.\n\n' "$VERSION"
        printf ' -- %s  %s\n' "$MAINTAINER" "$(date -R -u -d "@$SOURCE_DATE_EPOCH")"
    } | gzip -n -9 > "$root/usr/share/doc/$pkg/changelog.Debian.gz"
    # Shared-library dependencies the way Debian computes them.
    shl="$WORK/pg$v/shlibs"; mkdir -p "$shl/debian"
    printf 'Source: snowflake-id\n\nPackage: %s\nArchitecture: any\n' "$pkg" > "$shl/debian/control"
    libdeps=$(cd "$shl" && dpkg-shlibdeps --warnings=0 -O -e "$root/usr/lib/postgresql/$v/lib/snowflake_id.so" 2>/dev/null \
        | sed -n 's/^shlibs:Depends=//p')
    [ -n "$libdeps" ] || die "dpkg-shlibdeps found no dependencies for $pkg"
    cat > "$root/DEBIAN/control" <<EOF
Package: $pkg
Version: $VERSION-$DEB_REVISION
Architecture: $DEBARCH
Maintainer: $MAINTAINER
Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)
Depends: postgresql-$v, $libdeps
Section: database
Priority: optional
Description: time-ordered 64-bit Snowflake IDs for PostgreSQL $v
 snowflake_id mints Twitter-Snowflake-style bigint keys (41-bit milliseconds,
 10-bit worker id, 12-bit sequence) from one generator in shared memory:
 unique and strictly increasing per server, unique across servers with
 distinct snowflake_id.worker_id settings, and safe when the clock steps back.
 Add snowflake_id to shared_preload_libraries, then CREATE EXTENSION.
EOF
    (cd "$root" && find usr -type f -print0 | sort -z | xargs -0 md5sum) > "$root/DEBIAN/md5sums"
    find "$root" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
    deb="$DIST/${pkg}_$VERSION-${DEB_REVISION}_$DEBARCH.deb"
    dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
    log "PostgreSQL $v: $(basename "$DIST")/$name.tar.gz, $(basename "$DIST")/$(basename "$deb")"
done

(cd "$DIST" && sha256sum -- *.tar.gz *.deb > SHA256SUMS)
log "checksums: $DIST/SHA256SUMS"
