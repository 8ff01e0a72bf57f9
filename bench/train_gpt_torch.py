#!/usr/bin/python3
"""The PyTorch side of bench/train_gpt.sh: the same GPT, batch and optimizer as
bench/train_gpt.c, as a nanoGPT-style nn.Module (DESIGN.md section 6a: GPT-2
blocks, layernorm, GELU tanh, tied embeddings, causal attention written out as
nanoGPT does where scaled_dot_product_attention is missing), AdamW with
PyTorch's defaults for CPU tensors, f32. With --arch llama, a LLaMA-class decoder
as Hugging Face's modeling_llama writes it at the same sizes: RMSNorm, rotary
positions (rotate-half, cos and sin precomputed once), grouped-query attention
with 2 key/value heads (repeat_interleave), SwiGLU of width 704 (8/3 x 256 rounded
up to 32) as gate_proj, up_proj and down_proj, no biases, an untied head.

Usage: train_gpt_torch.py [--nproc P] [--mode plain|ddp|zero1] [--steps K] [--warmup W]
                          [--threads N] [--batch B] [--arch gpt2|llama]

plain runs one process; ddp and zero1 spawn P processes (torch.multiprocessing, gloo
on 127.0.0.1) wrapping the model in DistributedDataParallel, zero1 with
ZeroRedundancyOptimizer(AdamW). Each process uses --threads intra-op threads
(torch.set_num_threads). Prints one line, as bench/train_gpt.c does:
  train_gpt_torch np=P mode=M batch=B seq=128 steps=K step_s=.. tok_per_step=.. tok_s=..
  cpu_s_per_step=.. loss_first=.. loss_last=..
step_s is the slowest rank's time from a barrier to the end of the K timed steps / K;
cpu_s_per_step the user + system time of every thread of every process over the timed
steps (resource.getrusage, summed over ranks) / K."""
import argparse
import math
import resource
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from torch_peer import finish, join_group, run_processes

VOCAB, SEQ, LAYERS, HEADS, DIM = 256, 128, 4, 4, 256
KV_HEADS, FFN, HEAD_DIM = 2, 704, 64  # --arch llama


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(DIM)
        self.c_attn = nn.Linear(DIM, 3 * DIM)
        self.attn_proj = nn.Linear(DIM, DIM)
        self.ln_2 = nn.LayerNorm(DIM)
        self.c_fc = nn.Linear(DIM, 4 * DIM)
        self.mlp_proj = nn.Linear(4 * DIM, DIM)
        self.register_buffer("mask", torch.tril(torch.ones(SEQ, SEQ)))  # f32 as nanoGPT's: gloo broadcasts no bool

    def attn(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, HEADS, C // HEADS).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // HEADS))
        att = att.masked_fill(self.mask[:T, :T] == 0, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.attn_proj(y)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, DIM)
        self.wpe = nn.Embedding(SEQ, DIM)
        self.h = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(DIM)
        self.lm_head = nn.Linear(DIM, VOCAB, bias=False)
        self.lm_head.weight = self.wte.weight  # tied
        for name, p in self.named_parameters():
            if name.endswith("proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * LAYERS))
            elif p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, tokens, targets):
        T = tokens.shape[1]
        x = self.wte(tokens) + self.wpe(torch.arange(T))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1), ignore_index=-1)


