#!/usr/bin/env bash
# The summary of scripts/test.sh (scripts/steps.sh), on a run with a step
# that passes, one that fails (as an integration script fails: `die`
# inside it), one that skips, one that cannot run and one never reached:
# the run goes on after the failure, ends with one line per step and
# "summary: 1 passed, 1 failed, 1 skipped" (the failed step's line
# naming its first `die`), and exits non-zero (issue 45).
# A run where every step passes exits 0 with "summary: 2 passed, 0 failed,
# 0 skipped". The clusters a step made (state_dir) are removed when it
# ends; after a failure only their logs stay.
# A step that runs past SNOWFLAKE_STEP_LIMIT_S is stopped with every
# process it started, and recorded as failed with what still ran; the run
# goes on to its next step (the CI run of 2026-11-28 hung 78 minutes in one
# step and never reached its summary).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
SCRATCH=$(mktemp -d)
trap 'rm -rf "$SCRATCH"' EXIT
# The start of every scratch run below: this checkout's helpers, with the
# scratch directory as the project's root.
cat > "$SCRATCH/head.sh" <<SH
set -euo pipefail
source "$ROOT/scripts/lib.sh"
ROOT=$SCRATCH
VAR_TMP_DIR=$SCRATCH/vt
mkdir -p "\$ROOT/.run"
source "$ROOT/scripts/steps.sh"
SH

cat > "$SCRATCH/run.sh" <<SH
source "$SCRATCH/head.sh"
plan "ok step"; plan "failing step"; plan "skipping step"; plan "blocked step"; plan "unreached step"
trap summary EXIT
ok() { d=\$(state_dir "\$ROOT/.run/ok" ok/cluster); head -c 1048576 /dev/zero > "\$d/base"; note "fine"; }
fails() {
    d=\$(state_dir "\$ROOT/.run/fails" fails/cluster)
    head -c 1048576 /dev/zero > "\$d/base"; echo "the server said why" > "\$d/server.log"
    die "an integration script failed"
}
skips() { skip_test "not here"; }
hangs() { sleep 301 & sleep 302; }
step "ok step" ok
step "failing step" fails
step "skipping step" skips
not_run "blocked step" "what it needs failed"
[ -z "\${ALL_PASS:-}" ] || { STEPS=("ok step" "ok step 2"); step "ok step 2" ok; exit 0; }
exit 0
SH
# The hanging variant: its own script, the same steps.sh.
sed -e '/^step "ok step" ok$/,$d' "$SCRATCH/run.sh" > "$SCRATCH/hang.sh"
cat >> "$SCRATCH/hang.sh" <<'SH'
STEPS=("hanging step" "ok step")
step "hanging step" hangs
step "ok step" ok
exit 0
SH
set +e
bash "$SCRATCH/run.sh" > "$SCRATCH/out" 2> "$SCRATCH/err"
rc=$?
set -e
[ $rc != 0 ] || die "a run with a failed step exited 0"
[ "$(tail -1 "$SCRATCH/out")" = "summary: 1 passed, 1 failed, 1 skipped" ] \
    || die "the last line of stdout is not the summary: $(tail -1 "$SCRATCH/out")"
for want in "ok step +passed .*fine" "failing step +failed .*run.sh: an integration script failed" "skipping step +skipped .*not here" \
            "blocked step +not run .*what it needs failed" "unreached step +not run" "2 step\(s\) not run"; do
    grep -qE "$want" "$SCRATCH/err" || { cat "$SCRATCH/err" >&2; die "the summary has no line matching '$want'"; }
done
grep -q "the run goes on" "$SCRATCH/err" || die "the failed step did not say the run goes on"
# The disk of a step's clusters is given back; a failed step keeps its logs.
[ ! -e "$SCRATCH/vt/ok" ] || die "a passed step's cluster directory was left behind: $(ls -R "$SCRATCH/vt/ok")"
[ -f "$SCRATCH/vt/fails/cluster/server.log" ] || die "a failed step's server log was removed"
[ ! -e "$SCRATCH/vt/fails/cluster/base" ] || die "a failed step's cluster data was left behind"
grep -q "MB of disk free after each step" "$SCRATCH/err" || die "the summary does not say how much disk stayed free"

ALL_PASS=1 bash "$SCRATCH/run.sh" > "$SCRATCH/out" 2> "$SCRATCH/err" \
    || { cat "$SCRATCH/err" >&2; die "a run where every step passed exited non-zero"; }
