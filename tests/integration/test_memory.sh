#!/bin/bash
# test_memory.sh — memory over time (issue 19): peak RSS, growth charged to
# the function / Python line that grew it, and the memory counter tracks of
# the Chrome trace and HTML exports.
#
# Ground truth:
#   mem_grow --mb 256 writes 256 MiB of fresh anonymous pages in grow_here
#   (nothing else in the program allocates more than a few pages), so the RSS
#   growth charged to grow_here must be 256 MiB +- 10 %; its peak RSS is
#   checked against /usr/bin/time -v's "Maximum resident set size" of the same
#   run (+- 5 %). time -v reports the wait4 rusage of `opprof record`, whose
#   maximum RSS is the largest of opprof's own and its reaped children's: the
#   workload (256 MiB) is by far the largest, so it is the workload's peak as
#   the kernel counted it, under opprof. The workload's own getrusage ru_maxrss
#   (printed at exit; the same kernel counter from inside) must agree too.
#   A Python program (/usr/bin/python3) appends 192 one-MiB bytes objects on
#   one line: that line must be charged 192 MiB +- 10 %.
# Why 10 % holds on a busy machine: growth is charged per ~10 ms interval to
# the samples in it, so only the two intervals where grow_here starts and
# ends can give some of it to a neighbour; the growth is spread over >= 0.7 s
# of the thread's CPU time (3 ms of arithmetic per MiB, measured in thread CPU
# time, so load stretches wall time but not the work), so those two
# intervals hold a few % of it at most. The release (one munmap, a few
# microseconds) is not checked: a change faster than a sample period is
# shared by the samples around it (docs/guide.md says so).
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
require_python3
require_opprof
MEM_GROW="$OPPROF_BUILDDIR/tests/workloads/mem_grow"
[ -x "$MEM_GROW" ] || skip "workload not built ($MEM_GROW missing; run make check)"
make_workdir

MB=256
TIME_TXT="$WORK/time.txt"
if [ -x /usr/bin/time ]; then
    log "+ /usr/bin/time -v opprof record -o $WORK/mg -- mem_grow --mb $MB"
    limited /usr/bin/time -v -o "$TIME_TXT" "$OPPROF" record -o "$WORK/mg" -- "$MEM_GROW" --mb "$MB" \
        >"$WORK/mg.out" 2>"$WORK/mg.err"
    st=$?
else
    log "note: /usr/bin/time missing: the peak is checked against the workload's own ru_maxrss only"
    : >"$TIME_TXT"
    limited "$OPPROF" record -o "$WORK/mg" -- "$MEM_GROW" --mb "$MB" >"$WORK/mg.out" 2>"$WORK/mg.err"
    st=$?
fi
show stderr "$WORK/mg.err" 4
[ "$st" -eq 0 ] || die "opprof record of mem_grow exited $st"

limited "$OPPROF" report "$WORK/mg" --memory --format json >"$WORK/mg.json" 2>"$WORK/report.err" ||
    { show stderr "$WORK/report.err"; die "opprof report --memory --format json failed"; }
limited "$OPPROF" report "$WORK/mg" --memory --format csv >"$WORK/mg.csv" 2>>"$WORK/report.err" ||
    die "opprof report --memory --format csv failed"
limited "$OPPROF" report "$WORK/mg" --memory >"$WORK/mg.txt" 2>>"$WORK/report.err" ||
    die "opprof report --memory failed"
show report "$WORK/mg.txt" 14
limited "$OPPROF" export "$WORK/mg" --chrome-trace "$WORK/mg.trace.json" --html "$WORK/mg.html" \
    2>"$WORK/export.err" || { show stderr "$WORK/export.err"; die "opprof export failed"; }

pycheck '
doc = load(sys.argv[1])["memory"]
mb, time_txt, err_txt, csv_path = int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
procs = doc["processes"]
if len(procs) != 1:
    fail("expected 1 process with readings, got %d" % len(procs)); sys.exit(failures)
p = procs[0]
peak = p["peak_rss_bytes"]
print("opprof: peak RSS %.1f MiB at %.2f s, kernel peak %.1f MiB, %d readings, %d minor / %d major faults"
      % (peak / 2**20, p["peak_s"], p["kernel_peak_bytes"] / 2**20, len(p["readings"]), p["minor_faults"],
         p["major_faults"]))
