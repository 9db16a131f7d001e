# shellcheck shell=bash
# The steps of scripts/test.sh and their summary. Source it after lib.sh;
# tests/lint/steps.sh tests it.
#   plan NAME                 a step this run means to take
#   step NAME COMMAND...      run it (a failure ends the step, not the run)
#   queue NAME NEEDS MUTEXES COMMAND...
#                             a step for run_queue, which runs the queued
#                             steps side by side (SNOWFLAKE_JOBS at a time)
#   not_run NAME WHY          a planned step that cannot run
#   note TEXT                 (inside a step) the summary's note for it
#   at_exit NAME FUNCTION     step NAME (planned) must run even when the
#                             run ends early: the summary runs it if the
#                             run did not (a die outside a step, an
#                             interrupt)
#   trap summary EXIT         the summary, always, and the exit status
# The summary gives each step's wall time and its CPU time (every process
# it started, servers included: a control group per step; see
# cpu_group_make), then the steps that set the total (run side by side:
# the chain of steps that ended last, each waiting for the one before; run
# one after another: the longest ones, to a half of it), and flags a step
# that took more than twice the time recorded for it in tests/README.md's
# table "Step times" (a flag, not a failure: the machine is noisy; issue
# 64).
# No step runs longer than STEP_LIMIT_S (SNOWFLAKE_STEP_LIMIT_S, default
# 1200): a step past it is stopped with every process it started (TERM,
# then KILL after 30 s), recorded as failed with what was still running,
# and the run goes on. A hung step costs CI its limit, not the whole run.
# STEPS: every step this run means to take, in order; RESULT/TOOK/NOTE:
# what became of it. A step never reached says "not run".
STEPS=() T_START=$SECONDS AT_EXIT=()
STEP_LIMIT_S=${SNOWFLAKE_STEP_LIMIT_S:-1200}
declare -A RESULT=() TOOK=() NOTE=() CPU=()
plan() { STEPS+=("$1"); }
# cpu_ticks: the machine's busy CPU time so far, in clock ticks.
cpu_ticks() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9; exit}' /proc/stat 2>/dev/null || echo 0; }
CLK_TCK=$(getconf CLK_TCK 2>/dev/null || echo 100)
# recorded_times: "NAME<TAB>SECONDS" for each row of the table under
# "## Step times" in tests/README.md (| step | seconds | ...).
recorded_times() {
    [ -f "$ROOT/tests/README.md" ] || return 0
    awk -F'|' '/^## / {on = ($0 ~ /^## Step times/)} on && NF > 3 && $3 ~ /^ *[0-9]+ *$/ {
        name = $2; gsub(/^ +| +$/, "", name); gsub(/`/, "", name); t = $3; gsub(/ /, "", t); print name "\t" t }' \
        "$ROOT/tests/README.md"
}
at_exit() { AT_EXIT+=("$1" "$2"); }
# critical_path: for steps run side by side (run_queue), the chain of
# steps that set the total: the one that ended last, then the one whose
# end let it start (what it needed, or the job or lock it waited for),
# and so on back to the start of the run.
critical_path() {
    local cur="" s best chain=() sum=0 steps=0 last=0
    for s in "${!T_END[@]}"; do
        steps=$((steps + ${TOOK[$s]:-0}))
        if [ -z "$cur" ] || [ "${T_END[$s]}" -gt "$last" ]; then cur=$s; last=${T_END[$s]}; fi
    done
    while [ -n "$cur" ]; do
        chain=("$cur (${TOOK[$cur]:-0} s)" "${chain[@]}"); sum=$((sum + ${TOOK[$cur]:-0}))
        best=""
        for s in "${!T_END[@]}"; do
            # It ended when this one began, and began before it (so that
            # the walk ends, through steps of no time too).
            [ "${T_BEGIN[$s]}" -lt "${T_BEGIN[$cur]}" ] && [ "${T_END[$s]}" -le $((T_BEGIN[$cur] + 1)) ] || continue
            if [ -z "$best" ] || [ "${T_END[$s]}" -gt "${T_END[$best]}" ]; then best=$s; fi
        done
        [ -n "$best" ] || break
        cur=$best
    done
    printf '  %s s of steps ran in %s s, %s at a time at most (SNOWFLAKE_JOBS)\n' "$steps" "$last" "$JOBS" >&2
    printf '  critical path (the steps that set the total, %s of its %s s): %s\n' \
        "$sum" "$last" "$(IFS=';'; echo "${chain[*]}" | sed 's/;/ -> /g')" >&2
}
summary() {
    local rc=$? s n_pass=0 n_fail=0 n_skip=0 n_not=0 r i
    trap - EXIT
    stop_queue
    for ((i = 0; i < ${#AT_EXIT[@]}; i += 2)); do
        [ -n "${RESULT[${AT_EXIT[i]}]:-}" ] || step "${AT_EXIT[i]}" "${AT_EXIT[i + 1]}"
    done
    printf '\n' >&2
    log "summary of scripts/test.sh ($(( (SECONDS - T_START) / 60 )) min $(( (SECONDS - T_START) % 60 )) s${DISK_LOW:+; at least $((DISK_LOW / 1024)) MB of disk free after each step})"
    local -A recorded=()
    local name secs flag slow=0 total=0 half shown=() t
    while IFS=$'\t' read -r name secs; do recorded[$name]=$secs; done < <(recorded_times)
    for s in "${STEPS[@]}"; do
        r=${RESULT[$s]:-not run}
        case "$r" in
            passed) n_pass=$((n_pass + 1)) ;;
            failed) n_fail=$((n_fail + 1)) ;;
            skipped) n_skip=$((n_skip + 1)) ;;
            *) n_not=$((n_not + 1)) ;;
        esac
        flag=""
        if [ -n "${TOOK[$s]:-}" ] && [ -n "${recorded[$s]:-}" ] && [ "${TOOK[$s]}" -ge 2 ] \
            && [ "${TOOK[$s]}" -gt $((2 * recorded[$s])) ]; then
            flag="[over twice its recorded ${recorded[$s]} s] "; slow=$((slow + 1))
        fi
        printf '  %-46s %-8s %6s %9s  %s%s\n' "$s" "$r" "${TOOK[$s]:+${TOOK[$s]} s}" \
            "${CPU[$s]:+$CPU_WORD ${CPU[$s]} s}" "$flag" "${NOTE[$s]:-}" >&2
        total=$((total + ${TOOK[$s]:-0}))
    done
    [ "$n_not" = 0 ] || printf '  %s step(s) not run\n' "$n_not" >&2
    [ "$slow" = 0 ] || printf '  %s step(s) took over twice their recorded time (tests/README.md, "Step times"): a flag, not a failure\n' "$slow" >&2
    if [ "${#T_END[@]}" -gt 0 ]; then
        critical_path
    elif [ "$total" -gt 0 ]; then
        # The steps ran one after another: the longest set the total.
        half=0
        while IFS=$'\t' read -r t name; do
            [ "$half" -lt $((total / 2)) ] || break
            half=$((half + t)); shown+=("$name ($t s)")
        done < <(for s in "${STEPS[@]}"; do [ -z "${TOOK[$s]:-}" ] || printf '%s\t%s\n' "${TOOK[$s]}" "$s"; done | sort -t$'\t' -k1,1nr)
        printf '  critical path (the steps run one after another): %s of %s s are these %s: %s\n' \
            "$half" "$total" "${#shown[@]}" "$(IFS=';'; echo "${shown[*]}" | sed 's/;/, /g')" >&2
    fi
    local failed=0
    if [ "$n_fail" != 0 ] || [ "$n_not" != 0 ] || [ "$rc" != 0 ]; then
        failed=1
        printf '\033[1;31mFAILED:\033[0m %s failed, %s not run\n' "$n_fail" "$n_not" >&2
    else
        log "all requested layers passed"
    fi
    # The last line of all: the counts, for people and for CI.
    printf 'summary: %s passed, %s failed, %s skipped\n' "$n_pass" "$n_fail" "$n_skip"
    exit "$failed"
}

# step NAME COMMAND...: run one planned step in a subshell (its `die`
# ends the step, not the run; `set -e` holds inside it), and record passed
# / failed / skipped (an integration script that called skip_test), its
# duration, its CPU time and the first line of its note. Each step has a
# directory of its own, .run/steps/SLUG/ (SNOWFLAKE_STEP_DIR: its note,
# why it failed, its skip, its time-out, its clusters), so that steps can
# run side by side (run_queue).
step_slug() { printf '%s' "$1" | tr -c 'A-Za-z0-9._-' '_'; }
# step_file NAME: where a step run in the background keeps its output
# (.log) and its record (.result), beside its directory.
step_file() { printf '%s/.run/steps/%s' "$ROOT" "$(step_slug "$1")"; }
step() {
    local name="$1" t0=$SECONDS rc wd c0 cmd sd cg=""; shift
    sd=$(step_file "$name")
    rm -rf "$sd" && mkdir -p "$sd" "$VAR_TMP_DIR"
    export SNOWFLAKE_STEP_DIR="$sd" SNOWFLAKE_STEP_WHY="$sd/step.why"
    SNOWFLAKE_STEP_STATES="$VAR_TMP_DIR/.step-states.$(step_slug "$name")"
    export SNOWFLAKE_STEP_STATES
    : > "$SNOWFLAKE_STEP_STATES"
    cg=$(cpu_group_make "$name")
    c0=$(cpu_ticks)
    set +e
    (
        [ -z "$cg" ] || cpu_group_join "$cg" || : > "$sd/no-cpu-group"
        set -e; "$@"
    ) &
    cmd=$!
    step_watchdog "$STEP_LIMIT_S" "$sd/step.timeout" "$cmd" &
    wd=$!
    wait "$cmd"
    rc=$?
    kill "$wd" 2>/dev/null
    wait "$wd" 2>/dev/null
    set -e
    if [ -s "$sd/step.timeout" ]; then
        rc=124
        # What ignored the watchdog's TERM and left the step's process tree
        # (a daemon): every process still in the step's control group.
        [ -z "$cg" ] || cpu_group_kill "$cg"
    fi
    reclaim_states "$name" "$rc"
    rm -f "$SNOWFLAKE_STEP_STATES"
    unset SNOWFLAKE_STEP_STATES SNOWFLAKE_STEP_WHY SNOWFLAKE_STEP_DIR
    TOOK[$name]=$((SECONDS - t0))
    if [ -n "$cg" ] && [ ! -e "$sd/no-cpu-group" ]; then
        CPU[$name]=$(cpu_group_seconds "$cg"); cpu_group_drop "$cg"
    else
        [ -z "$cg" ] || cpu_group_drop "$cg"
        CPU[$name]=$(( ($(cpu_ticks) - c0) / CLK_TCK ))
    fi
    if [ $rc != 0 ]; then
        RESULT[$name]=failed
        # Why, in the summary: its time-out, or else the first die of the
        # step, if any.
        if [ -s "$sd/step.timeout" ]; then
            NOTE[$name]=$(head -1 "$sd/step.timeout" | cut -c1-300)
        elif [ -s "$sd/step.why" ]; then
            NOTE[$name]=$(head -1 "$sd/step.why" | tr -d '\033' | cut -c1-300)
        fi
        log "FAILED: $name (exit $rc, after ${TOOK[$name]} s); the run goes on"
    elif [ -f "$sd/skipped" ]; then
        RESULT[$name]=skipped; NOTE[$name]=$(head -1 "$sd/skipped")
    else
        RESULT[$name]=passed
        [ ! -f "$sd/step.note" ] || NOTE[$name]=$(head -1 "$sd/step.note")
    fi
}

# The CPU time of a step: of every process it started, servers included
# (pg_ctl's postmaster leaves the step's process tree, never its control
# group), from a control group of its own, made below this run's own
# group (cgroup v1's cpuacct, or v2, whose cpu.stat every group has)
# where this user may make one; else the machine's busy time while the
# step ran (/proc/stat), which counts a step beside it too (the summary
# says "machine cpu" then).
CPU_GROUP_ROOT="" CPU_WORD="machine cpu"
cpu_group_root() {
    local line path d
    # v1: the cpuacct hierarchy, at this process's place in it.
    line=$(grep -E '^[0-9]+:([^:]*,)?cpuacct(,[^:]*)?:' /proc/self/cgroup 2>/dev/null | head -1 || true)
    if [ -n "$line" ]; then
        path=${line#*:*:}
        for d in /sys/fs/cgroup/cpuacct /sys/fs/cgroup/cpu,cpuacct /sys/fs/cgroup/cpuacct,cpu; do
            [ -f "$d$path/cpuacct.usage" ] && [ -w "$d$path" ] && { printf '%s\n' "${d}${path%/}"; return; }
        done
        return 0
    fi
    # v2: the unified hierarchy.
    line=$(grep -E '^0::' /proc/self/cgroup 2>/dev/null | head -1 || true)
    [ -n "$line" ] || return 0
    path=${line#0::}
    for d in /sys/fs/cgroup /sys/fs/cgroup/unified; do
        [ -f "$d$path/cgroup.procs" ] && [ -f "$d/cgroup.controllers" ] && [ -w "$d$path" ] \
            && { printf '%s\n' "${d}${path%/}"; return; }
    done
}
CPU_GROUP_ROOT=$(cpu_group_root)
[ -z "$CPU_GROUP_ROOT" ] || CPU_WORD=cpu
# cpu_group_make NAME: a new control group for the step; prints its path,
# or nothing where none can be made.
cpu_group_make() {
    [ -n "$CPU_GROUP_ROOT" ] || return 0
    local g
    g="$CPU_GROUP_ROOT/snowflake_id-test-$$-$(step_slug "$1")"
    mkdir -p "$g" 2>/dev/null || return 0
    if [ -f "$g/cpuacct.usage" ] || [ -f "$g/cpu.stat" ]; then printf '%s\n' "$g"; else rmdir "$g" 2>/dev/null || true; fi
}
cpu_group_join() { echo "$BASHPID" > "$1/cgroup.procs" 2>/dev/null; }
cpu_group_seconds() {
    if [ -f "$1/cpuacct.usage" ]; then
        awk '{printf "%d", $1 / 1e9}' "$1/cpuacct.usage"
    else
        awk '$1 == "usage_usec" {printf "%d", $2 / 1e6}' "$1/cpu.stat"
    fi
}
# cpu_group_kill DIR: KILL every process still in the group.
cpu_group_kill() {
    local pids
    pids=$(cat "$1/cgroup.procs" 2>/dev/null || true)
    [ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
}
# cpu_group_drop DIR: remove the group (a process still in it, a server a
# step left, keeps it; the next run's groups have other names).
cpu_group_drop() { rmdir "$1" 2>/dev/null || true; }

# --- Steps side by side ------------------------------------------------------
# queue NAME NEEDS MUTEXES COMMAND...: a planned step for run_queue. NEEDS
# are the steps that must have passed first, separated by "|" ("" for
# none; if one did not pass, NAME is "not run", and why); MUTEXES are words no two running steps may
# share (a build directory, a major's extension directory, ports). The word
# "alone" runs the step with no other beside it: a step that times
# something (a first ID within 1 s, a wait of at most one TTL) keeps its
# bound on a machine no other step loads.
QUEUE=()
declare -A Q_NEEDS=() Q_MUTEX=() Q_CMD=() Q_WHY=() T_BEGIN=() T_END=()
queue() {
    local name="$1"; QUEUE+=("$name"); Q_NEEDS[$name]=$2; Q_MUTEX[$name]=$3
    shift 3; Q_CMD[$name]=$(printf '%q ' "$@")
}
# run_queue: run the queued steps, SNOWFLAKE_JOBS at a time (default 2, a
# job per core of the 2-core machine CI runs on), each as soon as what it
# needs has passed and no running step holds one of its MUTEXES, in the
# order queued (the longest first, so the run ends with short steps). With
# more than one job, a step's output goes to .run/steps/SLUG.log and is
# printed whole when it ends; with one, as it runs.
JOBS=${SNOWFLAKE_JOBS:-2}
declare -A Q_PID=()
run_queue() {
    local -A held=()
    local pending=("${QUEUE[@]}") rest name w t p f barrier launched waiting failed needs=()
    [[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || die "SNOWFLAKE_JOBS must be a whole number of at least 1, not '$JOBS'"
    if [ "$JOBS" -gt 1 ] && (( BASH_VERSINFO[0] < 5 || (BASH_VERSINFO[0] == 5 && BASH_VERSINFO[1] < 1) )); then
        log "bash $BASH_VERSION has no 'wait -n -p' (5.1 and later): the steps run one after another"
        JOBS=1
    fi
    mkdir -p "$ROOT/.run/steps"
    while [ "${#pending[@]}" -gt 0 ] || [ "${#Q_PID[@]}" -gt 0 ]; do
        rest=(); barrier=0; launched=0
        for name in "${pending[@]}"; do
            if [ "$barrier" = 1 ]; then rest+=("$name"); continue; fi
            waiting=0; failed=""
            IFS='|' read -r -a needs <<< "${Q_NEEDS[$name]}"
            for w in "${needs[@]}"; do
                [ -n "$w" ] || continue
                if [ -z "${RESULT[$w]:-}" ]; then waiting=1
                elif [ "${RESULT[$w]}" != passed ]; then failed=${failed:-$w}
                fi
            done
            if [ -n "$failed" ]; then
                not_run "$name" "${Q_WHY[$name]:-"$failed: ${RESULT[$failed]}"}"; continue
            fi
            if [ "$waiting" = 1 ]; then rest+=("$name"); continue; fi
            if [[ " ${Q_MUTEX[$name]} " == *" alone "* ]]; then
                # Nothing queued after it overtakes it while it waits.
                if [ "${#Q_PID[@]}" -gt 0 ]; then rest+=("$name"); barrier=1; continue; fi
            elif [ -n "${held[alone]:-}" ] || [ "${#Q_PID[@]}" -ge "$JOBS" ]; then
                rest+=("$name"); continue
            fi
            for t in ${Q_MUTEX[$name]}; do [ -z "${held[$t]:-}" ] || { rest+=("$name"); continue 2; }; done
            launched=1
            T_BEGIN[$name]=$((SECONDS - T_START))
            if [ "$JOBS" = 1 ]; then
                step "$name" eval "${Q_CMD[$name]}"
                T_END[$name]=$((SECONDS - T_START))
                continue
            fi
            for t in ${Q_MUTEX[$name]}; do held[$t]=$name; done
            log "started: $name"
            f=$(step_file "$name")
            rm -f "$f.result"
            ( exec > "$f.log" 2>&1
              step "$name" eval "${Q_CMD[$name]}"
              step_result "$name" > "$f.result.new"
              mv "$f.result.new" "$f.result" ) &
            Q_PID[$name]=$!
        done
        pending=("${rest[@]}")
        if [ "${#Q_PID[@]}" = 0 ]; then
            [ "$launched" = 1 ] && continue
            # Nothing runs and nothing can start: what they need never ran.
            for name in "${pending[@]}"; do not_run "$name" "${Q_NEEDS[$name]//|/, } never ran"; done
            break
        fi
        p=""
        wait -n -p p "${Q_PID[@]}" || true
        # Every runner that has ended: the one wait reported, and any other
        # that bash reaped meanwhile (wait -n reports one at a time).
        for name in "${!Q_PID[@]}"; do
            [ "${Q_PID[$name]}" = "$p" ] || ! kill -0 "${Q_PID[$name]}" 2>/dev/null || continue
            T_END[$name]=$((SECONDS - T_START))
            unset "Q_PID[$name]"
            for t in ${Q_MUTEX[$name]}; do unset "held[$t]"; done
            step_collect "$name"
        done
    done
}
# stop_queue: the run ends early (an interrupt, a die outside a step):
# stop every step still running, with its processes (TERM: their EXIT
# traps stop their servers), wait for them, and take their records,
# before the summary and the steps that must run at the end.
stop_queue() {
    local name pids=()
    [ "${#Q_PID[@]}" -gt 0 ] || return 0
    log "stopping the steps still running: ${!Q_PID[*]}"
    for name in "${!Q_PID[@]}"; do mapfile -t -O "${#pids[@]}" pids < <(step_processes "${Q_PID[$name]}"); done
    [ "${#pids[@]}" = 0 ] || kill -TERM "${pids[@]}" 2>/dev/null || true
    for name in "${!Q_PID[@]}"; do
        wait "${Q_PID[$name]}" 2>/dev/null || true
        T_END[$name]=$((SECONDS - T_START))
        step_collect "$name"
        unset "Q_PID[$name]"
    done
}
# step_result NAME: the record of a step that ran in the background, as
# lines the parent sources.
step_result() {
    local n; n=$(printf '%q' "$1")
    printf 'RESULT[%s]=%q; TOOK[%s]=%q; CPU[%s]=%q; NOTE[%s]=%q; DISK_STEP=%q\n' \
        "$n" "${RESULT[$1]:-failed}" "$n" "${TOOK[$1]:-}" "$n" "${CPU[$1]:-}" "$n" "${NOTE[$1]:-}" "${DISK_LOW:-}"
}
# step_collect NAME: a background step ended: print its output, take its
# record (none: it died, and is failed).
step_collect() {
    local f DISK_STEP=""
    f=$(step_file "$1")
    if [ -s "$f.result" ]; then
        # shellcheck disable=SC1090
        source "$f.result"
    else
        RESULT[$1]=failed; NOTE[$1]="the step's runner ended without a record (see $f.log)"
    fi
    log "---- $1: ${RESULT[$1]} after ${TOOK[$1]:-?} s; its output: ----"
    cat "$f.log" >&2 2>/dev/null || true
    log "---- end of $1 ----"
    if [ -n "$DISK_STEP" ] && { [ -z "$DISK_LOW" ] || [ "$DISK_STEP" -lt "$DISK_LOW" ]; }; then DISK_LOW=$DISK_STEP; fi
}

# step_processes ROOT: the live process ROOT and every one below it,
# parents first.
step_processes() {
    ps -e -o pid=,ppid= | awk -v root="$1" '
        { kids[$2] = kids[$2] " " $1; live[$1] = 1 }
        END {
            if (!(root in live)) exit
            print root
            n = split(kids[root], q, " ")
            for (i = 1; i <= n; i++) {
                print q[i]
                m = split(kids[q[i]], more, " ")
                for (j = 1; j <= m; j++) q[++n] = more[j]
            }
        }'
}
# step_watchdog LIMIT FILE ROOT (in the background while a step runs):
# after LIMIT seconds, write why to FILE, show what still runs, and stop
# ROOT, the step's subshell, and every process below it: TERM (its EXIT
# traps stop their servers), then KILL whatever is left after 30 s.
step_watchdog() {
    local limit="$1" file="$2" root="$3" t0=$SECONDS pids last
    while [ $((SECONDS - t0)) -lt "$limit" ]; do sleep 1; kill -0 "$root" 2>/dev/null || return 0; done
    mapfile -t pids < <(step_processes "$root")
    [ "${#pids[@]}" != 0 ] || return 0
    last=$(ps -o args= -p "${pids[-1]}" 2>/dev/null | cut -c1-160 || true)
    printf 'timed out after %s s (SNOWFLAKE_STEP_LIMIT_S); still running: %s\n' "$limit" "${last:-?}" > "$file"
    printf '\033[1;31mERROR:\033[0m the step ran past its %s s; its processes:\n' "$limit" >&2
    ps -o pid,etimes,args -p "$(IFS=,; echo "${pids[*]}")" 2>/dev/null | cut -c1-200 >&2 || true
    kill -TERM "${pids[@]}" 2>/dev/null || true
    for _ in $(seq 1 300); do
        mapfile -t pids < <(step_processes "$root")
        [ "${#pids[@]}" != 0 ] || return 0
        sleep 0.1
    done
    kill -KILL "${pids[@]}" 2>/dev/null || true
}
# reclaim_states NAME RC: give back the disk of the clusters the step made
# (state_dir records them). A run of every layer makes more than 15 GB of
# clusters, WAL and tables, and a CI machine may have less free: each
# step's are removed when it ends, so the run needs only the largest
# step's. A server a step left running is stopped first (SIGQUIT: its data
# goes). After a failure the logs stay (*.log, *.out, *.diffs, up to 64 MB
# each), for reading; the demo servers of scripts/run.sh (run-*) are never
# touched. Says how much disk the step's clusters held, and what is free.
DISK_LOW=""
reclaim_states() {
    local name="$1" rc="$2" top dir pid pidfile kb=0 k names=()
    [ -s "${SNOWFLAKE_STEP_STATES:-}" ] || return 0
    mapfile -t names < <(sort -u "$SNOWFLAKE_STEP_STATES")
    for top in "${names[@]}"; do
        dir="$VAR_TMP_DIR/$top"
        case "$top" in ""|.*|*/*|run-*) continue ;; esac
        [ -d "$dir" ] || continue
        while read -r pidfile; do
            pid=$(head -1 "$pidfile" 2>/dev/null || true)
            if [[ "$pid" =~ ^[0-9]+$ ]] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = postgres ]; then
                kill -QUIT "$pid" 2>/dev/null || true
                for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            fi
        done < <(find "$dir" -maxdepth 5 -name postmaster.pid 2>/dev/null)
        k=$(du -sk "$dir" 2>/dev/null | cut -f1); kb=$((kb + ${k:-0}))
        if [ "$rc" = 0 ]; then
            rm -rf "$dir"
        else
            find "$dir" -type f ! \( \( -name '*.log' -o -name '*.out' -o -name '*.diffs' \) -size -64M \) -delete 2>/dev/null || true
            find "$dir" -mindepth 1 -type d -empty -delete 2>/dev/null || true
        fi
    done
    k=$(df -Pk "$VAR_TMP_DIR" 2>/dev/null | awk 'NR == 2 {print $4}')
    log "$name: its clusters held $((kb / 1024)) MB on disk, given back; $(( ${k:-0} / 1024 )) MB free"
    if [ -z "$DISK_LOW" ] || [ "${k:-0}" -lt "$DISK_LOW" ]; then DISK_LOW=${k:-0}; fi
}
# not_run NAME WHY: a planned step that cannot run.
not_run() { RESULT[$1]="not run"; NOTE[$1]=$2; }
note() { printf '%s\n' "$*" > "${SNOWFLAKE_STEP_DIR:-$ROOT/.run}/step.note"; }

