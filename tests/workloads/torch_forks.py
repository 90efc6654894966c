"""Forks N short children from a process that has imported torch, one after
the other, as a DataLoader does for its workers: each child multiplies two
64x64 matrices and leaves with os._exit. What a profiler costs each forked
child of a large parent (bench/run.sh, BENCH_ONLY_FORKS=1).

    python3 torch_forks.py [N]     # default 40
"""
import os
import sys

import torch

n = int(sys.argv[1]) if len(sys.argv) > 1 else 40
x = torch.randn(64, 64)
for _ in range(n):
    pid = os.fork()
    if pid == 0:
        y = x @ x
        os._exit(0 if y.shape == (64, 64) else 1)
    _, status = os.waitpid(pid, 0)
    if status != 0:
        sys.exit("a child failed")