# The peak is the workload alone: the resident memory of the agent (its
# sample ring, ~12-14 MiB once filled, and unwind tables) is left out of it.
# The references below are of the whole process (the agent lives in it), so
# the peak plus the agent bytes at that reading is what they must match.
agent = p.get("agent_at_peak_bytes", 0)
whole = peak + agent
print("memory of the agent itself at the peak: %.1f MiB (left out of the peak)" % (agent / 2**20))
m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(time_txt).read())
if m:
    tv = int(m.group(1)) * 1024
    err = abs(whole - tv) / tv
    (ok if err <= 0.05 else fail)("peak RSS %.1f MiB + the agent %.1f MiB vs /usr/bin/time -v %.1f MiB: %.2f %% apart (<= 5 %%)"
                                  % (peak / 2**20, agent / 2**20, tv / 2**20, 100 * err))
m = re.search(r"mem_grow: mb=(\d+) grown_bytes=(\d+) maxrss_kb=(\d+)", open(err_txt).read())
if not m:
    fail("the workload did not print its figures")
else:
    own = int(m.group(3)) * 1024
    err = abs(whole - own) / own
    (ok if err <= 0.05 else fail)("peak RSS vs the workload'"'"'s own ru_maxrss %.1f MiB: %.2f %% apart (<= 5 %%)"
                                  % (own / 2**20, 100 * err))
truth = mb * 2**20
rows = {r["name"]: r for r in doc["growth"]["function"]}
g = rows.get("grow_here")
if not g:
    fail("no grow_here row in the growth by function table")
else:
    err = abs(g["total_grown_bytes"] - truth) / truth
    print("grow_here: self %.1f MiB, total %.1f MiB; all growth %.1f MiB, %.1f MiB charged"
          % (g["self_grown_bytes"] / 2**20, g["total_grown_bytes"] / 2**20, doc["grown_bytes"] / 2**20,
             doc["charged_bytes"] / 2**20))
    (ok if err <= 0.10 else fail)("growth charged to grow_here %.1f MiB vs %d MiB written there: %.1f %% off (<= 10 %%)"
                                  % (g["total_grown_bytes"] / 2**20, mb, 100 * err))
    # They allocate nothing: before the memory of the agent was left out, its
    # ring filling up was charged to them (3.8 and 2.0 MiB in the guide run).
    # What is left is the rest of the agent (its writer buffers and tables,
    # ~0.1 MiB); 2 MiB between the two tells the ring (5.8 MiB) apart.
    # grow_here spins 50 ms before its first write, so the reading interval
    # where spin_before ends has no growth to share with it (without that
    # lead-in, busy CI runs charged spin_before 1.8-2.0 MiB of the growth).
    other = sum(rows.get(name, {}).get("total_grown_bytes", 0) for name in ("spin_before", "spin_after"))
    (ok if other <= 2 * 2**20 else fail)("spin_before + spin_after (they allocate nothing) charged %.2f MiB (<= 2 MiB)"
                                         % (other / 2**20))
csv = open(csv_path).read().splitlines()
if not csv or csv[0] != "view,name,where,self_grown_bytes,total_grown_bytes,released_bytes":
    fail("CSV header: %r" % (csv[:1],))
elif not any(l.startswith("function,grow_here,") for l in csv):
    fail("CSV has no function,grow_here row")
else:
    ok("CSV: %d growth rows, grow_here among them" % (len(csv) - 1))
' "$WORK/mg.json" "$MB" "$TIME_TXT" "$WORK/mg.err" "$WORK/mg.csv"

# Chrome trace: one "memory" counter event per reading, its largest RSS the
# report's peak; read by our JSON check, and by a real reader when npm has it.
pycheck '
doc = load(sys.argv[1])["memory"]["processes"][0]
trace = load(sys.argv[2])
ev = [e for e in trace["traceEvents"] if e.get("ph") == "C" and e.get("name") == "memory"]
(ok if len(ev) == len(doc["readings"]) else fail)("chrome trace: %d memory counter events for %d readings"
                                                   % (len(ev), len(doc["readings"])))
