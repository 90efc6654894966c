#!/bin/sh
# test_unwind.sh — the agent's table-driven unwinder (sampler/agent/unwind_*)
# against libunwind on the same samples. With OPPROF_UNWIND_CHECK=1 the
# handler unwinds every sample both ways and counts the stacks that differ
# (the UNWIND record, docs/format.md); the truth here is libunwind, which the
# agent used alone before. Workloads: C without frame pointers (known_split,
# unwind_deep with large frames, alloca and a workload signal handler), an
# OpenMP program (GNU libgomp), CPython and PyTorch. Each must show 0
# disagreements, every sample checked, and most samples on the tables (the
# share is printed). Then known_split's 5:3:2 split is checked with the
# tables unwinding alone (no check mode), as test_known_split does with
# libunwind.
. "$(dirname "$0")/lib.sh"
require_all

DEEP="$OPPROF_BUILDDIR/tests/workloads/unwind_deep"
GOMP="$OPPROF_BUILDDIR/tests/workloads/omp_regions_gomp"
PYTHON=${OPPROF_TEST_PYTHON:-/usr/bin/python3}
[ -x "$DEEP" ] || skip "workload not built ($DEEP missing; run make check)"

# unwind_counts DIR NAME MIN_FAST_PCT: sums the last UNWIND record of every
# stream of DIR and checks it (see the top of this file). Signal frames,
# DWARF expressions and modules whose table is not built yet go to libunwind:
# they lower the fast-path share, and are printed by cause.
unwind_counts() {
    pycheck '
import glob, os, struct
d, name, min_fast = sys.argv[1], sys.argv[2], float(sys.argv[3])
min_contexts = int(sys.argv[4]) if len(sys.argv) > 4 else 0
FIELDS = ("time table_samples table_frames fallback not_built no_module no_table rule read "
          "check disagree disagree_length tables_built table_bytes build_cpu_ns "
          "table_p50 table_p99 lib_p50 lib_p99 cache_loaded cache_stored cache_rejected "
          "context_checked context_disagree replay_samples replay_frames rule_lookups rule_cache_hits "
          "cache_evicted deferred deferred_finished deferred_cut deferred_pool_full deferred_checked "
          "deferred_disagree deferred_unknown_stack check_at_entry").split()
TIMES = "table_p50 table_p99 lib_p50 lib_p99".split()
tot = dict.fromkeys(FIELDS, 0)
samples = 0
notes = []
biggest, times = -1, [0.0] * 4
for path in sorted(glob.glob(os.path.join(d, "proc-*.raw"))):
    data = open(path, "rb").read()
    off = struct.unpack_from("<I", data, 12)[0]
    last = None
    while off + 8 <= len(data):
        rtype, size = struct.unpack_from("<II", data, off)
        if size < 8:
            break
        body = data[off + 8:off + size]
        if rtype in (5, 18):  # SAMPLE, SAMPLE_SHORT
            samples += 1
        elif rtype == 19 and len(body) >= 16:  # SAMPLE_RUN: its count
            samples += struct.unpack_from("<I", body, 8)[0]
        elif rtype == 24 and len(body) >= 8 * len(FIELDS):
            last = dict(zip(FIELDS, struct.unpack_from("<%dQ" % len(FIELDS), body)))
        elif rtype == 8:
            n = struct.unpack_from("<QI", body)[1]
            text = body[16:16 + n].decode("utf-8", "replace")
            if text.startswith("unwind check"):
                notes.append(text)
        off += (size + 7) & ~7
    if last:
        for k in FIELDS:
            if k not in TIMES:
                tot[k] += last[k]
        if last["check"] >= biggest:  # timings: the stream with the most samples
            biggest = last["check"]
            times = [last[k] / 1000.0 for k in TIMES]
fast = 100.0 * tot["table_samples"] / max(tot["check"], 1)
print("%s: %d samples, %d unwound both ways, %d on the tables (%.1f %% fast path, %.1f frames each), "
      "%d disagreements (%d of length only); libunwind for %d: not built yet %d, no module %d, "
      "no table %d, rule %d (signal frames, expressions), stack read %d; %d tables, %.1f MB, built in %.1f ms"
      % (name, samples, tot["check"], tot["table_samples"], fast,
         tot["table_frames"] / max(tot["table_samples"], 1), tot["disagree"], tot["disagree_length"],
         tot["fallback"], tot["not_built"], tot["no_module"], tot["no_table"], tot["rule"], tot["read"],
         tot["tables_built"], tot["table_bytes"] / 1e6, tot["build_cpu_ns"] / 1e6))
print("  time to unwind the same samples, median / p99: tables %.2f / %.2f us, libunwind %.2f / %.2f us"
      % tuple(times))
# A leaf at the first instruction of a function that no FDE covers (_init,
# where the page fault of the first call into a library is sampled): the
# tables walk it with the rule of the call, libunwind has no rule there.
# Counted apart, not as a disagreement; the unit test unwind_cfi checks the rows.
print("  stacks from a function entry no FDE covers (_init, _fini), not compared: %d" % tot["check_at_entry"])
print("  OpenMP contexts repeated without a walk and walked to check: %d, %d differ"
      % (tot["context_checked"], tot["context_disagree"]))
print("  finished from the previous walk of the thread (memo): %d stacks, %.1f frames copied each, all in the comparison"
      % (tot["replay_samples"], tot["replay_frames"] / max(tot["replay_samples"], 1)))
print("  frame rules from the rule cache of each thread: %d of %d lookups (%.1f %%), all in the comparison"
      % (tot["rule_cache_hits"], tot["rule_lookups"], 100.0 * tot["rule_cache_hits"] / max(tot["rule_lookups"], 1)))
print("  walks stopped at a module without a table, finished by the writer on a copy of the stack: %d kept "
      "(%d on a stack the snapshot did not know yet), "
      "%d finished, %d cut short, %d compared with libunwind, %d differ; %d to libunwind (every copy buffer in use)"
      % (tot["deferred"], tot["deferred_unknown_stack"], tot["deferred_finished"], tot["deferred_cut"],
         tot["deferred_checked"], tot["deferred_disagree"], tot["deferred_pool_full"]))
for t in notes[:4]:
    print("  " + t[:2000])
if tot["deferred_disagree"] != 0:
    fail("%s: %d stacks finished by the writer on a copy differ from libunwind" % (name, tot["deferred_disagree"]))
# Each sample that stopped at a module not built yet, or at a PC in no
# module, is kept for the writer unless every buffer is in use or its stack
# is not in the readable-mappings snapshot yet; and a kept walk is cut only
# at a row the tables cannot express (a leaf in a DWARF expression: the
# ~0.1 % of samples that take "rule") or past 64 KB of stack: most finish.
# Not unwind_deep: it is built to have both, a 70 KB frame (no copy holds
# it) and the signal frames of --signals, so its few kept walks (5-11 a run,
# at the start) are cut 0 to 5 times a run; they are flagged truncated, and
# the comparison above still covers those it finishes.
waiting = tot["not_built"] + tot["no_module"]
if waiting >= 4 and tot["deferred_checked"] == 0:
    fail("%s: %d walks stopped at a module without a table, none finished by the writer" % (name, waiting))
if name != "unwind_deep" and tot["deferred"] >= 4 and tot["deferred_finished"] * 2 < tot["deferred"]:
    fail("%s: of %d walks left to the writer only %d finished" % (name, tot["deferred"], tot["deferred_finished"]))
# known_split: its two threads start after the first read of the maps by the agent:
# their first samples read stacks the snapshot does not know yet, which the
# handler copies through the kernel for the writer (42 of 3,767 samples went
# to libunwind so before, none kept). Check mode counts those reads as
# "stack read" too, with every other failed read: of them 10-48 were kept
# in the regular build, but 21 of 46 in the sanitizer build (the stacks of
# its workloads), so the check asks for some, not for a share.
if name == "known_split" and tot["read"] >= 4 and tot["deferred_unknown_stack"] == 0:
    fail("%s: %d walks stopped at a failed stack read, none kept for the writer as a stack the snapshot did not know"
         % (name, tot["read"]))
if tot["context_disagree"] != 0:
    fail("%s: %d OpenMP contexts sent as unchanged whose walk gives another stack" % (name, tot["context_disagree"]))
if tot["context_checked"] < min_contexts:
    fail("%s: %d OpenMP contexts repeated without a walk, expected at least %d" % (name, tot["context_checked"], min_contexts))
if samples == 0:
    fail("%s: no samples" % name)
if tot["check"] < samples:
    fail("%s: %d samples but only %d unwound both ways (UNWIND record missing?)" % (name, samples, tot["check"]))
if tot["disagree"] != 0:
    fail("%s: %d samples whose stacks differ between the tables and libunwind" % (name, tot["disagree"]))
# The comparison covers the memo only if stacks were finished from it: each
# workload samples threads that stay in one call path for many samples (a
# loop under a fixed caller chain), so most walks can be; a fifth is far
# below what was measured (known_split ~95 %, PyTorch ~65 %) and shows the
# memo was in use.
if tot["replay_samples"] * 5 < tot["table_samples"]:
    fail("%s: only %d of %d table walks finished from the memo: the check did not exercise it"
         % (name, tot["replay_samples"], tot["table_samples"]))
# Likewise the rule cache: every lookup of a walk is counted, and a thread
# that stays in one call path looks the same PCs up again; half is far below
# what was measured (PyTorch ~94 %, C workloads more) and shows the checked
# walks took their rules from it.
if tot["rule_cache_hits"] * 2 < tot["rule_lookups"] or tot["rule_lookups"] == 0:
    fail("%s: %d of %d frame rules from the rule cache: the check did not exercise it"
         % (name, tot["rule_cache_hits"], tot["rule_lookups"]))
# The floor applies once tables exist: samples taken before the writer built
# the table of a module ("not built yet", one drain per module) are the lazy
# build warm-up, a fixed count per run, so a short run (
# omp_regions on a quiet machine: 230 samples, 53 of them warm-up) would fail on them alone.
steady = 100.0 * tot["table_samples"] / max(tot["check"] - tot["not_built"], 1)
if steady < min_fast:
    fail("%s: %.1f %% of samples after warm-up on the tables, expected at least %.0f %%" % (name, steady, min_fast))
if tot["not_built"] > 1000:
    fail("%s: %d samples waited for a table to be built: the writer builds them too late" % (name, tot["not_built"]))
' "$@"
}

