#!/usr/bin/python3
"""The peer of bench/gpt_fwdbwd: the same GPT (DESIGN.md section 6a) as a nanoGPT-style
PyTorch module, timed over forward + backward steps on the CPU.

Usage: gpt_fwdbwd_torch.py [--threads T] [--batch B] [--seq S] [--vocab V] [--dim C]
                           [--heads H] [--layers L]
It then serves commands on stdin, one per line, answering one line on stdout each:
    warmup K      K untimed steps                         -> "ok"
    run K         K timed steps                           -> "step_s=X cpu_s=Y" (per step)
    breakdown K   K steps timed per module                -> "NAME fwd_s bwd_s;..." (per step)
    quit          exit
After start-up it prints "ready torch=VERSION threads=T". A step is zero_grad
(set_to_none, as nanoGPT does), forward, cross-entropy and backward; no optimizer."""
import argparse
import math
import resource
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Embed(nn.Module):
    def __init__(self, vocab, seq, dim):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(seq, dim)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1], dtype=torch.long)
        return self.wte(idx) + self.wpe(pos)


class Attention(nn.Module):
    def __init__(self, dim, heads, seq):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(dim, 3 * dim)
        self.c_proj = nn.Linear(dim, dim)
        self.register_buffer("mask", torch.tril(torch.ones(seq, seq)).view(1, 1, seq, seq))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // self.heads))
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class Block(nn.Module):
    def __init__(self, dim, heads, seq):
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads, seq)
        self.ln_2 = nn.LayerNorm(dim)
        self.c_fc = nn.Linear(dim, 4 * dim)
        self.c_proj = nn.Linear(4 * dim, dim)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.c_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class Head(nn.Module):
    def __init__(self, dim, wte):
        super().__init__()
        self.ln_f = nn.LayerNorm(dim)
        self.wte = wte  # tied LM head

    def forward(self, x, targets):
        logits = F.linear(self.ln_f(x), self.wte.weight)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1), ignore_index=-1)


class GPT(nn.Module):
    def __init__(self, vocab, seq, dim, heads, layers):
        super().__init__()
        self.embed = Embed(vocab, seq, dim)
        self.blocks = nn.ModuleList(Block(dim, heads, seq) for _ in range(layers))
        self.head = Head(dim, self.embed.wte)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * layers))
            elif p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, idx, targets):
        x = self.embed(idx)
        for b in self.blocks:
            x = b(x)
        return self.head(x, targets)


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def step(model, idx, targets):
    model.zero_grad(set_to_none=True)
    model(idx, targets).backward()


def breakdown(model, idx, targets, steps):
    """Forward: pre/post hooks. Backward: a full backward hook fires when a module's
    input gradient is done, so a module's backward is the time since the previous
    (later) module's hook; the embedding's runs from block 0's hook to the end."""
    mods = [("embedding", model.embed)] + [("block%d" % i, b) for i, b in enumerate(model.blocks)]
    mods.append(("head", model.head))
    fwd = {n: 0.0 for n, _ in mods}
    bwd = dict(fwd)
    marks, handles, starts = [], [], {}
    for name, mod in mods:
        handles.append(mod.register_forward_pre_hook(lambda m, i, n=name: starts.__setitem__(n, time.perf_counter())))
        handles.append(mod.register_forward_hook(
            lambda m, i, o, n=name: fwd.__setitem__(n, fwd[n] + time.perf_counter() - starts[n])))
        if name != "embedding":  # its input (token ids) has no gradient
            handles.append(mod.register_full_backward_hook(lambda m, gi, go, n=name: marks.append((n, time.perf_counter()))))
    for _ in range(steps):
        model.zero_grad(set_to_none=True)
        loss = model(idx, targets)
        marks.clear()
        t = time.perf_counter()
        loss.backward()
        marks.append(("embedding", time.perf_counter()))
        for n, tm in marks:
            bwd[n] += tm - t
            t = tm
    for h in handles:
        h.remove()
    return ";".join("%s %.6f %.6f" % (n, fwd[n] / steps, bwd[n] / steps) for n, _ in mods)


def main():
    ap = argparse.ArgumentParser()
    for name, default in [("threads", 2), ("batch", 8), ("seq", 128), ("vocab", 256), ("dim", 256), ("heads", 4),
                          ("layers", 4)]:
        ap.add_argument("--" + name, type=int, default=default)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1337)
    model = GPT(a.vocab, a.seq, a.dim, a.heads, a.layers)
    g = torch.Generator().manual_seed(7)
    idx = torch.randint(0, a.vocab, (a.batch, a.seq), generator=g)
    targets = torch.roll(idx, -1, dims=1)
    print("ready torch=%s threads=%d" % (torch.__version__, torch.get_num_threads()), flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if not cmd or cmd[0] == "quit":
            break
        k = int(cmd[1])
        if cmd[0] == "warmup":
            for _ in range(k):
                step(model, idx, targets)
            print("ok", flush=True)
        elif cmd[0] == "run":
            c0, t0 = cpu_seconds(), time.perf_counter()
            for _ in range(k):
                step(model, idx, targets)
            t1, c1 = time.perf_counter(), cpu_seconds()
            print("step_s=%.6f cpu_s=%.6f" % ((t1 - t0) / k, (c1 - c0) / k), flush=True)
        elif cmd[0] == "breakdown":
            print(breakdown(model, idx, targets, k), flush=True)
        else:
            print("error unknown command %s" % cmd[0], flush=True)


if __name__ == "__main__":
    main()
