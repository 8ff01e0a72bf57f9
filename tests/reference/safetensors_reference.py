#!/usr/bin/python3
"""safetensors files between PyTorch and gaaw, for tests/mpi/test_safetensors_torch_np2.c.

Usage:
  safetensors_reference.py write DIR TOKENS vocab max_seq layers heads dim batch seq
      writes DIR/torch_f32.safetensors (nanoGPT's state_dict: "transformer." names,
      lm_head.weight tied to transformer.wte.weight, the h.N.attn.bias masks) and
      DIR/torch_bf16.safetensors (the same weights as BF16, by torch's own
      rounding), and the reference GPT's logits on TOKENS (raw i32, batch x seq)
      for each: DIR/torch_f32.logits and DIR/torch_bf16.logits (raw f32).
      It also writes DIR/hf_gpt2/model.safetensors and its config.json: the F32
      weights in Hugging Face's GPT-2 layout as the Hub's gpt2 files hold it (no
      "transformer." prefix, Conv1D weights as (in, out), the masks, no lm_head).
  safetensors_reference.py read FILE TOKENS OUT vocab max_seq layers heads dim batch seq
      loads FILE (gaaw's export) and writes the reference GPT's logits to OUT.
  safetensors_reference.py read-hf FILE TOKENS OUT vocab max_seq layers heads dim batch seq
      the same for gaaw's export in Hugging Face's GPT-2 layout (gpt2_names=hf,
      export_dtype=bf16): FILE's tensors must be BF16 under GPT2LMHeadModel's names,
      and the config.json beside it must describe the model (exit 1 otherwise).
The safetensors files are written and read by hand (struct + json): Debian has no
safetensors package. The GPT is tests/reference/gpt_reference.py's (tied, layernorm,
GELU). Exits 77 when PyTorch is not installed."""
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt_reference  # noqa: E402 (exits 77 without torch)
import torch  # noqa: E402

DTYPES = {"F32": (torch.float32, 4), "BF16": (torch.bfloat16, 2), "F16": (torch.float16, 2)}


def nanogpt_state(cfg, seed):
    vocab, max_seq, layers, heads, dim = cfg
    g = torch.Generator().manual_seed(seed)

    def rand(*shape, mean=0.0):
        return mean + 0.1 * torch.randn(*shape, generator=g)
    sd = {"transformer.wte.weight": rand(vocab, dim), "transformer.wpe.weight": rand(max_seq, dim)}
    mask = torch.tril(torch.ones(max_seq, max_seq)).view(1, 1, max_seq, max_seq)
    for i in range(layers):
        h = "transformer.h.%d." % i
        sd[h + "ln_1.weight"], sd[h + "ln_1.bias"] = rand(dim, mean=1.0), rand(dim)
        sd[h + "attn.bias"] = mask
        sd[h + "attn.c_attn.weight"], sd[h + "attn.c_attn.bias"] = rand(3 * dim, dim), rand(3 * dim)
        sd[h + "attn.c_proj.weight"], sd[h + "attn.c_proj.bias"] = rand(dim, dim), rand(dim)
        sd[h + "ln_2.weight"], sd[h + "ln_2.bias"] = rand(dim, mean=1.0), rand(dim)
        sd[h + "mlp.c_fc.weight"], sd[h + "mlp.c_fc.bias"] = rand(4 * dim, dim), rand(4 * dim)
        sd[h + "mlp.c_proj.weight"], sd[h + "mlp.c_proj.bias"] = rand(dim, 4 * dim), rand(dim)
    sd["transformer.ln_f.weight"], sd["transformer.ln_f.bias"] = rand(dim, mean=1.0), rand(dim)
    sd["lm_head.weight"] = sd["transformer.wte.weight"]
    return sd


def write_safetensors(path, tensors, dtype):
    header, blobs, at = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous().to(DTYPES[dtype][0])
        raw = (t.view(torch.int16) if DTYPES[dtype][1] == 2 else t).numpy().tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        dtype, size = DTYPES[e["dtype"]]
        raw = bytearray(data[8 + n + b:8 + n + end])
        t = torch.frombuffer(raw, dtype=torch.int16 if size == 2 else torch.float32) if raw else torch.zeros(0)
        out[name] = (t.view(dtype) if size == 2 else t).to(torch.float32).reshape(e["shape"])
    return out


