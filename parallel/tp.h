/* Tensor-parallel mappings (Megatron-LM's), each a forward and its conjugate
 * backward over the tp group. Row-major (N, C) activations; "sequence" splits are
 * over the first dimension (tokens), in tp-rank order.
 *
 *   copy_to_tp            forward identity        backward all-reduce
 *   reduce_from_tp        forward all-reduce      backward identity
 *   gather_from_sequence  forward all-gather      backward reduce-scatter
 *   reduce_scatter_to_seq forward reduce-scatter  backward all-gather
 *   gather_from_tp        forward all-gather on the last dimension, backward split
 *
 * Identities need no call; the others are below. All are collective over the tp
 * group (comm). */
#ifndef GAAW_PARALLEL_TP_H
#define GAAW_PARALLEL_TP_H

#include "gaaw/comm.h"

/* In place: x = sum over the tp group of x. (copy_to_tp backward, reduce_from_tp forward) */
gaaw_status_t gaaw_tp_allreduce(gaaw_comm_t tp, gaaw_tensor_t *x);
/* x_local: (N/tp, C) -> x_full: (N, C). (gather_from_sequence forward,
 * reduce_scatter_to_sequence backward) */
gaaw_status_t gaaw_tp_gather_rows(gaaw_comm_t tp, const gaaw_tensor_t *x_local, gaaw_tensor_t *x_full);
/* y_full: (N, C), partial sums -> y_local: (N/tp, C), this rank's rows of the sum.
 * (reduce_scatter_to_sequence forward, gather_from_sequence backward) */
gaaw_status_t gaaw_tp_reduce_scatter_rows(gaaw_comm_t tp, const gaaw_tensor_t *y_full, gaaw_tensor_t *y_local);
/* x_local: (N, C/tp) -> x_full: (N, C), columns in tp-rank order; workspace: (tp, N, C/tp).
 * (gather_from_tp forward) */
gaaw_status_t gaaw_tp_gather_columns(gaaw_comm_t tp, const gaaw_tensor_t *x_local, gaaw_tensor_t *workspace,
                                     gaaw_tensor_t *x_full);
/* dx_full: (N, C) -> dx_local += this rank's columns (N, C/tp). (gather_from_tp backward) */
gaaw_status_t gaaw_tp_split_columns(gaaw_comm_t tp, const gaaw_tensor_t *dx_full, gaaw_tensor_t *dx_local);

#endif
