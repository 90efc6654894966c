#!/bin/sh
# test_known_split.sh — one thread of known_split (50/30/20 % in spin_a/b/c,
# spin_c in a stripped library, no frame pointers): the report must give the
# split within 2 pp, the same split as total time of phase_a/b/c, ~100 % under
# run_work and main, the right modules, and the right callers/callees.
. "$(dirname "$0")/lib.sh"
require_all

record_checked_split "$WORK/res" main --seconds "$SECONDS_OF_WORK" ||
    die "no report to check further"

# The same result grouped by module: libsplit_stripped.so has spin_c's 20 %.
if report_json "$WORK/res" "$WORK/module.json" --group-by module; then
    pycheck '
doc = load(sys.argv[1]); tol = float(sys.argv[2])
by = rows_by_name(doc)
for mod, want in (("libsplit_stripped.so", 20.0), ("known_split", 80.0)):
    r = by.get(mod)
    if not r:
        fail("group-by module: no row %s (rows %s)" % (mod, sorted(by)))
        continue
    print("module %-22s self %6.2f%% expected %5.1f%%" % (mod, r[0]["self_pct"], want))
    if abs(r[0]["self_pct"] - want) > tol:
        fail("group-by module: self %% of %s is %.2f, expected %.1f +- %.1f" % (mod, r[0]["self_pct"], want, tol))
' "$WORK/module.json" "$TOL_PP"
else
    fail "opprof report --group-by module failed"
fi

# Callers of spin_c: only phase_c. Callees of run_work: the three phases.
if report_json "$WORK/res" "$WORK/callers.json" --callers spin_c; then
    pycheck '
doc = load(sys.argv[1])
names = [r.get("name") for r in doc.get("rows", []) if r.get("samples", 0) > 0]
print("callers of spin_c: %s" % names)
if names != ["phase_c"]:
    fail("callers of spin_c are %s, expected [phase_c]" % names)
' "$WORK/callers.json"
else
    fail "opprof report --callers spin_c failed"
fi
if report_json "$WORK/res" "$WORK/callees.json" --callees run_work; then
    pycheck '
doc = load(sys.argv[1])
names = sorted(r.get("name") for r in doc.get("rows", []) if r.get("total_pct", 0) >= 1.0)
print("callees of run_work (>= 1 %%): %s" % names)
if names != ["phase_a", "phase_b", "phase_c"]:
    fail("callees of run_work are %s, expected [phase_a, phase_b, phase_c]" % names)
' "$WORK/callees.json"
else
    fail "opprof report --callees run_work failed"
fi

# The other formats render the same profile.
for fmt in text csv; do
    if limited "$OPPROF" report "$WORK/res" --format "$fmt" >"$WORK/report.$fmt" 2>"$WORK/report.$fmt.err"; then
        if grep -q spin_a "$WORK/report.$fmt" && grep -q spin_c "$WORK/report.$fmt"; then
            pass "--format $fmt shows spin_a and spin_c"
        else
            fail "--format $fmt output does not mention spin_a and spin_c"
            show "$fmt" "$WORK/report.$fmt" 10
        fi
    else
        fail "opprof report --format $fmt exited $?"
        show stderr "$WORK/report.$fmt.err"
    fi
done

# report without DIR uses the newest opprof.NNN of the current directory.
mkdir "$WORK/cwd" && cd "$WORK/cwd" || die "mkdir"
cp -r "$WORK/res" opprof.000
if limited "$OPPROF" report --format json >"$WORK/default.json" 2>"$WORK/default.err" &&
    pycheck 'd = load(sys.argv[1]); assert d.get("total_weight", 0) > 0, "no samples"' "$WORK/default.json"; then
    pass "opprof report without DIR reads ./opprof.000"
else
    fail "opprof report without DIR in a directory holding opprof.000 failed"
    show stderr "$WORK/default.err"
fi
cd "$WORK" || die "cd"

finish
