#!/bin/sh
# bench/unwind_callgrind.sh — instructions per stack walk of the agent's table
# unwinder beside libunwind's unw_backtrace, on the same stacks (see
# bench/unwind_bench.c), counted by valgrind --tool=callgrind: instruction
# counts do not depend on the machine's load, so the ratio is repeatable.
#
#   bench/unwind_callgrind.sh [ITERATIONS]   # walks each way per stack (default 200)
#
# Needs gcc, valgrind (callgrind_annotate) and libunwind's headers; run from
# the source tree or anywhere (it finds the tree from its own path). Builds
# into a temp dir; nothing else is touched.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
iter=${1:-200}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/unwind_bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
command -v valgrind >/dev/null || { echo "unwind_callgrind: valgrind not found" >&2; exit 77; }
# config.h is only needed for its feature macros; an empty one does here.
: >"$tmp/config.h"
# The handler's code as the agent builds it (-O2, no frame pointers needed);
# the bench's own stacks without frame pointers.
${CC:-gcc} -std=gnu11 -O2 -g -D_GNU_SOURCE -fomit-frame-pointer -fno-optimize-sibling-calls \
    -I"$src" -I"$tmp" $(pkg-config --cflags libunwind 2>/dev/null || true) \
    "$src/bench/unwind_bench.c" "$src/sampler/agent/unwind_table.c" "$src/sampler/agent/unwind_sample.c" "$src/sampler/agent/unwind_compile.c" "$src/sampler/agent/unwind_build.c" "$src/sampler/agent/unwind_cache.c" "$src/sampler/agent/unwind_defer.c" \
    -o "$tmp/unwind_bench" $(pkg-config --libs libunwind 2>/dev/null || echo -lunwind) -ldl
"$tmp/unwind_bench" "$iter" # outside valgrind: both walks give the same stacks
valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" "$tmp/unwind_bench" "$iter" \
    >"$tmp/bench.out" 2>"$tmp/valgrind.err" || { cat "$tmp/valgrind.err" >&2; exit 1; }
callgrind_annotate --inclusive=yes --threshold=100 "$tmp/cg.out" >"$tmp/annotate.txt" 2>"$tmp/annotate.err"
# walks per function: from the bench's own line (stacks x iterations)
walks=$(sed -n 's/.*, \([0-9]*\) table walks, .*/\1/p' "$tmp/bench.out")
cold_walks=$(sed -n 's/.*, \([0-9]*\) cold libunwind walks, .*/\1/p' "$tmp/bench.out")
ir_of() { # inclusive Ir of function $1 (callgrind_annotate prints "1,234 (5%)  file:func")
    awk -v f="$1" '$0 ~ (":" f "([ .]|$)") { gsub(",", "", $1); print $1; exit }' "$tmp/annotate.txt"
}
tables=$(ir_of walk_tables)
rules=$(ir_of walk_rules)
memo=$(ir_of walk_memo)
libunwind=$(ir_of walk_libunwind)
cold=$(ir_of walk_libunwind_cold)
cat "$tmp/bench.out"
if [ -z "$tables" ] || [ -z "$libunwind" ] || [ -z "$walks" ] || [ "$walks" -eq 0 ]; then
    echo "unwind_callgrind: could not read the counts (see $tmp/annotate.txt)" >&2
    trap - EXIT
    exit 1
fi
awk -v t="$tables" -v r="${rules:-0}" -v m="${memo:-0}" -v l="$libunwind" -v w="$walks" -v c="${cold:-0}" -v cw="${cold_walks:-1}" 'BEGIN {
    printf "instructions per stack walk (callgrind, the same stacks):\n"
    printf "  table unwinder                    %10.0f\n", t / w
    printf "  handler, rule cache, memo off     %10.0f  (x%.2f of the tables; a stack unlike the previous one)\n", r / w, r / t
    printf "  table unwinder with the memo      %10.0f  (x%.2f of the tables; same leaf each time: the best case)\n", m / w, m / t
    printf "  libunwind, trace cache hot        %10.0f  (x%.2f of the tables)\n", l / w, l / t
    printf "  libunwind, caches flushed         %10.0f  (x%.2f of the tables)\n", c / cw, (c / cw) / (t / w)
}'
