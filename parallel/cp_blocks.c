/* The attention blocks of context parallelism (cp_blocks.h). */
#include "parallel/cp_blocks.h"

#include "parallel/cp_split.h"
#include "parallel/model_impl.h"

static int64_t start_of(const gaaw_cp_blocks *b, int rank, int i)
{
  return gaaw_cp_piece_start(b->seq, b->cp, rank, i);
}

/* Whether query piece i of rank q_rank sees a key of piece j of rank k_rank: the
 * pieces have one length, so it does when the keys start no later (causal). */
static int sees(const gaaw_cp_blocks *b, int q_rank, int i, int k_rank, int j)
{
  return start_of(b, k_rank, j) <= start_of(b, q_rank, i);
}

/* Piece i of t, whose first dimension holds the pieces one after the other. */
static gaaw_tensor_t piece_of(const gaaw_tensor_t *t, int pieces, int i)
{
  gaaw_tensor_t v = *t;
  v.shape[0] = t->shape[0] / pieces;
  v.offset += (size_t)i * (size_t)gaaw_tensor_numel(&v) * gaaw_dtype_size(t->dtype);
  return v;
}

/* Piece j of k (which 0) or v (1) of kv (2, P BH, c, D): (BH, c, D). */
static gaaw_tensor_t kv_piece(const gaaw_tensor_t *kv, int pieces, int which, int j)
{
  gaaw_tensor_t part = gaaw_reshape(kv, 3, (int64_t[]){kv->shape[1], kv->shape[2], kv->shape[3]});
  part.offset += (size_t)which * (size_t)gaaw_tensor_numel(&part) * gaaw_dtype_size(kv->dtype);
  return piece_of(&part, pieces, j);
}

/* The views of one block: query piece i of rank q_rank against key piece j of k_rank. */
typedef struct {
  gaaw_tensor_t q, k, v, out, lse;
  int64_t q_start, k_start;
} block_views;

static block_views views_of(const gaaw_cp_blocks *b, int q_rank, int i, const gaaw_tensor_t *q, int k_rank, int j,
                            const gaaw_tensor_t *kv, const gaaw_tensor_t *out, const gaaw_tensor_t *lse)
{
  block_views v = {piece_of(q, b->pieces, i), kv_piece(kv, b->pieces, 0, j), kv_piece(kv, b->pieces, 1, j),
                   piece_of(out, b->pieces, i), piece_of(lse, b->pieces, i), start_of(b, q_rank, i),
                   start_of(b, k_rank, j)};
  return v;
}

gaaw_status_t gaaw_cp_blocks_forward(const gaaw_cp_blocks *b, int q_rank, const gaaw_tensor_t *q, int k_rank,
                                     const gaaw_tensor_t *kv, gaaw_tensor_t *out, gaaw_tensor_t *lse,
                                     gaaw_tensor_t *part, gaaw_tensor_t *part_lse, int started[2])
{
  gaaw_context_t ctx = b->ctx;
  for (int i = 0; i < b->pieces; i++)
    for (int j = 0; j < b->pieces; j++) {
      if (!sees(b, q_rank, i, k_rank, j)) continue; /* every key after every query */
      block_views v = views_of(b, q_rank, i, q, k_rank, j, kv, out, lse);
      if (!started[i]) {
        GAAW_CHECK(gaaw_attention_block_forward(ctx, &v.q, &v.k, &v.v, v.q_start, v.k_start, GAAW_ATTENTION_CAUSAL,
                                                &v.out, &v.lse));
        started[i] = 1;
        continue;
      }
      GAAW_CHECK(gaaw_attention_block_forward(ctx, &v.q, &v.k, &v.v, v.q_start, v.k_start, GAAW_ATTENTION_CAUSAL, part,
                                              part_lse));
      GAAW_CHECK(gaaw_attention_merge(ctx, &v.out, &v.lse, part, part_lse));
    }
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_cp_blocks_backward(const gaaw_cp_blocks *b, int q_rank, const gaaw_tensor_t *dout,
                                      const gaaw_tensor_t *q, int k_rank, const gaaw_tensor_t *kv,
                                      const gaaw_tensor_t *out, const gaaw_tensor_t *lse, gaaw_tensor_t *dq,
                                      gaaw_tensor_t *dkv)
{
  gaaw_context_t ctx = b->ctx;
  for (int i = 0; i < b->pieces; i++)
    for (int j = 0; j < b->pieces; j++) {
      if (!sees(b, q_rank, i, k_rank, j)) continue;
      block_views v = views_of(b, q_rank, i, q, k_rank, j, kv, out, lse);
      gaaw_tensor_t doi = piece_of(dout, b->pieces, i), dqi = piece_of(dq, b->pieces, i);
      gaaw_tensor_t dk = kv_piece(dkv, b->pieces, 0, j), dv = kv_piece(dkv, b->pieces, 1, j);
      GAAW_CHECK(gaaw_attention_block_backward(ctx, &doi, &v.q, &v.k, &v.v, &v.out, &v.lse, v.q_start, v.k_start,
                                               GAAW_ATTENTION_CAUSAL, &dqi, &dk, &dv));
    }
  return GAAW_SUCCESS;
}
