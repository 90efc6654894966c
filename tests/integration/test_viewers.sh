#!/bin/sh
# test_viewers.sh — `opprof export` of the known-split program (a C call
# stack main > do_work > run_work > phase_X > spin_X, 5:3:2) opened by the
# readers people use, each skipped with its reason when it is not here:
#   chrome trace: @tracerbench/trace-model builds its model (throws on a bad
#     event) with slices nested >= 3 deep; speedscope 1.25.0 imports it in
#     headless Chromium as its CLI does, without "Tried to end" warnings, and
#     its sandwich view gives spin_a/b/c the same shares as the folded stacks;
#     a Python program's trace loads in both without warnings either
#   flame graph: width and height attributes, flamegraph.pl's --width,
#     --minwidth, --colors, --countname; one root (main: _start and
#     __libc_start_main dropped; exit too, for at most 1 % of the samples, when
#     one lands in the exit handlers) in the folded stacks and the SVG; Chromium
#     shows it at its own size (scrolls) with a screenshot kept
#   pprof: gunzipped and decoded by the pprof-format npm package: string 0 is
#     "", sample types samples/count + cpu/nanoseconds, per-function totals
#     equal the folded stacks', lines present for functions with debug info
#   callgrind: callgrind_annotate (valgrind) reads it without warnings; its
#     self and --inclusive=yes totals per function equal the folded stacks'
#   PyTorch HTML (when python3 imports torch): the page has the findings,
#     phases and operator table the text report prints, renders in Chromium
#     without console errors (screenshot kept)
# npm packages come from tests/integration/viewers_npm.sh, cached in
# $OPPROF_TEST_NPM_DIR (default ~/.cache/opprof-test-npm).
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
require_python3
require_opprof
require_workload
make_workdir

NPM_DIR=${OPPROF_TEST_NPM_DIR:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/opprof-test-npm}
NODE_OK=0
if ! command -v node >/dev/null 2>&1; then
    NPM_WHY="node is not installed"
elif NPM_WHY=$(sh "$HERE/viewers_npm.sh" "$NPM_DIR" 2>&1); then
    NODE_OK=1
fi
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)

record "$WORK/ks" -- "$KNOWN_SPLIT" --seconds 2
[ "$RECORD_STATUS" -eq 0 ] || die "opprof record of known_split exited $RECORD_STATUS"
limited "$OPPROF" export "$WORK/ks" --chrome-trace "$WORK/ks.json" --folded "$WORK/ks.folded" \
    2>"$WORK/export.err" || { show stderr "$WORK/export.err"; die "opprof export failed"; }

# A Python program too: interpreter frames change under a Python function from
# sample to sample, the case where names repeat between slices that end and
# begin at one timestamp.
cat >"$WORK/split.py" <<'PY'
import sys, time
def hot_a(n):
    return sum((i * i) & 0xFFFF for i in range(n))
def hot_b(n):
    return sum((i * i) & 0xFFFF for i in range(n))
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    hot_a(30000)
    hot_b(10000)
PY
PY_OK=0
if [ -x /usr/bin/python3 ]; then
    record "$WORK/py" -- /usr/bin/python3 "$WORK/split.py" 2
    [ "$RECORD_STATUS" -eq 0 ] && limited "$OPPROF" export "$WORK/py" --chrome-trace "$WORK/py.json" 2>/dev/null &&
        PY_OK=1
fi
[ "$PY_OK" = 1 ] || log "note: no Python recording (python3 missing or record failed): Python trace not checked"

# --- chrome trace: trace-model ------------------------------------------------------
if [ "$NODE_OK" = 1 ]; then
    cat >"$WORK/tm.js" <<'JS'
const fs = require('fs');
const tm = require('@tracerbench/trace-model');
const doc = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
for (const e of doc.traceEvents)
  if (e.cat === undefined) { console.log('FAIL: event without cat: ' + JSON.stringify(e)); process.exit(1); }
