/* Context parallelism's split of a sequence (doc/context-parallel.md): a causal
 * model's seq tokens are cut into 2 cp pieces of seq / (2 cp) tokens, and cp rank r
 * holds pieces r and 2 cp - 1 - r (one early, one late), so that every rank has the
 * same causal attention work. At cp 1 a rank holds the whole sequence as one piece.
 * A rank's rows are piece-major: (piece, sequence of the batch, token). */
#ifndef GAAW_PARALLEL_CP_SPLIT_H
#define GAAW_PARALLEL_CP_SPLIT_H

#include <stdint.h>

/* The pieces a cp rank holds of each sequence. */
static inline int gaaw_cp_pieces(int cp)
{
  return cp > 1 ? 2 : 1;
}

/* The tokens of one piece of a sequence of seq tokens. */
static inline int64_t gaaw_cp_piece_len(int64_t seq, int cp)
{
  return cp > 1 ? seq / (2 * (int64_t)cp) : seq;
}

/* The position of the first token of piece i (0 or 1) of cp rank r. */
static inline int64_t gaaw_cp_piece_start(int64_t seq, int cp, int r, int i)
{
  return (i == 0 ? r : 2 * (int64_t)cp - 1 - r) * gaaw_cp_piece_len(seq, cp);
}

#endif
