#!/usr/bin/env bash
# tests/integration/test_perf_map.sh — CPython 3.12+ under `-X perf`: the
# interpreter runs each Python function through a small trampoline in
# anonymous executable memory and names it in /tmp/perf-PID.map
# ("START SIZE py::func:file"). opprof must name those frames from the map
# (module "[perf map]") instead of showing "[anon]+0x...", and the Python
# split of py_split.py (50/30/20 among spin_a/b/c, tests/workloads) must
# stay within TOL_PP with the trampolines on the stack.
# The same recording reported once more with the map moved away shows the
# "[anon]" frames: the names came from the map, not from somewhere else.
# Runs under every pyenv interpreter 3.12+ this machine has; none: SKIP.
. "$(dirname "$0")/lib.sh"

require_python3
require_opprof
make_workdir

PERF_MAPS=()
cleanup_maps() {
    # The maps the workloads wrote (CPython leaves them behind).
    for m in "${PERF_MAPS[@]}"; do rm -f "$m"; done
}
trap 'cleanup_maps; _cleanup' EXIT

PYENV_ROOT_DIR=$(pyenv_root_dir)
[ -n "$PYENV_ROOT_DIR" ] && [ -d "$PYENV_ROOT_DIR/versions" ] ||
    skip "no pyenv interpreters (pyenv root not found): -X perf needs CPython 3.12+"

# check_perf LABEL PYTHON
check_perf() {
    local label=$1 py=$2 res="$WORK/res-$1" try
    for try in 1 2; do
        rm -rf "$res"
        record "$res" -F "$SPLIT_FREQ" -- "$py" -X perf "$OPPROF_SRCDIR/tests/workloads/py_split.py" "$SECONDS_OF_WORK"
        if [ "$RECORD_STATUS" -ne 0 ]; then
            fail "$label: py_split.py under -X perf failed under opprof record (exit $RECORD_STATUS)"
            return
        fi
        local pid
        pid=$(ls "$res" | sed -n 's/^proc-\([0-9]*\)-[0-9]*\.raw$/\1/p' | head -n 1)
        local map="/tmp/perf-$pid.map"
        PERF_MAPS+=("$map")
        if [ -z "$pid" ] || [ ! -s "$map" ]; then
            fail "$label: no perf map $map written by the interpreter under -X perf"
            return
        fi
        if ! limited "$OPPROF" export "$res" --folded "$res.folded" >"$res.export.out" 2>&1 ||
            ! report_json "$res" "$res.py.json" --group-by python; then
            fail "$label: opprof export --folded or report failed"
            return
        fi
        # Control: without the map, the same frames are anonymous.
        mv "$map" "$WORK/hidden.map"
        limited "$OPPROF" export "$res" --folded "$res.nomap.folded" >/dev/null 2>&1
        mv "$WORK/hidden.map" "$map"
        if python3 - "$label" "$res.folded" "$res.nomap.folded" "$res.py.json" "$TOL_PP" "$map" <<'PY'
import json, re, sys
label, tol = sys.argv[1], float(sys.argv[5])
def frames(path):
    named, anon, samples = {}, 0, 0
    for line in open(path):
        stack, _, count = line.rstrip("\n").rpartition(" ")
        samples += int(count)
        for f in stack.split(";"):
            if f.startswith("py::"):
                key = f.split(" (")[0]
                named[key] = named.get(key, 0) + int(count)
            elif f.startswith("[anon]"):
                anon += int(count)
    return named, anon, samples
named, anon, samples = frames(sys.argv[2])
_, anon_without, _ = frames(sys.argv[3])
entries = sum(1 for _ in open(sys.argv[6]))
print("%s: %d perf map entries; with the map: %d frames named py::..., %d [anon] frames; "
      "without it: %d [anon] frames (%d samples)" % (label, entries, sum(named.values()), anon, anon_without, samples))
top = sorted(named.items(), key=lambda kv: -kv[1])[:4]
print("%s: most seen: %s" % (label, ", ".join("%s x%d" % kv for kv in top)))
bad = []
if anon:
    bad.append("%d frames are still [anon] with the map there" % anon)
if not named or anon_without == 0:
    bad.append("no trampoline frame on the stacks (named %d, anonymous without the map %d)" % (len(named), anon_without))
if not any(re.match(r"py::(run_work|spin_[abc]|body):.*py_split\.py$", k) for k in named):
    bad.append("no trampoline of py_split.py's functions named")
by = {r["name"]: r for r in json.load(open(sys.argv[4]))["rows"]}
rw = by.get("run_work", {}).get("total_ns", 0)
got = {n: (100.0 * by.get(n, {"total_ns": 0})["total_ns"] / rw if rw else 0.0) for n in ("spin_a", "spin_b", "spin_c")}
print("%s: split spin_a/spin_b/spin_c = %.2f / %.2f / %.2f %% (truth 50 / 30 / 20 +- %.1f), run_work %.1f %%"
      % (label, got["spin_a"], got["spin_b"], got["spin_c"], tol, by.get("run_work", {}).get("total_pct", 0)))
if by.get("run_work", {}).get("total_pct", 0) < 90:
    bad.append("run_work holds under 90 % of the samples")
bad += ["%s %.2f" % (n, got[n]) for n, t in (("spin_a", 50.0), ("spin_b", 30.0), ("spin_c", 20.0)) if abs(got[n] - t) > tol]
if bad:
    print("%s: %s" % (label, "; ".join(bad)))
sys.exit(1 if bad else 0)
PY
        then
            pass "$label -X perf: trampolines named from the perf map, split within ${TOL_PP} pp"
            return
        fi
        log "note: $label: attempt $try failed (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
    done
    fail "$label -X perf: trampoline names or the split wrong on both attempts (see above)"
}

RAN=0
for dir in "$PYENV_ROOT_DIR"/versions/3.*; do
    ver=$(basename "$dir")
    minor=$(echo "$ver" | cut -d. -f2)
    case "$ver" in *t | *-*) continue ;; esac
    [ "$minor" -ge 12 ] 2>/dev/null || continue
    py="$dir/bin/python3.$minor"
    [ -x "$py" ] || { fail "pyenv $ver: $py is missing"; continue; }
    probe=$("$py" -X perf -c 'import os, sys; print(os.getpid(), int(sys.is_stack_trampoline_active()))' 2>/dev/null)
    PERF_MAPS+=("/tmp/perf-${probe%% *}.map")
    if [ "${probe#* }" != 1 ]; then
        log "SKIP part: pyenv $ver: -X perf is not available in this build (sys.is_stack_trampoline_active() false)"
        continue
    fi
    RAN=$((RAN + 1))
    check_perf "pyenv-$ver" "$py"
done
[ "$RAN" -gt 0 ] || [ "$FAILURES" -gt 0 ] || skip "no pyenv CPython 3.12+ with -X perf support here"
finish
