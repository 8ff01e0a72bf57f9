#!/usr/bin/python3
"""The mixture-of-experts MLP of gaaw (parallel/moe.h, doc/moe.md) in PyTorch, for
gaaw's parity tests, written from doc/moe.md's rules.

Usage: moe_reference.py IN OUT [IN OUT ...]

Each pair is one case (PyTorch starts once for them all). IN and OUT are tensor files
(see gpt_reference.py). IN holds "config" (i32: sigmoid, renormalize, top_k,
drop_position, shared, gated), "coefs" (f32: aux_coef, z_coef, aux_scale, capacity_factor), "x" (T, C), "router" (E, C), "w13"
(E, 2F, C: the gate's F rows, then the up projection's), "w2" (E, C, F), "dy"
(T, C), and "s13" (2S, C), "s2" (C, S), "sgate" (1, C): with shared, y also adds a
shared expert swiglu(x s13^T) s2^T, times sigmoid(x sgate^T) per token when gated. The scores are the softmax of each row of x router^T, or the sigmoid of
each logit; each token takes the top_k largest scores, ties to the lower index (a
stable descending sort), weighted by them, renormalised or not; an expert is
swiglu(x w13[e]^T) w2[e]^T. aux = aux_coef E sum_i f_i P_i (f_i: the share of the
T top_k choices that went to expert i, P_i: expert i's mean score), z = z_coef
mean_t logsumexp(logits[t])^2, and the backward is that of L = sum(dy y) +
aux_scale (aux + z). With capacity_factor > 0 each expert keeps at most
ceil(top_k T capacity_factor / E) assignments: the first choices of all tokens
before any second choice, and within a choice the largest weights first (ties to
the earlier token) or, with drop_position, the earlier tokens first; a dropped
assignment adds nothing to y (f and P still count it). OUT holds "y", "aux", "z",
"kept" (T, top_k: 1 kept, 0 dropped) and "grad.x", "grad.router", "grad.w13",
"grad.w2", "grad.s13", "grad.s2", "grad.sgate" (zero where unused). Exits 77 when PyTorch is not installed, and only then."""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt_reference  # noqa: E402 (exits 77 without PyTorch; its tensor file reader and writer)

torch = gpt_reference.torch
F = torch.nn.functional


def run_case(in_path, out_path):
    src = gpt_reference.read_tensors(in_path)
    sigmoid, renormalize, k, drop_position, shared, gated = (int(v) for v in src["config"].tolist())
    aux_coef, z_coef, aux_scale, capacity = (float(v) for v in src["coefs"].tolist())
    p = {n: src[n].clone().requires_grad_(True) for n in ("x", "router", "w13", "w2", "s13", "s2", "sgate")}
    x, router, w13, w2 = p["x"], p["router"], p["w13"], p["w2"]
    T, E = x.shape[0], router.shape[0]
    logits = x @ router.T
    scores = torch.sigmoid(logits) if sigmoid else F.softmax(logits, dim=-1)
    chosen = torch.sort(scores.detach(), dim=-1, descending=True, stable=True).indices[:, :k]
    weights = scores.gather(1, chosen)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    kept = torch.ones(T, k, dtype=torch.bool)
    if capacity > 0:
        limit, used, w = math.ceil(k * T * capacity / E), [0] * E, weights.detach()
        for j in range(k):
            order = range(T) if drop_position else sorted(range(T), key=lambda t: (-float(w[t, j]), t))
            for t in order:
                e = int(chosen[t, j])
                kept[t, j] = used[e] < limit
                used[e] += int(kept[t, j])
    y = torch.zeros_like(x)
    for e in range(E):
        tokens, slots = ((chosen == e) & kept).nonzero(as_tuple=True)
        if tokens.numel() == 0:
            continue
        gate, up = (x[tokens] @ w13[e].T).chunk(2, dim=-1)
        out = (F.silu(gate) * up) @ w2[e].T
        y = y.index_add(0, tokens, weights[tokens, slots].unsqueeze(1) * out)
    if shared:
        gate, up = (x @ p["s13"].T).chunk(2, dim=-1)
        out = (F.silu(gate) * up) @ p["s2"].T
        y = y + (torch.sigmoid(x @ p["sgate"].T) * out if gated else out)
    f = torch.bincount(chosen.flatten(), minlength=E).to(x.dtype) / (T * k)
    aux = aux_coef * E * (f * scores.mean(dim=0)).sum()
    z = z_coef * (torch.logsumexp(logits, dim=-1) ** 2).mean()
    loss = (src["dy"] * y).sum() + aux_scale * (aux + z)
    loss.backward()
    out = {"y": y.detach(), "aux": aux.detach().reshape(1), "z": z.detach().reshape(1),
           "kept": kept.to(torch.float32)}
    for n, v in p.items():
        out["grad." + n] = v.grad.detach().clone() if v.grad is not None else torch.zeros_like(v)
    gpt_reference.write_tensors(out_path, out)


def main():
    gpt_reference.run_pairs(run_case, "moe_reference.py")


if __name__ == "__main__":
    main()
