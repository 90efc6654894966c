#!/usr/bin/env bash
# tests/integration/test_dlopen.sh — sampling a program that keeps loading and
# unloading libraries must never hang it (the loader lock held by the sampled
# thread, or its unloaded libraries). Ten recordings at 5 kHz, 60 s limit each (~1 s);
# nearly every sample (95 %) must unwind to main() or loader(), also those
# taken inside dlopen/dlclose.
. "$(dirname "$0")/lib.sh"
HAMMER="$OPPROF_BUILDDIR/tests/workloads/dlopen_hammer"
require_python3
require_opprof
[ -x "$HAMMER" ] || die "workload not built ($HAMMER missing; make check builds it)"
make_workdir
RECORD_HANG_OK=1
for i in 1 2 3 4 5 6 7 8 9 10; do
    record "$WORK/r$i" -F 5000 -- "$HAMMER"
    [ "$RECORD_STATUS" -eq 0 ] || { fail "run $i: exit status $RECORD_STATUS"; continue; }
    report_json "$WORK/r$i" "$WORK/r$i.json" --sort self || { fail "run $i: report failed"; continue; }
    python3 - "$WORK/r$i.json" <<'PY' || fail "run $i: fewer than 95 % of the samples unwound to main or loader"
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
def total(name):
    return sum(r["total_pct"] for r in rows if r["name"] == name)
spin = sum(r["self_pct"] for r in rows if r["name"] == "spin")
# main() spins in the main thread; loader() in the two other threads
# dlopens, dlcloses (most of its time is the kernel's mmap/munmap, sampled
# since opprof samples kernel time too) and spins a little. The CPU split
# between the threads depends on the machine's load, so the check is on the
# stacks: nearly every sample (all but thread start-up and exit) unwinds to
# main or loader, whatever it was doing in the loader, and spin() has samples.
callers = total("main") + total("loader")
print("spin self %.1f %%; main total %.1f %%, loader total %.1f %%: %.1f %% of samples under main or loader"
      % (spin, total("main"), total("loader"), callers))
sys.exit(0 if spin > 1.0 and callers >= 95.0 else 1)
PY
done
finish