[ "$(tail -1 "$SCRATCH/out")" = "summary: 2 passed, 0 failed, 0 skipped" ] \
    || die "the summary of a passing run is wrong: $(tail -1 "$SCRATCH/out")"
# A hung step: stopped at its limit, its processes gone, the run goes on.
# Its time is over twice the one recorded for it: flagged, not failed.
mkdir -p "$SCRATCH/tests"
printf '## Step times\n\n| step | seconds |\n|---|---|\n| `hanging step` | 1 |\n| ok step | 60 |\n\n## Next\n| x | 9 |\n' \
    > "$SCRATCH/tests/README.md"
t0=$SECONDS
set +e
SNOWFLAKE_STEP_LIMIT_S=3 timeout -k 5 120 bash "$SCRATCH/hang.sh" > "$SCRATCH/out" 2> "$SCRATCH/err"
rc=$?
set -e
[ $rc != 124 ] && [ $rc != 137 ] || die "a run with a hung step did not end within 120 s (its limit was 3 s)"
[ $rc != 0 ] || die "a run with a timed-out step exited 0"
[ "$(tail -1 "$SCRATCH/out")" = "summary: 1 passed, 1 failed, 0 skipped" ] \
    || { cat "$SCRATCH/err" >&2; die "the summary of a run with a hung step is wrong: $(tail -1 "$SCRATCH/out")"; }
grep -qE "hanging step +failed .*timed out after 3 s .*still running: sleep 30[12]" "$SCRATCH/err" \
    || { cat "$SCRATCH/err" >&2; die "the summary does not say the hung step timed out and what still ran"; }
! pgrep -f "^sleep 30[12]$" >/dev/null || die "the hung step's processes outlived it: $(pgrep -af "^sleep 30[12]$")"
# Each step's wall and CPU time, the flag, and the steps that set the total.
grep -qE "hanging step +failed +[0-9]+ s +(machine )?cpu [0-9]+ s  \[over twice its recorded 1 s\] timed out" "$SCRATCH/err" \
    || { cat "$SCRATCH/err" >&2; die "the summary does not flag the step over twice its recorded time, with its CPU time"; }
! grep -qE "ok step .*over twice" "$SCRATCH/err" || die "a step within its recorded time was flagged"
grep -q "1 step(s) took over twice their recorded time" "$SCRATCH/err" || die "the summary does not count the flagged steps"
grep -qE "critical path .*: [0-9]+ of [0-9]+ s are these 1: hanging step \([0-9]+ s\)" "$SCRATCH/err" \
    || { cat "$SCRATCH/err" >&2; die "the summary does not name the steps that set the total"; }
log "steps: a hung step stopped after its 3 s limit, with its processes, in $((SECONDS - t0)) s; the run went on"
log "steps: the summary lists every step and counts them, after a failure too, with wall and CPU times, flags and the critical path"

# Steps side by side (run_queue, issue 64): two at a time; two steps that
# share a mutex never overlap; an "alone" step overlaps nothing and
# nothing queued after it overtakes it; a step whose need failed is "not
# run", with why; each step's output is printed whole; the summary gives
# the critical path. Each step writes when it started and ended.
cat > "$SCRATCH/queue.sh" <<SH
source "$SCRATCH/head.sh"
for s in a b c d e f g h i j; do plan "\$s"; done
trap summary EXIT
# span NAME SECONDS [OTHER]: a step of SECONDS; with OTHER, it also waits
# (up to 60 s) until OTHER has started, so that two steps the runner puts
# side by side overlap however busy the machine is.
span() {
    echo "start \$1 \$(date +%s%N)" >> "\$ROOT/spans"; echo "output of \$1"; sleep "\$2"
    [ -z "\${3:-}" ] || poll_until 60 grep -q "^start \$3 " "\$ROOT/spans" || true
    echo "end \$1 \$(date +%s%N)" >> "\$ROOT/spans"
}
fails() { die "f failed"; }
queue a "" "m" span a 1 c
queue f "" "" fails
queue h "" "" true
queue b "" "m" span b 1
queue c "" "" span c 2
queue d "" "alone" span d 1
queue i "" "alone" true
queue j "" "alone" true
queue e "f" "" span e 1
queue g "" "" span g 1
run_queue
exit 0
SH
set +e
SNOWFLAKE_JOBS=2 timeout -k 5 120 bash "$SCRATCH/queue.sh" > "$SCRATCH/out" 2> "$SCRATCH/err"
rc=$?
set -e
# Steps of no time at all, one after another (i and j, as the steps
# skipped on other majors at the end of CI's run), once sent the critical
# path's walk round in a circle, and the run never ended.
[ $rc != 124 ] && [ $rc != 137 ] || { cat "$SCRATCH/err" >&2; die "the queued run did not end within 120 s"; }
[ $rc != 0 ] || die "a queued run with a failed step exited 0"
[ "$(tail -1 "$SCRATCH/out")" = "summary: 8 passed, 1 failed, 0 skipped" ] \
    || { cat "$SCRATCH/err" >&2; die "the summary of the queued run is wrong: $(tail -1 "$SCRATCH/out")"; }
