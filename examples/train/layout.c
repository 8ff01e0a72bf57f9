/* gaaw-train --layout auto. */
#include "examples/train/layout.h"

#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "examples/train/trainer.h"

/* The planner's request for the job of o: its GPT and global batch; every ZeRO
 * stage, schedule and recompute; the offload the options name (none if unset);
 * cp 1 (gaaw-train's --layout auto plans without context parallelism: a cp run
 * names its layout). */
static void job_request(const train_options *o, int64_t global_batch, gaaw_plan_request_t *req)
{
  memset(req, 0, sizeof *req);
  train_gpt_config(o, &req->model);
  req->global_batch = global_batch;
  if (!strcmp(o->offload_optimizer, "host")) req->offload = 1u << 1;
  else if (!strcmp(o->offload_optimizer, "nvme")) req->offload = 1u << 2;
  else req->offload = 1u << 0;
  req->max_layouts = 1;
  req->cp = 1;
}

/* Whether v is the same on every rank (an MPMD launch may give ranks other options). */
static int same_on_every_rank(int64_t v)
{
  int64_t mine[2] = {v, -v}, most[2];
  MPI_Allreduce(mine, most, 2, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
  return most[0] == -most[1];
}

/* Calibrates this machine on a probe context of the whole world with tp = pp = 1
 * and plans req on it: *best is the fastest layout that fits. Returns a train exit
 * status, with err set when it is not TRAIN_EXIT_OK. */
static int plan_on_probe(gaaw_config_t cfg, const gaaw_plan_request_t *req, gaaw_plan_cluster_t *cluster,
                         gaaw_plan_layout_t *best, char *err, size_t len)
{
  gaaw_context_t probe = NULL;
  gaaw_plan_t plan = NULL;
  int code = TRAIN_EXIT_OK;
  gaaw_status_t st = gaaw_config_parse(cfg, "tp=1 pp=1 dp=0 virtual_stages=1 microbatches=1");
  if (st == GAAW_SUCCESS) st = gaaw_config_set_string(cfg, "pp_layout", "");
  if (st == GAAW_SUCCESS) st = gaaw_init(MPI_COMM_WORLD, cfg, &probe);
  if (st == GAAW_SUCCESS) st = gaaw_plan_calibrate(probe, &req->model, cluster);
  if (st != GAAW_SUCCESS) {
    snprintf(err, len, "--layout auto: calibrating this machine failed:\n%s",
             gaaw_last_error(probe)[0] ? gaaw_last_error(probe) : gaaw_last_error(NULL));
    code = TRAIN_EXIT_FAILURE;
  } else if (gaaw_plan_create(probe, req, cluster, &plan) != GAAW_SUCCESS) {
    snprintf(err, len, "--layout auto: the planner failed:\n%s", gaaw_last_error(probe));
    code = TRAIN_EXIT_USAGE;
  } else if (gaaw_plan_count(plan) == 0) {
    int world = cluster->nodes * cluster->devices_per_node;
    size_t n = (size_t)snprintf(err, len, "--layout auto: no layout of %d ranks fits this job (global batch %lld):",
                                world, (long long)req->global_batch);
    gaaw_plan_rejected_t r;
    for (int i = 0; i < gaaw_plan_rejected_count(plan) && i < 8 && n < len; i++)
      if (gaaw_plan_rejected(plan, i, &r) == GAAW_SUCCESS)
        n += (size_t)snprintf(err + n, len - n, "\n  dp %d pp %d tp %d: %s", r.dp, r.pp, r.tp, r.reason);
    code = TRAIN_EXIT_USAGE;
  } else {
    gaaw_plan_layout(plan, 0, best);
  }
  gaaw_plan_destroy(&plan);
  gaaw_finalize(&probe);
  return code;
}

int train_layout_auto(gaaw_config_t cfg, train_options *o, char *chosen, size_t chosen_len, char *err, size_t len)
{
  chosen[0] = '\0';
  const int automatic = !strcmp(o->layout, "auto");
  if (!same_on_every_rank(automatic)) {
    snprintf(err, len, "--layout is auto on some ranks only: give every rank the same --layout");
    return TRAIN_EXIT_USAGE;
  }
  if (!automatic) return TRAIN_EXIT_OK;
  int world;
  int64_t tp = 1, pp = 1, dp = 0, microbatches = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  gaaw_config_get_int(cfg, "tp", &tp);
  gaaw_config_get_int(cfg, "pp", &pp);
  gaaw_config_get_int(cfg, "dp", &dp);
  gaaw_config_get_int(cfg, "microbatches", &microbatches);
  if (dp == 0) dp = world / (tp * pp);
  gaaw_plan_request_t req;
  job_request(o, dp * microbatches * o->batch * o->accum, &req);
  if (!same_on_every_rank(req.global_batch)) {
    snprintf(err, len, "--layout auto: the global batch (--batch x --accum x microbatches x dp, %lld here) differs "
             "across ranks", (long long)req.global_batch);
    return TRAIN_EXIT_USAGE;
  }

  gaaw_plan_cluster_t cluster;
  gaaw_plan_layout_t best;
  int code = plan_on_probe(cfg, &req, &cluster, &best, err, len);
  if (code != TRAIN_EXIT_OK) return code;
  if (gaaw_plan_apply(&best, cfg) != GAAW_SUCCESS) {
    snprintf(err, len, "--layout auto: %s", gaaw_last_error(NULL));
    return TRAIN_EXIT_FAILURE;
  }
  o->zero = best.zero_stage;
  o->batch = best.microbatch;
  o->accum = 1;
  static const char *const recompute[] = {"none", "selective", "full"}, *const offload[] = {"none", "host", "nvme"};
  char schedule[64] = "";
  if (best.pp > 1)
    snprintf(schedule, sizeof schedule, ", %s, %d virtual stage%s", gaaw_plan_schedule_name(best.schedule),
             best.virtual_stages, best.virtual_stages == 1 ? "" : "s");
  snprintf(chosen, chosen_len,
           "layout auto: dp %d x pp %d x tp %d%s, %d microbatch%s of %d, ZeRO %d, recompute %s, offload %s: "
           "predicted %.4g s per step, %.4g tok/s, %.3g MiB per rank (%s, %.3g TFLOP/s)",
           best.dp, best.pp, best.tp, schedule, best.microbatches, best.microbatches == 1 ? "" : "es", best.microbatch,
           best.zero_stage, recompute[best.recompute], offload[best.offload], best.step_seconds, best.tokens_per_s,
           best.memory_bytes_per_rank / (1024.0 * 1024), cluster.device.name, cluster.device.peak_tflops);
  return TRAIN_EXIT_OK;
}
