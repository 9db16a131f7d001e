#!/usr/bin/env bash
# A full disk under generation, on a real cluster. The data directory lives
# on a small tmpfs (its WAL elsewhere, as in many production layouts, so
# that PostgreSQL itself keeps running), IDs are being generated, and the
# tmpfs is filled to the last page:
#  - snowflake_nextval() fails with SQLSTATE 58030 once the durable
#    reservation runs out, and no ID it issued lies past that reservation;
#  - nothing crashes (the postmaster is the same process throughout, and no
#    crash restart is logged);
#  - once space is freed, generation resumes by itself, above every ID
#    issued before.
# Needs root (mount); the test suite runs as root.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
is_root || die "full_disk.sh needs root to mount a tmpfs"
BASE=$(state_dir "$ROOT/.run/it-full-disk" it-full-disk)
PORT=${SNOWFLAKE_IT_FULL_DISK_PORT:-15550}
DIR="$BASE/cluster"; MNT="$BASE/tmpfs"
q() { PGOPTIONS="-c client_min_messages=warning" timeout 120 "$(pgbin)/psql" -X -q -h "$DIR" -p "$PORT" -U postgres -v ON_ERROR_STOP=1 "$@"; }
cleanup() {
    cluster_stop "$DIR"
    # pg_ctl stop -w returns once the postmaster has removed its pid file,
    # a moment before it exits with its working directory on the tmpfs:
    # umount waits for that (busy, exit 32, in CI's run of 799e0a2).
    local i
    for ((i = 0; i < 100; i++)); do
        mountpoint -q "$MNT" || return 0
        umount "$MNT" 2>/dev/null && return 0
        sleep 0.1
    done
    umount "$MNT"
}
trap cleanup EXIT
cleanup

mkdir -p "$DIR" "$MNT"
chown postgres "$DIR"
cluster_init "$DIR" "$PORT" "shared_preload_libraries = 'snowflake_id'" "snowflake_id.worker_id = 9"
# Move the data directory onto a 64 MiB tmpfs, its WAL beside the cluster.
mount -t tmpfs -o size=64m,mode=0700 tmpfs "$MNT"
chown postgres "$MNT"
rm -rf "$DIR/wal"
mv "$DIR/data/pg_wal" "$DIR/wal"
cp -a "$DIR/data/." "$MNT/"
rm -rf "$DIR/data"
ln -s "$MNT" "$DIR/data"
ln -s "$DIR/wal" "$MNT/pg_wal"
chown -h postgres "$DIR/data" "$MNT/pg_wal"
cluster_up "$DIR"
q -c "CREATE EXTENSION snowflake_id"
postmaster=$(head -1 "$MNT/postmaster.pid")

# Call snowflake_nextval() for SECS seconds, one subtransaction per call;
# print: calls that succeeded, calls that failed with 58030, other errors,
# the largest ID, the first 58030 message and DETAIL.
generate() {
    q -At -F '|' -c "
    DO \$\$
    DECLARE ok int := 0; nfull int := 0; nother int := 0; top bigint := 0; id bigint; msg text := '';
            t0 timestamptz := clock_timestamp(); e_msg text; e_detail text; e_state text;
    BEGIN
        WHILE clock_timestamp() < t0 + interval '$1 seconds' LOOP
            BEGIN
                id := snowflake_nextval();
                ok := ok + 1; top := greatest(top, id);
            EXCEPTION WHEN OTHERS THEN
                GET STACKED DIAGNOSTICS e_state = RETURNED_SQLSTATE, e_msg = MESSAGE_TEXT, e_detail = PG_EXCEPTION_DETAIL;
                IF e_state = '58030' THEN nfull := nfull + 1; ELSE nother := nother + 1; END IF;
                IF msg = '' THEN msg := e_state || ': ' || e_msg || ' / ' || coalesce(e_detail, ''); END IF;
            END;
            PERFORM pg_sleep(0.0005);
        END LOOP;
        PERFORM set_config('fd.result', format(\$f\$%s|%s|%s|%s|%s\$f\$, ok, nfull, nother, top, msg), false);
    END \$\$;
    SELECT current_setting('fd.result')"
}

IFS='|' read -r ok _ other top0 _ < <(generate 2)
[ "$ok" -gt 0 ] && [ "$other" = 0 ] || die "generation failed before the disk was full ($ok ok, $other errors)"
log "before: $ok IDs in 2 s, up to $top0"

# Fill the tmpfs to the last page.
dd if=/dev/zero of="$MNT/filler" bs=1M status=none 2>/dev/null || true
dd if=/dev/zero of="$MNT/filler2" bs=4k status=none 2>/dev/null || true
avail=$(df --output=avail -B1 "$MNT" | tail -1 | tr -d ' ')
[ "$avail" = 0 ] || die "the tmpfs still has $avail bytes free"
log "the data directory's filesystem is full ($(df -h --output=size "$MNT" | tail -1 | tr -d ' '))"

IFS='|' read -r ok full other top1 msg < <(generate 5)
reserved=$(q -At -c "SELECT (extract(epoch FROM reserved_until) * 1000)::bigint FROM snowflake_stats()")
past=$(q -At -c "SELECT count(*) FROM (VALUES ($top1)) v(id)
                  WHERE $top1 > 0 AND (extract(epoch FROM snowflake_timestamp(id)) * 1000)::bigint > $reserved")
log "full: $ok IDs issued (up to $top1), $full calls failed with 58030, $other other errors; first: $msg"
[ "$full" -gt 0 ] || die "no call failed with 58030 while the disk was full"
[ "$other" = 0 ] || die "$other calls failed with another error while the disk was full: $msg"
[[ "$msg" == "58030: could not write snowflake_id state file"* ]] || die "unexpected error: $msg"
[ "$past" = 0 ] || die "an ID past the durable reservation was issued while the disk was full"

rm -f "$MNT/filler" "$MNT/filler2"
log "space freed"
IFS='|' read -r ok full other top2 _ < <(generate 3)
log "after: $ok IDs issued (up to $top2), $full calls failed with 58030, $other other errors"
[ "$ok" -gt 0 ] || die "generation did not resume once space was freed"
resumed=$(q -At -c "SELECT snowflake_nextval() > greatest($top0, $top1, $top2)")
[ "$resumed" = t ] || die "IDs after the full disk are not above those issued before"
[ "$top2" -gt "$top1" ] && [ "$top1" -ge "$top0" ] || die "IDs went backwards across the full disk ($top0, $top1, $top2)"
[ "$(head -1 "$MNT/postmaster.pid")" = "$postmaster" ] || die "the postmaster changed: the server crashed"
! grep -qE "terminated by signal|server process .* was terminated|all server processes terminated" "$DIR/server.log" \
    || die "the server log shows a crash"
log "full disk: no crash, 58030 while full, nothing past the reservation, generation resumed above every earlier ID"

log "full_disk: ok"
trap - EXIT
cleanup
rm -rf "$BASE"   # self-cleaning on success; kept for inspection on failure
