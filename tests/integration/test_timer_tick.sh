#!/bin/sh
# test_timer_tick.sh — `record --timer tick`: a POSIX CPU-time timer per
# thread (sampler/agent/agent_tick.c) instead of the perf_event timer.
#   known_split: the 50/30/20 split within 3 sigma of the samples taken (the
#     tick caps the rate: 250 Hz on a CONFIG_HZ=250 kernel, so ~4 ms a
#     sample), the weights adding up to the CPU time the workload reports
#     itself, record's summary giving the rate reached, info and the report
#     saying how it was sampled;
#   threads: a Python program runs 60 threads one after the other (30 ms of
#     CPU each): most are sampled, the weights add up to its own CPU time, and
#     at its end /proc/self/timers lists no timer of a thread that is gone
#     (each holds a slot of RLIMIT_SIGPENDING);
#   a fork child and an exec'd image are sampled too (timers are neither
#     inherited nor kept across exec: the agent arms them again);
#   --timer with -p, with -c, or with an unknown mode: one error, status 2.
. "$(dirname "$0")/lib.sh"
require_all
require_python3

# --- known_split ---------------------------------------------------------------------
record "$WORK/ks" --timer tick -- "$KNOWN_SPLIT" --seconds 4
[ "$RECORD_STATUS" -eq 0 ] || die "opprof record --timer tick of known_split exited $RECORD_STATUS"
grep -q '^opprof record: --timer tick: [0-9]* samples per second of CPU time' "$RECORD_ERR" &&
    pass "summary: $(grep -- '--timer tick:' "$RECORD_ERR" | cut -c1-80)..." ||
    fail "record's summary does not give the rate --timer tick reached"
grep -qx 'timer=tick' "$WORK/ks/info" && grep -qx 'sample_weight=thread_cpu_time' "$WORK/ks/info" &&
    pass "info: timer=tick, sample_weight=thread_cpu_time" || fail "info lacks timer=tick or sample_weight=thread_cpu_time"
limited "$OPPROF" report "$WORK/ks" >"$WORK/ks.txt" 2>&1
grep -q 'record --timer tick' "$WORK/ks.txt" && pass "the report's samples line names --timer tick" ||
    fail "the report does not say the samples came from --timer tick"
if report_json "$WORK/ks" "$WORK/ks.json"; then
    pycheck '
import math
doc = load(sys.argv[1])
err = open(sys.argv[2]).read()
m = re.search(r"total spin_a=\d+ spin_b=\d+ spin_c=\d+ iterations \(5:3:2\) cpu=([0-9.]+)s", err)
if not m: fail("known_split did not print its CPU time")
cpu = float(m.group(1)) if m else 0
samples = sum(r.get("samples", 0) for r in doc["rows"] if r.get("self_pct", 0) > 0)
weight_s = doc["total_weight"] * doc["period_ns"] / 1e9
rate = samples / cpu if cpu else 0
print("samples %d, weight %.3f s, workload CPU %.3f s, %.0f samples per CPU-second" % (samples, weight_s, cpu, rate))
# The tick caps the rate at CONFIG_HZ (100-1000): fewer than -F 1000 asks,
# never more; 50 a second would mean timers that did not fire.
if not 50 <= rate <= 1050: fail("%.0f samples per CPU-second: not what a kernel tick gives" % rate)
# Weights carry each sample'"'"'s CPU time since the previous one: together
# the workload'"'"'s CPU time, less the end after the last sample (< 1 tick,
# 10 ms) and start-up before the timer (the agent'"'"'s constructor).
if cpu and abs(weight_s - cpu) > 0.03 * cpu + 0.010:
    fail("weights add up to %.3f s, the workload reports %.3f s of CPU" % (weight_s, cpu))
