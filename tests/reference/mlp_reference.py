#!/usr/bin/python3
"""The MLP surrogate of gaaw (parallel/mlp.c) in PyTorch, for gaaw's parity tests.

Usage: mlp_reference.py IN OUT [IN OUT ...]

Each pair is one case (PyTorch starts once for them all). IN and OUT are tensor files (see gpt_reference.py). IN holds "config" (i32: nsizes,
activation (gaaw_activation_t: 0 gelu-tanh, 1 swiglu, 2 none, 3 relu, 4 tanh, 5 silu),
loss (gaaw_loss_t: 0 mse, 1 l1, 2 huber)), "sizes" (i32), "delta" (f32, Huber's),
"inputs" (batch, sizes[0]), "outputs" (batch, sizes[-1]), optionally "weights" (the
same shape; absent = all 1), and fc.I.weight (out or 2 out with SwiGLU, in) and
fc.I.bias for every linear. The loss is sum(w l) / sum(w) with PyTorch's elementwise
losses (reduction "none"). OUT holds "loss", "logits" (the predictions, under
gpt_reference.py's name, so tests/harness/torch_cases.h compares both alike) and
"grad.NAME" for every parameter. Exits 77 when PyTorch is not installed, and only then."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt_reference  # noqa: E402 (exits 77 without PyTorch; its tensor file reader and writer)

torch = gpt_reference.torch
F = torch.nn.functional


def activate(u, act):
    if act == 0:
        return F.gelu(u, approximate="tanh")
    if act == 1:
        gate, up = u.chunk(2, dim=-1)
        return F.silu(gate) * up
    if act == 3:
        return F.relu(u)
    if act == 4:
        return torch.tanh(u)
    if act == 5:
        return F.silu(u)
    return u


def elementwise_loss(y, t, kind, delta):
    if kind == 0:
        return F.mse_loss(y, t, reduction="none")
    if kind == 1:
        return F.l1_loss(y, t, reduction="none")
    return F.huber_loss(y, t, reduction="none", delta=delta)


def run_case(in_path, out_path):
    src = gpt_reference.read_tensors(in_path)
    nsizes, act, kind = (int(v) for v in src.pop("config").tolist())
    delta = float(src.pop("delta")[0])
    src.pop("sizes")  # (the weights carry the shapes)
    x, t = src.pop("inputs"), src.pop("outputs")
    w = src.pop("weights") if "weights" in src else torch.ones_like(t)
    params = {n: v.clone().requires_grad_(True) for n, v in src.items()}
    y = x
    for i in range(nsizes - 1):
        y = y @ params[f"fc.{i}.weight"].T + params[f"fc.{i}.bias"]
        if i + 2 < nsizes:
            y = activate(y, act)
    loss = (w * elementwise_loss(y, t, kind, delta)).sum() / w.sum()
    loss.backward()
    out = {"loss": loss.detach().reshape(1), "logits": y.detach()}
    for n, v in params.items():
        out["grad." + n] = v.grad.detach().clone()
    gpt_reference.write_tensors(out_path, out)


def main():
    gpt_reference.run_pairs(run_case, "mlp_reference.py")


if __name__ == "__main__":
    main()
