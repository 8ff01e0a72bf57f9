/* heat.h: what the in-situ examples in C share (heat_surrogate.c, the simulation
 * that trains its surrogate, and heat_predict.c, which reloads the surrogate and
 * only predicts): the problem, the solver on each rank's strip of rows, the
 * surrogate's samples and model, and the comparison of surrogate and solver. A
 * checkpoint reloads only into the model it was saved from, so both programs build
 * it here, once. heat.inc and heat_procs.inc are the same for Fortran.
 *
 * A program defines HEAT_PROGRAM (its name, for messages) before it includes this. */
#ifndef HEAT_H
#define HEAT_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include <gaaw.h>

/* The problem. */
#define NX 64           /* grid columns */
#define NY 64           /* grid rows, split over the ranks */
#define ALPHA 0.2       /* diffusion number kappa dt / h^2 (stable up to 0.25) */
#define K 2             /* solver steps per surrogate step */
#define R K             /* neighbourhood radius: K steps reach K cells */
#define NIN ((2 * R + 1) * (2 * R + 1)) /* inputs per sample: the (2R+1)^2 patch */
/* Training and the comparison. */
#define SNAPSHOTS 25    /* training samples are taken every K solver steps */
#define STEPS_PER_SNAPSHOT 4 /* optimizer steps per snapshot */
#define BATCH 256       /* samples per rank per optimizer step */
#define ROLLOUT 20      /* surrogate steps compared with the solver */
/* Samples are differences to the centre value, scaled to order 1 by hand (the
 * model keeps no normalisation statistics: a program that reloads it scales its
 * samples the same way, with these). */
#define IN_SCALE 10.0f
#define OUT_SCALE (10.0f / (K * ALPHA))

/* This rank's strip of rows, with R halo rows above and below and R halo
 * columns left and right (zero: the boundary). u[(j + R) * WIDTH + i + R] is
 * column i (0..NX-1), local row j (0..rows-1). */
#define WIDTH (NX + 2 * R)
typedef struct {
  int rows, first_row; /* owned rows and the global index of the first */
  int up, down;        /* neighbour ranks (MPI_PROC_NULL at the boundary) */
  double *u, *scratch; /* (rows + 2R) x WIDTH */
} strip_t;

static double *at(double *u, int i, int j)
{
  return &u[(size_t)(j + R) * WIDTH + (i + R)];
}

/* Stops the program with gaaw's report when st is not GAAW_SUCCESS. Every rank
 * gets the same status from gaaw's collective calls, so all stop together. */
static void check(gaaw_status_t st, gaaw_context_t ctx, const char *what)
{
  if (st == GAAW_SUCCESS) return;
  fprintf(stderr, HEAT_PROGRAM ": %s failed: %s\n", what, gaaw_last_error(ctx));
  MPI_Abort(MPI_COMM_WORLD, 1);
}

/* gaaw_init on MPI_COMM_WORLD with cfg (stops the program on failure), and the
 * layout: dp, tp, this rank's tp coordinate and its tp group (in tp_rank order).
 * Collective over world. */
static void heat_init(gaaw_config_t cfg, gaaw_context_t *ctx, int *dp, int *tp, int *tp_rank, MPI_Comm *tp_comm)
{
  int pp, dp_rank, pp_rank;
  check(gaaw_init(MPI_COMM_WORLD, cfg, ctx), NULL, "gaaw_init");
  check(gaaw_topology_sizes(*ctx, dp, &pp, tp), *ctx, "gaaw_topology_sizes");
  check(gaaw_topology_coords(*ctx, &dp_rank, &pp_rank, tp_rank), *ctx, "gaaw_topology_coords");
  MPI_Comm_split(MPI_COMM_WORLD, dp_rank, *tp_rank, tp_comm);
}

/* Two Gaussian bumps. */
static void initial_field(strip_t *s)
{
  memset(s->u, 0, sizeof(double) * (size_t)(s->rows + 2 * R) * WIDTH);
  for (int j = 0; j < s->rows; j++)
    for (int i = 0; i < NX; i++) {
      double y = s->first_row + j;
      double a = ((i - 20) * (i - 20) + (y - 24) * (y - 24)) / (2 * 6.0 * 6.0);
      double b = ((i - 44) * (i - 44) + (y - 40) * (y - 40)) / (2 * 4.0 * 4.0);
      *at(s->u, i, j) = exp(-a) + 0.5 * exp(-b);
    }
}