else: ok("weights add up to %.3f s of the workload'"'"'s %.3f s of CPU" % (weight_s, cpu))
# 3 sigma of a 50 % share over this many samples, at least the usual 2 pp
tol = max(2.0, 300 * math.sqrt(0.25 / max(samples, 1)))
by = rows_by_name(doc)
for f, want in (("spin_a", 50.0), ("spin_b", 30.0), ("spin_c", 20.0)):
    got = by[f][0]["self_pct"] if f in by else 0.0
    if abs(got - want) > tol: fail("%s: %.1f %% self, truth %.0f %% (+- %.1f pp: 3 sigma)" % (f, got, want, tol))
    else: ok("%s: %.1f %% self, truth %.0f %% (+- %.1f pp)" % (f, got, want, tol))
' "$WORK/ks.json" "$RECORD_ERR"
fi

# --- threads come and go -------------------------------------------------------------------
cat >"$WORK/threads.py" <<'PY'
import threading, time
def burn(s):
    end = time.thread_time() + s
    while time.thread_time() < end:
        pass
for i in range(60):
    t = threading.Thread(target=burn, args=(0.03,))
    t.start()
    t.join()
    time.sleep(0.005)  # the writer's next poll sees the thread gone
time.sleep(0.05)
timers = sum(1 for line in open("/proc/self/timers") if line.startswith("ID:"))
print("timers_at_end=%d cpu=%.3f" % (timers, time.process_time()))
PY
record "$WORK/th" --timer tick -- /usr/bin/python3 "$WORK/threads.py"
[ "$RECORD_STATUS" -eq 0 ] || die "opprof record --timer tick of 60 threads exited $RECORD_STATUS"
limited "$OPPROF" report "$WORK/th" >"$WORK/th.txt" 2>&1
if report_json "$WORK/th" "$WORK/th.json" --group-by thread; then
    pycheck '
doc = load(sys.argv[1])
out = open(sys.argv[2]).read()
m = re.search(r"timers_at_end=(\d+) cpu=([0-9.]+)", out)
if not m: fail("the workload did not print its timers and CPU time: %r" % out[-200:])
else:
    timers, cpu = int(m.group(1)), float(m.group(2))
    # the main thread'"'"'s, and at most one of a thread whose exit the
    # writer has not polled yet
    if timers > 2: fail("%d POSIX timers left at the end (main + threads gone): not deleted" % timers)
    else: ok("%d POSIX timer(s) at the end, after 60 threads came and went" % timers)
    # Each thread leaves the CPU time after its last tick unsampled (up to
    # 4 ms at 250 Hz, 60 times): the weights, the unsampled time the report
    # counts and the agent'"'"'s writer and start-up CPU time (which no
    # sample stands for) add up to the CPU time, and the rest is said. The
    # handler'"'"'s own time is in the weights: the timer counts the
    # thread'"'"'s whole CPU clock (agent.c, tick_weight). The writer'"'"'s
    # part is ~1 % on one VM and ~5 % on one whose system calls cost ~1 us
    # (2026-11-29): leaving it out failed there with the agent of 0bc53fa too.
    weight_s = doc["total_weight"] * doc["period_ns"] / 1e9
    acct = doc.get("accounting", {})
    un_s = acct.get("unsampled_cpu_ns", 0) / 1e9
    agent = doc.get("agent", {})
    agent_s = (agent.get("writer_cpu_ns", 0) + agent.get("startup_cpu_ns", 0)) / 1e9
    if weight_s > cpu * 1.02 + 0.010 or abs(weight_s + un_s + agent_s - cpu) > 0.03 * cpu + 0.010:
        fail("weights %.3f s + unsampled %.3f s + the writer and start-up %.3f s, the workload reports %.3f s of CPU" % (weight_s, un_s, agent_s, cpu))
    else: ok("weights %.3f s + unsampled %.3f s + the writer and start-up %.3f s = the workload'"'"'s %.3f s of CPU" % (weight_s, un_s, agent_s, cpu))
    # the reason given: the tail after each thread'"'"'s last tick, or threads
    # that ended before the writer armed them (a busy host delays its poll)
    said = "--timer tick" in "".join(l for l in open(sys.argv[3]) if l.startswith("  unsampled"))
    if un_s > 0.05 * cpu and not said: fail("%.3f s unsampled, and the report does not say why" % un_s)
threads = [r for r in doc["rows"] if r.get("samples", 0) > 0]
# each thread runs 30 ms of CPU: armed within ~10 ms, it takes a sample
# (61 of 61 on a quiet VM); beside a CI and two busy loops the writer'"'"'s
# poll came late and 52 were (its unsampled time is counted, above). Half
# would mean timers not armed.
if len(threads) < 31: fail("%d threads sampled of 61" % len(threads))
else: ok("%d threads sampled of 61" % len(threads))
# Each thread burns 30 ms of its CPU clock or more. Its timer, armed when
# the writer first lists it (up to ~10 ms in, later on a busy host), has its
# first expiry at one period of the thread clock, so the first sample
# carries the time before the arm (agent_tick.c): a sampled thread weighs
# at least 30 ms less the tail after its last tick (one tick: 1000 / the
# rate) and a period. Arming one period from now gave a median of 22 ms
# (13-29) at 250 Hz, as the time before each arm went unsampled.
samples = sum(r.get("samples", 0) for r in threads)
tick_ms = 1000.0 * doc["total_weight"] * doc["period_ns"] / 1e9 / max(samples, 1)
floor_ms = 30.0 - tick_ms - doc["period_ns"] / 1e6
ws = sorted(r["self_ns"] / 1e6 for r in threads)
if ws and ws[len(ws) // 2] < floor_ms:
    fail("a sampled thread weighs %.1f ms at the median (%.0f-%.0f), below the %.1f ms of CPU each had less a tick: the time before its timer was armed is lost" % (ws[len(ws) // 2], ws[0], ws[-1], floor_ms))
elif ws: ok("a sampled thread weighs %.1f ms at the median (%.0f-%.0f) of the 30 ms or more each ran (floor %.1f: less a tick of %.1f ms)" % (ws[len(ws) // 2], ws[0], ws[-1], floor_ms, tick_ms))
' "$WORK/th.json" "$WORK/th.out" "$WORK/th.txt"
fi

# --- fork child and exec'd image ------------------------------------------------------
cat >"$WORK/fork.py" <<'PY'
import os, sys, time
def burn(s):
    end = time.process_time() + s
    while time.process_time() < end:
        pass
pid = os.fork()
if pid == 0:
    burn(0.4)
    os.execv(sys.argv[1], [sys.argv[1], "--seconds", "0.4"])
burn(0.4)
os.waitpid(pid, 0)
PY
record "$WORK/fk" --timer tick -- /usr/bin/python3 "$WORK/fork.py" "$KNOWN_SPLIT"
[ "$RECORD_STATUS" -eq 0 ] || fail "opprof record --timer tick of fork + exec exited $RECORD_STATUS"
if report_json "$WORK/fk" "$WORK/fk.json" --group-by process; then
    pycheck '
doc = load(sys.argv[1])
rows = [r for r in doc["rows"] if r.get("samples", 0) > 0]
names = sorted(r["name"] for r in rows)
print("processes with samples: %s" % names)
# the parent, the fork child before exec, and known_split after it: at
# least the parent and the exec'"'"'d image (known_split keeps the pid)
if len(rows) < 2 or not any("known_split" in n for n in names):
    fail("fork child or exec'"'"'d image not sampled: %s" % names)
else: ok("parent, fork child and exec'"'"'d image sampled")
' "$WORK/fk.json"
fi

# --- options that do not go with it --------------------------------------------------------
for args in "--timer tick -p 1" "--timer tick -e task-clock -c 1000 -- true" "--timer fast -- true"; do
    # shellcheck disable=SC2086
    limited "$OPPROF" record -o "$WORK/bad" $args >"$WORK/bad.out" 2>"$WORK/bad.err"
    st=$?
    if [ "$st" -eq 2 ] && [ "$(wc -l <"$WORK/bad.err")" -eq 1 ] && [ ! -e "$WORK/bad" ]; then
        pass "record $args: status 2, $(cat "$WORK/bad.err")"
    else
        show stderr "$WORK/bad.err" 4
        fail "record $args: status $st (expected 2 with one line and no result dir)"
    fi
done

finish