# check_workload NAME MIN_FAST_PCT [--contexts N] COMMAND...: one recording
# in check mode; --contexts: at least N OpenMP region contexts were found
# unchanged (no walk) and each was walked anyway to compare.
check_workload() {
    _cw_name=$1 _cw_min=$2 _cw_ctx=0
    shift 2
    if [ "$1" = --contexts ]; then
        _cw_ctx=$2
        shift 2
    fi
    OPPROF_UNWIND_CHECK=1 record "$WORK/$_cw_name" -- "$@"
    if [ "$RECORD_STATUS" -ne 0 ]; then
        fail "$_cw_name: opprof record exited $RECORD_STATUS"
        return
    fi
    unwind_counts "$WORK/$_cw_name" "$_cw_name" "$_cw_min" "$_cw_ctx" && pass "$_cw_name: tables agree with libunwind"
}

# Fast-path floors: a few samples of each module go to libunwind until the
# writer has built its table (one drain, ~10 ms), and signal frames always
# do. 90 % leaves room for that on a loaded machine (measured 98.8-99.4 %).
# PyTorch loads ~300 libraries, each sampled first on the slow path, and its
# tables take ~0.3 s of writer CPU to build: 70 % (measured 90 %).
check_workload known_split 90 "$KNOWN_SPLIT" --threads 2 --seconds 2
check_workload unwind_deep 90 "$DEEP" --threads 2 --seconds 2 --signals
if [ -x "$GOMP" ]; then
    # Passive waiting: with libgomp's default spinning, 20,000 regions of two
    # threads on 2 CPUs shared with other jobs ran past the 60 s limit (CI
    # beside two busy loops, ASan: a descheduled team member makes the other
    # spin out its time slice at every barrier). What is checked here is the
    # unwinding of OpenMP stacks, which passive waiting keeps.
    # 20,000 regions opened from one loop: all but the first few contexts
    # are repeats, each walked again here to compare.
    OMP_WAIT_POLICY=passive check_workload omp_regions 90 --contexts 10000 "$GOMP" --regions 20000