mx = max((e["args"]["RSS MiB"] for e in ev), default=0)
(ok if abs(mx - doc["peak_rss_bytes"] / 2**20) < 0.01 else fail)("chrome trace: largest RSS %.3f MiB = peak %.3f MiB"
                                                                % (mx, doc["peak_rss_bytes"] / 2**20))
html = open(sys.argv[3]).read()
(ok if "<h2>Memory over time</h2>" in html and "Growth by function" in html else fail)(
    "html: a Memory over time chart and the Memory section")
' "$WORK/mg.json" "$WORK/mg.trace.json" "$WORK/mg.html"

NPM_DIR=${OPPROF_TEST_NPM_DIR:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/opprof-test-npm}
if command -v node >/dev/null 2>&1 && NPM_WHY=$(sh "$HERE/viewers_npm.sh" "$NPM_DIR" 2>&1); then
    cat >"$WORK/tm.js" <<'JS'
const fs = require('fs');
const tm = require('@tracerbench/trace-model');
const doc = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const model = tm.buildModel(doc.traceEvents); // throws on what it cannot read
let n = 0, mx = 0;
for (const p of model.processes)
  for (const e of p.events)
    if (e.ph === 'C' && e.name === 'memory') { n++; mx = Math.max(mx, e.args['RSS MiB']); }
console.log('trace-model: ' + n + ' memory counter events, largest RSS ' + mx + ' MiB');
process.exit(n > 0 ? 0 : 2);
JS
    if NODE_PATH="$NPM_DIR/node_modules" limited node "$WORK/tm.js" "$WORK/mg.trace.json" >"$WORK/tm.out" 2>&1; then
        pass "$(tail -n 1 "$WORK/tm.out")"
    else
        show trace-model "$WORK/tm.out" 10
        fail "@tracerbench/trace-model rejected the trace or found no memory counters"
    fi
else
    log "SKIP: trace-model check: ${NPM_WHY:-node is not installed}"
fi

# Attach mode reads /proc/PID/statm from outside: the same growth, charged the
# same way. The workload spins 1 s first so the attach happens before it grows.
"$MEM_GROW" --mb 128 --spin-seconds 1 2>"$WORK/att.wl.err" &
WL=$!
sleep 0.2
log "+ opprof record -p $WL -o $WORK/att"
limited "$OPPROF" record -p "$WL" -o "$WORK/att" >"$WORK/att.out" 2>"$WORK/att.err"
st=$?
wait "$WL"
if [ "$st" -ne 0 ]; then
    show stderr "$WORK/att.err" 4
    log "SKIP: attach case: opprof record -p exited $st (perf_event_open on another process refused?)"
else
    report_json "$WORK/att" "$WORK/att.json" --memory || fail "opprof report --memory of the attached recording failed"
    pycheck '
doc = load(sys.argv[1])["memory"]
rows = {r["name"]: r for r in doc["growth"]["function"]}
g, truth = rows.get("grow_here"), 128 * 2**20
if not doc["processes"] or not g:
    fail("attach: no readings or no grow_here row")
else:
    err = abs(g["total_grown_bytes"] - truth) / truth
    (ok if err <= 0.10 else fail)("attach: grow_here charged %.1f MiB of 128 MiB (%.1f %% off, <= 10 %%), peak %.1f MiB"
                                  % (g["total_grown_bytes"] / 2**20, 100 * err,
                                     doc["processes"][0]["peak_rss_bytes"] / 2**20))
' "$WORK/att.json"
fi

# The cgroup limit: mem_grow --mb 280 in a cgroup limited to 300 MiB peaks at
# ~290 MiB, over 90 % of the limit: the limit is recorded and a finding says
# so. Only where this test can make a cgroup (root, a writable v1 memory
# controller or v2 memory.max); skipped otherwise.
CG=
CG_FILE=
v1=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ {print $3}' /proc/self/cgroup 2>/dev/null)
v2=$(awk -F: '$1 == "0" {print $3}' /proc/self/cgroup 2>/dev/null)
if [ -n "$v1" ] && mkdir "/sys/fs/cgroup/memory${v1%/}/opprof-test-$$" 2>/dev/null; then
    CG="/sys/fs/cgroup/memory${v1%/}/opprof-test-$$"
    CG_FILE=memory.limit_in_bytes
