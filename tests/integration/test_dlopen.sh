#!/usr/bin/env bash
# tests/integration/test_dlopen.sh — sampling a program that keeps loading and
# unloading libraries must never hang it (the loader lock held by the sampled
# thread, or its unloaded libraries). Ten recordings at 5 kHz, 60 s limit each (~1 s);
# nearly every sample must unwind to main() or loader(), also those taken
# inside dlopen/dlclose: 95 % in the runs' median, 90 % in every run. Then a
# library loaded while nothing is sampled (dlopen_late) must unwind fully,
# recorded from the start and with --delay.
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
    python3 - "$WORK/r$i.json" "$WORK/shares" <<'PY' || fail "run $i: fewer than 90 % of the samples unwound to main or loader"
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
with open(sys.argv[2], "a") as f:
    f.write("%.2f\n" % callers)
# Why a run may fall below 95 % when the median does not: most samples that
# reach neither are at the first instruction of a library's _init (the page
# fault of its first fetch, kernel time sampled at that PC), and crti.o's
# .init section has no unwind information (libz.so.1's .init at 0x3000: no
# FDE covers it). The agent's tables have a row for it (DT_INIT), but here
# such samples mostly reach libunwind, which stops there: this program
# unloads libraries before their tables are built, and after 4 of those the
# agent no longer leaves walks to the writer. How often that fault is
# sampled moves with timing: 1.5-3.0 % of samples in regular builds, and
# 5.7 % in one ASan run of CI (94.3 % under main or loader; the other nine
# 96.7-97.5 %).
sys.exit(0 if spin > 1.0 and callers >= 90.0 else 1)
PY
done
python3 - "$WORK/shares" <<'PY' || fail "the runs' median: fewer than 95 % of the samples unwound to main or loader"
import statistics, sys
shares = [float(x) for x in open(sys.argv[1])]
median = statistics.median(shares)
print("under main or loader: median %.1f %% of %d runs (least %.1f %%)" % (median, len(shares), min(shares)))
sys.exit(0 if len(shares) >= 5 and median >= 95.0 else 1)
PY
# A library loaded while nothing was sampled and run at once (dlopen_late:
# spin_c of libsplit_stripped.so, unwound by CFI only), recorded from the
# start and with --delay past the dlopen: nearly every sample must unwind
# through run_plugin to main. Before, 10 % did from the start and 7 % with
# --delay; retaking the snapshot on glibc's load count alone gave 36 % and
# 100 %: the first samples after a dlopen need _dl_find_object.
LATE="$OPPROF_BUILDDIR/tests/workloads/dlopen_late"
LIB="$OPPROF_BUILDDIR/tests/workloads/bin/libsplit_stripped.so"
[ -x "$LATE" ] && [ -f "$LIB" ] || die "workload not built ($LATE or $LIB missing; make check builds them)"
for opts in "" "--delay 0.5"; do
    # shellcheck disable=SC2086 # opts is two words or none
    record "$WORK/late" -F 1000 $opts -- "$LATE" "$LIB" 1
    [ "$RECORD_STATUS" -eq 0 ] || { fail "dlopen_late ${opts:-from the start}: exit status $RECORD_STATUS"; continue; }
    report_json "$WORK/late" "$WORK/late.json" --sort self || { fail "dlopen_late: report failed"; continue; }
    python3 - "$WORK/late.json" "${opts:-from the start}" <<'PY' || fail "dlopen_late ${opts:-from the start}: samples in the late-loaded library did not unwind to main"
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
total = lambda n: sum(r["total_pct"] for r in rows if r["name"] == n)
spin = sum(r["self_pct"] for r in rows if r["name"] == "spin_c")
print("dlopen_late %s: spin_c self %.1f %%; run_plugin total %.1f %%, main total %.1f %%"
      % (sys.argv[2], spin, total("run_plugin"), total("main")))
sys.exit(0 if spin > 50.0 and total("run_plugin") >= 95.0 and total("main") >= 95.0 else 1)
PY
    rm -rf "$WORK/late"
done
finish