class RMSNorm(nn.Module):
    def __init__(self, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(DIM))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.input_layernorm = RMSNorm()
        self.q_proj = nn.Linear(DIM, HEADS * HEAD_DIM, bias=False)
        self.k_proj = nn.Linear(DIM, KV_HEADS * HEAD_DIM, bias=False)
        self.v_proj = nn.Linear(DIM, KV_HEADS * HEAD_DIM, bias=False)
        self.o_proj = nn.Linear(HEADS * HEAD_DIM, DIM, bias=False)
        self.post_attention_layernorm = RMSNorm()
        self.gate_proj = nn.Linear(DIM, FFN, bias=False)
        self.up_proj = nn.Linear(DIM, FFN, bias=False)
        self.down_proj = nn.Linear(FFN, DIM, bias=False)
        self.register_buffer("mask", torch.tril(torch.ones(SEQ, SEQ)))

    def attn(self, x, cos, sin):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, HEADS, HEAD_DIM).transpose(1, 2)
        k = self.k_proj(x).view(B, T, KV_HEADS, HEAD_DIM).transpose(1, 2)
        v = self.v_proj(x).view(B, T, KV_HEADS, HEAD_DIM).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = (t.repeat_interleave(HEADS // KV_HEADS, dim=1) for t in (k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(HEAD_DIM))
        att = att.masked_fill(self.mask[:T, :T] == 0, float("-inf")).softmax(dim=-1)
        return self.o_proj((att @ v).transpose(1, 2).contiguous().view(B, T, HEADS * HEAD_DIM))

    def forward(self, x, cos, sin):
        x = x + self.attn(self.input_layernorm(x), cos, sin)
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class Llama(nn.Module):
    def __init__(self, theta=10000.0):
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, DIM)
        self.layers = nn.ModuleList(LlamaBlock() for _ in range(LAYERS))
        self.norm = RMSNorm()
        self.lm_head = nn.Linear(DIM, VOCAB, bias=False)
        inv_freq = 1.0 / theta ** (torch.arange(0, HEAD_DIM, 2, dtype=torch.float64) / HEAD_DIM)
        angles = torch.arange(SEQ, dtype=torch.float64)[:, None] * inv_freq[None, :]
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", angles.cos().float())
        self.register_buffer("sin", angles.sin().float())
        for name, p in self.named_parameters():
            if name.endswith(("o_proj.weight", "down_proj.weight")):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * LAYERS))
            elif p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, tokens, targets):
        T = tokens.shape[1]
        x = self.embed_tokens(tokens)
        for block in self.layers:
            x = block(x, self.cos[:T], self.sin[:T])
        logits = self.lm_head(self.norm(x))
        return F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1), ignore_index=-1)


def stream_bytes(dp_rank, step, count):
    """The synthetic byte stream of bench/bench_util.h's bench_stream_byte."""
    out = []
    for pos in range(count):
        h = (dp_rank * 1000003 + step * 7919 + pos) & 0xFFFFFFFF
        h = (h * 2654435761) & 0xFFFFFFFF
        h ^= h >> 15
        out.append(h & 255)
    return out


def make_batch(dp_rank, step, batch):
    rows = torch.tensor(stream_bytes(dp_rank, step, batch * (SEQ + 1)), dtype=torch.long).view(batch, SEQ + 1)
    return rows[:, :-1].contiguous(), rows[:, 1:].contiguous()


def cpu_seconds():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def run(rank, args, port, queue):
    torch.set_num_threads(args.threads)
    torch.manual_seed(1337)
    distributed = args.mode != "plain"
    if distributed:
        join_group(rank, args.nproc, port)
    model = Llama() if args.arch == "llama" else GPT()
    opt_args = dict(lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1)
    if distributed:
        model = nn.parallel.DistributedDataParallel(model)
    if args.mode == "zero1":
        from torch.distributed.optim import ZeroRedundancyOptimizer
        opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, **opt_args)
    else:
        opt = torch.optim.AdamW(model.parameters(), **opt_args)

    loss_first = 0.0
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            if distributed:
                dist.barrier()
            t0, cpu0 = time.perf_counter(), cpu_seconds()
        tokens, targets = make_batch(rank, step, args.batch)
        loss = model(tokens, targets)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step == 0:
            loss_first = loss.item()
    times = torch.tensor([time.perf_counter() - t0, cpu_seconds() - cpu0], dtype=torch.float64)
    if distributed:
        slowest, cpu = times.clone(), times.clone()
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        dist.all_reduce(cpu, op=dist.ReduceOp.SUM)
        times = torch.tensor([slowest[0].item(), cpu[1].item()], dtype=torch.float64)
    finish(rank, distributed, queue, (times[0].item(), times[1].item(), loss_first, loss.item()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nproc", type=int, default=1)
    ap.add_argument("--mode", choices=("plain", "ddp", "zero1"), default="plain")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--arch", choices=("gpt2", "llama"), default="gpt2")
    args = ap.parse_args()
    if args.mode == "plain":
        args.nproc = 1
    elapsed, cpu, loss_first, loss_last = run_processes(run, args, args.nproc, args.mode != "plain")
    step_s = elapsed / args.steps
    tokens = args.nproc * args.batch * SEQ
    print(f"train_gpt_torch arch={args.arch} np={args.nproc} mode={args.mode} batch={args.batch} seq={SEQ} steps={args.steps} "
          f"step_s={step_s:.6f} tok_per_step={tokens} tok_s={tokens / step_s:.1f} "
          f"cpu_s_per_step={cpu / args.steps:.4f} loss_first={loss_first:.4f} loss_last={loss_last:.4f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
