/* All-to-all attention (DeepSpeed-Ulysses), context parallelism's other attention
 * core (doc/context-parallel.md, cp_kind=a2a): an all-to-all over the cp group turns
 * this rank's pieces of every head into every rank's pieces of heads / cp of them;
 * the blocks (cp_blocks.h) then run here over the whole sequence, and a second
 * all-to-all turns the output back. The heads of a rank (heads / tp, the key and
 * value heads repeated over their query heads) must divide by cp.
 * Shapes (P = pieces per rank, cp_split.h; BH = sequences x this rank's query heads;
 * c = tokens of a piece; D = head width), pieces major:
 *   qkv, dqkv: (3, P BH, c, D), q, k, v   out, dout: (P BH, c, D)
 *   lse: (P BH, c) f32 elements, held in the head-sharded order (cp, P BH / cp, c),
 *        for the backward only
 * Collective over the model's cp group; every rank calls with the same shapes. */
#ifndef GAAW_PARALLEL_A2A_ATTENTION_H
#define GAAW_PARALLEL_A2A_ATTENTION_H

#include "parallel/model_impl.h"

gaaw_status_t gaaw_a2a_attention_forward(gaaw_model_t m, const gaaw_frame *f, const gaaw_tensor_t *qkv,
                                         gaaw_tensor_t *out, gaaw_tensor_t *lse);
/* dqkv = .. (overwritten) from dout and the forward's out and lse. */
gaaw_status_t gaaw_a2a_attention_backward(gaaw_model_t m, const gaaw_frame *f, const gaaw_tensor_t *dout,
                                          const gaaw_tensor_t *qkv, const gaaw_tensor_t *out, const gaaw_tensor_t *lse,
                                          gaaw_tensor_t *dqkv);

#endif
