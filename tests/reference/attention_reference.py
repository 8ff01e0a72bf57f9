#!/usr/bin/python3
"""Causal self-attention in PyTorch (nanoGPT's, without the projections), for gaaw's
attention kernels.

Usage: attention_reference.py IN OUT [IN OUT ...]

Each pair is one case (PyTorch starts once for them all). IN and OUT are tensor files
(see gpt_reference.py). IN holds "q", "k", "v" and "dout" (f32, (BH, T, D)); OUT holds
"out" = softmax(mask(q k^T / sqrt(D))) v and "grad.q", "grad.k", "grad.v", the
gradients of sum(dout * out), all computed by autograd in f32. Exits 77 when PyTorch
is not installed, and only then."""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt_reference  # noqa: E402 (exits 77 without PyTorch; its tensor file reader and writer)

torch = gpt_reference.torch


def run_case(in_path, out_path):
    src = gpt_reference.read_tensors(in_path)
    q, k, v = (src[n].clone().requires_grad_(True) for n in ("q", "k", "v"))
    T, D = q.shape[-2], q.shape[-1]
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    att = torch.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
    out = att @ v
    (out * src["dout"]).sum().backward()
    gpt_reference.write_tensors(out_path, {"out": out, "grad.q": q.grad, "grad.k": k.grad, "grad.v": v.grad})


def main():
    gpt_reference.run_pairs(run_case, "attention_reference.py")


if __name__ == "__main__":
    main()
