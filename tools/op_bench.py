#!/usr/bin/env python3
# tools/op_bench.py — the microbenchmark runner behind `opprof sweep --op`.
#
# Times one PyTorch operator on one input shape, dtype and thread count:
# creates the inputs (torch.manual_seed(0)), warms up, times calls one by
# one with time.perf_counter (--repeat calls, more until --min-time seconds
# of calls have passed), and prints one JSON line:
#   {"op": ..., "shape": [...], "dtype": ..., "threads": N, "repeat": N,
#    "median_s": ..., "min_s": ..., "max_s": ..., "p25_s": ..., "p75_s": ...}
# Unknown op, malformed shape or unknown dtype: one line on stderr, exit 2.
#
# The timed calls run inside the function op_bench_timed_calls and nothing
# else does: `opprof diff SWEEPDIR:ROW ...` keeps only the samples under that
# Python frame, so a comparison of two rows is about the operator and not
# about `import torch` or the warm-up. --min-time gives that loop enough
# samples at 1 kHz (0.2 s: about 200 per row) whatever the shape.
#
# Shapes (dimensions separated by "x"):
#   bmm         BxMxKxN  A[B,M,K] @ B[B,K,N]
#   baddbmm     BxMxKxN  C[B,M,N] + A[B,M,K] @ B[B,K,N]
#   mm          MxKxN    A[M,K] @ B[K,N]
#   addmm       MxKxN    C[M,N] + A[M,K] @ B[K,N]
#   softmax     any tensor shape, over dim -1
#   layer_norm  any tensor shape, normalized over dim -1, with weight and bias
#   linear      MxKxN    x[M,K] @ W[N,K]^T + b[N]
#   conv2d      NxCxHxWxKxRxS  input[N,C,H,W], weight[K,C,R,S], stride 1, no padding
import argparse
import json
import sys
import time

OPS = {"bmm": 4, "baddbmm": 4, "mm": 3, "addmm": 3, "softmax": None, "layer_norm": None, "linear": 3, "conv2d": 7}
DTYPES = ("float32", "float64", "bfloat16", "float16")


def fail(msg):
    sys.stderr.write("op_bench: %s\n" % msg)
    sys.exit(2)


def canonical_op(name):
    for prefix in ("torch.nn.functional.", "torch.", "F.", "aten::"):
        if name.startswith(prefix):
            name = name[len(prefix):]
            break
    return name


def parse_shape(op, text):
    parts = text.split("x")
    dims = []
    for p in parts:
        if not p.isdigit() or int(p) <= 0:
            fail("malformed shape '%s': expected positive integers separated by 'x'" % text)
        dims.append(int(p))
    want = OPS[op]
    if want is not None and len(dims) != want:
        names = {4: "BxMxKxN", 3: "MxKxN", 7: "NxCxHxWxKxRxS"}[want]
        fail("malformed shape '%s' for %s: expected %s" % (text, op, names))
    if op == "conv2d" and (dims[5] > dims[2] or dims[6] > dims[3]):
        fail("malformed shape '%s' for conv2d: the kernel RxS is larger than the image HxW" % text)
    return dims


def make_call(torch, op, dims, dtype):
    def rnd(*shape):
        return torch.randn(*shape, dtype=torch.float32).to(dtype)
    if op == "bmm":
        b, m, k, n = dims
        a, bb = rnd(b, m, k), rnd(b, k, n)
        return lambda: torch.bmm(a, bb)
    if op == "baddbmm":
        b, m, k, n = dims
        c, a, bb = rnd(b, m, n), rnd(b, m, k), rnd(b, k, n)
        return lambda: torch.baddbmm(c, a, bb)
    if op == "mm":
        m, k, n = dims
        a, bb = rnd(m, k), rnd(k, n)
        return lambda: torch.mm(a, bb)
    if op == "addmm":
        m, k, n = dims
        c, a, bb = rnd(m, n), rnd(m, k), rnd(k, n)
        return lambda: torch.addmm(c, a, bb)
    if op == "linear":
        m, k, n = dims
        x, w, bias = rnd(m, k), rnd(n, k), rnd(n)
        return lambda: torch.nn.functional.linear(x, w, bias)
    if op == "conv2d":
        n, c, h, w, k, r, s = dims
        x, wt = rnd(n, c, h, w), rnd(k, c, r, s)
        return lambda: torch.nn.functional.conv2d(x, wt)
    x = rnd(*dims)
    if op == "softmax":
        return lambda: torch.softmax(x, dim=-1)
    w, bias = rnd(dims[-1]), rnd(dims[-1])
    return lambda: torch.nn.functional.layer_norm(x, (dims[-1],), w, bias)


def op_bench_warm_up(call, count):
    for _ in range(count):
        call()


def op_bench_timed_calls(call, repeat, min_time):
    """Per-call times of at least repeat calls and at least min_time seconds."""
    times = []
    start = time.perf_counter()
    while len(times) < repeat or time.perf_counter() - start < min_time:
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return times


def quantile(sorted_times, q):
    """Linear interpolation between the closest ranks (numpy's default)."""
    pos = q * (len(sorted_times) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_times) - 1)
    return sorted_times[lo] + (sorted_times[hi] - sorted_times[lo]) * (pos - lo)


def main():
    ap = argparse.ArgumentParser(description="time one PyTorch operator")
    ap.add_argument("--op", required=True)
    ap.add_argument("--shape", required=True)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: leave as is)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--min-time", type=float, default=0.0,
                    help="keep timing calls until this many seconds have passed")
    args = ap.parse_args()

    op = canonical_op(args.op)
    if op not in OPS:
        fail("unknown op '%s' (known: %s)" % (args.op, ", ".join("torch." + o for o in OPS)))
    dims = parse_shape(op, args.shape)
    if args.dtype not in DTYPES:
        fail("unknown dtype '%s' (known: %s)" % (args.dtype, ", ".join(DTYPES)))
    if args.repeat < 1 or args.warmup < 0 or args.min_time < 0:
        fail("--repeat must be >= 1, --warmup and --min-time >= 0")

    import torch
    torch.manual_seed(0)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    call = make_call(torch, op, dims, getattr(torch, args.dtype))
    with torch.no_grad():
        op_bench_warm_up(call, args.warmup)
        times = op_bench_timed_calls(call, args.repeat, args.min_time)
    times.sort()
    print(json.dumps({"op": "torch." + op, "shape": dims, "dtype": args.dtype,
                      "threads": torch.get_num_threads(), "repeat": len(times),
                      "median_s": quantile(times, 0.5), "min_s": times[0], "max_s": times[-1],
                      "p25_s": quantile(times, 0.25), "p75_s": quantile(times, 0.75)}))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
