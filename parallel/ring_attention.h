/* Ring attention, context parallelism's attention core (doc/context-parallel.md):
 * the causal attention of this rank's query pieces over the keys of every rank of
 * the cp group. Keys and values travel round the ring (rank r sends to r + 1 and
 * receives from r - 1) while the blocks already here compute; the partial results of
 * a row merge by their log-sum-exp; blocks whose keys all lie after their queries
 * are skipped. Backward sends the keys and values round again together with their
 * gradients, which come home after the last step.
 * Shapes (P = pieces per rank, cp_split.h; BH = sequences x this rank's query heads;
 * c = tokens of a piece; D = head width), pieces major:
 *   q, out, dout, dq: (P BH, c, D)   lse: (P BH, c) f32   kv, dkv: (2, P BH, c, D), k then v
 * Collective over the model's cp group; every rank calls with the same shapes. */
#ifndef GAAW_PARALLEL_RING_ATTENTION_H
#define GAAW_PARALLEL_RING_ATTENTION_H

#include "parallel/model_impl.h"

/* out and lse of q over every rank's kv, for frame f's pieces. */
gaaw_status_t gaaw_ring_attention_forward(gaaw_model_t m, const gaaw_frame *f, const gaaw_tensor_t *q,
                                          const gaaw_tensor_t *kv, gaaw_tensor_t *out, gaaw_tensor_t *lse);
/* dq += .. and dkv = .. (overwritten: the gradient of this rank's kv, summed over every
 * rank's queries) from dout and the forward's out and lse. */
gaaw_status_t gaaw_ring_attention_backward(gaaw_model_t m, const gaaw_frame *f, const gaaw_tensor_t *dout,
                                           const gaaw_tensor_t *q, const gaaw_tensor_t *kv, const gaaw_tensor_t *out,
                                           const gaaw_tensor_t *lse, gaaw_tensor_t *dq, gaaw_tensor_t *dkv);

#endif