const model = tm.buildModel(doc.traceEvents); // throws on what it cannot read
let depth = 0, slices = 0;
for (const p of model.processes) for (const t of p.threads) for (const e of t.events) {
  if (!e.isComplete()) continue;
  slices++;
  let d = 1;
  for (let q = e.parent; q; q = q.parent) d++;
  depth = Math.max(depth, d);
}
console.log('trace-model: ' + model.processes.length + ' process(es), ' + slices + ' slices, depth ' + depth);
process.exit(depth >= 3 ? 0 : 2);
JS
    for t in ks $([ "$PY_OK" = 1 ] && echo py); do
        if NODE_PATH="$NPM_DIR/node_modules" limited node "$WORK/tm.js" "$WORK/$t.json" >"$WORK/tm.out" 2>&1; then
            pass "$t.json: $(tail -n 1 "$WORK/tm.out")"
        else
            show trace-model "$WORK/tm.out" 10
            fail "@tracerbench/trace-model rejected $t.json, or its slices are not nested 3 deep"
        fi
    done
else
    log "SKIP: trace-model check: $NPM_WHY"
fi

# --- chrome trace: speedscope's importer in Chromium -----------------------------------
# speedscope_load FILE VIEW: loads FILE the way `speedscope FILE` does (a script
# calling speedscope.loadFileFromBase64 named in #localProfilePath); the page's
# DOM goes to FILE.dom, the console to FILE.log.
speedscope_load() {
    _ss="$WORK/speedscope"
    [ -d "$_ss" ] || cp -r "$NPM_DIR/node_modules/speedscope/dist/release" "$_ss"
    printf 'speedscope.loadFileFromBase64("%s", "%s")\n' "$(basename "$1")" "$(base64 -w0 "$1")" >"$1.js"
    limited "$CHROMIUM" --headless --no-sandbox --disable-gpu --user-data-dir="$(mktemp -d "$WORK/chrome.XXXXXX")" \
        --enable-logging=stderr --v=0 --window-size=1400,2000 --virtual-time-budget=10000 \
        --dump-dom "file://$_ss/index.html#localProfilePath=$1.js&view=$2" >"$1.dom" 2>"$1.log"
}
if [ "$NODE_OK" = 1 ] && [ -n "$CHROMIUM" ]; then
    speedscope_load "$WORK/ks.json" sandwich
    if grep -q "Tried to end\|Importing as Trace Event" "$WORK/ks.json.log"; then
        grep "Tried to end\|still open" "$WORK/ks.json.log" | head -n 3
        grep -q "Tried to end\|still open" "$WORK/ks.json.log" && fail "speedscope warns while importing the chrome trace"
        pycheck '
import html
dom = open(sys.argv[1], encoding="utf-8").read()
text = html.unescape(re.sub(r"\|+", "|", re.sub(r"<[^>]+>", "|", dom)))
# sandwich rows: "total (pct)|self (pct)|name|"; speedscope writes a share
# under 0.01 % as "<0.01" and one between 99 and 100 % as ">99" (main, when a
# sample landed in the exit path after main returned)
rows = re.findall(r"\|([0-9.]+[a-z]+) \(([0-9.<>]+)%\)\|([0-9.]+[a-z]+) \(([0-9.<>]+)%\)\|([^|]+)(?=\|)", text)
share = {r[4]: float(r[1].lstrip("<>")) for r in rows}
counts, total = {}, 0
for line in open(sys.argv[2], encoding="utf-8"):
    stack, n = line.rsplit(" ", 1)
    total += int(n)
    for f in set(stack.split(";")): counts[f] = counts.get(f, 0) + int(n)
for f in ("spin_a", "spin_b", "spin_c", "main"):
    want = 100.0 * counts.get(f, 0) / total
    if f not in share: fail("speedscope sandwich view has no row for %s" % f)
    elif abs(share[f] - want) > 2: fail("%s: speedscope total %.1f %%, folded %.1f %%" % (f, share[f], want))
    else: ok("%s: speedscope total %.1f %%, folded %.1f %%" % (f, share[f], want))
' "$WORK/ks.json.dom" "$WORK/ks.folded"
    else
        show chromium "$WORK/ks.json.log" 10
        fail "speedscope did not import the chrome trace"
    fi
    if [ "$PY_OK" = 1 ]; then
        speedscope_load "$WORK/py.json" flamechart
        if ! grep -q "Importing as Trace Event" "$WORK/py.json.log"; then
            fail "speedscope did not import the Python chrome trace"
        elif grep "Tried to end\|still open" "$WORK/py.json.log" | head -n 3 | grep .; then
            fail "speedscope warns while importing the Python chrome trace"
        else
            pass "speedscope imports the Python chrome trace without warnings"
        fi
    fi
