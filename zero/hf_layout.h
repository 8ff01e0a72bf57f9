/* Hugging Face's layout of a LLaMA-class GPT (transformers' LlamaForCausalLM):
 * the names and row ranges that gaaw's parameters take in a safetensors export
 * and import, and the config.json written beside it. gaaw fuses q, k, v into one
 * QKV weight and gate, up into one c_fc weight; the file holds them apart. Only
 * this boundary knows. */
#ifndef GAAW_ZERO_HF_LAYOUT_H
#define GAAW_ZERO_HF_LAYOUT_H

#include "parallel/model_impl.h"

#define GAAW_HF_MAX_PARTS 3
#define GAAW_HF_NAME_MAX 96

/* One parameter's pieces in the file: rows [row0[k], row0[k] + rows[k]) of it
 * (all of a 1-D parameter's elements count as rows) under name[k]. */
typedef struct {
  int n;
  char name[GAAW_HF_MAX_PARTS][GAAW_HF_NAME_MAX];
  int64_t row0[GAAW_HF_MAX_PARTS], rows[GAAW_HF_MAX_PARTS];
} gaaw_hf_parts;

/* Whether model m exports under Hugging Face's LLaMA names: a GPT with RoPE,
 * RMSNorm and SwiGLU. */
int gaaw_hf_llama(gaaw_model_t m);
/* The pieces of m's parameter `name` of global shape (rows, ...) in the LLaMA
 * layout; 0 when name is not a GPT parameter gaaw knows. */
int gaaw_hf_parts_of(gaaw_model_t m, const char *name, int64_t rows, gaaw_hf_parts *out);

/* config.json beside path (the file's directory): written by gaaw_model_export
 * for a LLaMA-class GPT (world rank 0, replaced atomically), checked by
 * gaaw_model_import when it exists: every field it gives must be the model's
 * (GAAW_ERR_INVALID_ARG naming the field and both values), a "rope_scaling" other
 * than null is GAAW_ERR_UNSUPPORTED naming its type (gaaw has none), and
 * "model_type" must be "llama". Not collective. */
gaaw_status_t gaaw_hf_config_write(gaaw_model_t m, const char *path);
gaaw_status_t gaaw_hf_config_check(gaaw_model_t m, const char *path);

#endif
