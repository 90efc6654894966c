#!/bin/sh
# bench/unwind_replay.sh — instructions per sample of the handler's stack walk
# on recorded stacks: a real run's samples (perf record --call-graph dwarf
# keeps each one's registers and the top of its stack) walked again by the
# agent's table unwinder in bench/unwind_replay.c, under valgrind
# --tool=callgrind, which counts instructions: a figure that does not move
# with the machine's load, on the stacks a profile of that program meets.
#
#   bench/unwind_replay.sh [PERF_DATA]   # default: records REPLAY_COMMAND first
#   REPLAY_COMMAND="/usr/bin/python3 tests/workloads/torch_train.py --steps 20"
#   REPLAY_STACK=32768                   # stack bytes kept per sample
#   REPLAY_COLD="2 16 64"                # MB passed over before each timed walk ("": none)
#
# Needs perf (software events are enough: task-clock), gcc and valgrind;
# run from anywhere (it finds the tree from its own path). Builds and
# records into a temp dir; nothing else is touched. The files the recording
# mapped must be unchanged when a PERF_DATA is given (tables are compiled
# from them).
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/unwind_replay.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
command -v valgrind >/dev/null || { echo "unwind_replay: valgrind not found" >&2; exit 77; }
command -v perf >/dev/null || { echo "unwind_replay: perf not found" >&2; exit 77; }
data=${1:-}
if [ -z "$data" ]; then
    cmd=${REPLAY_COMMAND:-/usr/bin/python3 $src/tests/workloads/torch_train.py --steps 20}
    data=$tmp/stacks.data
    # the agent's default timer: the task clock, a sample each 1 ms of CPU
    # shellcheck disable=SC2086 # the command's words
    perf record -q -e task-clock -c 1000000 --call-graph "dwarf,${REPLAY_STACK:-32768}" -o "$data" \
        -- $cmd >"$tmp/record.out" 2>&1 || { cat "$tmp/record.out" >&2; echo "unwind_replay: perf record failed" >&2; exit 77; }
    echo "recorded: $cmd"
fi
: >"$tmp/config.h" # only its feature macros are needed; an empty one does here
# the handler's code as the agent builds it (-O2)
${CC:-gcc} -std=gnu11 -O2 -g -D_GNU_SOURCE -I"$src" -I"$tmp" \
    "$src/bench/unwind_replay.c" "$src/sampler/agent/unwind_table.c" "$src/sampler/agent/unwind_sample.c" \
    "$src/sampler/agent/unwind_compile.c" "$src/sampler/agent/unwind_build.c" "$src/sampler/agent/unwind_cache.c" \
    "$src/sampler/agent/unwind_defer.c" \
    -o "$tmp/unwind_replay" $(pkg-config --libs libunwind 2>/dev/null || echo -lunwind) -ldl -lm
"$tmp/unwind_replay" "$data" # outside valgrind: the handler's walks against the plain ones
# and timed, outside valgrind, after passing over MB of other memory each
for mb in ${REPLAY_COLD-2 16 64}; do
    "$tmp/unwind_replay" --cold "$mb" "$data" | grep -e '^unwind_replay: cold' -e "^unwind_replay: a cold"
done
valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" "$tmp/unwind_replay" "$data" \
    >"$tmp/replay.out" 2>"$tmp/valgrind.err" || { cat "$tmp/valgrind.err" "$tmp/replay.out" >&2; exit 1; }
callgrind_annotate --inclusive=yes --threshold=100 "$tmp/cg.out" >"$tmp/annotate.txt" 2>"$tmp/annotate.err"
walks=$(sed -n 's/^unwind_replay: \([0-9]*\) walks$/\1/p' "$tmp/replay.out")
ir_of() { # inclusive Ir of function $1 (callgrind_annotate prints "1,234 (5%)  file:func")
    awk -v f="$1" '$0 ~ (":" f "([ .]|$)") { gsub(",", "", $1); print $1; exit }' "$tmp/annotate.txt"
}
handler=$(ir_of walk_handler)
plain=$(ir_of walk_plain)
if [ -z "$handler" ] || [ -z "$plain" ] || [ -z "$walks" ] || [ "$walks" -eq 0 ]; then
    cat "$tmp/replay.out" >&2
    echo "unwind_replay: could not read the counts (see $tmp/annotate.txt)" >&2
    trap - EXIT
    exit 1
fi
grep -v ' walks$' "$tmp/replay.out" | grep -v '^  stopped at' | sed 's/^/under valgrind: /' | head -2
awk -v h="$handler" -v p="$plain" -v w="$walks" 'BEGIN {
    printf "instructions per sample (callgrind, %d recorded stacks walked in order):\n", w
    printf "  handler walk (memo, rule cache)   %10.0f\n", h / w
    printf "  plain table walk                  %10.0f  (x%.2f of the handler walk)\n", p / w, p / h
}'