else
    log "note: $GOMP not built (no OpenMP compiler support): OpenMP case not run"
fi
check_workload cpython 90 "$PYTHON" "$OPPROF_SRCDIR/tests/workloads/py_split.py"
if "$PYTHON" -c 'import torch' 2>/dev/null; then
    check_workload pytorch 70 "$PYTHON" "$OPPROF_SRCDIR/tests/workloads/torch_train.py" --seconds 4
elif [ "${CI:-}" = true ]; then
    fail "$PYTHON cannot import torch (python3-torch should be installed in CI)"
else
    log "note: $PYTHON cannot import torch: PyTorch case not run"
fi

# The 5:3:2 split with the tables alone (the default), and most samples on them.
record_checked_split "$WORK/split" main --seconds "$SECONDS_OF_WORK" || die "no report to check further"
unwind_counts_fast() {
    pycheck '
import glob, os, struct
table = fallback = 0
for path in glob.glob(os.path.join(sys.argv[1], "proc-*.raw")):
    data = open(path, "rb").read()
    off = struct.unpack_from("<I", data, 12)[0]
    last = None
    while off + 8 <= len(data):
        rtype, size = struct.unpack_from("<II", data, off)
        if size < 8:
            break
        if rtype == 24:
            last = struct.unpack_from("<4Q", data, off + 8)
        off += (size + 7) & ~7
    if last:
        table += last[1]
        fallback += last[3]
share = 100.0 * table / max(table + fallback, 1)
print("known_split split run: %d samples on the tables, %d on libunwind (%.1f %% fast path)" % (table, fallback, share))
if share < 90:
    fail("only %.1f %% of the split run on the tables" % share)
' "$1"
}
unwind_counts_fast "$WORK/split" >"$WORK/split_share.out" # (no pipe: pycheck counts failures in this shell)
_share_status=$?
cat "$WORK/split_share.out"
[ "$_share_status" -eq 0 ] && pass "known_split's split holds with the table unwinder"

