"""Pure-Python workload with a known split: spin_a, spin_b and spin_c run the
same loop body for iteration counts in the ratio 5:3:2, interleaved in small
rounds, so their shares of CPU time are 50/30/20 % by construction. Used by
tests/integration/test_python_split.sh."""
import sys
import time


def body(n):
    # Small ints only: a growing sum would become a multi-digit int whose
    # additions cost more late in the loop, breaking "time proportional to n".
    s = 0
    for i in range(n):
        s = (s + i) & 0xFFFF
    return s


def spin_a(n):
    return body(n)


def spin_b(n):
    return body(n)


def spin_c(n):
    return body(n)


def run_work(seconds):
    # Iterations per tenth of a round. The round length varies (a cycle of
    # unit sizes, 1.7k..2.4k) so that it cannot phase-lock with the 1 ms
    # sampling period: a round of exactly 0.5 ms put every other sample at
    # the same point of a round and moved shares by 3 pp.
    units = (2000, 2311, 1777, 2203, 1901, 2399, 1703)
    start = time.process_time()
    rounds = 0
    while time.process_time() - start < seconds:
        unit = units[rounds % len(units)]
        spin_a(5 * unit)
        spin_b(3 * unit)
        spin_c(2 * unit)
        rounds += 1
    return rounds


if __name__ == "__main__":
    rounds = run_work(float(sys.argv[1]) if len(sys.argv) > 1 else 3.0)
    print("rounds", rounds, file=sys.stderr)
