"""tests/workloads/ddp_allreduce.py — a torch.distributed (gloo, CPU) job with
one slow rank, for tests/integration/test_ranks_torch.sh.

Each step every rank runs compute_step() (matrix products), then all_reduce
of a small tensor. Rank 1 does 3x the products of the others, so they wait
in all_reduce. gloo's waiting thread blocks (it is off CPU, not spinning).

Launch either way:
  torchrun --nproc_per_node 2 --no_python opprof record -o prof.%r -- python3 ddp_allreduce.py
  opprof record -o prof -- python3 ddp_allreduce.py --spawn 2      (torch.multiprocessing)
Options: --steps N (default 20), --reps N (products per step on fast ranks, default 4),
--size N (matrix size, default 192).
"""
import argparse
import os
import socket
import time

import torch
import torch.distributed as dist


def compute_step(a, b, reps):
    c = a
    for _ in range(reps):
        c = torch.mm(c, b)
        c = c / c.norm()
    return c


def run(rank, world, args):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world)
    torch.manual_seed(rank)
    a = torch.randn(args.size, args.size)
    b = torch.randn(args.size, args.size)
    reps = args.reps * (3 if rank == 1 else 1)
    t0 = time.perf_counter()
    waited = 0.0
    for _ in range(args.steps):
        c = compute_step(a, b, reps)
        s = c.sum().reshape(1)
        w0 = time.perf_counter()
        dist.all_reduce(s)
        waited += time.perf_counter() - w0
    dist.barrier()
    print(f"rank {rank} of {world}: {args.steps} steps x {reps} products, "
          f"{time.perf_counter() - t0:.2f} s wall, {waited:.2f} s in all_reduce", flush=True)
    dist.destroy_process_group()


def spawned(rank, world, port, args):
    # env:// needs these; the agent also reads RANK to split one result by rank.
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    run(rank, world, args)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--size", type=int, default=192)
    ap.add_argument("--spawn", type=int, default=0, help="start N ranks with torch.multiprocessing")
    args = ap.parse_args()
    if args.spawn:
        import torch.multiprocessing as mp
        mp.spawn(spawned, args=(args.spawn, free_port(), args), nprocs=args.spawn, join=True)
    else:
        run(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args)


if __name__ == "__main__":
    main()
