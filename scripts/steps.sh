# shellcheck shell=bash
# The steps of scripts/test.sh and their summary. Source it after lib.sh;
# tests/lint/steps.sh tests it.
#   plan NAME                 a step this run means to take
#   step NAME COMMAND...      run it (a failure ends the step, not the run)
#   not_run NAME WHY          a planned step that cannot run
#   note TEXT                 (inside a step) the summary's note for it
#   at_exit NAME FUNCTION     step NAME (planned) must run even when the
#                             run ends early: the summary runs it if the
#                             run did not (a die outside a step, an
#                             interrupt)
#   trap summary EXIT         the summary, always, and the exit status
# The summary gives each step's wall time and the CPU time the machine
# spent while it ran (all processes, servers included: /proc/stat), then
# the steps that set the total (the run is sequential: the longest ones,
# to a half of it), and flags a step that took more than twice the time
# recorded for it in tests/README.md's table "Step times" (a flag, not a
# failure: the machine is noisy; issue 64).
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
summary() {
    local rc=$? s n_pass=0 n_fail=0 n_skip=0 n_not=0 r i
    trap - EXIT
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
            "${CPU[$s]:+cpu ${CPU[$s]} s}" "$flag" "${NOTE[$s]:-}" >&2
        total=$((total + ${TOOK[$s]:-0}))
    done
    [ "$n_not" = 0 ] || printf '  %s step(s) not run\n' "$n_not" >&2
    [ "$slow" = 0 ] || printf '  %s step(s) took over twice their recorded time (tests/README.md, "Step times"): a flag, not a failure\n' "$slow" >&2
    # The steps run one after another: the longest set the total.
    if [ "$total" -gt 0 ]; then
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
# ends the step, not the run; `set -e` holds inside it), and record passed / failed / skipped (an
# integration script that called skip_test), its duration, and the first
# line of .run/step.note as its note.
step() {
    local name="$1" t0=$SECONDS rc wd c0; shift
    c0=$(cpu_ticks)
    rm -f "$ROOT/.run/skipped" "$ROOT/.run/step.note" "$ROOT/.run/step.why"
    mkdir -p "$VAR_TMP_DIR" "$ROOT/.run"
    export SNOWFLAKE_STEP_WHY="$ROOT/.run/step.why"
    export SNOWFLAKE_STEP_STATES="$VAR_TMP_DIR/.step-states"
    : > "$SNOWFLAKE_STEP_STATES"
    rm -f "$ROOT/.run/step.timeout"
    step_watchdog "$STEP_LIMIT_S" "$ROOT/.run/step.timeout" &
    wd=$!
    set +e
    (set -e; "$@")
    rc=$?
    kill "$wd" 2>/dev/null
    wait "$wd" 2>/dev/null
    set -e
    [ ! -s "$ROOT/.run/step.timeout" ] || rc=124
    reclaim_states "$name" "$rc"
    unset SNOWFLAKE_STEP_STATES SNOWFLAKE_STEP_WHY
    TOOK[$name]=$((SECONDS - t0))
    CPU[$name]=$(( ($(cpu_ticks) - c0) / CLK_TCK ))
    if [ $rc != 0 ]; then
        RESULT[$name]=failed
        # Why, in the summary: its time-out, or else the first die of the
        # step, if any.
        if [ -s "$ROOT/.run/step.timeout" ]; then
            NOTE[$name]=$(head -1 "$ROOT/.run/step.timeout" | cut -c1-300)
        elif [ -s "$ROOT/.run/step.why" ]; then
            NOTE[$name]=$(head -1 "$ROOT/.run/step.why" | tr -d '\033' | cut -c1-300)
        fi
        log "FAILED: $name (exit $rc, after ${TOOK[$name]} s); the run goes on"
    elif [ -f "$ROOT/.run/skipped" ]; then
        RESULT[$name]=skipped; NOTE[$name]=$(head -1 "$ROOT/.run/skipped")
    else
        RESULT[$name]=passed
        [ ! -f "$ROOT/.run/step.note" ] || NOTE[$name]=$(head -1 "$ROOT/.run/step.note")
    fi
}
# step_processes: every live process below this script except the
# watchdog's own ($1), parents first.
step_processes() {
    ps -e -o pid=,ppid= | awk -v root="$$" -v skip="$1" '
        { kids[$2] = kids[$2] " " $1 }
        END {
            n = split(kids[root], q, " ")
            for (i = 1; i <= n; i++) {
                if (q[i] == skip) continue
                print q[i]
                m = split(kids[q[i]], more, " ")
                for (j = 1; j <= m; j++) q[++n] = more[j]
            }
        }'
}
# step_watchdog LIMIT FILE (in the background while a step runs): after
# LIMIT seconds, write why to FILE, show what still runs, and stop every
# process of the step: TERM (its EXIT traps stop their servers), then KILL
# whatever is left after 30 s.
step_watchdog() {
    local limit="$1" file="$2" me=$BASHPID t0=$SECONDS pids last
    while [ $((SECONDS - t0)) -lt "$limit" ]; do sleep 1; done
    mapfile -t pids < <(step_processes "$me")
    [ "${#pids[@]}" != 0 ] || return 0
    last=$(ps -o args= -p "${pids[-1]}" 2>/dev/null | cut -c1-160 || true)
    printf 'timed out after %s s (SNOWFLAKE_STEP_LIMIT_S); still running: %s\n' "$limit" "${last:-?}" > "$file"
    printf '\033[1;31mERROR:\033[0m the step ran past its %s s; its processes:\n' "$limit" >&2
    ps -o pid,etimes,args -p "$(IFS=,; echo "${pids[*]}")" 2>/dev/null | cut -c1-200 >&2 || true
    kill -TERM "${pids[@]}" 2>/dev/null || true
    for _ in $(seq 1 300); do
        mapfile -t pids < <(step_processes "$me")
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
note() { printf '%s\n' "$*" > "$ROOT/.run/step.note"; }

