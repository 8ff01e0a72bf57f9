#!/usr/bin/python3
"""LLaMA-class weights in Hugging Face's layout between PyTorch and gaaw, for
tests/mpi/test_llama_hf_np4.c.

Usage:
  llama_hf_reference.py read PATH TOKENS TARGETS OUT CONFIG...
      loads PATH (gaaw's export: one file, or the model.safetensors.index.json of a
      sharded set, whose shards it checks against the index; Hugging Face's LLaMA
      names: model.embed_tokens,
      model.layers.N.self_attn.{q,k,v,o}_proj, mlp.{gate,up,down}_proj,
      input_layernorm, post_attention_layernorm, model.norm, lm_head) and the
      config.json beside it, and writes the reference's loss and logits to OUT.
  llama_hf_reference.py write PATH TOKENS TARGETS OUT CONFIG...
      writes random weights as PATH in that layout (F32) with a config.json beside
      it, and their loss and logits to OUT.
CONFIG is vocab max_seq layers heads kv_heads head_dim dim ffn tied batch seq. The
model is tests/reference/gpt_reference.py's (RoPE, RMSNorm, SwiGLU, no biases): the
file's q, k, v and gate, up pieces are joined into its fused weights here, as gaaw
joins them. OUT holds "loss" (1) and "logits" (batch x seq, vocab) as
gpt_reference.py's tensor files. Exits 77 when PyTorch is not installed."""
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt_reference  # noqa: E402 (exits 77 without torch)
import safetensors_reference as st  # noqa: E402
import torch  # noqa: E402


def fused(hf, layers, tied):
    """Hugging Face's LLaMA names -> gpt_reference.py's (nanoGPT's) fused ones."""
    p = {"wte.weight": hf["model.embed_tokens.weight"], "ln_f.weight": hf["model.norm.weight"]}
    p["lm_head.weight"] = hf["model.embed_tokens.weight"] if tied else hf["lm_head.weight"]
    for i in range(layers):
        a, h = "model.layers.%d." % i, "h.%d." % i
        p[h + "ln_1.weight"] = hf[a + "input_layernorm.weight"]
        p[h + "ln_2.weight"] = hf[a + "post_attention_layernorm.weight"]
        p[h + "attn.c_attn.weight"] = torch.cat([hf[a + "self_attn.%s_proj.weight" % x] for x in "qkv"])
        p[h + "attn.c_proj.weight"] = hf[a + "self_attn.o_proj.weight"]
        p[h + "mlp.c_fc.weight"] = torch.cat([hf[a + "mlp.gate_proj.weight"], hf[a + "mlp.up_proj.weight"]])
        p[h + "mlp.c_proj.weight"] = hf[a + "mlp.down_proj.weight"]
    return p


def random_hf(cfg, seed):
    vocab, _, layers, heads, kv, hd, dim, ffn, tied = cfg[:9]
    g = torch.Generator().manual_seed(seed)

    def rand(*shape, mean=0.0):
        return mean + 0.1 * torch.randn(*shape, generator=g)
    sd = {"model.embed_tokens.weight": rand(vocab, dim)}
    for i in range(layers):
        a = "model.layers.%d." % i
        sd[a + "input_layernorm.weight"] = rand(dim, mean=1.0)
        sd[a + "self_attn.q_proj.weight"] = rand(heads * hd, dim)
        sd[a + "self_attn.k_proj.weight"] = rand(kv * hd, dim)
        sd[a + "self_attn.v_proj.weight"] = rand(kv * hd, dim)
        sd[a + "self_attn.o_proj.weight"] = rand(dim, heads * hd)
        sd[a + "post_attention_layernorm.weight"] = rand(dim, mean=1.0)
        sd[a + "mlp.gate_proj.weight"] = rand(ffn, dim)
        sd[a + "mlp.up_proj.weight"] = rand(ffn, dim)
        sd[a + "mlp.down_proj.weight"] = rand(dim, ffn)
    sd["model.norm.weight"] = rand(dim, mean=1.0)
    if not tied:
        sd["lm_head.weight"] = rand(vocab, dim)
    return sd


def read_set(path):
    """One safetensors file, or every shard a model.safetensors.index.json names."""
    if not path.endswith(".index.json"):
        return st.read_safetensors(path)
    with open(path) as f:
        index = json.load(f)
    out, total = {}, 0
    for name in sorted(set(index["weight_map"].values())):
        part = st.read_safetensors(os.path.join(os.path.dirname(path), name))
        for key, t in part.items():
            if index["weight_map"].get(key) != name:
                sys.exit("%s: %s is in %s, the index says %s" % (path, key, name, index["weight_map"].get(key)))
            total += 4 * t.numel()
        out.update(part)
    if len(out) != len(index["weight_map"]) or total != index["metadata"]["total_size"]:
        sys.exit("%s: %d tensors of %d bytes, the index names %d of %d" % (
            path, len(out), total, len(index["weight_map"]), index["metadata"]["total_size"]))
    return out


def config_json(cfg):
    vocab, max_seq, layers, heads, kv, hd, dim, ffn, tied = cfg[:9]
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": dim,
            "intermediate_size": ffn, "num_hidden_layers": layers, "num_attention_heads": heads,
            "num_key_value_heads": kv, "head_dim": hd, "vocab_size": vocab, "max_position_embeddings": max_seq,
            "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "rope_scaling": None, "tie_word_embeddings": bool(tied),
            "hidden_act": "silu"}


def loss_and_logits(p, cfg, tokens_path, targets_path, theta, eps):
    vocab, max_seq, layers, heads, kv, hd, dim, ffn, tied, batch, seq = cfg
    count = batch * seq
    with open(tokens_path, "rb") as f:
        tokens = torch.tensor(struct.unpack("<%di" % count, f.read()), dtype=torch.int32).reshape(batch, seq)
    with open(targets_path, "rb") as f:
        targets = torch.tensor(struct.unpack("<%di" % count, f.read()), dtype=torch.long)
    model_cfg = [vocab, max_seq, layers, heads, dim, ffn, 1, 1, tied, batch, seq, 0, kv, hd, 1, 1]
    with torch.no_grad():
        logits = gpt_reference.forward(p, model_cfg, tokens, theta, eps)
        loss = torch.nn.functional.cross_entropy(logits, targets, ignore_index=-1)
    return {"loss": loss.reshape(1), "logits": logits}


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode not in ("read", "write") or len(sys.argv) != 17:
        sys.exit(__doc__)
    path, tokens, targets, out = sys.argv[2:6]
    cfg = [int(v) for v in sys.argv[6:17]]
    config_path = os.path.join(os.path.dirname(path), "config.json")
    if mode == "write":
        hf = random_hf(cfg, 4321)
        st.write_safetensors(path, hf, "F32")
        with open(config_path, "w") as f:
            json.dump(config_json(cfg), f)
    else:
        hf = read_set(path)
    with open(config_path) as f:
        conf = json.load(f)
    expect = config_json(cfg)
    for key in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                "num_key_value_heads", "head_dim", "vocab_size", "tie_word_embeddings", "model_type"):
        if conf.get(key) != expect[key]:
            sys.exit("%s: %s is %r, expected %r" % (config_path, key, conf.get(key), expect[key]))
    if conf["tie_word_embeddings"] and "lm_head.weight" in hf:
        sys.exit("%s: a tied model's file holds lm_head.weight" % path)
    p = fused(hf, cfg[2], conf["tie_word_embeddings"])
    gpt_reference.write_tensors(out, loss_and_logits(p, cfg, tokens, targets, conf["rope_theta"],
                                                     conf["rms_norm_eps"]))


if __name__ == "__main__":
    main()
