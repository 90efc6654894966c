#!/bin/sh
# bench/handler_callgrind.sh — instructions per call of the agent's whole
# signal handler (the stack walk, the Python frames, the queue) on a real
# workload, counted by valgrind --tool=callgrind: a figure that does not move
# with the machine's load. Beside another build's in the same run when given.
#
#   bench/handler_callgrind.sh BUILDDIR [OLD_BUILDDIR]
#   HANDLER_COMMAND="/usr/bin/python3 tests/workloads/py_split.py"
#
# The workload runs under `opprof record --timer tick -- valgrind ...`: the
# agent is preloaded into the program valgrind runs, and valgrind delivers
# the thread CPU-time timer's signal to the agent's handler (the default
# timer's synchronous SIGTRAP from a perf event is fatal to valgrind, so
# --timer tick is the one this can count; the handler's work is the same).
# callgrind collects only inside agent_handle_sample (--toggle-collect);
# its inclusive counts divided by the samples recorded give instructions
# per handler call, split into the native stack walk (agent_unwind_sample),
# the Python frames (agent_python_capture) and the rest. Needs valgrind and
# callgrind_annotate; slow (the workload runs ~50x slower). A run valgrind
# aborts (or that runs past HANDLER_TIMEOUT seconds, default 600) is run
# again, HANDLER_ATTEMPTS times at most (default 4).
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 1 ] || { echo "usage: bench/handler_callgrind.sh BUILDDIR [OLD_BUILDDIR]" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "handler_callgrind: valgrind not found" >&2; exit 77; }
cmd=${HANDLER_COMMAND:-/usr/bin/python3 $src/tests/workloads/py_split.py}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/handler_callgrind.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# one build: prints "label calls total unwind python"
measure() {
    label=$1 build=$2
    [ -x "$build/opprof" ] || { echo "handler_callgrind: $build/opprof not built" >&2; exit 2; }
    attempt=1
    while :; do
        rm -rf "$tmp/res" "$tmp"/cg.*
        # (timeout: a run valgrind hangs in, its signal queue full, is one of those below)
        # shellcheck disable=SC2086 # the command's words
        if timeout -k 10 "${HANDLER_TIMEOUT:-600}" "$build/opprof" record -q --timer tick -o "$tmp/res" -- \
            valgrind --tool=callgrind \
            --toggle-collect=agent_handle_sample --callgrind-out-file="$tmp/cg.%p" $cmd >"$tmp/run.out" 2>&1; then
            break
        fi
        # valgrind 3.19 sometimes asserts when a signal handler's system
        # call meets one the signal interrupted (syswrap-main.c:
        # "sci->status.what == SsIdle"), or hangs, more often on a busy
        # machine
        if [ $attempt -ge "${HANDLER_ATTEMPTS:-4}" ]; then
            tail -20 "$tmp/run.out" >&2
            echo "handler_callgrind: the run failed $attempt times" >&2
            exit 1
        fi
        attempt=$((attempt + 1))
    done
    calls=$("$build/opprof" report "$tmp/res" --format text 2>/dev/null | sed -n 's/^  samples *\([0-9]*\) .*/\1/p' | head -1)
    # every process's counts (a launcher's, children's) add up
    for f in "$tmp"/cg.*; do callgrind_annotate --inclusive=yes "$f" 2>/dev/null; done >"$tmp/annotate.txt"
    sum_of() {
        awk -v f="$1" '$0 ~ (":" f "([ .]|$)") { gsub(",", "", $1); s += $1 } END { print s + 0 }' "$tmp/annotate.txt"
    }
    echo "$label ${calls:-0} $(sum_of agent_handle_sample) $(sum_of agent_unwind_sample) $(sum_of agent_python_capture)"
}

{
    measure new "$1"
    [ $# -lt 2 ] || measure old "$2"
} >"$tmp/rows"
echo "workload: $cmd (record --timer tick, under valgrind --tool=callgrind)"
awk '{
    if ($2 == 0) { printf "%-5s no samples recorded\n", $1; next }
    printf "%-5s %6d handler calls: %7.0f instructions each (stack walk %6.0f, Python frames %6.0f, the rest %5.0f)\n",
        $1, $2, $3 / $2, $4 / $2, $5 / $2, ($3 - $4 - $5) / $2
    per[$1] = $3 / $2
} END { if (per["old"] > 0) printf "new/old x%.3f\n", per["new"] / per["old"] }' "$tmp/rows"
