/* heat_predict: the surrogate that heat_surrogate trained in situ and saved, reloaded
 * in another job, on any number of ranks and any layout, only to predict.
 *
 * It builds the same MLP (heat.h) without an optimizer and loads the newest
 * checkpoint of the save directory into it with gaaw_model_load, which reads, on
 * each rank, what that rank owns in its own layout (trained with dp 2 or tp 2 on 2
 * ranks, predicting on 1 rank or with tp 2). Then, as a restarted simulation would,
 * it brings the solver to the timestep the checkpoint came from and compares the
 * surrogate with the solver from there on, as heat_surrogate does at the end of its
 * training: fresh inputs of the same kind as the training samples, never trained
 * on. Both print the same lines, and with the layout of the training the same
 * predictions to the bit (--predictions FILE writes them).
 *
 * Build and run (the same code is in heat_predict.f90 for Fortran):
 *   mpicc -O2 heat_predict.c -o heat_predict $(pkg-config --cflags --libs gaaw) -lm
 *   mpiexec -n 2 ./heat_surrogate --tp 2 --save-dir ck   # trains and saves
 *   mpiexec -n 1 ./heat_predict ck                      # predicts on 1 rank
 *   mpiexec -n 2 ./heat_predict --tp 2 ck               # or with tp 2 (any gaaw option)
 * A directory with no checkpoint is refused with one message, on every rank. */
#define HEAT_PROGRAM "heat_predict"
#include "heat.h"

/* The timestep and time the checkpoint came from, from dir/TIMESTEP_FILE, which
 * heat_surrogate writes after each save; 0 when the file is missing or unreadable.
 * Read on world rank 0 and sent to every rank. Collective over world.
 *
 * Why a file: the checkpoint holds the timestep too, as an entry, but entries
 * belong to an optimizer (gaaw_checkpoint_get_entry after gaaw_checkpoint_load),
 * and a predictor has none: gaaw_model_load loads the parameters alone. The other
 * way, an optimizer built only to load the checkpoint whole and read the entry,
 * would load into its moments what prediction never uses, and would have to be of
 * the trainer's kind (AdamW), or the load is refused. The file is written after the
 * checkpoint is committed and names its timestep, so the two agree unless a save
 * is interrupted between them or a load falls back to an older checkpoint
 * (checkpoint_fallback). */
static int read_timestep(const char *dir, int rank, int *timestep, double *time)
{
  int ok = 0;
  if (rank == 0) {
    char path[4096];
    snprintf(path, sizeof path, "%s/" TIMESTEP_FILE, dir);
    FILE *f = fopen(path, "r");
    ok = f && fscanf(f, "%d %lf", timestep, time) == 2 && *timestep >= 0;
    if (f) fclose(f);
    if (!ok) fprintf(stderr, "heat_predict: %s holds a checkpoint but %s cannot be read: not saved by heat_surrogate?\n", dir, path);
  }
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Bcast(timestep, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Bcast(time, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return ok;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int rank, size, status = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  /* gaaw's options from the command line (--tp 2) and GAAW_* variables; then the
   * save directory and --predictions FILE */
  gaaw_config_t cfg = NULL;
  gaaw_context_t ctx = NULL;
  check(gaaw_config_create(&cfg), NULL, "gaaw_config_create");
  check(gaaw_config_parse_args(cfg, &argc, argv), NULL, "the command line");
  const char *dir = NULL, *predictions = NULL, *v;
  for (int i = 1; i < argc;) {
    if ((v = option_value(&i, argc, argv, "--predictions"))) predictions = v;
    else if (!dir && argv[i][0] != '-') dir = argv[i++];
    else {
      if (rank == 0)
        fprintf(stderr, "heat_predict: unknown argument %s (usage: heat_predict [--tp N] DIR [--predictions FILE])\n",
                argv[i]);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  if (!dir) {
    if (rank == 0) fprintf(stderr, "heat_predict: no save directory (usage: heat_predict [--tp N] DIR)\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int dp, tp, tp_rank;
  MPI_Comm tp_comm; /* this rank's tp group, in tp_rank order */
  heat_init(cfg, &ctx, &dp, &tp, &tp_rank, &tp_comm);
  strip_t s = strip_create(rank, size); /* the solver's strip, at the initial field */

  /* the surrogate, its parameters from the checkpoint (no optimizer: nothing to
   * train). gaaw_model_load is collective and every rank gets the same status, so
   * a directory with no checkpoint stops every rank here, rank 0 saying why. */
  gaaw_model_t model = NULL;
  check(heat_model_create(ctx, &model), ctx, "gaaw_model_create_mlp");
  gaaw_status_t st = gaaw_model_load(model, dir);
  if (st == GAAW_ERR_NOT_FOUND) {
    if (rank == 0) fprintf(stderr, "heat_predict: no checkpoint in %s (heat_surrogate --save-dir DIR saves one)\n", dir);
    status = 1;
    goto out;
  }
  check(st, ctx, "gaaw_model_load");
  int timestep;
  double time;
  if (!read_timestep(dir, rank, &timestep, &time)) {
    status = 1;
    goto out;
  }
  if (rank == 0)
    printf("heat_predict: %d rank%s (tp %d x dp %d), the surrogate of %s, saved at timestep %d (t = %.6f)\n", size,
           size == 1 ? "" : "s", tp, dp, dir, timestep, time);

  /* the field of that timestep (a simulation restarting from its own output would
   * read it), then surrogate and solver from there, as heat_surrogate does */
  for (int t = 0; t < timestep; t++) solver_step(&s);
  rollout(ctx, model, &s, tp_comm, tp, tp_rank, predictions);

out:
  free(s.scratch), free(s.u);
  check(gaaw_model_destroy(&model), ctx, "gaaw_model_destroy");
  MPI_Comm_free(&tp_comm);
  check(gaaw_finalize(&ctx), NULL, "gaaw_finalize");
  gaaw_config_destroy(&cfg);
  MPI_Finalize();
  return status;
}
