#!/usr/bin/python3
"""The reference GPT of DESIGN.md section 6a in PyTorch, for gaaw's parity tests.

Usage: gpt_reference.py IN OUT [IN OUT ...]

Each pair is one case, run in turn (PyTorch starts once for them all). IN and OUT are "tensor files": a sequence of records, each
    u32 name length, name (utf-8), u32 dtype (0 f32, 3 i32), u32 ndim, ndim x i64 shape, data
IN holds "config" (i32: vocab, max_seq, layers, heads, dim, ffn, norm (0 layernorm, 1 rmsnorm),
activation (0 gelu-tanh, 1 swiglu), tied, batch, seq, optimizer steps, and optionally kv_heads,
head_dim, position (0 learned, 1 rotary), no_bias), optionally "llama" (f32: rope_theta,
norm_eps), "tokens", "targets"
(i32, (batch, seq), negative = ignored), "adam" (f32: lr, beta1, beta2, eps, weight_decay),
optionally "sgd" (f32: lr, momentum, weight_decay), and every parameter by its nanoGPT name.
OUT holds "loss", "logits" (batch*seq, vocab), "grad.NAME" for every parameter, and, when
optimizer steps > 0, "param.NAME" after that many of them on the same batch: AdamW, or
SGD (torch.optim.SGD: L2 weight decay, momentum without dampening) when "sgd" is given.
Exits 77 when PyTorch is not installed, and only then: a torch that is installed but
fails to import is an error (exit 1), as is any other failure."""
import importlib.util
import math
import struct
import sys

if importlib.util.find_spec("torch") is None:
    sys.exit(77)
import torch  # noqa: E402 (after the check above, on purpose)

DTYPES = {0: torch.float32, 3: torch.int32}


def read_tensors(path):
    out = {}
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos < len(data):
        (n,) = struct.unpack_from("<I", data, pos)
        pos += 4
        name = data[pos:pos + n].decode()
        pos += n
        dtype, ndim = struct.unpack_from("<II", data, pos)
        pos += 8
        shape = struct.unpack_from("<%dq" % ndim, data, pos)
        pos += 8 * ndim
        count = math.prod(shape)
        fmt = "<%d%s" % (count, "f" if dtype == 0 else "i")
        values = struct.unpack_from(fmt, data, pos)
        pos += 4 * count
        out[name] = torch.tensor(values, dtype=DTYPES[dtype]).reshape(shape)
    return out


def write_tensors(path, tensors):
    with open(path, "wb") as f:
        for name, t in tensors.items():
            t = t.detach().contiguous()
            is_int = t.dtype == torch.int32
            raw = name.encode()
            f.write(struct.pack("<I", len(raw)) + raw)
            f.write(struct.pack("<II", 3 if is_int else 0, t.dim()))
            f.write(struct.pack("<%dq" % t.dim(), *t.shape))
            f.write(t.numpy().astype("<i4" if is_int else "<f4").tobytes())


def norm(x, p, prefix, kind, eps):
    if kind == 0:
        return torch.nn.functional.layer_norm(x, (x.shape[-1],), p[prefix + ".weight"],
                                              p[prefix + ".bias"], eps=eps)
    rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return x * rstd * p[prefix + ".weight"]


