/* Device memory of a layout: an analytic guess the search prunes with, and the
 * ledger (gaaw_memory_estimate) that decides for the layouts it keeps.
 *
 * The guess, for the first stage's rank (the one with the most in flight):
 *   model states, Psi this rank's parameters, e bytes per element, K bytes of
 *   optimizer state per parameter (fp32 m and v, and an fp32 master below f32):
 *     stage 0: (2e + K) Psi   1: 2e Psi + K Psi/dp   2: e Psi + (e + K) Psi/dp
 *     stage 3: (2e + K) Psi/dp; offload moves the K Psi/dp part off the device;
 *   (dp: the dp x cp ranks ZeRO shards over);
 *   activations per block and microbatch (Korthikanti et al. 2022, "Reducing
 *   Activation Recomputation in Large Transformer Models", for 2-byte elements,
 *   scaled by e/2, with s the rank's s / cp tokens of a row): none s b h (10 +
 *   24/t + 5 a s/(h t)), but as selective where the core is blocked (attention=auto
 *   at 512 tokens or more, and always at cp > 1: no scores kept), selective s b h 34/t
 *   (10 + 24 over t with sequence parallelism), full 2 s b h (the block's input),
 *   times the blocks in flight: 1F1B, ZB-H1 min(p, m) x L/p, GPipe m x L/p,
 *   interleaved ((v-1) p + 2 (p-1) + 1) chunks of L/(p v) (DESIGN.md section 10).
 * It leaves out workspaces and the logits, so it is low for small models; the
 * search only drops what it guesses at over 1.25 times the device. */
#include <math.h>

#include "plan/plan_impl.h"

double plan_memory_guess(const gaaw_plan_request_t *r, const plan_shape *sh, const gaaw_plan_layout_t *l)
{
  double t = l->tp, p = l->pp, v = l->virtual_stages, m = l->microbatches, cp = l->cp > 1 ? l->cp : 1;
  double dp = l->dp * cp, e = sh->e; /* ZeRO shards over dp x cp */
  double psi = sh->L / p * sh->block_params / t + sh->V * sh->h / t + sh->s * sh->h;
  double K = 8 + (e < 4 ? 4 : 0), opt = l->offload ? 0 : K;
  double states = l->zero_stage == 0   ? (2 * e + opt) * psi
                  : l->zero_stage == 1 ? 2 * e * psi + opt * psi / dp
                  : l->zero_stage == 2 ? e * psi + (e + opt) * psi / dp
                                       : (2 * e + opt) * psi / dp;
  double sbh = sh->s / cp * l->microbatch * sh->h * e / 2;
  double sp = r->model.sequence_parallel ? t : 1;
  int blocked = cp > 1 || sh->s >= 512;
  double per_block = l->recompute == 2                ? 2 * sbh / sp
                     : l->recompute == 1 || blocked ? sbh * (10 / sp + 24 / t)
                                                      : sbh * (10 / sp + 24 / t + 5 * sh->a * sh->s / (sh->h * t));
  double blocks;
  if (l->schedule == GAAW_SCHED_INTERLEAVED)
    blocks = ((v - 1) * p + 2 * (p - 1) + 1) * sh->L / (p * v);
  else if (l->schedule == GAAW_SCHED_GPIPE)
    blocks = m * sh->L / p;
  else
    blocks = fmin(p, m) * sh->L / p;
  return states + per_block * blocks;
}

gaaw_status_t plan_layout_options(const gaaw_plan_layout_t *l, gaaw_config_t cfg)
{
  static const char *recompute[] = {"none", "selective", "full"}, *offload[] = {"none", "host", "nvme"};
  gaaw_context_t ctx = NULL;
  GAAW_CHECK(gaaw_config_set_int(cfg, "tp", l->tp));
  GAAW_CHECK(gaaw_config_set_int(cfg, "pp", l->pp));
  GAAW_CHECK(gaaw_config_set_int(cfg, "dp", l->dp));
  GAAW_CHECK(gaaw_config_set_int(cfg, "virtual_stages", l->virtual_stages));
  GAAW_CHECK(gaaw_config_set_int(cfg, "microbatches", l->microbatches));
  GAAW_CHECK(gaaw_config_set_string(cfg, "pp_schedule", gaaw_sched_kind_name(l->schedule)));
  GAAW_CHECK(gaaw_config_set_string(cfg, "recompute", recompute[l->recompute]));
  GAAW_CHECK(gaaw_config_set_string(cfg, "offload_optimizer", offload[l->offload]));
  GAAW_CHECK(gaaw_config_set_int(cfg, "cp", l->cp > 1 ? l->cp : 1));
  GAAW_CHECK(gaaw_config_set_string(cfg, "cp_kind", l->cp_kind == 1 ? "a2a" : "ring"));
  return GAAW_SUCCESS;
}

gaaw_status_t plan_memory_estimate(gaaw_context_t ctx, const gaaw_plan_request_t *r, const gaaw_plan_layout_t *l,
                                   double *bytes)
{
  gaaw_config_t cfg = NULL;
  gaaw_optimizer_config_t oc;
  gaaw_estimate_options_t eo;
  gaaw_memory_estimate_t est;
  gaaw_status_t st = GAAW_SUCCESS;
  gaaw_optimizer_config_default(&oc);
  oc.zero_stage = l->zero_stage;
  oc.accumulation = l->microbatches;
  gaaw_estimate_options_default(&eo);
  eo.batch = l->microbatch;
  eo.seq = r->model.max_seq;
  *bytes = 0;
  GAAW_CHECK_GOTO(st, gaaw_config_create(&cfg), out);
  GAAW_CHECK_GOTO(st, plan_layout_options(l, cfg), out);
  /* rank 0 (first stage: embedding, most activations in flight) and the last
   * stage's rank 0 (LM head, logits) */
  int ranks[2] = {0, (l->pp - 1) * l->dp * (l->cp > 1 ? l->cp : 1) * l->tp};
  for (int i = 0; i < (l->pp > 1 ? 2 : 1); i++) {
    eo.rank = ranks[i];
    GAAW_CHECK_GOTO(st, gaaw_memory_estimate(ctx, &r->model, cfg, &oc, &eo, &est), out);
    *bytes = fmax(*bytes, (double)est.total[GAAW_SPACE_DEVICE]);
  }
out:
  gaaw_config_destroy(&cfg);
  return st;
}
