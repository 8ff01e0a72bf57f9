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

#endif