else
    log "SKIP: speedscope check: ${NPM_WHY:-chromium is not installed}"
fi

# --- flame graph ------------------------------------------------------------------------
if limited "$OPPROF" export "$WORK/ks" --flamegraph "$WORK/ks.svg" --width 900 --minwidth 0.5 --colors hot \
    --countname ms 2>"$WORK/svg.err"; then
    pycheck '
import xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
w, h = root.get("width"), root.get("height")
if w != "900" or not h or float(h) < 100: fail("flame graph SVG width/height: %r %r" % (w, h))
else: ok("flame graph SVG is %s x %s px" % (w, h))
ns = "{http://www.w3.org/2000/svg}"
texts = "".join(t.text or "" for t in root.iter(ns + "text"))
if " ms (" not in texts: fail("--countname ms not used in the summary line")
fills = [r.get("fill") for g in root.iter(ns + "g") if g.get("class") == "f" for r in g.iter(ns + "rect")]
hot = [f for f in fills if f.startswith("rgb(") and int(f[4:].split(",")[0]) >= 205]
if not fills or len(hot) != len(fills): fail("--colors hot: %d of %d boxes red-based" % (len(hot), len(fills)))
depth1 = [g for g in root.iter(ns + "g") if g.get("data-d") == "1"]
names = [g.find(ns + "title").text.split("\n")[0] for g in depth1]
# Besides main, exit may be a root: libc runs the exit handlers (and, in the
# ASan build, the LeakSanitizer check) after main returns, outside main, and a
# sample or two may land there; more than 1 % would be a wrong unwind. Any
# other root is a stack cut short: one in 1,886 samples (in the lazy
# binding trampoline, _dl_runtime_resolve_xsavec) in a CI run of 2026-11-28;
# test_known_split checks unwinding itself (>= 97 % under run_work). Here
# more than 0.5 % fails.
roots, total = {}, 0
for l in open(sys.argv[2]):
    stack, n = l.rsplit(" ", 1)
    roots[stack.split(";")[0]] = roots.get(stack.split(";")[0], 0) + int(n)
    total += int(n)
other = sum(n for r, n in roots.items() if r not in ("main", "exit"))
if other > total / 200 or roots.get("exit", 0) > total / 100:
    fail("folded roots: %s (expected main, exit for at most 1 %% and others for at most 0.5 %% of %d samples)"
         % (roots, total))
elif other:
    print("note: %d of %d samples rooted outside main and exit (stacks cut short): %s" % (other, total, roots))
# a root under --minwidth (0.5 px: one sample of ~1,900) has no tower
if "main" not in names or set(names) - set(roots):
    fail("flame graph roots: %s, folded roots: %s" % (names, sorted(roots)))
else: ok("root towers: %s; folded roots: %s" % (", ".join(names), ", ".join("%s %d" % (r, roots[r]) for r in sorted(roots))))
' "$WORK/ks.svg" "$WORK/ks.folded"
    if [ -n "$CHROMIUM" ]; then
        ART=${OPPROF_TEST_ARTIFACTS:-$OPPROF_BUILDDIR/tests/integration/artifacts}
        mkdir -p "$ART"
        limited "$CHROMIUM" --headless --no-sandbox --disable-gpu --user-data-dir="$(mktemp -d "$WORK/chrome.XXXXXX")" \
            --window-size=1280,800 --screenshot="$ART/viewers-flame.png" "file://$WORK/ks.svg" >/dev/null 2>&1 &&
            pass "flame graph screenshot: $ART/viewers-flame.png"
    fi
else
    show stderr "$WORK/svg.err"
    fail "opprof export --flamegraph with flamegraph.pl options failed"
fi
command -v flamegraph.pl >/dev/null 2>&1 || log "note: flamegraph.pl not installed (no Debian package here): not compared"

# folded_totals FOLDED: "name self total" per function, from the folded stacks
# (total once per stack line, as every viewer counts recursion).
folded_totals() {
    python3 -c '
import sys
self_, total = {}, {}
for line in open(sys.argv[1], encoding="utf-8"):
    stack, n = line.rsplit(" ", 1); fr = stack.split(";"); n = int(n)
    self_[fr[-1]] = self_.get(fr[-1], 0) + n
    for f in set(fr): total[f] = total.get(f, 0) + n
for f in sorted(total): print(f, self_.get(f, 0), total[f])
' "$1"
}

