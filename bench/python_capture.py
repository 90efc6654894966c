"""bench/python_capture.py: drives bench/python_capture.c (the handler's
Python capture, loaded with ctypes) from Python code at fixed places, so
that callgrind counts its instructions per capture on stacks that are the
same in every run.

    python3 bench/python_capture.py LIBRARY SCENARIO CAPTURES [--check]

Scenarios (each prints "captures N frames F", F the mean frames a capture):
  operator   a thread inside one long native call, as in a PyTorch
             operator: the same 30-frame stack captured again and again
             from one call site (the memos' best case).
  loop       pure Python that moves between samples, as py_split.py: three
             functions at depths 8, 12 and 16, each capturing from two
             call sites in turn, so the innermost frame changes at every
             capture and the outer ones now and then.
  fresh      every capture from a new code object (exec'd source), at
             depth 20: the innermost frame's code object is read each time
             (the memos' worst case for that frame).
  switch     captures alternate between two generators, each at the end of
             a chain of 40 generator frames ("yield from"): the memo holds
             the other chain's frames each time (the outer memo's worst case).
--check compares every capture with Python's own view of the stack (the
code object of each frame, and the instruction of each frame but the
innermost, which moved on since it was asked) and exits 1 at the first
difference.
"""
import ctypes
import sys


def main():
    lib = ctypes.CDLL(sys.argv[1])
    scenario, captures = sys.argv[2], int(sys.argv[3])
    check = "--check" in sys.argv[4:]
    lib.bench_capture.restype = ctypes.c_uint
    lib.bench_frame_code.restype = ctypes.c_uint64
    lib.bench_frame_code.argtypes = [ctypes.c_uint]
    lib.bench_frame_instr.restype = ctypes.c_int32
    lib.bench_frame_instr.argtypes = [ctypes.c_uint]
    if lib.bench_setup() != 1:
        print("python_capture: the capture found no interpreter it supports", file=sys.stderr)
        sys.exit(77)
    capture, drain = lib.bench_capture, lib.bench_drain
    done = [0, 0]  # captures, frames captured

    def checked():
        """Captures and compares with the stack as Python sees it."""
        n = capture()
        want = []
        f = sys._getframe(0)
        while f is not None:
            want.append(f)
            f = f.f_back
        got = [(lib.bench_frame_code(i), lib.bench_frame_instr(i)) for i in range(n)]
        ok = len(got) == len(want) and all(
            code == id(f.f_code) and (i == 0 or 2 * instr == f.f_lasti)
            for i, ((code, instr), f) in enumerate(zip(got, want)))
        if not ok:
            print("python_capture: capture %d differs from Python's stack:" % done[0], file=sys.stderr)
            for i, f in enumerate(want):
                g = got[i] if i < len(got) else (0, -2)
                print("  %-24s code %#x lasti %d | captured %#x instr %d"
                      % (f.f_code.co_name, id(f.f_code), f.f_lasti, g[0], g[1]), file=sys.stderr)
            sys.exit(1)
        return n

    take = checked if check else capture

    def one():
        done[1] += take()
        done[0] += 1
        if done[0] % 16 == 0:
            drain()  # the writer's drain, as between samples

    def operator(depth):
        if depth > 0:
            return operator(depth - 1)
        for _ in range(captures):
            one()

    def leaf(depth, site):
        if depth > 0:
            return leaf(depth - 1, site)
        if site:
            one()
        else:
            x = 1
            one()
            return x

    def loop():
        for i in range(captures):
            leaf((8, 12, 16)[i % 3], i % 2)

    def fresh(depth):
        if depth > 0:
            return fresh(depth - 1)
        for i in range(captures):
            scope = {"one": one}
            exec(compile("def f%d():\n    one()\nf%d()\n" % (i, i), "<fresh>", "exec"), scope)

    def chain(depth):
        if depth > 0:
            yield from chain(depth - 1)
        while True:
            one()
            yield

    def switch():
        a, b = chain(40), chain(40)
        for i in range(captures):
            next(a if i % 2 else b)

    if scenario == "operator":
        operator(28)
    elif scenario == "loop":
        loop()
    elif scenario == "fresh":
        fresh(18)
    elif scenario == "switch":
        switch()
    else:
        print("python_capture: no scenario %r (operator, loop, fresh, switch)" % scenario, file=sys.stderr)
        sys.exit(2)
    print("captures %d frames %.1f" % (done[0], done[1] / max(done[0], 1)))


if __name__ == "__main__":
    main()
