#!/usr/bin/env bash
# tests/integration/test_distros.sh — the distro matrix: opprof on the Python
# and PyTorch of other Debian releases, in minimal roots that
# scripts/roots.sh builds with debootstrap (cached in OPPROF_ROOTS_DIR,
# /var/cache/opprof-roots):
#   trixie:   Python 3.13.5 (no frame pointers) + torch 2.6 (glibc 2.41). The
#             bookworm build runs there as it is (it needs GLIBC_2.34 at
#             most): the source and build dirs are bind-mounted at the same
#             paths inside the root.
#   bullseye: Python 3.9.2 + torch 1.7.1 (glibc 2.31, gcc 10): too old for a
#             bookworm binary, so opprof is built inside the root from the
#             tarball `make dist-gzip` writes of this build tree, as a user
#             builds a release (configure --enable-werror; make).
#   sid:      Python 3.14 (3.14.10 when written; no torch): the bookworm
#             build bind-mounted as for trixie. The split is checked in
#             record and in attach (record -p) mode.
# In each: py_split.py's known 50/30/20 split of run_work among spin_a/b/c
# within TOL_PP, with the chain <module> -> run_work; torch_train.py's
# operators (aten::bmm, aten::mm, aten::addmm, or what that torch release
# calls them) each called from a line of torch_train.py, the
# forward/backward/optimizer phases, and no crash.
# A root that is missing is a SKIP naming why (scripts/roots.sh's reason:
# no debootstrap, no mirror, ...); a root that is there but fails a check is
# a FAIL. Mounts (/proc, /sys, the bind mounts) are undone by the EXIT trap,
# whatever happens: a mount left behind would break `rm -rf` of the root and
# `make distcheck`. Runs in the regular build only: a sanitizer build needs
# the host compiler's runtime, which the roots do not have.
. "$(dirname "$0")/lib.sh"

ROOTS_DIR=${OPPROF_ROOTS_DIR:-/var/cache/opprof-roots}
# Plain paths (make check passes "build/.."): they are mount points inside.
OPPROF_SRCDIR=$(cd "$OPPROF_SRCDIR" && pwd -P)
OPPROF_BUILDDIR=$(cd "$OPPROF_BUILDDIR" && pwd -P)
OPPROF="$OPPROF_BUILDDIR/opprof"
WORKLOADS="$OPPROF_SRCDIR/tests/workloads"

require_python3
require_opprof
[ "$(id -u)" -eq 0 ] || skip "not root: chroot and mounts need root"
case "$("$OPPROF_BUILDDIR/config.status" --config 2>/dev/null)" in
*enable-sanitizers*) skip "sanitizer build: the roots lack the host compiler's sanitizer runtime (the matrix runs in the regular build)" ;;
esac
command -v chroot >/dev/null 2>&1 || skip "chroot not found"
make_workdir

# ---- mounts, undone whatever happens -----------------------------------------
MOUNTS=()
ROOT_WORK=()
unmount_all() {
    local i
    for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do
        umount "${MOUNTS[i]}" 2>/dev/null || umount -l "${MOUNTS[i]}" 2>/dev/null ||
            log "WARNING: could not unmount ${MOUNTS[i]}"
    done
    MOUNTS=()
    for d in "${ROOT_WORK[@]}"; do
        # Only after every mount is gone: never rm -rf through a mount.
        [ "${OPPROF_TEST_KEEP:-0}" = 1 ] && { log "(kept $d)"; continue; }
        awk -v d="$d" 'index($2, d) == 1 { f = 1 } END { exit !f }' /proc/mounts || rm -rf "$d"
    done
    ROOT_WORK=()
}
trap 'unmount_all; _cleanup' EXIT

