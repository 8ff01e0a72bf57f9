/* The GPT's configuration as tests/reference/gpt_reference.py reads it: "config"
 * (i32) and "llama" (f32: rope_theta, norm_eps), zeroed fields resolved to their
 * defaults. Shared by torch_ref.h and torch_cases.h. */
#ifndef GAAW_TEST_TORCH_CONFIG_H
#define GAAW_TEST_TORCH_CONFIG_H

#include "gaaw.h"
#include "tests/harness/tensor_file.h"

static inline void torch_write_config(FILE *f, const gaaw_gpt_config_t *g, int B, int T, int steps)
{
  int32_t cfg[16] = {g->vocab, g->max_seq, g->layers, g->heads, g->dim, g->ffn ? g->ffn : 4 * g->dim,
                     g->norm, g->activation, g->tied_embeddings, B, T, steps,
                     g->kv_heads, g->head_dim, g->position, g->no_bias != 0};
  const float llama[2] = {g->rope_theta ? (float)g->rope_theta : 10000.0f, g->norm_eps ? g->norm_eps : 1e-5f};
  tf_write(f, "config", 1, 1, (int64_t[]){16}, cfg);
  tf_write(f, "llama", 0, 1, (int64_t[]){2}, llama);
}

#endif
