#!/usr/bin/env python3
# tools/op_bench.py — the microbenchmark runner behind `opprof sweep --op`.
#
# Times one PyTorch operator on one input shape, dtype and thread count:
# creates the inputs (torch.manual_seed(0)), warms up, times --repeat calls
# one by one with time.perf_counter, and prints one JSON line:
#   {"op": ..., "shape": [...], "dtype": ..., "threads": N, "repeat": N,
#    "median_s": ..., "min_s": ..., "max_s": ...}
# Unknown op, malformed shape or unknown dtype: one line on stderr, exit 2.
#
# Shapes (dimensions separated by "x"):
#   bmm         BxMxKxN  A[B,M,K] @ B[B,K,N]
#   mm          MxKxN    A[M,K] @ B[K,N]
#   addmm       MxKxN    C[M,N] + A[M,K] @ B[K,N]
#   softmax     any tensor shape, over dim -1
#   layer_norm  any tensor shape, normalized over dim -1
import argparse
import json
import sys
import time

OPS = {"bmm": 4, "mm": 3, "addmm": 3, "softmax": None, "layer_norm": None}
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
        names = {4: "BxMxKxN", 3: "MxKxN"}[want]
        fail("malformed shape '%s' for %s: expected %s" % (text, op, names))
    return dims


def make_call(torch, op, dims, dtype):
    def rnd(*shape):
        return torch.randn(*shape, dtype=torch.float32).to(dtype)
    if op == "bmm":
        b, m, k, n = dims
        a, bb = rnd(b, m, k), rnd(b, k, n)
        return lambda: torch.bmm(a, bb)
    if op == "mm":
        m, k, n = dims
        a, bb = rnd(m, k), rnd(k, n)
        return lambda: torch.mm(a, bb)
    if op == "addmm":
        m, k, n = dims
        c, a, bb = rnd(m, n), rnd(m, k), rnd(k, n)
        return lambda: torch.addmm(c, a, bb)
    x = rnd(*dims)
    if op == "softmax":
        return lambda: torch.softmax(x, dim=-1)
    return lambda: torch.nn.functional.layer_norm(x, (dims[-1],))


def main():
    ap = argparse.ArgumentParser(description="time one PyTorch operator")
    ap.add_argument("--op", required=True)
    ap.add_argument("--shape", required=True)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: leave as is)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()

    op = canonical_op(args.op)
    if op not in OPS:
        fail("unknown op '%s' (known: %s)" % (args.op, ", ".join("torch." + o for o in OPS)))
    dims = parse_shape(op, args.shape)
    if args.dtype not in DTYPES:
        fail("unknown dtype '%s' (known: %s)" % (args.dtype, ", ".join(DTYPES)))
    if args.repeat < 1 or args.warmup < 0:
        fail("--repeat must be >= 1 and --warmup >= 0")

    import torch
    torch.manual_seed(0)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    call = make_call(torch, op, dims, getattr(torch, args.dtype))
    with torch.no_grad():
        for _ in range(args.warmup):
            call()
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            call()
            times.append(time.perf_counter() - t0)
    times.sort()
    mid = len(times) // 2
    median = times[mid] if len(times) % 2 else (times[mid - 1] + times[mid]) / 2
    print(json.dumps({"op": "torch." + op, "shape": dims, "dtype": args.dtype,
                      "threads": torch.get_num_threads(), "repeat": args.repeat,
                      "median_s": median, "min_s": times[0], "max_s": times[-1]}))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