# mount_tracked ARGS... TARGET: mount, remembered for unmount_all.
mount_tracked() {
    local target=${!#}
    mount "$@" || return 1
    MOUNTS+=("$target")
}

# bind_same_path ROOT DIR [ro]: DIR at the same path inside ROOT.
bind_same_path() {
    mkdir -p "$1$2" || return 1
    mount_tracked --bind "$2" "$1$2" || return 1
    [ "${3:-}" = ro ] || return 0
    mount -o remount,bind,ro "$1$2"
}

# lock_root NAME: one test run per root at a time (two checkouts testing at
# once share the cache); released when the test exits.
lock_root() {
    exec {ROOT_LOCK_FD}>"$ROOTS_DIR/$1.lock" || return 1
    flock -w 1200 "$ROOT_LOCK_FD"
}

# enter_root ROOT: /proc, /sys (torch's cpuinfo reads it), the source tree
# (read-only) and the build dir at their own paths; sets RWORK, a work dir
# inside the root (its path inside: RW).
enter_root() {
    local root=$1
    mount_tracked -t proc proc "$root/proc" || return 1
    # A bind, not a second sysfs: "sysfs already mounted" when another user
    # of the root has it mounted; binds stack and come off one by one.
    mount_tracked --bind /sys "$root/sys" || return 1
    bind_same_path "$root" "$OPPROF_SRCDIR" ro || return 1
    case "$OPPROF_BUILDDIR/" in
    "$OPPROF_SRCDIR"/*) ;; # already inside the source tree's bind mount
    *) bind_same_path "$root" "$OPPROF_BUILDDIR" || return 1 ;;
    esac
    RW=$(mktemp -d "$root/tmp/opprof-distros.XXXXXX") || return 1
    ROOT_WORK+=("$RW")
    RW=${RW#"$root"}
}

# open_root NAME WHAT: ROOT is the root NAME, logged, locked and entered
# (enter_root); 1 after a failure that says so (WHAT: the tree bind-mounted
# inside it besides the source, for the message).
open_root() {
    ROOT="$ROOTS_DIR/$1"
    log "$1 root: $(sed -n 2p "$ROOT/.opprof-root")"
    if ! lock_root "$1" || ! enter_root "$ROOT"; then
        fail "$1: cannot lock $ROOT or mount /proc, /sys or $2 inside $ROOT"
        return 1
    fi
}

# in_root ROOT CMD...: CMD in ROOT with a clean environment, time-limited.
in_root() {
    local root=$1
    shift
    limited chroot "$root" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8 \
        TMPDIR=/tmp "$@"
}

# root_available NAME: 0 when scripts/roots.sh left a complete root, else
# prints why not (its reason) in WHY.
root_available() {
    WHY=
    [ -f "$ROOTS_DIR/$1/.opprof-root" ] && return 0
    if [ -s "$ROOTS_DIR/$1.unavailable" ]; then
        WHY="$(cat "$ROOTS_DIR/$1.unavailable")"
    else
        WHY="no root in $ROOTS_DIR/$1 (scripts/roots.sh $1 builds it; scripts/test.sh runs it)"
    fi
    return 1
}

# ---- the checks ---------------------------------------------------------------

# check_attach_split LABEL ROOT OPPROF PYTHON: py_split.py started inside
# ROOT without opprof, attached (record -p) for 2 s from inside the root:
# the split among the samples that kept a spin_X frame within
# max(ATTACH_TOL_PP, 3 sigma of a binomial share for that many samples), the
# chain <module> -> run_work, and the target finishing with status 0. The
# tolerance and the coverage bounds are test_python_split.sh's check_attach
# ones (frames are read after each sample, from outside: a read racing the
# thread finds run_work alone now and then, spread evenly over the three;
# 5 pp because on a loaded machine the kept samples lean 3-5 pp toward
# spin_a, a bias seen on every version, see test_python_split.sh). Quiet
# machine, 3.14.10: within 0.7 pp.
ATTACH_TOL_PP="${OPPROF_TEST_ATTACH_TOL_PP:-5}"
check_attach_split() {
    local label=$1 root=$2 opprof=$3 py=$4 try res
    for try in 1 2; do
        res="$RW/attach-$try"
        log "+ [$label] $py py_split.py 8 & opprof record -o $res -F $SPLIT_FREQ -p PID --duration 2"
        in_root "$root" /bin/sh -c '"$1" "$2" 8 >/dev/null & p=$!; sleep 0.8
            "$3" record -o "$4" -F "$5" -p "$p" --duration 2; st=$?
            wait "$p"; echo "target exit $?"; exit $st' sh "$py" "$WORKLOADS/py_split.py" "$opprof" "$res" \
            "$SPLIT_FREQ" >"$WORK/$label-attach.out" 2>&1
        local st=$?
        show stderr "$WORK/$label-attach.out" 4
        if [ "$st" -ne 0 ] || ! grep -q '^target exit 0$' "$WORK/$label-attach.out" ||
            ! in_root "$root" "$opprof" report "$res" --format json --limit 100000 --group-by python \
                >"$WORK/$label-apy.json" 2>&1 ||
            ! in_root "$root" "$opprof" report "$res" --format json --limit 100000 --callers run_work \
                >"$WORK/$label-arw.json" 2>&1; then
            fail "$label: attach (record -p, exit $st), the target's exit or the report failed"
            return
        fi
        if python3 - "$label" "$WORK/$label-apy.json" "$WORK/$label-arw.json" "$ATTACH_TOL_PP" <<'PY'
import json, math, sys
label, tol = sys.argv[1], float(sys.argv[4])
by = {r["name"]: r for r in json.load(open(sys.argv[2]))["rows"]}
inside = by.get("run_work", {}).get("samples", 0)
spins = sum(by.get(n, {"samples": 0})["samples"] for n in ("spin_a", "spin_b", "spin_c"))
got = {n: (100.0 * by.get(n, {"samples": 0})["samples"] / spins if spins else 0.0) for n in ("spin_a", "spin_b", "spin_c")}
covered = 100.0 * spins / inside if inside else 0.0
withpy = sum(r.get("self_ns", 0) for r in by.values() if r["name"] != "[no Python frame]")
rw = 100.0 * by.get("run_work", {}).get("total_ns", 0) / withpy if withpy else 0.0
tol = max(tol, 3 * 100 * math.sqrt(0.25 / spins)) if spins else tol
callers = {r["name"]: r["total_ns"] for r in json.load(open(sys.argv[3]))["rows"]}
module = 100.0 * callers.get("<module>", 0) / (sum(callers.values()) or 1)
print("%s attached: split spin_a/spin_b/spin_c = %.2f / %.2f / %.2f %% (truth 50 / 30 / 20 +- %.1f, %d samples); "
      "run_work %.1f %% of the samples with Python frames, %.1f %% of it under a spin_X frame; <module> calls %.2f %% of it"
      % (label, got["spin_a"], got["spin_b"], got["spin_c"], tol, spins, rw, covered, module))
bad = spins < 30 or rw < 90 or covered < 60 or module < 99.5 or any(
    abs(got[n] - t) > tol for n, t in (("spin_a", 50.0), ("spin_b", 30.0), ("spin_c", 20.0)))
sys.exit(1 if bad else 0)
PY
        then
            pass "$label: attached (record -p): Python split and call chain"
            return
        fi
        log "note: $label attached: outside the tolerance on attempt $try (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
    done
    fail "$label: attached: the Python split or call chain differs from the truth on both attempts (see above)"
}

# check_split LABEL ROOT OPPROF PYTHON: py_split.py's split inside ROOT.
check_split() {
    local label=$1 root=$2 opprof=$3 py=$4 try res
    for try in 1 2; do
        res="$RW/split-$try"
        log "+ [$label] opprof record -o $res -F $SPLIT_FREQ -- $py py_split.py $SECONDS_OF_WORK"
        in_root "$root" "$opprof" record -o "$res" -F "$SPLIT_FREQ" -- "$py" "$WORKLOADS/py_split.py" \
            "$SECONDS_OF_WORK" >"$WORK/$label-split.out" 2>&1
        local st=$?
        show stderr "$WORK/$label-split.out" 3
        if [ "$st" -ne 0 ] ||
            ! in_root "$root" "$opprof" report "$res" --format json --limit 100000 --group-by python \
                >"$WORK/$label-py.json" 2>"$WORK/$label-py.err" ||
            ! in_root "$root" "$opprof" report "$res" --format json --limit 100000 --callers run_work \
                >"$WORK/$label-rw.json" 2>"$WORK/$label-rw.err"; then
            show report "$WORK/$label-py.err" 4
            fail "$label: record of py_split.py (exit $st) or its report failed"
            return
        fi
        if python3 - "$label" "$WORK/$label-py.json" "$WORK/$label-rw.json" "$TOL_PP" <<'PY'
import json, sys
label, tol = sys.argv[1], float(sys.argv[4])
by = {r["name"]: r for r in json.load(open(sys.argv[2]))["rows"]}
bad = []
rw = by.get("run_work", {}).get("total_ns", 0)
if not rw:
    print("%s: no Python function run_work (Python frames missing?); rows: %s" % (label, sorted(by)[:10]))
    sys.exit(1)
got = {n: 100.0 * by.get(n, {"total_ns": 0})["total_ns"] / rw for n in ("spin_a", "spin_b", "spin_c")}
print("%s: split spin_a/spin_b/spin_c = %.2f / %.2f / %.2f %% of run_work (truth 50 / 30 / 20 +- %.1f); "
      "run_work %.1f %% of all samples" % (label, got["spin_a"], got["spin_b"], got["spin_c"], tol,
                                           by["run_work"]["total_pct"]))
bad += ["%s %.2f" % (n, got[n]) for n, t in (("spin_a", 50.0), ("spin_b", 30.0), ("spin_c", 20.0))
        if abs(got[n] - t) > tol]
if by["run_work"]["total_pct"] < 90:
    bad.append("run_work only %.1f %% of the samples" % by["run_work"]["total_pct"])
callers = {r["name"]: r["total_ns"] for r in json.load(open(sys.argv[3]))["rows"]}
module = 100.0 * callers.get("<module>", 0) / (sum(callers.values()) or 1)
# A chain cut short (the caller missing) was the readable-mappings table
# lagging new pymalloc arenas (0.7-0.8 % of run_work's samples on 3.9,
# fixed in agent_python.c's agent_read): test_python_split.sh's floor and
# figures (0 of ~11,700 in each of 39 runs of 3.9-3.13 after the fix).
if module < 99.9:
    bad.append("<module> calls only %.2f %% of run_work (callers %s)" % (module, sorted(callers)))
if bad:
    print("%s: off: %s" % (label, "; ".join(bad)))
sys.exit(1 if bad else 0)
PY
        then
            pass "$label: Python split and call chain within ${TOL_PP} pp"
            return
        fi
        log "note: $label: outside the tolerance on attempt $try (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
    done
    fail "$label: the Python split or call chain differs from the truth on both attempts (see above)"
}

# check_perf_map LABEL ROOT OPPROF PYTHON: python -X perf (3.12+) inside
# ROOT, where the interpreter has no frame pointers (trixie): its
# trampolines named from the perf map it writes in the root's /tmp, no
# frame left "[anon]", and the split still right.
check_perf_map() {
    local label=$1 root=$2 opprof=$3 py=$4 res try
    for try in 1 2; do
        res="$RW/xperf-$try"
        log "+ [$label] opprof record -o $res -F $SPLIT_FREQ -- $py -X perf py_split.py $SECONDS_OF_WORK"
        in_root "$root" "$opprof" record -o "$res" -F "$SPLIT_FREQ" -- "$py" -X perf "$WORKLOADS/py_split.py" \
            "$SECONDS_OF_WORK" >"$WORK/$label-xperf.out" 2>&1
        local st=$? pid
        pid=$(ls "$root$res" 2>/dev/null | sed -n 's/^proc-\([0-9]*\)-[0-9]*\.raw$/\1/p' | head -n 1)
        if [ "$st" -ne 0 ] || [ -z "$pid" ] ||
            ! in_root "$root" "$opprof" export "$res" --folded "$res.folded" >/dev/null 2>&1 ||
            ! in_root "$root" "$opprof" report "$res" --format json --limit 100000 --group-by python \
                >"$WORK/$label-xperf.json" 2>&1; then
            show stderr "$WORK/$label-xperf.out" 4
            fail "$label: record (exit $st), export or report of py_split.py under -X perf failed"
            return
        fi
        rm -f "$root/tmp/perf-$pid.map"
        if python3 - "$label" "$root$res.folded" "$WORK/$label-xperf.json" "$TOL_PP" <<'PY'
import json, sys
label, tol = sys.argv[1], float(sys.argv[4])
named = anon = 0
for line in open(sys.argv[2]):
    stack, _, count = line.rstrip("\n").rpartition(" ")
    for f in stack.split(";"):
        named += int(count) if f.startswith("py::") else 0
        anon += int(count) if f.startswith("[anon]") else 0
by = {r["name"]: r for r in json.load(open(sys.argv[3]))["rows"]}
rw = by.get("run_work", {}).get("total_ns", 0)
got = {n: (100.0 * by.get(n, {"total_ns": 0})["total_ns"] / rw if rw else 0.0) for n in ("spin_a", "spin_b", "spin_c")}
print("%s: -X perf: %d frames named py::... from the perf map, %d [anon]; split %.2f / %.2f / %.2f %%"
      % (label, named, anon, got["spin_a"], got["spin_b"], got["spin_c"]))
bad = anon > 0 or named == 0 or any(abs(got[n] - t) > tol for n, t in (("spin_a", 50.0), ("spin_b", 30.0), ("spin_c", 20.0)))
sys.exit(1 if bad else 0)
PY
        then
            pass "$label: -X perf trampolines named from the perf map, split within ${TOL_PP} pp"
            return
        fi
        log "note: $label: -X perf: outside the tolerance on attempt $try (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
    done
    fail "$label: -X perf: trampolines left [anon] or the split is off on both attempts (see above)"
}

# check_torch LABEL ROOT OPPROF PYTHON OP...: torch_train.py inside ROOT; each
# OP (an alternation of names: "aten::bmm" or "aten::addmm|aten::addmm_cpu")
# must be in the operator table with a line of torch_train.py as its top
# Python caller, and aten::bmm's callers must be torch_train.py's lines.
check_torch() {
    local label=$1 root=$2 opprof=$3 py=$4
    shift 4
    local res="$RW/torch"
    log "+ [$label] opprof record -o $res -- $py torch_train.py --seconds ${OPPROF_TEST_TORCH_SECONDS:-6}"
    in_root "$root" "$opprof" record -o "$res" -- "$py" "$WORKLOADS/torch_train.py" \
        --seconds "${OPPROF_TEST_TORCH_SECONDS:-6}" >"$WORK/$label-torch.out" 2>&1
    local st=$?
    show stderr "$WORK/$label-torch.out" 3
    if [ "$st" -ne 0 ]; then
        fail "$label: torch_train.py under opprof record exited $st"
        return
    fi
    local bmm
    bmm=$(echo "$@" | tr ' |' '\n\n' | grep -m1 bmm)
    if ! in_root "$root" "$opprof" report "$res" --format json --limit 100000 --group-by op \
        >"$WORK/$label-ops.json" 2>"$WORK/$label-ops.err" ||
        ! in_root "$root" "$opprof" report "$res" --format json --limit 100000 --callers "$bmm" \
            >"$WORK/$label-bmm.json" 2>"$WORK/$label-bmm.err" ||
        ! in_root "$root" "$opprof" report "$res" --group-by op --limit 1000 >"$WORK/$label-torch.txt" 2>&1; then
        show report "$WORK/$label-ops.err" 4
        show report "$WORK/$label-bmm.err" 4
        fail "$label: opprof report on the PyTorch run failed"
        return
    fi
    sed -n '/^Phases/,/^$/p' "$WORK/$label-torch.txt"
    # The whole table: an operator asked for may have little self time
    # (torch 1.7's aten::matmul is composite: ~0.1 % self, 40th to 50th of
    # 61), so a top-40 cut would drop its row by chance.
    sed -n '/^Operators/,/^Self time/p' "$WORK/$label-torch.txt" | head -n 14
    if python3 - "$label" "$WORK/$label-ops.json" "$WORK/$label-bmm.json" "$WORK/$label-torch.txt" "$@" <<'PY'
import json, re, sys
label = sys.argv[1]
doc = json.load(open(sys.argv[2]))
rows = doc["rows"]
text = open(sys.argv[4]).read()
failures = 0
def fail(msg):
    global failures
    failures += 1
    print("FAIL: %s: %s" % (label, msg))
names = {r["name"]: r for r in rows}
print("%s: operators seen: %s" % (label, ", ".join(r["name"] for r in rows if r["name"].startswith("aten::"))[:400]))
for want in sys.argv[5:]:
    alts = want.split("|")
    hit = [names[a] for a in alts if a in names]
    if not hit:
        fail("no operator named %s in the table" % " or ".join(alts))
        continue
    r = hit[0]
    # The text table's "Top Python caller" column for this operator.
    m = re.search(r"^\s*[\d.]+ %.*\s" + re.escape(r["name"]) + r"\s+(\S+):(\d+) ", text, re.M)
    if not m or m.group(1) != "torch_train.py":
        fail("%s: its top Python caller is not a line of torch_train.py (%s)" % (r["name"], m.group(0).strip() if m else "none"))
    else:
        print("ok: %s (%.1f %% self) called from torch_train.py:%s" % (r["name"], r["self_pct"], m.group(2)))
callers = [r for r in json.load(open(sys.argv[3]))["rows"] if r.get("name")]
allw = sum(r["total_ns"] for r in callers)
ours = sum(r["total_ns"] for r in callers if (r.get("source") or r["name"]).split(":")[0].endswith("torch_train.py"))
share = 100.0 * ours / allw if allw else 0.0
print("%s: %.1f %% of %s's time is called from lines of torch_train.py (expected >= 90 %%)" % (label, share, "bmm"))
if share < 90:
    fail("the callers of bmm point outside the script: %s" % [(r.get("source") or r["name"]) for r in callers[:5]])
# Operators are grouped by op, not by kernel (torch 1.7: aten::addmm_cpu,
# aten::mm_cpu, aten::mean_cpu_gpu were kernels shown as ops).
kernels = [r["name"] for r in rows if re.search(r"_(cpu|out|cpu_gpu)$", r["name"])]
if kernels:
    fail("kernel names in the operator table: %s" % kernels[:6])
for phase in ("forward", "backward", "optimizer"):
    if not re.search(r"^\s+%s\S*( step)?\s+[\d.]+ %%" % phase, text, re.M):
        fail("no %s phase in the report's Phases section" % phase)
for bad in ("Segmentation", "Aborted", "core dumped", "AddressSanitizer", "internal error"):
    if bad in text:
        fail("the report says %r" % bad)
sys.exit(1 if failures else 0)
PY
    then
        pass "$label: PyTorch operators with their Python lines, and the phases"
    else
        fail "$label: PyTorch operators, callers or phases wrong (see above)"
    fi
}

# ---- trixie: the bookworm build, bind-mounted ---------------------------------
RAN=0
if root_available trixie; then
    if open_root trixie "the build dir"; then
        PY=/usr/bin/python3.13
        log "trixie: $(in_root "$ROOT" "$PY" -c 'import sys, torch; print("Python", sys.version.split()[0], "torch", torch.__version__)' 2>&1 | tail -n 1)"
        RAN=$((RAN + 1))
        check_split trixie-3.13 "$ROOT" "$OPPROF" "$PY"
        check_perf_map trixie-3.13 "$ROOT" "$OPPROF" "$PY"
        check_torch trixie-torch2.6 "$ROOT" "$OPPROF" "$PY" aten::bmm aten::mm aten::addmm
        unmount_all
    fi
else
    log "SKIP part: trixie: $WHY"
fi

# ---- bullseye: opprof built inside ----------------------------------------------
if root_available bullseye; then
    if open_root bullseye "the source dir"; then
        # Built as a user builds a release: from the tarball `make dist`
        # writes (here, of this build tree), unpacked, configured and made
        # inside the root. Build dirs of earlier runs are dropped.
        BB="/var/tmp/opprof-build-$$"
        find "$ROOT/var/tmp" -maxdepth 1 -name 'opprof-build-*' -exec rm -rf {} + 2>/dev/null
        TARBALL=
        if make -C "$OPPROF_BUILDDIR" -s dist-gzip >"$WORK/dist.log" 2>&1; then
            TARBALL=$(ls -t "$OPPROF_BUILDDIR"/opprof-*.tar.gz 2>/dev/null | head -n 1)
        fi
        mkdir -p "$ROOT$BB"
        if [ -z "$TARBALL" ] || ! tar -xzf "$TARBALL" -C "$ROOT$BB" --strip-components=1; then
            show dist "$WORK/dist.log" 10
            fail "bullseye: no tarball to build from (make dist-gzip in $OPPROF_BUILDDIR failed)"
        fi
        log "+ [bullseye] configure && make in $BB (from $(basename "${TARBALL:-none}"))"
        SECONDS=0
        if [ -n "$TARBALL" ] && TIME_LIMIT=1200 in_root "$ROOT" /bin/sh -c "cd $BB &&
            ./configure -q --enable-werror && make -s -j\$(nproc)" \
            >"$WORK/bullseye-build.log" 2>&1; then
            log "bullseye: opprof built (-Werror) with $(in_root "$ROOT" gcc -dumpfullversion), glibc $(in_root "$ROOT" ldd --version | sed -n '1s/.* //p') in $SECONDS s"
            PY=/usr/bin/python3.9
            log "bullseye: $(in_root "$ROOT" "$PY" -c 'import sys, torch; print("Python", sys.version.split()[0], "torch", torch.__version__)' 2>&1 | tail -n 1)"
            RAN=$((RAN + 1))
            check_split bullseye-3.9 "$ROOT" "$BB/opprof" "$PY"
            # torch 1.7's Linear on 3-d input is matmul -> at::mm (no addmm),
            # and its kernels are named mm_cpu, addmm_cpu_out: the table must
            # show the ops (aten::mm), not the kernels.
            check_torch bullseye-torch1.7 "$ROOT" "$BB/opprof" "$PY" "aten::bmm" "aten::mm" "aten::matmul"
        else
            show build "$WORK/bullseye-build.log" 25
            fail "bullseye: opprof does not build there (gcc 10, glibc 2.31, linux-libc-dev 5.10)"
        fi
        unmount_all
    fi
else
    log "SKIP part: bullseye: $WHY"
fi

# ---- sid: Python 3.14, the bookworm build bind-mounted -------------------------
if root_available sid; then
    if open_root sid "the build dir"; then
        PY=/usr/bin/python3.14
        log "sid: $(in_root "$ROOT" "$PY" -c 'import sys; print("Python", sys.version.split()[0])' 2>&1 | tail -n 1)"
        RAN=$((RAN + 1))
        check_split sid-3.14 "$ROOT" "$OPPROF" "$PY"
        check_attach_split sid-3.14 "$ROOT" "$OPPROF" "$PY"
        unmount_all
    fi
else
    log "SKIP part: sid (Python 3.14): $WHY"
fi

# ==== trixie: record --torch-shapes keeps operator shares (issue 19) ==========
# A block of its own (its own lock, mounts and unmount): torch 2.6 runs
# layer_norm and softmax as OpenMP regions of 2 threads by default (torch
# 1.13 on the host runs 1 thread: no region at all), so this is where the
# runtime's waiting meets the hook. tests/workloads/torch_shapes.py is
# recorded with and without --torch-shapes; each operator's share of operator
# time (self, of the aten:: rows) must move by at most 3 pp beyond what the
# plain runs themselves spread, as test_torch_shapes.sh requires 3 pp on the
# host (1 thread there: no region).
# The bound: 3 pp plus how far the two plain runs of the same attempt lie
# apart (a control: plain, hooked, plain2), the hooked share measured from
# the plain runs' mean. Why: ~4,000-5,000 samples fall inside operators (24
# iterations at 1 kHz), so a 44 % share (bmm) has a sampling sigma of
# ~0.8 pp; but on a loaded machine the operators' CPU time itself moves from
# run to run, hook or not. Measured with two busy loops beside it (6 pairs):
# the plain runs alone read bmm at 45.6-49.1 %, layer_norm at 3.0-6.6 % (its
# kernel 57 ms in one run, 122 ms in another, for the same calls), and
# hooked minus plain fell between -3.5 and +3.3 pp in either direction;
# quiet, within 0.6 pp. A fixed 3 pp bound missed there (CI: bmm -3.25 pp,
# then -3.11; -3.70, then -0.94). The control's spread takes in what the
# machine did to this attempt; a real shift beyond it still misses, twice
# (a miss is measured once more).
# The opener's fork/join wait in libgomp (35-74 % of all samples from run to
# run, more under load, with and without the hook alike) is the
# "[OpenMP runtime wait]" row, not operator self time. Before that row, 4
# paired runs differed by up to 7.3 pp (layer_norm) and 5.3 pp (softmax) in
# either direction; after it, by 1.7 pp at most on a quiet machine.
# Also checked: the wait row is the Threading section's runtime spin/wait
# (two code paths over the same samples: equal to 0.05 pp).
TS_ITERS=${OPPROF_TEST_TORCH_SHAPES_ITERS:-24}
check_torch_shapes_shares() {
    local label=$1 root=$2 opprof=$3 py=$4 try run
    for try in 1 2; do
        for run in plain hooked plain2; do
            local opt=
            [ "$run" = hooked ] && opt=--torch-shapes
            log "+ [$label] opprof record $opt -o $RW/ts-$run-$try -- $py torch_shapes.py --iters $TS_ITERS"
            if ! TIME_LIMIT=300 in_root "$root" "$opprof" record $opt -o "$RW/ts-$run-$try" -- "$py" "$WORKLOADS/torch_shapes.py" \
                --iters "$TS_ITERS" >"$WORK/$label-ts-$run.out" 2>&1 ||
                ! in_root "$root" "$opprof" report "$RW/ts-$run-$try" --group-by op --format json --limit 0 \
                    >"$WORK/$label-ts-$run.json" 2>"$WORK/$label-ts-$run.err" ||
                ! in_root "$root" "$opprof" report "$RW/ts-$run-$try" --threading --format json \
                    >"$WORK/$label-ts-$run-thr.json" 2>>"$WORK/$label-ts-$run.err"; then
                show stderr "$WORK/$label-ts-$run.out" 4
                show report "$WORK/$label-ts-$run.err" 4
                fail "$label: torch_shapes.py ($run) under opprof record or its report failed"
                return
            fi
        done
        show stderr "$WORK/$label-ts-hooked.out" 2
        if python3 - "$label" "$WORK/$label-ts" <<'PY'
import json, sys
label, base = sys.argv[1], sys.argv[2]
bad = []
def rows(run):
    return {r["name"]: r for r in json.load(open("%s-%s.json" % (base, run)))["rows"]}
def shares(t):
    ops = {k: v["self_pct"] for k, v in t.items() if k.startswith("aten::")}
    s = sum(ops.values())
    return {k: 100 * v / s for k, v in ops.items()} if s else {}
h, p, p2 = rows("hooked"), rows("plain"), rows("plain2")
sh, sp, sp2 = shares(h), shares(p), shares(p2)
for name in ("aten::mm", "aten::bmm", "aten::addmm", "aten::native_layer_norm", "aten::_softmax"):
    a, b, c = sh.get(name, 0.0), sp.get(name, 0.0), sp2.get(name, 0.0)
    spread = abs(b - c)
    print("%s: %s self share of operator time %.2f %% with --torch-shapes, %.2f and %.2f %% without "
          "(%+.2f pp from their mean; bound 3 + %.2f pp, the plain runs' spread)"
          % (label, name, a, b, c, a - (b + c) / 2, spread))
    if not b or not c or abs(a - (b + c) / 2) > 3 + spread:
        bad.append(name)
# A torch that runs these operators on one thread has no fork/join wait.
# Seen on a 2-vCPU
# Firecracker VM (AMD EPYC, 2026-11-29): torch 2.6 in this root ran no
# OpenMP team of two in most runs, where another VM gave 35-74 % of waits;
# in some of them a second thread took samples all the same (2 threads,
# no team: the wait row 0, rightly). So a wait is required where a team
# of two or more ran (max_team, from the agent's libgomp entry points),
# and the two figures must agree in every run (where no team of two ran,
# that is all: 0.00 and 0.00 in every such run seen).
no_team = []
for run, t in (("hooked", h), ("plain", p), ("plain2", p2)):
    wait = t.get("[OpenMP runtime wait]", {}).get("self_pct", 0.0)
    tj = json.load(open("%s-%s-thr.json" % (base, run)))["threading"]
    thr = 100 * tj["spin_share"]
    team = tj.get("max_team", 0)
    print("%s (%s): [OpenMP runtime wait] %.2f %% of samples, Threading's runtime spin/wait %.2f %%, %d thread(s) "
          "sampled, largest OpenMP team %d" % (label, run, wait, thr, tj.get("threads", 0), team))
    if abs(wait - thr) > 0.05:
        bad.append("wait row (%s) against Threading" % run)
    elif team >= 2 and wait <= 0:
        bad.append("wait row (%s): 0 with a team of %d" % (run, team))
    elif team < 2:
        no_team.append(run)
if no_team:
    print("note: %s: torch ran no OpenMP team of two in %s: no fork/join wait to check there" % (label, ", ".join(no_team)))
if bad:
    print("%s: off: %s" % (label, ", ".join(bad)))
sys.exit(1 if bad else 0)
PY
        then
            pass "$label: --torch-shapes moves no operator's share by more than 3 pp beyond the plain runs' own spread; the wait row agrees with Threading"
            return
        fi
        log "note: $label: --torch-shapes shares off on attempt $try (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
    done
    fail "$label: on both attempts --torch-shapes moved an operator's share by more than 3 pp beyond the plain runs' spread, or a wait row was off (the 'off:' lines above)"
}
if root_available trixie; then
    ROOT="$ROOTS_DIR/trixie"
    # The trixie part above may still hold the root's lock on an fd of its
    # own: a second flock of that file from this shell would wait for itself.
    ts_locked=0
    for fd in /proc/$$/fd/*; do
        [ "$(readlink "$fd" 2>/dev/null)" = "$ROOTS_DIR/trixie.lock" ] && ts_locked=1
    done
    if { [ "$ts_locked" = 0 ] && ! lock_root trixie; } || ! enter_root "$ROOT"; then
        fail "trixie (--torch-shapes): cannot lock $ROOT or mount /proc, /sys or the build dir inside $ROOT"
    else
        RAN=$((RAN + 1))
        check_torch_shapes_shares trixie-torch-shapes "$ROOT" "$OPPROF" /usr/bin/python3.13
        unmount_all
    fi
else
    log "SKIP part: trixie (--torch-shapes): $WHY"
fi
# ==== end of the --torch-shapes block ============================================

[ "$RAN" -gt 0 ] || [ "$FAILURES" -gt 0 ] || skip "no distro root: trixie: $(root_available trixie || echo "$WHY"); bullseye: $(root_available bullseye || echo "$WHY"); sid: $(root_available sid || echo "$WHY")"
finish
