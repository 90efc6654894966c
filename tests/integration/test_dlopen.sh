#!/usr/bin/env bash
# tests/integration/test_dlopen.sh — sampling a program that keeps loading and
# unloading libraries must never hang it (the loader lock held by the sampled
# thread, or its unloaded libraries). Ten recordings at 5 kHz, 60 s limit each (~1 s);
# spin() must still be the hottest function, with its full stack.
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
    python3 - "$WORK/r$i.json" <<'PY' || fail "run $i: spin is not the hottest function"
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
top = max(rows, key=lambda r: r["self_ns"])
main = [r for r in rows if r["name"] == "main"]
print("top self: %s %.1f %%; main total %.1f %%" % (top["name"], top["self_pct"], main[0]["total_pct"] if main else 0))
sys.exit(0 if top["name"] == "spin" and main and main[0]["total_pct"] > 40 else 1)
PY
done
finish
