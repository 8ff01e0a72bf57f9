/* heat_surrogate: in-situ training of a surrogate model next to a simulation.
 *
 * A 2D heat-equation solver (explicit finite differences, u = 0 on the boundary) is
 * split over the MPI ranks in strips of rows, each rank exchanging halo rows with
 * its neighbours. While it runs, every rank turns its own fields into training
 * samples for an MLP: the neighbourhood of a point at time t (inputs) and how much
 * the point changes over the next K solver steps (target). gaaw trains the model
 * with data parallelism over the solver ranks (each rank's gradients come from its
 * own subdomain) and, with --tp 2, with tensor parallelism: then the two ranks of a
 * tp group share one copy of the model, so they gather their samples and pass the
 * same batch. Finally both the solver and the surrogate advance the same field,
 * the surrogate K steps per prediction, and the program prints the surrogate's
 * error against the solver.
 *
 * With --save-dir DIR the program keeps its surrogate: a checkpoint in DIR every
 * --save-every N solver timesteps (at the end of the first snapshot that reaches
 * each multiple of N) and always at the last timestep of training, each with the
 * simulation's timestep and time as entries (gaaw_checkpoint_set_entry), which a
 * restart with gaaw_checkpoint_load gets back. heat_predict reloads it and only
 * predicts. --predictions FILE writes the first predictions after training (one
 * line per grid point) for comparison with heat_predict's.
 *
 * Build and run (the same code is in heat_surrogate.f90 for Fortran; heat.h, which
 * it includes, holds the solver and the model, shared with heat_predict.c):
 *   mpicc -O2 heat_surrogate.c -o heat_surrogate $(pkg-config --cflags --libs gaaw) -lm
 *   mpiexec -n 2 ./heat_surrogate            # dp 2
 *   mpiexec -n 2 ./heat_surrogate --tp 2     # tp 2 (any gaaw option: --key value)
 *   mpiexec -n 2 ./heat_surrogate --save-dir ck --save-every 20
 * The grid's rows (NY) must divide by the number of ranks. */
#define HEAT_PROGRAM "heat_surrogate"
#include "heat.h"

/* Saves the surrogate in dir (dir/step-NNNNNNNN, NNNNNNNN the optimizer's step
 * count) with the simulation's timestep and time as entries, then writes them to
 * dir/TIMESTEP_FILE too, where heat_predict reads them (heat_predict.c says why).
 * The time is timestep * dt, in units of h^2 / kappa (so dt = ALPHA). The wait
 * commits an asynchronous save (checkpoint_async) at once, so that the file never
 * names a checkpoint that is not there; the file is replaced whole (a temporary
 * file renamed). Collective over world. */
