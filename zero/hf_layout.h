/* Hugging Face's layouts of the GPT: a LLaMA-class GPT as transformers'
 * LlamaForCausalLM, and (option gpt2_names=hf) a GPT-2 as its GPT2LMHeadModel:
 * the names, row ranges and orientation that gaaw's parameters take in a
 * safetensors export and import, and the config.json written beside it. gaaw
 * fuses q, k, v into one QKV weight and gate, up into one c_fc weight, where a
 * LLaMA file holds them apart; GPT-2's Conv1D layers keep their weights as
 * (in, out), the transpose of gaaw's (out, in). Only this boundary knows. */
#ifndef GAAW_ZERO_HF_LAYOUT_H
#define GAAW_ZERO_HF_LAYOUT_H

#include "parallel/model_impl.h"

/* Mixtral's experts are tensors of their own: an MoE layer's w13 is 2 E of them */
#define GAAW_HF_MAX_EXPERTS 256
#define GAAW_HF_MAX_PARTS (2 * GAAW_HF_MAX_EXPERTS)
#define GAAW_HF_NAME_MAX 96

/* One parameter's pieces in the file: rows [row0[k], row0[k] + rows[k]) of it
 * (all of a 1-D parameter's elements count as rows) under name[k]; transposed:
 * the piece is the whole 2-D parameter, stored as its transpose. */
typedef struct {
  int n, transposed;
  char name[GAAW_HF_MAX_PARTS][GAAW_HF_NAME_MAX];
  int64_t row0[GAAW_HF_MAX_PARTS], rows[GAAW_HF_MAX_PARTS];
} gaaw_hf_parts;

typedef enum { GAAW_HF_NONE = 0, GAAW_HF_LLAMA, GAAW_HF_GPT2 } gaaw_hf_kind;

/* The layout model m exports and imports under: LLAMA for a GPT with RoPE, RMSNorm
 * and SwiGLU (with MoE MLPs: Mixtral's, when every block has one, scored by softmax,
 * renormalised, at most GAAW_HF_MAX_EXPERTS experts, no shared expert); GPT2 for any other GPT when
 * the option gpt2_names is hf; else NONE (gaaw's own names: nanoGPT's for a GPT). */
gaaw_hf_kind gaaw_hf_layout(gaaw_model_t m);
/* The most file tensors m's nparams parameters take in any layout. */
int64_t gaaw_hf_tensor_bound(gaaw_model_t m, int nparams);
/* A GPT2 layout's model must be what GPT2LMHeadModel computes: learned positions,
 * layernorm, GELU, biases, head_dim = dim / heads, kv_heads = heads; else
 * GAAW_ERR_UNSUPPORTED naming what differs. Not collective. */
gaaw_status_t gaaw_hf_gpt2_check(gaaw_model_t m);
/* The pieces of m's parameter `name` of global shape (rows, ...) in layout kind
 * (LLAMA or GPT2); 0 when name is not a GPT parameter gaaw knows. */
int gaaw_hf_parts_of(gaaw_model_t m, gaaw_hf_kind kind, const char *name, int64_t rows, gaaw_hf_parts *out);

/* config.json beside path (the file's directory), for layout kind: written by
 * gaaw_model_export (world rank 0, replaced atomically; torch_dtype that of the
 * tensors, dtype_name "float32", "bfloat16" or "float16"), checked by
 * gaaw_model_import when it exists: every field it gives must be the model's
 * (GAAW_ERR_INVALID_ARG naming the field and both values), "model_type" must be
 * "llama" ("mixtral" with MoE MLPs) or "gpt2", and what gaaw does not compute is GAAW_ERR_UNSUPPORTED
 * naming it (a "rope_scaling" other than null, GPT-2's attention scalings and
 * activations other than the tanh GELU). Not collective. */
gaaw_status_t gaaw_hf_config_write(gaaw_model_t m, gaaw_hf_kind kind, const char *path, const char *dtype_name);
gaaw_status_t gaaw_hf_config_check(gaaw_model_t m, gaaw_hf_kind kind, const char *path);
/* The check of one config.json's text (size bytes; file: its name in messages)
 * against the GPT g (its sizes resolved, as the model holds them); pure, ctx may
 * be NULL: the fuzz target tests/fuzz/fuzz_hf_config.c calls it. */
gaaw_status_t gaaw_hf_config_check_text(gaaw_context_t ctx, const gaaw_gpt_config_t *g, gaaw_hf_kind kind,
                                        const char *file, const char *text, size_t size);

#endif
