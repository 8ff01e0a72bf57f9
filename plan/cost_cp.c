/* Context parallelism's exchanges in one block on one microbatch (cost model).
 *
 * With c the cp size, b the rows, t the tp size, e the dtype's bytes, the pieces a
 * rank holds are s / c tokens of each row (doc/context-parallel.md):
 *   KV = 2 b (s/c) (a/t) D e   a rank's keys and values, expanded to its query heads
 *   S  =   b (s/c) (a/t) D e   one tensor's share under all-to-all
 * ring (cp_kind 0): forward runs c steps; in each of the first c - 1 the rank sends
 *   its current K, V block on while it computes with it, so such a step takes the
 *   longer of the block's compute (a c-th of the core) and the KV message; the
 *   backward's steps compute twice that and pass K, V and their gradients (2 KV),
 *   and the gradients' last hop home is not hidden; full recomputation re-runs
 *   the forward ring in backward;
 * a2a (cp_kind 1): forward all-to-alls 4 S (q, k, v to head shards, the output
 *   back), backward 8 S, full recomputation 4 S more, none of it hidden.
 * The cp group is c ranks tp apart (rank order tp-cp-dp-pp). */
#include <math.h>

#include "plan/plan_impl.h"

void plan_cp_exchange(const plan_shape *sh, const gaaw_plan_cluster_t *c, const gaaw_plan_layout_t *l,
                      double *forward, double *backward)
{
  *forward = *backward = 0;
  if (l->cp <= 1) return;
  double n = l->cp, S = l->microbatch * sh->s / n * sh->a / l->tp * sh->d * sh->e, KV = 2 * S;
  plan_link cpl;
  plan_link_of(c, l->cp, l->tp, &cpl);
  if (l->cp_kind == 1) {
    *forward = 4 * plan_all_to_all_seconds(&cpl, S);
    *backward = 8 * plan_all_to_all_seconds(&cpl, S) + (l->recompute == 2 ? *forward : 0);
    return;
  }
  double step = plan_core_seconds(sh, &c->device, l) / n; /* one block's compute */
  double fwd_hidden = fmax(0, plan_p2p_seconds(&cpl, KV) - step);
  double bwd_hidden = fmax(0, plan_p2p_seconds(&cpl, 2 * KV) - 2 * step);
  *forward = (n - 1) * fwd_hidden;
  *backward = (n - 1) * bwd_hidden + plan_p2p_seconds(&cpl, KV) + (l->recompute == 2 ? *forward : 0);
}