limited "$OPPROF" export "$WORK/ks" --pprof "$WORK/ks.pb.gz" --callgrind "$WORK/ks.cg" 2>"$WORK/pc.err" ||
    { show stderr "$WORK/pc.err"; fail "opprof export --pprof/--callgrind failed"; }
folded_totals "$WORK/ks.folded" >"$WORK/want.txt"

# --- pprof ----------------------------------------------------------------------------
if [ "$NODE_OK" = 1 ] && [ -s "$WORK/ks.pb.gz" ]; then
    cat >"$WORK/pprof.js" <<'JS'
const fs = require('fs'), zlib = require('zlib');
const { Profile } = require('pprof-format');
const p = Profile.decode(zlib.gunzipSync(fs.readFileSync(process.argv[2])));
const str = i => p.stringTable.strings[Number(i)];
const bad = m => { console.log('FAIL: pprof: ' + m); process.exitCode = 1; };
if (str(0) !== '') bad('string_table[0] is not ""');
const types = p.sampleType.map(t => str(t.type) + '/' + str(t.unit)).join(' ');
if (types !== 'samples/count cpu/nanoseconds') bad('sample types ' + types);
const fn = new Map(p.function.map(f => [Number(f.id), f]));
const loc = new Map(p.location.map(l => [Number(l.id), l]));
const self = {}, total = {};
let lines = 0;
for (const s of p.sample) {
  const n = Number(s.value[0]), seen = new Set();
  s.locationId.forEach((id, k) => {
    const l = loc.get(Number(id));
    if (!l || !l.line.length || !fn.get(Number(l.line[0].functionId))) { bad('dangling location ' + id); return; }
    if (Number(l.line[0].line) > 0) lines++;
    const name = str(fn.get(Number(l.line[0].functionId)).name);
    if (k === 0) self[name] = (self[name] || 0) + n;
    if (!seen.has(name)) { seen.add(name); total[name] = (total[name] || 0) + n; }
  });
}
if (!lines) bad('no location has a line');
for (const name of Object.keys(total).sort()) console.log(name, self[name] || 0, total[name]);
JS
    if NODE_PATH="$NPM_DIR/node_modules" limited node "$WORK/pprof.js" "$WORK/ks.pb.gz" >"$WORK/pprof.txt" 2>&1 &&
        cmp -s "$WORK/pprof.txt" "$WORK/want.txt"; then
        pass "pprof-format decodes the pprof export; self/total per function = folded ($(wc -l <"$WORK/want.txt") functions)"
    else
        diff "$WORK/want.txt" "$WORK/pprof.txt" | head -n 10
        fail "pprof export: decode failed or totals differ from the folded stacks"
    fi
else
    log "SKIP: pprof check: ${NPM_WHY:-no pprof file}"
fi

# --- callgrind ------------------------------------------------------------------------
if command -v callgrind_annotate >/dev/null 2>&1; then
    cg_totals() { # callgrind_annotate's per-function first column, "file:name count"
        # A line whose name ends in "(Nx)" is a call (N calls), not a
        # function's total: callgrind_annotate prints it in some runs (CI saw
        # "spin_a (926x)" beside spin_a's own line), so it is left out. N has
        # thousands commas ("(1,015x)": CI saw one pass the filter when it
        # allowed digits only). --auto=no: those call lines, and source lines
        # with a colon, come from the annotated source that follows the
        # function list, when the source file is where the debug info says.
        callgrind_annotate --auto=no --threshold=100 "$@" "$WORK/ks.cg" 2>&1 |
            sed -n 's/^ *\([0-9,]*\) ([ 0-9.]*%) *\([0-9,]* ([ 0-9.]*%) *\)*\(.*:[^:]*\)$/\3 \1/p' |
            grep -v ' ([0-9,]*x) [0-9,]*$' |
            tr -d , | sort
    }
    # callgrind_annotate reports a malformed file on stderr ("WARNING: line N
    # malformed", "Line N: ...") and dies with status != 0; its stdout holds
    # the annotated source, whose comments may say "error" (known_split.c's
    # does), so only stderr and the status are judged.
    CG_STATUS=0
    callgrind_annotate "$WORK/ks.cg" >"$WORK/cg.txt" 2>"$WORK/cg.err" || CG_STATUS=$?
    cg_totals >"$WORK/cg.self"
    cg_totals --inclusive=yes >"$WORK/cg.incl"
    if [ "$CG_STATUS" -ne 0 ] || [ -s "$WORK/cg.err" ]; then
        show callgrind_annotate "$WORK/cg.err" 5
        fail "callgrind_annotate rejects or warns about the callgrind export (status $CG_STATUS)"
    else
        # callgrind keeps two functions of one name in two files apart (libc's
        # clock_gettime calls the vDSO's clock_gettime: CI saw both in one
        # stack) while folded stacks hold names only. Self time adds up by
        # name; a name's inclusive time in folded (each stack once) lies
        # between the largest of its callgrind functions and their sum.
        pycheck '