def logits(state, cfg, tokens_path, batch, seq):
    vocab, max_seq, layers, heads, dim = cfg
    p = {k[len("transformer."):] if k.startswith("transformer.") else k: v for k, v in state.items()}
    with open(tokens_path, "rb") as f:
        tokens = torch.tensor(struct.unpack("<%di" % (batch * seq), f.read()), dtype=torch.int32)
    model_cfg = [vocab, max_seq, layers, heads, dim, 4 * dim, 0, 0, 1]
    with torch.no_grad():
        return gpt_reference.forward(p, model_cfg, tokens.reshape(batch, seq))


CONV1D = (".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight")


def gpt2_hf_from_nanogpt(sd):
    """nanoGPT's state_dict -> the Hub's GPT-2 file: prefix dropped, Conv1D transposed."""
    out = {}
    for k, v in sd.items():
        if k == "lm_head.weight":
            continue
        k = k[len("transformer."):]
        out[k] = v.t() if k.endswith(CONV1D) else v
    return out


def gpt2_hf_config(cfg):
    vocab, max_seq, layers, heads, dim = cfg
    return {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": vocab,
            "n_positions": max_seq, "n_embd": dim, "n_layer": layers, "n_head": heads, "n_inner": None,
            "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5}


def read_gpt2_hf(path, cfg):
    """gaaw's GPT-2 export in Hugging Face's layout -> nanoGPT names and orientation."""
    with open(os.path.join(os.path.dirname(path), "config.json")) as f:
        conf = json.load(f)
    want = gpt2_hf_config(cfg)
    want.update({"n_inner": 4 * cfg[4], "torch_dtype": "bfloat16", "tie_word_embeddings": True})
    for key, value in want.items():
        if conf.get(key) != value and not (isinstance(value, float) and abs(conf.get(key, 0) - value) < 1e-12):
            sys.exit("config.json: %s is %r, expected %r" % (key, conf.get(key), value))
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + n])
    out = {}
    for name, t in read_safetensors(path).items():
        if header[name]["dtype"] != "BF16" or not name.startswith("transformer."):
            sys.exit("%s: tensor %s is %s, expected BF16 under transformer." % (path, name, header[name]["dtype"]))
        out[name] = t.t() if name.endswith(CONV1D) else t
    return out


def write_logits(path, t):
    with open(path, "wb") as f:
        f.write(t.detach().contiguous().numpy().astype("<f4").tobytes())


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "write" and len(sys.argv) == 11:
        out_dir, tokens = sys.argv[2], sys.argv[3]
        cfg, (batch, seq) = [int(v) for v in sys.argv[4:9]], [int(v) for v in sys.argv[9:11]]
        sd = nanogpt_state(cfg, 1234)
        for dtype in ("F32", "BF16"):
            name = "torch_%s" % dtype.lower()
            write_safetensors(os.path.join(out_dir, name + ".safetensors"), sd, dtype)
            rounded = {k: v.to(DTYPES[dtype][0]).to(torch.float32) for k, v in sd.items()}
            write_logits(os.path.join(out_dir, name + ".logits"), logits(rounded, cfg, tokens, batch, seq))
        os.makedirs(os.path.join(out_dir, "hf_gpt2"), exist_ok=True)
        write_safetensors(os.path.join(out_dir, "hf_gpt2", "model.safetensors"), gpt2_hf_from_nanogpt(sd), "F32")
        with open(os.path.join(out_dir, "hf_gpt2", "config.json"), "w") as f:
            json.dump(gpt2_hf_config(cfg), f)
    elif mode == "read" and len(sys.argv) == 12:
        path, tokens, out = sys.argv[2:5]
        cfg, (batch, seq) = [int(v) for v in sys.argv[5:10]], [int(v) for v in sys.argv[10:12]]
        write_logits(out, logits(read_safetensors(path), cfg, tokens, batch, seq))
    elif mode == "read-hf" and len(sys.argv) == 12:
        path, tokens, out = sys.argv[2:5]
        cfg, (batch, seq) = [int(v) for v in sys.argv[5:10]], [int(v) for v in sys.argv[10:12]]
        write_logits(out, logits(read_gpt2_hf(path, cfg), cfg, tokens, batch, seq))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
