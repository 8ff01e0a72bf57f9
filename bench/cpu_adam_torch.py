#!/usr/bin/python3
"""The PyTorch side of bench/cpu_adam.sh: torch.optim.AdamW steps over one f32
parameter of N elements with a fixed gradient, the hyper-parameters of
bench/cpu_adam.c (lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight decay 0.01), on T
intra-op threads (torch.set_num_threads), for foreach=False and foreach=True (the
multi-tensor path, here on a list of one tensor), one optimizer each, the two
alternating step by step. OMP_WAIT_POLICY and the other thread variables come
from the environment.

Usage: cpu_adam_torch.py [--elements N] [--threads T] [--repeats R] [--warmup W]

Only f32: PyTorch 1.13's AdamW on CPU keeps its state in the parameter's dtype and
has no path with bf16 weights and gradient over f32 master weights and moments, so
bench/cpu_adam.sh compares gaaw's bf16 update against this f32 figure too.
W untimed steps of each, then R timed; each step is timed on its own (opt.step()
alone: the gradient is set once and never zeroed) and the figure is the median.
Prints one line per path:
  cpu_adam_torch foreach=F elements=N threads=T repeats=R step_s=.. value=.. unit=elements/s"""
import argparse
import statistics
import sys
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--elements", type=int, default=16 * 1024 * 1024)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--warmup", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    n = args.elements

    # the same start as bench/cpu_adam.c: w in [-0.5, 0.5), g in [-0.01, 0.01)
    i = torch.arange(n, dtype=torch.int64)

    def start_value(salt):
        h = (i * 2654435761 + salt) & 0xFFFFFFFF
        h = h ^ (h >> 15)
        return (h & 65535).to(torch.float32) / 32768.0 - 1.0

    paths = {}
    for foreach in (False, True):
        p = torch.nn.Parameter(0.5 * start_value(1))
        p.grad = 1e-2 * start_value(2)
        opt = torch.optim.AdamW([p], lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, foreach=foreach)
        paths[foreach] = (p, opt, [])
    del i

    for step in range(args.warmup + args.repeats):
        for foreach, (p, opt, times) in paths.items():
            t0 = time.perf_counter()
            opt.step()
            dt = time.perf_counter() - t0
            if step >= args.warmup:
                times.append(dt)

    for foreach, (p, opt, times) in paths.items():
        step_s = statistics.median(times)
        print(f"cpu_adam_torch foreach={int(foreach)} elements={n} threads={torch.get_num_threads()} "
              f"repeats={args.repeats} step_s={step_s:.6f} value={n / step_s:.4g} unit=elements/s")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
