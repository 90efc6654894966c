#!/usr/bin/env python3
# tests/workloads/torch_shapes.py — a PyTorch loop with known operators,
# shapes and call counts, for tests/integration/test_torch_shapes.sh.
#
# Each iteration calls each of these BURST times in a row (so that, as in
# `opprof sweep`, an operator's inputs are in cache when it runs), on fixed
# float32 inputs:
#   torch.mm          A[M,K] @ B[K,N]                     -> aten::mm
#   torch.bmm         A[BATCH,M,K] @ B[BATCH,K,N]         -> aten::bmm
#   torch.addmm       C[M,N] + A[M,K] @ B[K,N]            -> aten::addmm
#   F.linear          X[M,K] @ W[N,K]^T + b[N]            -> aten::addmm (bias vector)
#   F.layer_norm      X[ROWS,COLS] over COLS, weight+bias  -> aten::native_layer_norm
#   torch.softmax     X[ROWS,COLS] over dim -1            -> aten::_softmax
# under torch.no_grad (no autograd ops). Inputs are made before the loop and
# outside it nothing else runs, so the operators' calls are ITERS * BURST each
# (plus the input constructors; aten::addmm twice that). `--ops mm,bmm`
# keeps only those calls (for the test's GFLOP/s comparison with `opprof sweep`, which times one
# operator back to back). `--print-shapes` prints the constants as JSON for
# the test, which computes the expected FLOPs from them on its own.
# `--cpu-times FILE` writes each operator's calls and the thread CPU time of
# its bursts (time.thread_time_ns around each burst of 50 calls: the
# process's own accounting, which the test holds opprof's sampled time to).
import argparse
import json
import time

M, K, N, BATCH = 64, 256, 64, 4
ROWS, COLS = 256, 1024
BURST = 50


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=6)
    ap.add_argument("--ops", default="mm,bmm,addmm,linear,layer_norm,softmax")
    ap.add_argument("--print-shapes", action="store_true")
    ap.add_argument("--cpu-times", metavar="FILE")
    args = ap.parse_args()
    if args.print_shapes:
        print(json.dumps({"M": M, "K": K, "N": N, "BATCH": BATCH, "ROWS": ROWS, "COLS": COLS, "BURST": BURST}))
        return
    import torch
    import torch.nn.functional as F
    torch.manual_seed(0)
    a, b, c = torch.randn(M, K), torch.randn(K, N), torch.randn(M, N)
    ba, bb = torch.randn(BATCH, M, K), torch.randn(BATCH, K, N)
    w, bias = torch.randn(N, K), torch.randn(N)
    x = torch.randn(ROWS, COLS)
    lw, lb = torch.randn(COLS), torch.randn(COLS)
    calls = {
        "mm": lambda: torch.mm(a, b),
        "bmm": lambda: torch.bmm(ba, bb),
        "addmm": lambda: torch.addmm(c, a, b),
        "linear": lambda: F.linear(a, w, bias),
        "layer_norm": lambda: F.layer_norm(x, (COLS,), lw, lb),
        "softmax": lambda: torch.softmax(x, dim=-1),
    }
    chosen = [(name, calls[name]) for name in args.ops.split(",")]
    cpu_ns = {name: 0 for name, _ in chosen}
    with torch.no_grad():
        for _ in range(args.iters):
            for name, call in chosen:
                t0 = time.thread_time_ns()
                for _ in range(BURST):
                    call()
                cpu_ns[name] += time.thread_time_ns() - t0
    if args.cpu_times:
        with open(args.cpu_times, "w") as f:
            json.dump({name: {"calls": args.iters * BURST, "cpu_ns": ns} for name, ns in cpu_ns.items()}, f)

if __name__ == "__main__":
    main()
