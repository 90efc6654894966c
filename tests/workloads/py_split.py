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
    # Iterations per tenth of a round: a pseudo-random 1700..2400 for each
    # round, so that rounds cannot phase-lock with the sampling period. A
    # round of exactly 0.5 ms put every other sample at the same point of a
    # round and moved shares by 3 pp; a fixed cycle of seven sizes did the
    # same at -F 4000 under Python 3.14, whose 7-round cycle took 3.51 ms,
    # 14.04 periods of 0.25 ms (spin_b 28.3 to 33.7 % across CI runs). With
    # random lengths each round starts at a random phase of the period.
    start = time.process_time()
    rounds = 0
    x = 12345
    while time.process_time() - start < seconds:
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        unit = 1700 + (x >> 8) % 701
        spin_a(5 * unit)
        spin_b(3 * unit)
        spin_c(2 * unit)
        rounds += 1
    return rounds


if __name__ == "__main__":
    rounds = run_work(float(sys.argv[1]) if len(sys.argv) > 1 else 3.0)
    print("rounds", rounds, file=sys.stderr)