# The report's header says the same share (read from the same UNWIND records).
if limited "$OPPROF" report "$WORK/split" --format text >"$WORK/split.txt" 2>"$WORK/split.err"; then
    pycheck '
import re
text = open(sys.argv[1]).read()
m = re.search(r"^  unwinding   ([0-9.]+) % of stacks by the agent.s unwind tables, ([0-9]+) by libunwind", text, re.M)
if not m:
    fail("no unwinding line in the report header")
else:
    out = open(sys.argv[2]).read()
    want = re.search(r"\(([0-9.]+) % fast path\)", out)
    print("report: %s" % m.group(0).strip())
    if want and abs(float(m.group(1)) - float(want.group(1))) > 0.1:
        fail("report says %s %% on the tables, the streams %s %%" % (m.group(1), want.group(1)))
' "$WORK/split.txt" "$WORK/split_share.out"
else
    fail "opprof report --format text on the split run failed"
fi

# --- tables kept across runs (the unwind cache) --------------------------------------
# cache_counts DIR [FIELD...]: the fields (default "loaded stored rejected
# check disagree evicted") summed over the streams' last UNWIND records;
# "deferred_for_table" is deferred less those of a stack the readable-memory
# snapshot did not know (unknown_stack).
cache_counts() {
    python3 - "$@" <<'PY'
import glob, os, struct, sys
FIELDS = ("time table_samples table_frames fallback not_built no_module no_table rule read check disagree "
          "disagree_length tables_built table_bytes build_cpu_ns t50 t99 l50 l99 loaded stored rejected "
          "context_checked context_disagree replay_samples replay_frames rule_lookups rule_cache_hits evicted "
          "deferred deferred_finished deferred_cut deferred_pool_full deferred_checked deferred_disagree "
          "unknown_stack").split()
tot = dict.fromkeys(FIELDS, 0)
for path in glob.glob(os.path.join(sys.argv[1], "proc-*.raw")):
    data = open(path, "rb").read()
    off, last = struct.unpack_from("<I", data, 12)[0], None
    while off + 8 <= len(data):
        rtype, size = struct.unpack_from("<II", data, off)
        if size < 8:
            break
        if rtype == 24 and size - 8 >= 8 * 22:  # through "rejected"; later fields 0 when absent
            n = min(len(FIELDS), (size - 8) // 8)
            last = dict.fromkeys(FIELDS, 0)
            last.update(zip(FIELDS, struct.unpack_from("<%dQ" % n, data, off + 8)))
        off += size
    for k in FIELDS:
        tot[k] += last[k] if last else 0
tot["deferred_for_table"] = tot["deferred"] - tot["unknown_stack"]
print(*(tot[k] for k in (sys.argv[2:] or "loaded stored rejected check disagree evicted".split())))
PY
}
CACHE="$WORK/own-cache"
cache_run() { # cache_run NAME: known_split in check mode with the cache at $CACHE
    OPPROF_UNWIND_CACHE="$CACHE" OPPROF_UNWIND_CHECK=1 record "$WORK/$1" -- "$KNOWN_SPLIT" --threads 2 --seconds 1
    [ "$RECORD_STATUS" -eq 0 ] || fail "$1: opprof record exited $RECORD_STATUS"
    cache_counts "$WORK/$1" >"$WORK/$1.counts"
}
cache_run cache1
read -r c_load c_store c_rej c_chk c_dis _c_ev <"$WORK/cache1.counts"
# A load marks the file used (its access time, which the trimming below
# orders by). The access time is set an hour ahead, after the file's last
# change and status change, which relatime never updates on a read: only
# the agent's mark can bring it back to now.
touch -a -d "1 hour" "$CACHE"/*.t3
before_loads=$(date +%s)
cache_run cache2
if pycheck '
import glob, os
since, files = int(sys.argv[1]), glob.glob(os.path.join(sys.argv[2], "*.t3"))
marked = [f for f in files if since - 1 <= os.stat(f).st_atime < since + 1800]
print("cache: %d of %d tables marked used by the second run" % (len(marked), len(files)))
if len(marked) < 2:
    fail("the second run loaded tables but marked %d of %d used" % (len(marked), len(files)))
' "$before_loads" "$CACHE"; then
    pass "unwind cache: loading a table marks it used"
fi
read -r w_load w_store w_rej w_chk w_dis _w_ev <"$WORK/cache2.counts"
log "cache: first run read $c_load, stored $c_store; second run read $w_load, stored $w_store (checked $w_chk, $w_dis differ)"
# Not every table of the first run is wanted again: a module sampled once
# (the loader at start-up) may get no sample the second time (CI: 4 stored,
# 3 read). The two the work runs in (known_split, libsplit_stripped.so) are.
if [ "$c_load" -eq 0 ] && [ "$c_store" -ge 2 ] && [ "$w_load" -ge 2 ] && [ "$w_load" -le "$c_store" ] &&
    [ "$w_chk" -gt 0 ] && [ "$w_dis" -eq 0 ] && [ "$w_rej" -eq 0 ]; then
    pass "unwind cache: the second run reads $w_load of the $c_store tables the first stored, and they agree with libunwind"
else
    fail "unwind cache: first run loaded $c_load stored $c_store; second loaded $w_load rejected $w_rej, $w_dis of $w_chk differ"
fi
# Tables in the cache are read before any sample asks for them
# (unwind_build.c, load_cached_new): a sample that meets a module without a
# table wakes the writer and leaves its walk to it (unwind_defer.c), which
# made up the handler's slowest 1 %. With samples recorded from 0.5 s on,
# the writer has scanned the modules and read their tables before the
# first one: no walk deferred for a table and no sample waiting for one.
# Without the early reading each module's first sample is deferred
# (known_split's, and libsplit_stripped.so's). Walks deferred because a new
# thread's stack is not in the readable-mappings snapshot yet are another
# matter (agent_memmap.c) and are left out (deferred_for_table).
# Beside a `make -j2` this missed twice in three runs by one walk deferred
# for a table (2026-12-02; never in ten quiet runs, nor in CI beside two busy
# loops): which module's, and why, is not established. A miss is recorded
# again with the load average printed; a run that reads no table early
# misses on both attempts.
early_ok() { [ "$e_load" -ge 2 ] && [ "$e_defer" -eq 0 ] && [ "$e_nb" -eq 0 ]; }
for attempt in 1 2; do
    rm -rf "$WORK/cache_early"
    OPPROF_UNWIND_CACHE="$CACHE" record "$WORK/cache_early" --delay 0.5 -- "$KNOWN_SPLIT" --threads 2 --seconds 1.5
    [ "$RECORD_STATUS" -eq 0 ] || fail "cache_early: opprof record exited $RECORD_STATUS"
    read -r e_load e_defer e_nb <<EOF_COUNTS
$(cache_counts "$WORK/cache_early" loaded deferred_for_table not_built)
EOF_COUNTS
    log "cache, window from 0.5 s (attempt $attempt): $e_load tables read, $e_defer walks deferred for a table, $e_nb samples waited for one"
    early_ok && break
    [ $attempt = 1 ] && log "note: a walk deferred for a table on attempt 1 (load average: $(cut -d' ' -f1-3 /proc/loadavg)); recording again"
done
if early_ok; then
    pass "unwind cache: tables read before a sample asks ($e_load read, no walk deferred for a table)"
else
    fail "unwind cache: with a window from 0.5 s, $e_load tables read, $e_defer walks deferred for a table, $e_nb waited for one"
fi
# Damaged files (one cut short, the others with every index past its end)
# are refused, removed and compiled again: no crash, stacks still agree.
n=0
for f in "$CACHE"/*.t3; do
    n=$((n + 1))
    if [ $n -eq 1 ]; then
        truncate -s -100 "$f"
    else
        python3 -c 'import sys; p = sys.argv[1]; b = bytearray(open(p, "rb").read()); b[40:] = b"\xff" * (len(b) - 40); open(p, "wb").write(b)' "$f"
    fi
done
cache_run cache3
read -r d_load d_store d_rej d_chk d_dis _d_ev <"$WORK/cache3.counts"
log "damaged cache: $d_rej files refused, $d_load read, $d_store stored again; checked $d_chk, $d_dis differ"
if [ "$d_rej" -ge 2 ] && [ "$d_store" -ge 2 ] && [ "$d_chk" -gt 0 ] && [ "$d_dis" -eq 0 ]; then
    pass "unwind cache: damaged files are refused and the tables compiled again"
else
    fail "unwind cache with damaged files: refused $d_rej, stored $d_store, $d_dis of $d_chk differ"
fi
# A cache directory others can write to is not used at all.
chmod 0777 "$CACHE"
cache_run cache4
read -r o_load o_store o_rej o_chk o_dis _o_ev <"$WORK/cache4.counts"
if [ "$o_load" -eq 0 ] && [ "$o_store" -eq 0 ] && [ "$o_dis" -eq 0 ]; then
    pass "unwind cache: a directory writable by others is not used"
else
    fail "unwind cache in a world-writable dir: read $o_load, stored $o_store"
fi
chmod 0700 "$CACHE"

# The cache kept within OPPROF_UNWIND_CACHE_MAX, least recently used first
# (unwind_cache.c). A directory with 8 stale 64 KB tables last used 1 to 8
# days ago and a file that is no table; the limit leaves room for
# known_split's own tables (their size in $CACHE, from the runs above) and
# about 4 stale ones. After a run that stores its tables: the directory's
# tables within the limit, the stale ones removed strictly oldest first,
# every table the run stored there, the other file untouched, and the
# count in UNWIND equal to the files gone.
TRIM="$WORK/trim-cache"
mkdir -m 700 "$TRIM"
own_bytes=$(cat "$CACHE"/*.t3 | wc -c)
i=1
while [ $i -le 8 ]; do
    f="$TRIM/$(printf '%040x' $i)-1000-2000.t3"
    head -c 65536 /dev/zero >"$f"
    touch -a -d "$i days ago" "$f"
    i=$((i + 1))
done
echo "not a table" >"$TRIM/notes.txt"
limit=$((own_bytes + 4 * 65536 + 32768))
OPPROF_UNWIND_CACHE="$TRIM" OPPROF_UNWIND_CACHE_MAX=$limit record "$WORK/trim" -- "$KNOWN_SPLIT" --threads 2 --seconds 1
[ "$RECORD_STATUS" -eq 0 ] || fail "trim: opprof record exited $RECORD_STATUS"
cache_counts "$WORK/trim" >"$WORK/trim.counts"
read -r t_load t_store t_rej t_chk t_dis t_ev <"$WORK/trim.counts"
if pycheck '
import os
d, limit, stored, evicted = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
stale = ["%040x-1000-2000.t3" % i for i in range(1, 9)]
tables = [f for f in os.listdir(d) if f.endswith(".t3")]
kept = [i for i in range(1, 9) if stale[i - 1] in tables]
gone = [i for i in range(1, 9) if i not in kept]
total = sum(os.path.getsize(os.path.join(d, f)) for f in tables)
new = [f for f in tables if f not in stale]
print("trim: limit %d bytes, tables now %d bytes; stale tables kept (days since use) %s, removed %s; "
      "%d stored by the run, %d there; UNWIND says %d removed" % (limit, total, kept, gone, stored, len(new), evicted))
if total > limit:
    fail("the cache holds %d bytes of tables, over its limit of %d" % (total, limit))
if not gone or not kept:
    fail("expected some stale tables removed and some kept, kept %s" % kept)
elif max(kept) > min(gone):
    fail("a table used %d days ago was kept while one used %d days ago was removed" % (max(kept), min(gone)))
if stored < 2 or len(new) != stored:
    fail("the run stored %d tables, %d of them are there" % (stored, len(new)))
if evicted != len(gone):
    fail("UNWIND counts %d removed, %d are gone" % (evicted, len(gone)))
if open(os.path.join(d, "notes.txt")).read() != "not a table\n":
    fail("a file that is no table was touched")
' "$TRIM" "$limit" "$t_store" "$t_ev"; then
    pass "unwind cache: kept within OPPROF_UNWIND_CACHE_MAX, least recently used tables removed first"
fi

finish