/* This rank's strip of the NY rows split over size ranks, at the initial field;
 * stops the program (on every rank) when they do not divide. */
static strip_t strip_create(int rank, int size)
{
  if (NY % size != 0) {
    if (rank == 0) fprintf(stderr, HEAT_PROGRAM ": %d rows do not divide over %d ranks\n", NY, size);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  strip_t s = {.rows = NY / size, .first_row = rank * (NY / size)};
  s.up = rank > 0 ? rank - 1 : MPI_PROC_NULL;
  s.down = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
  size_t cells = (size_t)(s.rows + 2 * R) * WIDTH;
  s.u = calloc(cells, sizeof(double));
  s.scratch = calloc(cells, sizeof(double));
  initial_field(&s);
  return s;
}

/* Fills the R halo rows from the neighbours (left as zero at the boundary). */
static void exchange_halo(strip_t *s)
{
  int n = R * WIDTH;
  double *first = at(s->u, -R, 0), *last = at(s->u, -R, s->rows - R);
  double *above = at(s->u, -R, -R), *below = at(s->u, -R, s->rows);
  MPI_Sendrecv(first, n, MPI_DOUBLE, s->up, 0, below, n, MPI_DOUBLE, s->down, 0, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  MPI_Sendrecv(last, n, MPI_DOUBLE, s->down, 1, above, n, MPI_DOUBLE, s->up, 1, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
}

/* One explicit step of du/dt = kappa laplacian(u). */
static void solver_step(strip_t *s)
{
  exchange_halo(s);
  memcpy(s->scratch, s->u, sizeof(double) * (size_t)(s->rows + 2 * R) * WIDTH);
  for (int j = 0; j < s->rows; j++)
    for (int i = 0; i < NX; i++) {
      double c = *at(s->scratch, i, j);
      double lap = *at(s->scratch, i - 1, j) + *at(s->scratch, i + 1, j) + *at(s->scratch, i, j - 1) +
                   *at(s->scratch, i, j + 1) - 4 * c;
      *at(s->u, i, j) = c + ALPHA * lap;
    }
}

/* The surrogate: NIN -> 64 -> 64 -> 64 -> 1 (an even number of linears, so that
 * tp pairs each column-parallel linear with a row-parallel one). Collective over
 * world. */
static gaaw_status_t heat_model_create(gaaw_context_t ctx, gaaw_model_t *model)
{
  gaaw_mlp_config_t mc = {.nsizes = 5, .sizes = {NIN, 64, 64, 64, 1}, .activation = GAAW_ACT_GELU, .seed = 1};
  return gaaw_model_create_mlp(ctx, &mc, model);
}

/* The model's inputs for point (i, j) of field u (halo filled): x (NIN). */
static void patch(double *u, int i, int j, float *x)
{
  double c = *at(u, i, j);
  int k = 0;
  for (int dj = -R; dj <= R; dj++)
    for (int di = -R; di <= R; di++) x[k++] = IN_SCALE * (float)(*at(u, i + di, j + dj) - c);
}

/* With tp > 1 the ranks of a tp group hold one model between them and must pass
 * the same batch: each gets every member's n samples of width w, in member order.
 * With tp = 1 the rank's own samples are the batch. Returns the batch. */
static float *group_batch(MPI_Comm tp_comm, int tp, float *mine, float *all, int n, int w)
{
  if (tp == 1) return mine;
  MPI_Allgather(mine, n * w, MPI_FLOAT, all, n * w, MPI_FLOAT, tp_comm);
  return all;
}

/* sum over the world of the squared differences a - b over the owned points */
static double sum_sq_diff(const strip_t *s, double *a, double *b)
{
  double local = 0, total = 0;
  for (int j = 0; j < s->rows; j++)
    for (int i = 0; i < NX; i++) {
      double d = *at(a, i, j) - (b ? *at(b, i, j) : 0);
      local += d * d;
    }
  MPI_Allreduce(&local, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return total;
}

/* Writes the predictions of every rank, mine (points) each, to path from world
 * rank 0: one line per grid point, in global row-major order (the strips are in
 * rank order), "%.9e" (enough digits to give back the float). Collective over
 * world. */
static void write_predictions(const char *path, const float *mine, int points, int rank, int size)
{
  float *all = rank == 0 ? malloc(sizeof(float) * (size_t)points * size) : NULL;
  MPI_Gather(mine, points, MPI_FLOAT, all, points, MPI_FLOAT, 0, MPI_COMM_WORLD);
  int ok = 1;
  if (rank == 0) {
    FILE *f = fopen(path, "w");
    ok = f != NULL;
    for (int p = 0; ok && p < points * size; p++) ok = fprintf(f, "%.9e\n", all[p]) > 0;
    if (f && fclose(f) != 0) ok = 0;
    if (!ok) fprintf(stderr, HEAT_PROGRAM ": cannot write %s\n", path);
  }
  free(all);
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!ok) MPI_Abort(MPI_COMM_WORLD, 1);
}

/* From the field of s, the solver and the surrogate advance ROLLOUT * K steps (s
 * with them: it ends as the solver's field), the surrogate K steps per
 * prediction, and world rank 0 prints the surrogate's error after the first
 * surrogate step and after the last. With predictions (not NULL) the first
 * step's predictions go to that file (write_predictions). tp_comm is this
 * rank's tp group, in tp_rank order. Collective over world. */
static void rollout(gaaw_context_t ctx, gaaw_model_t model, strip_t *s, MPI_Comm tp_comm, int tp, int tp_rank,
                    const char *predictions)
{
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  size_t cells = (size_t)(s->rows + 2 * R) * WIDTH;
  int points = NX * s->rows;
  strip_t sur = *s;
  sur.u = calloc(cells, sizeof(double));
  sur.scratch = calloc(cells, sizeof(double));
  double *start = calloc(cells, sizeof(double));
  memcpy(sur.u, s->u, sizeof(double) * cells);
  memcpy(start, s->u, sizeof(double) * cells);
  float *px = malloc(sizeof(float) * points * NIN), *gpx = malloc(sizeof(float) * tp * points * NIN);
  float *pred = malloc(sizeof(float) * tp * points);
  for (int r = 0; r < ROLLOUT; r++) {
    for (int k = 0; k < K; k++) solver_step(s);
    exchange_halo(&sur);
    for (int p = 0; p < points; p++) patch(sur.u, p % NX, p / NX, px + (size_t)p * NIN);
    gaaw_batch_t all = {.batch = tp * points, .inputs = group_batch(tp_comm, tp, px, gpx, points, NIN)};
    check(gaaw_model_predict(model, &all, pred), ctx, "gaaw_model_predict");
    const float *mine = pred + (size_t)tp_rank * points; /* this rank's points in the group's batch */
    for (int p = 0; p < points; p++) *at(sur.u, p % NX, p / NX) += mine[p] / OUT_SCALE;
    if (r > 0) continue;
    if (predictions) write_predictions(predictions, mine, points, rank, size);
    double err1 = sqrt(sum_sq_diff(s, sur.u, s->u)), change1 = sqrt(sum_sq_diff(s, s->u, start));
    if (rank == 0) printf("after 1 surrogate step: error relative to the solver's change %.4f\n", err1 / change1);
  }
  double err = sqrt(sum_sq_diff(s, sur.u, s->u));
  double change = sqrt(sum_sq_diff(s, s->u, start));
  double norm = sqrt(sum_sq_diff(s, s->u, NULL));
  if (rank == 0) {
    printf("after %d surrogate steps (%d solver steps): |u_surrogate - u_solver| = %.3e, |u_solver| = %.3e\n",
           ROLLOUT, ROLLOUT * K, err, norm);
    printf("surrogate error relative to the solver's change: %.4f\n", err / change);
  }
  free(pred), free(gpx), free(px), free(start), free(sur.u), free(sur.scratch);
}

/* The value of option name (--name value or --name=value) when argv[*i] is it,
 * advancing *i past it; NULL when argv[*i] is another argument. Stops the program
 * when the value is missing. */
static const char *option_value(int *i, int argc, char **argv, const char *name)
{
  size_t n = strlen(name);
  if (strncmp(argv[*i], name, n) != 0) return NULL;
  if (argv[*i][n] == '=') return argv[(*i)++] + n + 1;
  if (argv[*i][n] != '\0') return NULL;
  if (*i + 1 >= argc) {
    fprintf(stderr, HEAT_PROGRAM ": %s needs a value\n", name);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  *i += 2;
  return argv[*i - 1];
}

/* The file, inside a save directory, in which heat_surrogate writes the timestep
 * and time of its newest checkpoint for heat_predict (heat_predict.c says why). */
#define TIMESTEP_FILE "timestep"

#endif
