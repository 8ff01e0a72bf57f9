/* One collective call of gaaw on 2 ranks, with its allocations failing (run by
 * test_alloc_faults.sh under tests/harness/fault_inject.c: GAAW_FAULT=alloc:K@libgaaw,
 * GAAW_FAULT_RANK=1). Only the call's own allocations count: the shim's window is
 * open around it. Each rank prints "rank R: STATUS, N allocations" (N: the window's
 * count of the library's allocations) and "message: TEXT" when it failed; the script
 * checks that every rank fails alike, at once, and that nothing crashes.
 *
 *   alloc_faults agree            gaaw_agree_slotted over 100 slots (the heap path)
 *   alloc_faults push             gaaw_sampler_push at tp 2 (the group's gather)
 *   alloc_faults exchange         gaaw_sampler_exchange at dp 2
 *   alloc_faults load DIR         gaaw_model_load of a checkpoint saved in DIR first
 *   alloc_faults save DIR         gaaw_checkpoint_save into DIR (rank 0, which gathers
 *                                 the ranks' records and writes meta.json, is the faulty one) */
#include <mpi.h>

#include "backends/agree.h"
#include "gaaw/topology.h"
#include "tests/harness/fault_util.h"
#include "tests/harness/model_util.h"

enum { T = 8 };
static int world_rank;

/* the shim's window (tests/harness/fault_inject.c); without the shim, a no-op */
static long fault_window(int open)
{
  fault_window_fn window = fault_shim_window();
  return window ? window(open) : 0;
}

static gaaw_status_t agree_call(gaaw_context_t ctx)
{
  gaaw_comm_t world;
  require_ok(ctx, gaaw_topology_comm(ctx, GAAW_GROUP_WORLD, &world));
  int64_t values[100];
  gaaw_agree_slots s = {.name = "batch", .slot_name = "slot", .slot = world_rank, .slots = 100, .value = 5,
                        .values = values};
  /* slots 2..99 have no rank, so even without a fault every rank gets
   * GAAW_ERR_INVALID_ARG naming them: the call's outcome without a fault */
  fault_window(1);
  gaaw_status_t st = gaaw_agree_slotted(world, GAAW_SUCCESS, "the test's call", NULL, 0, &s);
  fault_window(0);
  return st;
}

static gaaw_sampler_t sampler(gaaw_context_t ctx)
{
  gaaw_sampler_config_t c;
  gaaw_sampler_config_default(&c);
  c.inputs = 2, c.outputs = 1, c.capacity = 16;
  gaaw_sampler_t s;
  require_ok(ctx, gaaw_sampler_create(ctx, &c, &s));
  return s;
}

static gaaw_status_t sampler_call(gaaw_context_t ctx, int exchange)
{
  gaaw_sampler_t s = sampler(ctx);
  float x[2 * 4] = {1, 2, 3, 4, 5, 6, 7, 8}, y[4] = {1, 2, 3, 4};
  if (exchange) require_ok(ctx, gaaw_sampler_push(s, 4, x, y));
  fault_window(1);
  gaaw_status_t st = exchange ? gaaw_sampler_exchange(s, 4) : gaaw_sampler_push(s, 3 + world_rank, x, y);
  fault_window(0);
  gaaw_sampler_destroy(&s);
  return st;
}

/* save: the window around gaaw_checkpoint_save; else around gaaw_model_load of a
 * checkpoint saved before it */
static gaaw_status_t checkpoint_call(gaaw_context_t ctx, const char *dir, int save)
{
  gaaw_gpt_config_t g = model_tiny_gpt(T, GAAW_F32);
  gaaw_model_t model;
  gaaw_optimizer_t opt;
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  oc.zero_stage = 1;
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g, &model));
  require_ok(ctx, gaaw_optimizer_create(model, &oc, &opt));
  if (save) fault_window(1);
  gaaw_status_t st = gaaw_checkpoint_save(opt, dir);
  fault_window(0);
  gaaw_optimizer_destroy(&opt);
  if (!save) {
    require_ok(ctx, st);
    fault_window(1);
    st = gaaw_model_load(model, dir);
    fault_window(0);
  }
  gaaw_model_destroy(&model);
  return st;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  fault_window(0); /* from here on, only the window's allocations count */
  const char *mode = argc > 1 ? argv[1] : "";
  int push = strcmp(mode, "push") == 0;
  int load = strcmp(mode, "load") == 0, save = strcmp(mode, "save") == 0;
  if (!push && strcmp(mode, "agree") != 0 && strcmp(mode, "exchange") != 0 && !((load || save) && argc > 2)) {
    fprintf(stderr, "usage: alloc_faults agree | push | exchange | load DIR | save DIR\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, push ? "backend=host comm_timeout=10 tp=2"
                                                         : "backend=host comm_timeout=10");
  gaaw_status_t st;
  if (mode[0] == 'a') st = agree_call(ctx);
  else if (load || save) st = checkpoint_call(ctx, argv[2], save);
  else st = sampler_call(ctx, !push);
  long allocations = fault_window(0);
  printf("rank %d: %s, %ld allocations\n", world_rank, gaaw_status_string(st), allocations);
  if (st != GAAW_SUCCESS) printf("message: %.*s\n", (int)strcspn(gaaw_last_error(ctx), "\n"), gaaw_last_error(ctx));
  fflush(stdout);
  gaaw_finalize(&ctx);
  MPI_Finalize();
  return 0;
}
