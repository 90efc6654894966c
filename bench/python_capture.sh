#!/bin/sh
# bench/python_capture.sh — instructions per capture of the handler's Python
# stack capture (agent_python_capture: the frame walk with the thread's
# memos and the reads' checks), counted by valgrind --tool=callgrind in a
# running interpreter: bench/python_capture.c built as a library, preloaded
# (its thread-local memos need static TLS, as the agent's do) and called by
# bench/python_capture.py at fixed places. A figure that load does not move.
#
#   bench/python_capture.sh [PYTHON ...]     # default: python3 on PATH
#   CAPTURES=2000                            # captures per scenario
#
# Each interpreter first runs every scenario outside valgrind with --check
# (each capture against Python's own view of the stack); a difference stops
# the bench. Needs gcc and valgrind; builds into a temp dir, touches nothing
# else.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/python_capture.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
command -v valgrind >/dev/null || { echo "python_capture: valgrind not found" >&2; exit 77; }
[ $# -gt 0 ] || set -- python3
n=${CAPTURES:-2000}
: >"$tmp/config.h" # only its feature macros are needed; an empty one does here
# the handler's code as the agent builds it (-O2, initial-exec TLS); the
# sections nothing here calls (the stream writer's) are left out
${CC:-gcc} -std=gnu11 -O2 -g -fPIC -shared -fvisibility=hidden -ftls-model=initial-exec \
    -ffunction-sections -fdata-sections -Wl,--gc-sections -Wl,-z,defs -D_GNU_SOURCE -I"$src" -I"$tmp" \
    "$src/bench/python_capture.c" "$src/sampler/agent/agent_python.c" "$src/sampler/agent/agent_memmap.c" \
    "$src/sampler/common/python_walk.c" "$src/sampler/common/python_code.c" \
    "$src/sampler/common/python_linetable.c" "$src/sampler/common/python_debug_offsets.c" \
    "$src/format/stream_process.c" -o "$tmp/python_capture.so" -ldl
lib=$tmp/python_capture.so
driver=$src/bench/python_capture.py
echo "instructions per capture (callgrind; $n captures a scenario, each checked first against Python's stack)"
printf '  %-8s %10s %10s %10s %10s  %s\n' CPython operator loop fresh switch interpreter
for py in "$@"; do
    row=""
    for s in operator loop fresh switch; do
        LD_PRELOAD=$lib "$py" "$driver" "$lib" "$s" 300 --check >"$tmp/check.out" 2>&1 ||
            { cat "$tmp/check.out" >&2; echo "python_capture: $py $s: the capture differs from Python's stack" >&2; exit 1; }
        LD_PRELOAD=$lib valgrind --tool=callgrind --toggle-collect=agent_python_capture \
            --callgrind-out-file="$tmp/cg.out" "$py" "$driver" "$lib" "$s" "$n" >"$tmp/run.out" 2>"$tmp/valgrind.err" ||
            { cat "$tmp/valgrind.err" "$tmp/run.out" >&2; exit 1; }
        done_n=$(sed -n 's/^captures \([0-9]*\) frames \([0-9.]*\)$/\1/p' "$tmp/run.out")
        frames=$(sed -n 's/^captures \([0-9]*\) frames \([0-9.]*\)$/\2/p' "$tmp/run.out")
        # the total of the events collected: agent_python_capture and what it calls
        ir=$(sed -n 's/^summary: *\([0-9]*\).*/\1/p' "$tmp/cg.out")
        [ -n "$ir" ] && [ -n "$done_n" ] && [ "$done_n" -gt 0 ] ||
            { cat "$tmp/run.out" >&2; echo "python_capture: could not read the counts" >&2; exit 1; }
        row="$row $(awk -v i="$ir" -v n="$done_n" -v f="$frames" 'BEGIN { printf "%6.0f/%-4.1f", i / n, f }')"
    done
    ver=$("$py" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')
    printf '  %-8s%s  %s\n' "$ver" "$row" "$py"
done
echo "  (instructions / mean frames captured; operator: the same stack again, loop: the innermost frame moves,"
echo "   fresh: a new code object innermost each time, switch: two 40-frame generator chains in turn)"
