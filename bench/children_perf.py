#!/usr/bin/env python3
"""Which part of a process tree's children's CPU is the agent's, from perf.

    perf record -e cpu-clock -F 2000 --call-graph dwarf,16384 -o cpu.data -- \
        opprof record -q -o DIR -- python3 tests/workloads/torch_forks.py 40
    perf script -i cpu.data -F comm,pid,tid,ip,sym,dso | bench/children_perf.py [COMM]

The parent is the COMM process (default python3) with the most samples; its
children are the other COMM processes. Each child sample is counted once:
  workload        the child's main thread, no agent frame on the stack
  handler         under the agent's SIGTRAP handler (on_sigtrap)
  agent, main     in the agent on the main thread outside the handler (fork
                  child set-up, the drain at exit)
  other threads   the agent's writer thread, and any other thread
and the samples in or for the agent are broken down by their innermost agent
function, and whether the sample was in the kernel (page faults, system
calls) or in user space. bench/README.md says what it has measured.
"""
import collections
import sys

AGENT = "libopprof_agent"


def samples(lines):
    cur = None
    for line in lines:
        if not line.strip():
            if cur:
                yield cur
            cur = None
        elif not line[0].isspace():
            head = line.split()
            pid, _, tid = head[1].partition("/")
            cur = {"comm": head[0], "pid": pid, "tid": tid, "frames": []}
        elif cur is not None:
            parts = line.strip().split(None, 1)
            cur["frames"].append(parts[1] if len(parts) > 1 else "?")
    if cur:
        yield cur


def main():
    comm = sys.argv[1] if len(sys.argv) > 1 else "python3"
    all_samples = list(samples(sys.stdin))
    per_pid = collections.Counter(s["pid"] for s in all_samples if s["comm"] == comm)
    if not per_pid:
        sys.exit("children_perf: no %s samples in the input (perf script -F comm,pid,tid,ip,sym,dso)" % comm)
    parent = per_pid.most_common(1)[0][0]
    children = [s for s in all_samples if s["comm"] == comm and s["pid"] != parent]
    kinds = collections.Counter()
    inner = collections.Counter()
    for s in children:
        frames = s["frames"]
        agent = [f for f in frames if AGENT in f]
        if s["tid"] != s["pid"]:
            kind = "other threads"
        elif any("on_sigtrap" in f for f in agent):
            kind = "handler"
        elif agent:
            kind = "agent, main"
        else:
            kind = "workload"
        kinds[kind] += 1
        if kind != "workload":
            where = agent[0].split(" (")[0] if agent else "(no agent frame)"
            space = "kernel" if frames and "kernel" in frames[0] else "user"
            inner[(kind, where, space)] += 1
    n = len(children)
    print("parent %s: %d samples; %d children: %d samples" % (parent, per_pid[parent], len(per_pid) - 1, n))
    for kind in ("workload", "handler", "agent, main", "other threads"):
        print("  %-14s %6d  %5.1f %%" % (kind, kinds[kind], 100.0 * kinds[kind] / n if n else 0))
    print("in or for the agent: %d samples" % (n - kinds["workload"]))
    for (kind, where, space), count in inner.most_common(12):
        print("  %6d  %-14s %-32s %s" % (count, kind, where, space))


if __name__ == "__main__":
    main()
