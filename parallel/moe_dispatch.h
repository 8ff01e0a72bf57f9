/* Expert parallelism's token exchange (doc/moe.md, "Expert parallelism"): the
 * experts are split over the ep group, rank r holding experts [r El, (r + 1) El)
 * of E (El = E / ep). Each rank's permuted rows, sorted by global expert, go to the
 * experts' ranks in one alltoallv (the per-expert counts travel first); a rank
 * orders what it receives by local expert, then source rank, for its per-expert
 * GEMMs, and the results travel back the same way.
 *
 *   source side: xp (P, C), rows [0, sent) by global expert
 *     -> alltoallv -> recv (rows, C), by source rank, then local expert
 *     -> gather by_expert -> xe (rows, C), by local expert, then source rank
 *   expert side: ye (rows, C) -> gather by_source -> alltoallv -> yp (P, C) */
#ifndef GAAW_PARALLEL_MOE_DISPATCH_H
#define GAAW_PARALLEL_MOE_DISPATCH_H

#include <stdint.h>

#include "gaaw/comm.h"

typedef struct {
  gaaw_comm_t ep;
  int size, local;                /* ep ranks; experts per rank (El) */
  int64_t *send_rows, *recv_rows; /* per ep rank: the rows sent to it, received from it */
  int64_t *counts, *offsets;      /* per local expert: its rows here, and where they start in xe */
  int64_t rows;                   /* the rows here (the sum of recv_rows) */
  gaaw_tensor_t by_expert;        /* (rows) i32: xe[p] = recv[by_expert[p]] */
  gaaw_tensor_t by_source;        /* (rows) i32: its inverse */
} gaaw_moe_dispatch;

/* The exchange's plan from this rank's kept rows per global expert (counts, E of
 * them; E divisible by the ep group's size). Collective over ep (the counts). */
gaaw_status_t gaaw_moe_dispatch_plan(gaaw_context_t ctx, gaaw_comm_t ep, int experts, const int64_t *counts,
                                     gaaw_moe_dispatch *d);
/* xe (rows, C) = the rows of every ep rank's xp for this rank's experts, by local
 * expert. Collective over ep. */
gaaw_status_t gaaw_moe_dispatch_send(gaaw_context_t ctx, const gaaw_moe_dispatch *d, const gaaw_tensor_t *xp,
                                     gaaw_tensor_t *xe);
/* yp's first sent rows (of (P, C)) = the expert rows ye (rows, C) computed for
 * them, back from their experts' ranks (its other rows untouched). Collective
 * over ep. */
gaaw_status_t gaaw_moe_dispatch_return(gaaw_context_t ctx, const gaaw_moe_dispatch *d, const gaaw_tensor_t *ye,
                                       gaaw_tensor_t *yp);
void gaaw_moe_dispatch_free(gaaw_context_t ctx, gaaw_moe_dispatch *d);

#endif
