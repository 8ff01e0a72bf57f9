"""What the PyTorch sides of the benchmarks (bench/*_torch.py) share: running the
measurement in this process or in spawned processes that meet over gloo, and
handing rank 0's figures back."""
import os
import socket
import sys

import torch.distributed as dist
import torch.multiprocessing as mp


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def join_group(rank, nproc, port):
    """In a spawned process: joins the gloo group of nproc processes on 127.0.0.1."""
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=nproc)


def run_processes(run, args, nproc, spawn):
    """Calls run(rank, args, port, queue) in this process (spawn false: rank 0, port 0)
    or in nproc spawned processes, and returns what rank 0 put in the queue."""
    queue = mp.get_context("spawn").SimpleQueue()
    if not spawn:
        run(0, args, 0, queue)
        return queue.get()
    try:
        mp.start_processes(run, args=(args, free_port(), queue), nprocs=nproc, start_method="spawn")
    except mp.ProcessExitedException as e:
        # torch 1.13 + gloo now and then aborts a process at teardown ("terminate
        # called without an active exception"), after the timed steps: keep the
        # figures rank 0 sent if there are any, and say so
        if queue.empty():
            raise
        print(f"{os.path.basename(sys.argv[0])}: a process failed after the measurement: {e}", file=sys.stderr)
    return queue.get()


def finish(rank, distributed, queue, figures):
    """The end of run(): rank 0 hands its figures back, and the group (if any) is left
    together."""
    if rank == 0:
        queue.put(figures)
    if distributed:
        dist.barrier()
        dist.destroy_process_group()