static void save(gaaw_context_t ctx, gaaw_optimizer_t opt, const char *dir, int timestep, int rank)
{
  char step[32], time[32], path[4096], tmp[sizeof path + 8];
  snprintf(step, sizeof step, "%d", timestep);
  snprintf(time, sizeof time, "%.6f", timestep * ALPHA);
  check(gaaw_checkpoint_set_entry(opt, "timestep", step), ctx, "gaaw_checkpoint_set_entry");
  check(gaaw_checkpoint_set_entry(opt, "time", time), ctx, "gaaw_checkpoint_set_entry");
  check(gaaw_checkpoint_save(opt, dir), ctx, "gaaw_checkpoint_save");
  check(gaaw_checkpoint_wait(opt), ctx, "gaaw_checkpoint_wait");
  int ok = 1;
  if (rank == 0) {
    snprintf(path, sizeof path, "%s/" TIMESTEP_FILE, dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    ok = f && fprintf(f, "%s %s\n", step, time) > 0;
    if (f && fclose(f) != 0) ok = 0;
    if (ok) ok = rename(tmp, path) == 0;
    if (!ok) fprintf(stderr, "heat_surrogate: cannot write %s\n", path);
    else printf("timestep %3d: surrogate saved in %s\n", timestep, dir);
  }
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!ok) MPI_Abort(MPI_COMM_WORLD, 1);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  /* gaaw's options from the command line (--tp 2) and GAAW_* variables */
  gaaw_config_t cfg = NULL;
  gaaw_context_t ctx = NULL;
  check(gaaw_config_create(&cfg), NULL, "gaaw_config_create");
  check(gaaw_config_parse_args(cfg, &argc, argv), NULL, "the command line");
  /* what is left: this program's own options */
  const char *save_dir = NULL, *predictions = NULL, *every = NULL, *v;
  for (int i = 1; i < argc;) {
    if ((v = option_value(&i, argc, argv, "--save-dir"))) save_dir = v;
    else if ((v = option_value(&i, argc, argv, "--save-every"))) every = v;
    else if ((v = option_value(&i, argc, argv, "--predictions"))) predictions = v;
    else {
      if (rank == 0)
        fprintf(stderr, "heat_surrogate: unknown argument %s (usage: heat_surrogate [--tp N] [--save-dir DIR "
                        "[--save-every N]] [--predictions FILE])\n", argv[i]);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  char *end = NULL;
  long save_every = every ? strtol(every, &end, 10) : 0; /* 0: the last timestep only */
  if ((every && (*end != '\0' || save_every < 1)) || (every && !save_dir)) {
    if (rank == 0) fprintf(stderr, "heat_surrogate: --save-every takes a number >= 1 and needs --save-dir\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int dp, tp, tp_rank;
  MPI_Comm tp_comm; /* this rank's tp group, in tp_rank order */
  heat_init(cfg, &ctx, &dp, &tp, &tp_rank, &tp_comm);
  strip_t s = strip_create(rank, size); /* the solver's strip, at the initial field */
  if (rank == 0)
    printf("heat_surrogate: %d ranks (tp %d x dp %d), grid %d x %d, %d solver steps per surrogate step\n", size, tp,
           dp, NX, NY, K);
  size_t cells = (size_t)(s.rows + 2 * R) * WIDTH;
  double *before = calloc(cells, sizeof(double)); /* the field K steps ago */

  /* the surrogate (heat.h), AdamW */
  gaaw_model_t model = NULL;
  gaaw_optimizer_t opt = NULL;
  check(heat_model_create(ctx, &model), ctx, "gaaw_model_create_mlp");
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  oc.zero_stage = 1;
  oc.lr = 2e-3f;
  oc.weight_decay = 0;
  check(gaaw_optimizer_create(model, &oc, &opt), ctx, "gaaw_optimizer_create");

  /* samples, C order: x (BATCH, NIN), y (BATCH, 1); and their tp-group copies */
  int points = NX * s.rows;
  float *x = malloc(sizeof(float) * BATCH * NIN), *y = malloc(sizeof(float) * BATCH);
  float *gx = malloc(sizeof(float) * tp * BATCH * NIN), *gy = malloc(sizeof(float) * tp * BATCH);
  unsigned pick = 12345u + 977u * (unsigned)rank; /* which points go into a batch */

  /* 1. the solver runs; every K steps its fields train the surrogate */
  float loss = 0;
  for (int snap = 0; snap < SNAPSHOTS; snap++) {
    exchange_halo(&s);
    memcpy(before, s.u, sizeof(double) * cells);
    for (int k = 0; k < K; k++) solver_step(&s);
    for (int step = 0; step < STEPS_PER_SNAPSHOT; step++) {
      for (int b = 0; b < BATCH; b++) {
        pick = pick * 1664525u + 1013904223u;
        int p = (int)((pick >> 8) % (unsigned)points), i = p % NX, j = p / NX;
        patch(before, i, j, x + (size_t)b * NIN);
        y[b] = OUT_SCALE * (float)(*at(s.u, i, j) - *at(before, i, j));
      }
      gaaw_batch_t batch = {.batch = tp * BATCH,
                            .inputs = group_batch(tp_comm, tp, x, gx, BATCH, NIN),
                            .outputs = group_batch(tp_comm, tp, y, gy, BATCH, 1)};
      check(gaaw_model_forward_backward(model, &batch, &loss), ctx, "gaaw_model_forward_backward");
      check(gaaw_optimizer_step(opt), ctx, "gaaw_optimizer_step");
    }
    if (rank == 0 && (snap + 1) % 5 == 0) printf("snapshot %3d: training loss %.3e\n", snap + 1, loss);
    int timestep = (snap + 1) * K; /* the solver's steps so far */
    int crossed = save_every > 0 && timestep / save_every != (timestep - K) / save_every;
    if (save_dir && (crossed || snap == SNAPSHOTS - 1)) save(ctx, opt, save_dir, timestep, rank);
  }

  /* 2. from the same field, the solver and the surrogate advance ROLLOUT * K steps */
  rollout(ctx, model, &s, tp_comm, tp, tp_rank, predictions);

  free(gy), free(gx), free(y), free(x), free(before), free(s.scratch), free(s.u);
  check(gaaw_optimizer_destroy(&opt), ctx, "gaaw_optimizer_destroy");
  check(gaaw_model_destroy(&model), ctx, "gaaw_model_destroy");
  MPI_Comm_free(&tp_comm);
  check(gaaw_finalize(&ctx), NULL, "gaaw_finalize");
  gaaw_config_destroy(&cfg);
  MPI_Finalize();
  return 0;
}
