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
 * Build and run (the same code is in heat_surrogate.f90 for Fortran):
 *   mpicc -O2 heat_surrogate.c -o heat_surrogate $(pkg-config --cflags --libs gaaw) -lm
 *   mpiexec -n 2 ./heat_surrogate            # dp 2
 *   mpiexec -n 2 ./heat_surrogate --tp 2     # tp 2 (any gaaw option: --key value)
 * The grid's rows (NY) must divide by the number of ranks. */
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
/* Samples are differences to the centre value, scaled to order 1. */
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
  fprintf(stderr, "heat_surrogate: %s failed: %s\n", what, gaaw_last_error(ctx));
  MPI_Abort(MPI_COMM_WORLD, 1);
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
  if (argc > 1) { /* what is left is not a gaaw option */
    if (rank == 0) fprintf(stderr, "heat_surrogate: unknown argument %s (usage: heat_surrogate [--tp N])\n", argv[1]);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  check(gaaw_init(MPI_COMM_WORLD, cfg, &ctx), NULL, "gaaw_init");
  int dp, pp, tp, dp_rank, pp_rank, tp_rank;
  check(gaaw_topology_sizes(ctx, &dp, &pp, &tp), ctx, "gaaw_topology_sizes");
  check(gaaw_topology_coords(ctx, &dp_rank, &pp_rank, &tp_rank), ctx, "gaaw_topology_coords");
  MPI_Comm tp_comm; /* this rank's tp group, in tp_rank order */
  MPI_Comm_split(MPI_COMM_WORLD, dp_rank, tp_rank, &tp_comm);
  if (NY % size != 0) {
    if (rank == 0) fprintf(stderr, "heat_surrogate: %d rows do not divide over %d ranks\n", NY, size);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  if (rank == 0)
    printf("heat_surrogate: %d ranks (tp %d x dp %d), grid %d x %d, %d solver steps per surrogate step\n", size, tp,
           dp, NX, NY, K);

  /* the solver's strip */
  strip_t s = {.rows = NY / size, .first_row = rank * (NY / size)};
  s.up = rank > 0 ? rank - 1 : MPI_PROC_NULL;
  s.down = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
  size_t cells = (size_t)(s.rows + 2 * R) * WIDTH;
  s.u = calloc(cells, sizeof(double));
  s.scratch = calloc(cells, sizeof(double));
  double *before = calloc(cells, sizeof(double)); /* the field K steps ago */
  initial_field(&s);

  /* the surrogate: NIN -> 64 -> 64 -> 64 -> 1 (an even number of linears, so that
   * tp pairs each column-parallel linear with a row-parallel one), AdamW */
  gaaw_model_t model = NULL;
  gaaw_optimizer_t opt = NULL;
  gaaw_mlp_config_t mc = {.nsizes = 5, .sizes = {NIN, 64, 64, 64, 1}, .activation = GAAW_ACT_GELU, .seed = 1};
  check(gaaw_model_create_mlp(ctx, &mc, &model), ctx, "gaaw_model_create_mlp");
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
  }

  /* 2. from the same field, the solver and the surrogate advance ROLLOUT * K steps */
  strip_t sur = s;
  sur.u = calloc(cells, sizeof(double));
  sur.scratch = calloc(cells, sizeof(double));
  memcpy(sur.u, s.u, sizeof(double) * cells);
  double *start = before;
  memcpy(start, s.u, sizeof(double) * cells);
  float *px = malloc(sizeof(float) * points * NIN), *gpx = malloc(sizeof(float) * tp * points * NIN);
  float *pred = malloc(sizeof(float) * tp * points);
  for (int r = 0; r < ROLLOUT; r++) {
    for (int k = 0; k < K; k++) solver_step(&s);
    exchange_halo(&sur);
    for (int p = 0; p < points; p++) patch(sur.u, p % NX, p / NX, px + (size_t)p * NIN);
    gaaw_batch_t all = {.batch = tp * points, .inputs = group_batch(tp_comm, tp, px, gpx, points, NIN)};
    check(gaaw_model_predict(model, &all, pred), ctx, "gaaw_model_predict");
    const float *mine = pred + (size_t)tp_rank * points; /* this rank's points in the group's batch */
    for (int p = 0; p < points; p++) *at(sur.u, p % NX, p / NX) += mine[p] / OUT_SCALE;
  }
  double err = sqrt(sum_sq_diff(&s, sur.u, s.u));
  double change = sqrt(sum_sq_diff(&s, s.u, start));
  double norm = sqrt(sum_sq_diff(&s, s.u, NULL));
  if (rank == 0) {
    printf("after %d surrogate steps (%d solver steps): |u_surrogate - u_solver| = %.3e, |u_solver| = %.3e\n",
           ROLLOUT, ROLLOUT * K, err, norm);
    printf("surrogate error relative to the solver's change: %.4f\n", err / change);
  }

  free(pred), free(gpx), free(px), free(sur.u), free(sur.scratch);
  free(gy), free(gx), free(y), free(x), free(before), free(s.scratch), free(s.u);
  check(gaaw_optimizer_destroy(&opt), ctx, "gaaw_optimizer_destroy");
  check(gaaw_model_destroy(&model), ctx, "gaaw_model_destroy");
  MPI_Comm_free(&tp_comm);
  check(gaaw_finalize(&ctx), NULL, "gaaw_finalize");
  gaaw_config_destroy(&cfg);
  MPI_Finalize();
  return 0;
}
