#!/usr/bin/python3
"""The PyTorch side of bench/insitu_mlp.sh: the MLP of bench/insitu_mlp.c (8 -> 256
-> 256 -> 8, GELU tanh, mean-squared-error loss), AdamW (lr 3e-4, betas (0.9, 0.95),
eps 1e-8, weight decay 0.1), f32, batch B per process, on the same data.

Usage: insitu_mlp_torch.py [--nproc P] [--batch B] [--steps K] [--warmup W]
                           [--predicts R] [--threads N] [--foreach 0|1]

P = 1 runs in this process; P > 1 spawns P processes (torch.multiprocessing, gloo on
127.0.0.1) wrapping the model in DistributedDataParallel. Each process uses N
intra-op threads (torch.set_num_threads); OMP_WAIT_POLICY and the other thread
variables come from the environment. --foreach 1 uses AdamW's multi-tensor path.
A training step is forward, loss, backward, opt.step(), opt.zero_grad(set_to_none);
predict is the forward under torch.no_grad(). Each step and each predict is timed on
its own; its time is the slowest process's, and the result is the median. Prints:
  insitu_mlp_torch np=P batch=B steps=K predicts=R threads=N foreach=F step_s=..
  samples_s=.. predict_s=.. cpu_s_per_step=.. loss_first=.. loss_last=..
cpu_s_per_step is the user + system time of every thread of every process over the
timed steps (resource.getrusage, summed over processes) / K."""
import argparse
import resource
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from torch_peer import finish, join_group, run_processes

IN, HIDDEN, OUT, SLOTS = 8, 256, 8, 4


def make_batch(rank, slot, batch):
    """bench/insitu_mlp.c's make_batch: x (batch, IN) in [-1, 1), y (batch, OUT)."""
    e = torch.arange(batch * IN, dtype=torch.int64)
    h = (rank * 1000003 + slot * 7919 + e) & 0xFFFFFFFF
    h = (h * 2654435761) & 0xFFFFFFFF  # int64 products wrap; the low 32 bits are right
    h = h ^ (h >> 15)
    x = ((h & 65535).to(torch.float32) / 32768.0 - 1.0).view(batch, IN)
    y = torch.sin(3.14159265 * x[:, :OUT]) * x[:, [(j + 3) % IN for j in range(OUT)]]
    return x, y.contiguous()


def cpu_seconds():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def slowest_median(times, distributed):
    t = torch.tensor(times, dtype=torch.float64)
    if distributed:
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return statistics.median(t.tolist())


def run(rank, args, port, queue):
    torch.set_num_threads(args.threads)
    torch.manual_seed(1337)
    distributed = args.nproc > 1
    if distributed:
        join_group(rank, args.nproc, port)
    model = nn.Sequential(nn.Linear(IN, HIDDEN), nn.GELU(approximate="tanh"), nn.Linear(HIDDEN, HIDDEN),
                          nn.GELU(approximate="tanh"), nn.Linear(HIDDEN, OUT))
    plain = model
    if distributed:
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1,
                            foreach=bool(args.foreach))
    data = [make_batch(rank, s, args.batch) for s in range(SLOTS)]

    times, loss_first, cpu0 = [], 0.0, 0.0
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            if distributed:
                dist.barrier()
            cpu0 = cpu_seconds()
        x, y = data[step % SLOTS]
        t0 = time.perf_counter()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step >= args.warmup:
            times.append(time.perf_counter() - t0)
        if step == 0:
            loss_first = loss.item()
    cpu = torch.tensor([cpu_seconds() - cpu0], dtype=torch.float64)
    if distributed:
        dist.all_reduce(cpu)
    step_s = slowest_median(times, distributed)

    if distributed:
        dist.barrier()
    times = []
    with torch.no_grad():
        for i in range(args.warmup + args.predicts):
            t0 = time.perf_counter()
            plain(data[i % SLOTS][0])
            if i >= args.warmup:
                times.append(time.perf_counter() - t0)
    predict_s = slowest_median(times, distributed)
    finish(rank, distributed, queue, (step_s, predict_s, cpu.item(), loss_first, loss.item()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nproc", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--predicts", type=int, default=100)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--foreach", type=int, default=0)
    args = ap.parse_args()
    step_s, predict_s, cpu, loss_first, loss_last = run_processes(run, args, args.nproc, args.nproc > 1)
    samples = args.nproc * args.batch
    print(f"insitu_mlp_torch np={args.nproc} batch={args.batch} steps={args.steps} predicts={args.predicts} "
          f"threads={args.threads} foreach={args.foreach} step_s={step_s:.7f} samples_s={samples / step_s:.1f} "
          f"predict_s={predict_s:.7f} cpu_s_per_step={cpu / args.steps:.6f} loss_first={loss_first:.5f} "
          f"loss_last={loss_last:.5f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
