/* The attention blocks of context parallelism (doc/context-parallel.md): the query
 * pieces one rank held in the split (cp_split.h) against the key pieces another rank
 * held, causal by the pieces' positions in the whole sequence. Ring attention calls
 * them with this rank's queries and each rank's keys in turn; all-to-all attention
 * with every rank's queries and keys, for its share of the heads.
 * Shapes (P = pieces per rank, BH = sequences x the heads computed, c = tokens of a
 * piece, D = head width), pieces major:
 *   q, out, dout, dq: (P BH, c, D)   lse: (P BH, c) f32   kv, dkv: (2, P BH, c, D), k then v */
#ifndef GAAW_PARALLEL_CP_BLOCKS_H
#define GAAW_PARALLEL_CP_BLOCKS_H

#include "gaaw/kernels.h"

typedef struct {
  gaaw_context_t ctx;
  int cp, pieces;
  int64_t seq; /* tokens of a whole sequence */
} gaaw_cp_blocks;

/* out and lse of rank q_rank's pieces q over rank k_rank's pieces kv, merged into
 * what they hold; a query piece whose started[i] is 0 is written (and marked), not
 * merged. part (BH, c, D) and part_lse (BH, c) f32 are scratch. Blocks whose keys
 * all lie after their queries are skipped. Not collective. */
gaaw_status_t gaaw_cp_blocks_forward(const gaaw_cp_blocks *b, int q_rank, const gaaw_tensor_t *q, int k_rank,
                                     const gaaw_tensor_t *kv, gaaw_tensor_t *out, gaaw_tensor_t *lse,
                                     gaaw_tensor_t *part, gaaw_tensor_t *part_lse, int started[2]);
/* dq += .. and dkv += .. of the same blocks, from dout and the rows' merged out and
 * lse. Not collective. */
gaaw_status_t gaaw_cp_blocks_backward(const gaaw_cp_blocks *b, int q_rank, const gaaw_tensor_t *dout,
                                      const gaaw_tensor_t *q, int k_rank, const gaaw_tensor_t *kv,
                                      const gaaw_tensor_t *out, const gaaw_tensor_t *lse, gaaw_tensor_t *dq,
                                      gaaw_tensor_t *dkv);

#endif