grep -qE "^  e +not run .*f: failed" "$SCRATCH/err" || { cat "$SCRATCH/err" >&2; die "a step whose need failed is not 'not run' with why"; }
grep -qE "critical path \(the steps that set the total, [0-9]+ of its [0-9]+ s\): .* -> d \([0-9]+ s\)" "$SCRATCH/err" \
    || { cat "$SCRATCH/err" >&2; die "the summary of the queued run gives no critical path through the alone step"; }
grep -A1 -E -- "---- a: passed after [0-9]+ s; its output: ----" "$SCRATCH/err" | grep -q "output of a" \
    || { cat "$SCRATCH/err" >&2; die "a step's output is not printed whole under its name"; }
python3 - "$SCRATCH/spans" <<'PY' || die "the queued steps did not run as their mutexes say"
import sys
span = {}
for line in open(sys.argv[1]):
    what, name, t = line.split()
    span.setdefault(name, [0, 0])[what == "end"] = int(t)
def overlap(x, y):
    return span[x][0] < span[y][1] and span[y][0] < span[x][1]
bad = []
if overlap("a", "b"): bad.append("a and b share a mutex, and overlapped")
if not overlap("a", "c"): bad.append("a and c never ran side by side")
bad += [f"the alone step d overlapped {x}" for x in "abcg" if overlap("d", x)]
if span["g"][0] < span["d"][1]: bad.append("g, queued after the alone step d, overtook it")
ends = sorted(t for s in span.values() for t in s)
most = max(sum(1 for s in span.values() if s[0] <= t < s[1]) for t in ends)
if most > 2: bad.append(f"{most} steps ran at once with SNOWFLAKE_JOBS=2")
sys.exit("; ".join(bad) if bad else 0)
PY
log "steps: side by side, two at a time: mutexes and the alone step held, a step whose need failed not run, the critical path given"

# The run stopped while steps run side by side (a TERM to the runner, as
# CI's limit or a Ctrl-C sends): the summary stops every running step
# with its processes, waits for them and reports them failed, before it
# ends; nothing of theirs is left running.
cat > "$SCRATCH/stopped.sh" <<SH
source "$SCRATCH/head.sh"
plan "long 1"; plan "long 2"
trap summary EXIT
trap 'exit 143' TERM
queue "long 1" "" "" sleep 303
queue "long 2" "" "" sleep 304
run_queue
exit 0
SH
SNOWFLAKE_JOBS=2 timeout -k 5 120 bash "$SCRATCH/stopped.sh" > "$SCRATCH/out" 2> "$SCRATCH/err" &
runner=$!
poll_until 30 pgrep -f "^sleep 304$" >/dev/null || die "the queued steps of the stopped run did not start"
# The runner itself, the oldest process of that command line (its
# subshells share it).
kill -TERM "$(pgrep -o -f "^bash $SCRATCH/stopped.sh$")"
set +e; wait "$runner"; rc=$?; set -e
[ $rc != 124 ] && [ $rc != 137 ] || die "the stopped run did not end within 120 s"
[ $rc != 0 ] || die "the stopped run exited 0"
for n in 1 2; do
    grep -qE "^  long $n +failed" "$SCRATCH/err" || { cat "$SCRATCH/err" >&2; die "the stopped run's summary does not report 'long $n' failed"; }
done
! pgrep -f "^sleep 30[34]$" >/dev/null || die "the stopped run's steps outlived it: $(pgrep -af "^sleep 30[34]$")"
log "steps: a run stopped while two steps ran: both stopped with their processes and reported failed"
