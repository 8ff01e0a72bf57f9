/* The communication side of the cost model: alpha-beta times of NCCL's ring
 * algorithms on a group's links.
 *
 * World order is tp fastest, then cp, dp, pp (rank = ((pp_rank dp + dp_rank) cp +
 * cp_rank) tp + tp_rank) and node = rank / devices_per_node, so a tp group is n
 * ranks 1 apart, a cp group and the dp x cp group n ranks tp apart, a pp group n
 * ranks tp cp dp apart. A group whose first and last members share a node runs
 * on the intra-node links (NVLink), any other
 * on the inter-node ones (one NIC per device: a ring crosses each node boundary on
 * one link, so the slowest link is one NIC's).
 *
 * With B the buffer's bytes, n the members, alpha the latency, beta 1 / bandwidth:
 *   all-reduce      2 (n-1) alpha + 2 (n-1)/n B beta
 *   reduce-scatter    (n-1) alpha +   (n-1)/n B beta
 *   all-gather        (n-1) alpha +   (n-1)/n B beta
 *   point-to-point          alpha +           B beta
 *   all-to-all        (n-1) alpha +   (n-1)/n B beta   (B: each rank's send buffer,
 *                                                      of which (n-1)/n leaves it) */
#include "plan/plan_impl.h"

void plan_link_of(const gaaw_plan_cluster_t *c, int n, int stride, plan_link *l)
{
  int per_node = c->devices_per_node > 0 ? c->devices_per_node : 1;
  int intra = n <= 1 || ((n - 1) * (long long)stride) / per_node == 0;
  l->n = n;
  l->stride = stride;
  l->bytes_per_s = (intra ? c->intra_node_gbps : c->inter_node_gbps) * PLAN_GB;
  l->latency_s = (intra ? c->intra_node_latency_us : c->inter_node_latency_us) * 1e-6;
}

/* (n-1) steps each moving 1/n of the buffer. */
static double ring_pass(const plan_link *l, double bytes)
{
  if (l->n <= 1 || bytes <= 0) return 0;
  double n = l->n;
  return (n - 1) * l->latency_s + (n - 1) / n * bytes / l->bytes_per_s;
}

double plan_allreduce_seconds(const plan_link *l, double bytes)
{
  return 2 * ring_pass(l, bytes);
}

double plan_reduce_scatter_seconds(const plan_link *l, double bytes)
{
  return ring_pass(l, bytes);
}

double plan_all_gather_seconds(const plan_link *l, double bytes)
{
  return ring_pass(l, bytes);
}

double plan_all_to_all_seconds(const plan_link *l, double bytes)
{
  return ring_pass(l, bytes);
}

double plan_p2p_seconds(const plan_link *l, double bytes)
{
  return bytes > 0 ? l->latency_s + bytes / l->bytes_per_s : 0;
}