want = {}
for l in open(sys.argv[1]):
    n, s, t = l.split(); want[n] = (int(s), int(t))
def by_name(path):
    d = {}
    for l in open(path):
        key, c = l.rsplit(" ", 1); d.setdefault(key.rsplit(":", 1)[1], []).append(int(c))
    return d
cs, ci = by_name(sys.argv[2]), by_name(sys.argv[3])
bad = []
for n in sorted(set(want) | set(cs) | set(ci)):
    ws, wt = want.get(n, (0, 0))
    s, i = sum(cs.get(n, [])), ci.get(n, [])
    if s != ws: bad.append("%s self: callgrind %d, folded %d" % (n, s, ws))
    if not i or not max(i) <= wt <= sum(i): bad.append("%s inclusive: callgrind %s, folded %d" % (n, i, wt))
shared = [n for n in ci if len(ci[n]) > 1]
if bad: fail("callgrind_annotate per-function samples differ from the folded stacks: " + "; ".join(bad[:5]))
else: ok("callgrind_annotate: self and inclusive samples per function = folded (%d functions%s)" % (
    len(want), ", %s in %d files" % (shared[0], len(ci[shared[0]])) if shared else ""))
' "$WORK/want.txt" "$WORK/cg.self" "$WORK/cg.incl"
    fi
else
    log "SKIP: callgrind check: callgrind_annotate not installed (Debian package valgrind)"
fi

# --- PyTorch HTML page ------------------------------------------------------------------
# The interpreter is named, not found on PATH: a pyenv shim first on PATH has
# no torch, and the check was skipped in every run started from such a shell.
TORCH_PYTHON=${OPPROF_TEST_PYTHON:-/usr/bin/python3}
if "$TORCH_PYTHON" -c "import torch" >/dev/null 2>&1; then
    record "$WORK/torch" -- "$TORCH_PYTHON" "$OPPROF_SRCDIR/tests/workloads/torch_train.py" --seconds 4
    if [ "$RECORD_STATUS" -eq 0 ] &&
        limited "$OPPROF" export "$WORK/torch" --html "$WORK/torch.html" 2>"$WORK/th.err"; then
        for want in "Phases" "Operators by self time" "aten::"; do
            grep -q "$want" "$WORK/torch.html" || fail "PyTorch HTML page lacks \"$want\""
        done
        if [ -n "$CHROMIUM" ]; then
            ART=${OPPROF_TEST_ARTIFACTS:-$OPPROF_BUILDDIR/tests/integration/artifacts}
            mkdir -p "$ART"
            limited "$CHROMIUM" --headless --no-sandbox --disable-gpu \
                --user-data-dir="$(mktemp -d "$WORK/chrome.XXXXXX")" --enable-logging=stderr --v=0 \
                --window-size=1280,2400 --screenshot="$ART/viewers-torch-html.png" "file://$WORK/torch.html" \
                >"$WORK/th.log" 2>&1
            if grep -E "Uncaught|CONSOLE\(.*(Error|error)" "$WORK/th.log" | head -n 3 | grep -q .; then
                fail "Chromium reports console errors on the PyTorch HTML page"
            else
                pass "PyTorch HTML page: phases and operators, no console errors ($ART/viewers-torch-html.png)"
            fi
        fi
    else
        fail "recording or exporting the PyTorch workload failed"
    fi
else
    [ "${CI:-}" = true ] && fail "$TORCH_PYTHON cannot import torch (python3-torch should be installed)"
    log "SKIP: PyTorch HTML check: $TORCH_PYTHON cannot import torch (Debian package python3-torch)"
fi

finish
