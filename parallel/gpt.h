/* The GPT inside the library: its layer kinds' shared pieces and its batches
 * (gpt_batch.c), which gpt.c's model-kind table names. */
#ifndef GAAW_PARALLEL_GPT_H
#define GAAW_PARALLEL_GPT_H

#include "parallel/model_impl.h"

/* The GPT's entries of gaaw_model_kind_ops (see there). */
gaaw_status_t gaaw_gpt_load_batch(gaaw_model_t m, gaaw_frame *f, const gaaw_batch_t *b);
void gaaw_gpt_offset_batch(gaaw_model_t m, const gaaw_batch_t *b, size_t rows, gaaw_batch_t *one);
int gaaw_gpt_batch_digests(gaaw_model_t m, const gaaw_batch_t *b, size_t rows, struct gaaw_field_s *out);
gaaw_status_t gaaw_gpt_fill_targets(gaaw_model_t m, const gaaw_batch_t *b, gaaw_batch_t *full, void **filler);
int64_t gaaw_gpt_output_count(gaaw_model_t m, const gaaw_batch_t *b);
void gaaw_gpt_array_shapes(gaaw_model_t m, int predict, int64_t batch, int64_t seq, int64_t in[2], int64_t out[2]);
/* The GPT as a plan at the rank of layout (gaaw_model_plan): no memory, no
 * communication; for the memory estimate. Not collective. */
gaaw_status_t gaaw_model_plan_gpt(gaaw_context_t ctx, const gaaw_gpt_config_t *cfg, const gaaw_model_layout *layout,
                                  gaaw_model_t *model);

/* ---- the configuration (gpt_config.c) */
/* kv_heads and head_dim with a zeroed field's default. */
int gaaw_gpt_kv_heads(const gaaw_gpt_config_t *g);
int gaaw_gpt_head_dim(const gaaw_gpt_config_t *g);
/* The config's fields against themselves and tp; the mixture of experts' against
 * tp and cp too (GAAW_ERR_INVALID_ARG, or GAAW_ERR_UNSUPPORTED for what is not
 * built yet). */
gaaw_status_t gaaw_gpt_check_config(gaaw_context_t ctx, const gaaw_gpt_config_t *g, int tp);
gaaw_status_t gaaw_gpt_check_moe(gaaw_context_t ctx, const gaaw_gpt_config_t *g, int tp, int cp, int ep);
/* What every rank must share of a gaaw_gpt_config_t (the builder's fields). */
int gaaw_gpt_config_fields(const void *cfg, gaaw_field *f);

/* ---- the mixture-of-experts MLP of a block (gpt_moe.c, doc/moe.md) */
/* Its parameters' slots in a block, where the dense MLP's c_fc and c_proj are
 * (router (E, C), w13 (E 2F, C), w2 (E C, F); the shared expert's s13 (2S, C), s2
 * (C, S) and gate (1, C)), and its first saved slot, after the block's own
 * (gpt_block.c). */
enum {
  GAAW_GPT_MOE_ROUTER = 8, GAAW_GPT_MOE_W13 = 9, GAAW_GPT_MOE_W2 = 10, GAAW_GPT_MOE_S13 = 11, GAAW_GPT_MOE_S2 = 12,
  GAAW_GPT_MOE_SGATE = 13, GAAW_GPT_MOE_SAVED = 16
};
/* Whether block i has an MoE MLP (experts > 0 and i a multiple of moe_every). */
int gaaw_gpt_block_is_moe(const gaaw_gpt_config_t *g, int i);
/* Declares block i's MoE parameters on l (names h.i.mlp.gate.weight,
 * h.i.mlp.experts.w13.weight, h.i.mlp.experts.w2.weight; h.i.mlp.shared_expert.w13
 * and .w2.weight, h.i.mlp.shared_expert_gate.weight). */
gaaw_status_t gaaw_gpt_add_moe(gaaw_model_t m, gaaw_layer *l, int block);
/* y (N, C) = the layer of h (N, C) for frame f's microbatch, recording what it
 * measured in f->moe; backward: dh (N, C) (overwritten) from dy. Collective over
 * the dp x cp group when the data-parallel hooks are installed (the token group). */
gaaw_status_t gaaw_gpt_moe_forward(gaaw_model_t m, gaaw_layer *l, gaaw_frame *f, const gaaw_tensor_t *h,
                                   gaaw_tensor_t *y);
gaaw_status_t gaaw_gpt_moe_backward(gaaw_model_t m, gaaw_layer *l, gaaw_frame *f, const gaaw_tensor_t *h,
                                    const gaaw_tensor_t *dy, gaaw_tensor_t *dh);
/* What they allocate, for N tokens (model_memory.c's walk). */
void gaaw_gpt_moe_memory(gaaw_model_t m, struct gaaw_mem_walk *w, int backward, int64_t N);

#endif
