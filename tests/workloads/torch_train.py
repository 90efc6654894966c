"""A small attention + MLP training loop for opprof's PyTorch tests.

Runs a fixed number of steps (or --seconds) of forward, backward and SGD on
random data. With --torch-profiler FILE it also runs torch.profiler around the
same loop and writes key_averages() self CPU time per operator as JSON, so a
test can compare opprof's operator shares with torch.profiler's on one run.
"""
import argparse
import json
import time

import torch


class Block(torch.nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.norm1 = torch.nn.LayerNorm(dim)
        self.norm2 = torch.nn.LayerNorm(dim)
        self.fc1 = torch.nn.Linear(dim, 4 * dim)
        self.fc2 = torch.nn.Linear(4 * dim, dim)

    def attention(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.reshape(b, t, self.heads, d // self.heads).transpose(1, 2).reshape(b * self.heads, t, -1)
        k = k.reshape(b, t, self.heads, d // self.heads).transpose(1, 2).reshape(b * self.heads, t, -1)
        v = v.reshape(b, t, self.heads, d // self.heads).transpose(1, 2).reshape(b * self.heads, t, -1)
        scores = torch.bmm(q, k.transpose(1, 2)) / (d // self.heads) ** 0.5   # the bmm call site
        weights = torch.softmax(scores, dim=-1)
        out = torch.bmm(weights, v)
        out = out.reshape(b, self.heads, t, -1).transpose(1, 2).reshape(b, t, d)
        return self.proj(out)

    def forward(self, x):
        x = x + self.attention(self.norm1(x))
        return x + self.fc2(torch.relu(self.fc1(self.norm2(x))))


def step(model, opt, x, y):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--torch-profiler", metavar="FILE")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = torch.nn.Sequential(Block(64, 4), Block(64, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(8, 32, 64)
    y = torch.randn(8, 32, 64)
    for _ in range(3):
        step(model, opt, x, y)  # warm-up

    def loop():
        n = 0
        start = time.monotonic()
        while (args.steps and n < args.steps) or (not args.steps and time.monotonic() - start < args.seconds):
            step(model, opt, x, y)
            n += 1
        return n

    if args.torch_profiler:
        from torch.profiler import profile, ProfilerActivity
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            n = loop()
        rows = {}
        for e in prof.key_averages():
            rows[e.key] = {"self_cpu_us": e.self_cpu_time_total, "cpu_total_us": e.cpu_time_total, "calls": e.count}
        with open(args.torch_profiler, "w") as f:
            json.dump({"steps": n, "ops": rows}, f)
    else:
        n = loop()
    print(f"{n} steps", flush=True)


if __name__ == "__main__":
    main()