elif [ -n "$v2" ] && mkdir "/sys/fs/cgroup${v2%/}/opprof-test-$$" 2>/dev/null; then
    CG="/sys/fs/cgroup${v2%/}/opprof-test-$$"
    CG_FILE=memory.max
fi
if [ -n "$CG" ] && [ -f "$CG/$CG_FILE" ] && echo $((300 * 1048576)) >"$CG/$CG_FILE" 2>/dev/null; then
    log "+ (in cgroup $CG, $CG_FILE = 300 MiB) opprof record -o $WORK/cg -- mem_grow --mb 280"
    limited sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$CG" \
        "$OPPROF" record -o "$WORK/cg" -- "$MEM_GROW" --mb 280 --ms-per-mb 0.5 >"$WORK/cg.out" 2>"$WORK/cg.err"
    st=$?
    rmdir "$CG" 2>/dev/null
    if [ "$st" -ne 0 ]; then
        show stderr "$WORK/cg.err" 4
        fail "opprof record of mem_grow in a 300 MiB cgroup exited $st"
    else
        report_json "$WORK/cg" "$WORK/cg.json" --memory || fail "opprof report --memory of the cgroup run failed"
        pycheck '
doc = load(sys.argv[1])["memory"]
p = doc["processes"][0]
(ok if p["cgroup_limit_bytes"] == 300 * 2**20 else fail)("cgroup limit recorded: %d bytes (v%d, %s)"
                                                        % (p["cgroup_limit_bytes"], p["cgroup_version"], p["cgroup"]))
hits = [f for f in doc["findings"] if "cgroup memory limit" in f]
(ok if hits else fail)("finding near the limit (peak %.1f MiB of 300): %s"
                       % (p["peak_rss_bytes"] / 2**20, hits[0] if hits else doc["findings"]))
' "$WORK/cg.json"
    fi
else
    [ -n "$CG" ] && rmdir "$CG" 2>/dev/null
    log "SKIP: cgroup limit case: cannot make a memory-limited cgroup here (not root, or no writable memory controller)"
fi

# Python: the growth goes to the line that allocates.
if [ -x /usr/bin/python3 ]; then
    cat >"$WORK/mem_grow.py" <<'PY'
import sys, time
MB = 1 << 20
def spin(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        sum(range(20000))
def grow_here(chunks, mb):
    for _ in range(mb):
        chunks.append(b"\x01" * MB); sum(range(40000))  # GROW LINE: 1 MiB written, then some arithmetic
def release_here(chunks):
    chunks.clear()
chunks = []
spin(0.3)
grow_here(chunks, int(sys.argv[1]))
spin(0.3)
release_here(chunks)
spin(0.3)
PY
    PY_MB=192
    GROW_LINE=$(grep -n "GROW LINE" "$WORK/mem_grow.py" | cut -d: -f1)
    record "$WORK/py" -- /usr/bin/python3 "$WORK/mem_grow.py" "$PY_MB"
    [ "$RECORD_STATUS" -eq 0 ] || die "opprof record of mem_grow.py exited $RECORD_STATUS"
    report_json "$WORK/py" "$WORK/py.json" --memory || die "opprof report --memory of the Python run failed"
    pycheck '
doc = load(sys.argv[1])["memory"]
mb, line = int(sys.argv[2]), sys.argv[3]
rows = [r for r in doc["growth"]["line"] if r["name"].endswith("mem_grow.py:" + line)]
if not rows:
    fail("no row for mem_grow.py:%s in the growth by Python line table" % line)
else:
    r, truth = rows[0], mb * 2**20
    err = abs(r["self_grown_bytes"] - truth) / truth
    (ok if err <= 0.10 else fail)("Python line %s (%s) charged %.1f MiB of %d MiB: %.1f %% off (<= 10 %%)"
                                  % (line, r["where"], r["self_grown_bytes"] / 2**20, mb, 100 * err))
' "$WORK/py.json" "$PY_MB" "$GROW_LINE"
else
    log "SKIP: Python case: /usr/bin/python3 not found"
fi

finish
