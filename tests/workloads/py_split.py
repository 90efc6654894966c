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
    # Units of 4 x 1700..2400 iterations, random per round (LCG), so rounds
    # start at random phases of the sampling period (fixed or cycled sizes
    # aliased: spin_b 28.3-33.7 %). x4: every call outlasts a period at
    # -F 4000. At 1x spin_c took ~0.12 ms, and the timer's own cost on the
    # 2-CPU VM of 2026-11-28 (~25 us a sample, bench/null_sampler.c alone)
    # slowed the interpreter unevenly after each sample: calls shorter than
    # a period got off their share (spin_b 26-29 %). See docs/guide.md.
    start = time.process_time()
    rounds = 0
    x = 12345
    while time.process_time() - start < seconds:
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        unit = 4 * (1700 + (x >> 8) % 701)
        spin_a(5 * unit)
        spin_b(3 * unit)
        spin_c(2 * unit)
        rounds += 1
    return rounds


if __name__ == "__main__":
    rounds = run_work(float(sys.argv[1]) if len(sys.argv) > 1 else 3.0)
    print("rounds", rounds, file=sys.stderr)