def rotate(x, theta):
    """Rotary embedding of x (B, heads, T, D), Hugging Face's rotate-half on the two
    halves of each head, angles in double precision."""
    T, D = x.shape[-2], x.shape[-1]
    inv_freq = 1.0 / theta ** (torch.arange(0, D, 2, dtype=torch.float64) / D)
    angles = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]
    angles = torch.cat([angles, angles], dim=-1)
    cos, sin = angles.cos().float(), angles.sin().float()
    x1, x2 = x[..., :D // 2], x[..., D // 2:]
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


def linear(x, p, name):
    """x W^T (+ b where the model has biases)."""
    y = x @ p[name + ".weight"].T
    return y + p[name + ".bias"] if name + ".bias" in p else y


def forward(p, cfg, tokens, theta=10000.0, eps=1e-5):
    vocab, _, layers, heads, dim, ffn, norm_kind, act, tied = cfg[:9]
    kv_heads, head_dim, position = (cfg[12:15] + [0, 0, 0])[:3] if len(cfg) > 12 else (0, 0, 0)
    kv_heads, head_dim = kv_heads or heads, head_dim or dim // heads
    B, T = tokens.shape
    x = p["wte.weight"][tokens.long()]
    if position == 0:
        x = x + p["wpe.weight"][:T]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for i in range(layers):
        h = f"h.{i}"
        a = norm(x, p, h + ".ln_1", norm_kind, eps)
        qkv = linear(a, p, h + ".attn.c_attn")
        q, k, v = qkv.split([heads * head_dim, kv_heads * head_dim, kv_heads * head_dim], dim=-1)
        q = q.view(B, T, heads, head_dim).transpose(1, 2)
        k, v = (t.view(B, T, kv_heads, head_dim).transpose(1, 2) for t in (k, v))
        if position == 1:
            q, k = rotate(q, theta), rotate(k, theta)
        k, v = (t.repeat_interleave(heads // kv_heads, dim=1) for t in (k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(head_dim)
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, heads * head_dim)
        x = x + linear(y, p, h + ".attn.c_proj")
        m = norm(x, p, h + ".ln_2", norm_kind, eps)
        u = linear(m, p, h + ".mlp.c_fc")
        if act == 0:
            u = torch.nn.functional.gelu(u, approximate="tanh")
        else:
            gate, up = u.split(ffn, dim=-1)
            u = torch.nn.functional.silu(gate) * up
        x = x + linear(u, p, h + ".mlp.c_proj")
    x = norm(x, p, "ln_f", norm_kind, eps)
    head = p["wte.weight"] if tied else p["lm_head.weight"]
    return (x @ head.T).reshape(B * T, vocab)


def run_case(in_path, out_path):
    src = read_tensors(in_path)
    cfg = [int(v) for v in src.pop("config").tolist()]
    tokens, targets, adam = src.pop("tokens"), src.pop("targets"), src.pop("adam").tolist()
    sgd = src.pop("sgd").tolist() if "sgd" in src else None
    theta, norm_eps = src.pop("llama").tolist() if "llama" in src else (10000.0, 1e-5)
    adam_steps = cfg[11]
    torch.set_default_dtype(torch.float32)
    params = {n: t.clone().requires_grad_(True) for n, t in src.items()}
    logits = forward(params, cfg, tokens, theta, norm_eps)
    loss = torch.nn.functional.cross_entropy(logits, targets.reshape(-1).long(), ignore_index=-1)
    loss.backward()
    out = {"loss": loss.detach().reshape(1), "logits": logits.detach()}
    for n, t in params.items():
        out["grad." + n] = t.grad.detach().clone()
    if adam_steps > 0:
        if sgd is not None:
            lr, momentum, wd = sgd
            opt = torch.optim.SGD(list(params.values()), lr=lr, momentum=momentum, weight_decay=wd)
        else:
            lr, b1, b2, eps, wd = adam
            opt = torch.optim.AdamW(list(params.values()), lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd)
        for step in range(adam_steps):
            if step > 0:
                opt.zero_grad()
                logits = forward(params, cfg, tokens, theta, norm_eps)
                torch.nn.functional.cross_entropy(logits, targets.reshape(-1).long(),
                                                  ignore_index=-1).backward()
            opt.step()
        for n, t in params.items():
            out["param." + n] = t.detach().clone()
    write_tensors(out_path, out)


def run_pairs(case, script):
    """Runs case(IN, OUT) for every pair of the command line (also mlp_reference.py's)."""
    paths = sys.argv[1:]
    if not paths or len(paths) % 2:
        sys.exit("usage: %s IN OUT [IN OUT ...]" % script)
    for k in range(0, len(paths), 2):
        case(paths[k], paths[k + 1])


def main():
    run_pairs(run_case, "gpt_reference.py")


if __name__ == "__main__":
    main()
