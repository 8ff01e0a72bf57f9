/* bench/gpt_fwdbwd: one training step's model part (zero_grad, forward, loss,
 * backward; no optimizer) of the reference GPT (vocab 256, dim 256, 4 heads, 4
 * layers, seq 128, batch 8, layernorm, GELU, tied head) on the host backend,
 * against the same model in PyTorch (bench/gpt_fwdbwd_torch.py, nanoGPT style).
 * Rounds alternate: K timed gaaw steps, then K timed PyTorch steps in a child
 * process that stays up for the whole run, R times; medians over the rounds. Both
 * sides use the whole machine (threads = cores / ranks on the node for gaaw's
 * OpenMP and OpenBLAS, the same count for torch.set_num_threads) and inherit the
 * same OPENBLAS_* environment. While PyTorch runs, gaaw's ranks wait in a sleeping
 * poll, not a spinning barrier.
 * Output: one line per layer (bench=gpt_fwdbwd_layer ...: gaaw's mean milliseconds
 * per step in each layer's forward and backward, and PyTorch's per module when it
 * runs, from module hooks), then
 *   bench=gpt_fwdbwd backend=host ranks=P tp=P ... value=X unit=tok/s peer=torch
 *   peer_value=Y ratio=X/Y cpu_s_per_step=.. peer_cpu_s_per_step=.. openblas_coretype=..
 * cpu_s_per_step is user + system CPU time per step summed over gaaw's ranks.
 * With tp > 1 every rank runs the same batch on its share of the model, so tok/s
 * counts the batch once; the peer figure is the same one-process PyTorch.
 * Run: bench/gpt_fwdbwd [--steps K] [--repeats R] [--warmup W] [--threads T]
 *      [--no-peer] [--peer SCRIPT];  mpiexec -n 2 bench/gpt_fwdbwd --tp 2 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gaaw.h"
#include "bench/bench_util.h"

#ifndef GAAW_SRCDIR
#define GAAW_SRCDIR "."
#endif

/* OpenBLAS's own thread controls, when the BLAS is OpenBLAS (weak: absent otherwise). */
extern void openblas_set_num_threads(int) __attribute__((weak));
extern int openblas_get_num_threads(void) __attribute__((weak));

enum { MAX_REPEATS = 64, MAX_LAYERS = 64 };

static gaaw_context_t ctx;

#define CHECK(call)                                                                                          \
  do {                                                                                                       \
    gaaw_status_t st_ = (call);                                                                              \
    if (st_ != GAAW_SUCCESS) {                                                                               \
      fprintf(stderr, "bench/gpt_fwdbwd: %s failed: %s\n%s\n", #call, gaaw_status_name(st_), gaaw_last_error(ctx)); \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                                          \
    }                                                                                                        \
  } while (0)

static void die(const char *what)
{
  fprintf(stderr, "bench/gpt_fwdbwd: %s\n", what);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

/* ---------------------------------------------------------------- the PyTorch child */

typedef struct {
  pid_t pid;
  FILE *to, *from;
  char line[4096];
} peer_t;

/* Sends one command and reads the one-line answer into p->line. */
static const char *peer_ask(peer_t *p, const char *fmt, int k)
{
  fprintf(p->to, fmt, k);
  fputc('\n', p->to);
  fflush(p->to);
  if (!fgets(p->line, sizeof p->line, p->from)) die("the PyTorch peer stopped answering");
  p->line[strcspn(p->line, "\n")] = 0;
  return p->line;
}

static void peer_start(peer_t *p, const char *script, int threads, int batch, int seq)
{
  int to[2], from[2];
  if (pipe(to) || pipe(from)) die("pipe failed");
  char t[16], b[16], s[16];
  snprintf(t, sizeof t, "%d", threads);
  snprintf(b, sizeof b, "%d", batch);
  snprintf(s, sizeof s, "%d", seq);
  p->pid = fork();
  if (p->pid < 0) die("fork failed");
  if (p->pid == 0) {
    dup2(to[0], 0);
    dup2(from[1], 1);
    close(to[1]);
    close(from[0]);
    execl("/usr/bin/python3", "python3", script, "--threads", t, "--batch", b, "--seq", s, (char *)NULL);
    _exit(127);
  }
  close(to[0]);
  close(from[1]);
  p->to = fdopen(to[1], "w");
  p->from = fdopen(from[0], "r");
  if (!fgets(p->line, sizeof p->line, p->from)) die("the PyTorch peer did not start (is python3-torch installed?)");
  p->line[strcspn(p->line, "\n")] = 0;
}

static void peer_stop(peer_t *p)
{
  fputs("quit\n", p->to);
  fclose(p->to);
  fclose(p->from);
  waitpid(p->pid, NULL, 0);
}

/* Ranks other than 0 wait here while rank 0 runs the peer, sleeping between polls
 * so that the peer gets the cores. */
static void polite_barrier(void)
{
  MPI_Request req;
  int done = 0;
  MPI_Ibarrier(MPI_COMM_WORLD, &req);
  for (;;) {
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (done) break;
    nanosleep(&(struct timespec){0, 2000000}, NULL);
  }
}

/* ---------------------------------------------------------------- main */

typedef struct {
  int steps, repeats, warmup, threads, tp, peer;
  const char *script;
} options;

static options parse(int argc, char **argv)
{
  options o = {.steps = 5, .repeats = 5, .warmup = 2, .threads = 0, .tp = 1, .peer = 1,
               .script = GAAW_SRCDIR "/bench/gpt_fwdbwd_torch.py"};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--no-peer")) o.peer = 0;
    else if (v && !strcmp(a, "--steps")) o.steps = atoi(v), i++;
    else if (v && !strcmp(a, "--repeats")) o.repeats = atoi(v), i++;
    else if (v && !strcmp(a, "--warmup")) o.warmup = atoi(v), i++;
    else if (v && !strcmp(a, "--threads")) o.threads = atoi(v), i++;
    else if (v && !strcmp(a, "--tp")) o.tp = atoi(v), i++;
    else if (v && !strcmp(a, "--peer")) o.script = v, i++;
    else die("usage: gpt_fwdbwd [--steps K] [--repeats R] [--warmup W] [--threads T] [--tp P] [--no-peer] "
             "[--peer SCRIPT]");
  }
  if (o.steps < 1 || o.repeats < 1 || o.repeats > MAX_REPEATS || o.warmup < 0 || o.tp < 1)
    die("--steps >= 1, --repeats in 1..64, --warmup >= 0, --tp >= 1");
  return o;
}

/* Cores per rank on this node. */
static int default_threads(void)
{
  MPI_Comm node;
  int local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  MPI_Comm_size(node, &local);
  MPI_Comm_free(&node);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int t = (int)(cores / local);
  return t > 0 ? t : 1;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  options o = parse(argc, argv);
  if (o.tp != size) die("--tp must equal the number of ranks (this benchmark is tensor-parallel only)");
  int threads = o.threads > 0 ? o.threads : default_threads();
  if (openblas_set_num_threads) openblas_set_num_threads(threads);
  gaaw_config_t cfg;
  gaaw_config_create(&cfg);
  gaaw_config_set(cfg, "backend", "host");
  gaaw_config_set_int(cfg, "tp", o.tp);
  gaaw_config_set_int(cfg, "threads", threads);
  CHECK(gaaw_init(MPI_COMM_WORLD, cfg, &ctx));

  gaaw_gpt_config_t g;
  gaaw_gpt_config_default(&g); /* vocab 256, max_seq 128, 4 layers, 4 heads, dim 256, GELU, layernorm, tied */
  const int B = 8, T = g.max_seq;
  gaaw_model_t model;
  CHECK(gaaw_model_create_gpt(ctx, &g, &model));
  int32_t *tokens = malloc(sizeof(int32_t) * B * T), *targets = malloc(sizeof(int32_t) * B * T);
  uint64_t seed = 7;
  for (int i = 0; i < B * T; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    tokens[i] = (int32_t)((seed >> 33) % (uint64_t)g.vocab);
  }
  for (int i = 0; i < B * T; i++) targets[i] = i % T == T - 1 ? tokens[i - T + 1] : tokens[i + 1];
  gaaw_batch_t batch = {.batch = B, .seq = T, .tokens = tokens, .targets = targets};

  peer_t peer = {0};
  int run_peer = o.peer && rank == 0;
  if (run_peer) {
    peer_start(&peer, o.script, threads * size, B, T);
    fprintf(stderr, "bench/gpt_fwdbwd: peer %s\n", peer.line);
    peer_ask(&peer, "warmup %d", o.warmup);
  }
  if (o.peer) polite_barrier();
  for (int w = 0; w < o.warmup; w++) {
    CHECK(gaaw_model_zero_grad(model));
    CHECK(gaaw_model_forward_backward(model, &batch, NULL));
  }
  CHECK(gaaw_model_reset_times(model));

  double step_s[MAX_REPEATS], cpu_s[MAX_REPEATS], peer_step_s[MAX_REPEATS], peer_cpu_s[MAX_REPEATS];
  for (int r = 0; r < o.repeats; r++) {
    MPI_Barrier(MPI_COMM_WORLD);
    double c0 = bench_cpu_seconds(), t0 = MPI_Wtime();
    for (int k = 0; k < o.steps; k++) {
      CHECK(gaaw_model_zero_grad(model));
      CHECK(gaaw_model_forward_backward(model, &batch, NULL));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double t1 = MPI_Wtime(), cpu = (bench_cpu_seconds() - c0) / o.steps, cpu_all;
    MPI_Reduce(&cpu, &cpu_all, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    step_s[r] = (t1 - t0) / o.steps;
    cpu_s[r] = cpu_all;
    if (run_peer) {
      const char *ans = peer_ask(&peer, "run %d", o.steps);
      if (sscanf(ans, "step_s=%lf cpu_s=%lf", &peer_step_s[r], &peer_cpu_s[r]) != 2) die(ans);
    }
    if (o.peer) polite_barrier();
  }

  /* per-layer breakdown: gaaw's mean per step of the timed rounds (rank 0) */
  int nlayers;
  CHECK(gaaw_model_layer_count(model, &nlayers));
  double steps_done = (double)o.repeats * o.steps, fsum = 0, bsum = 0;
  char peer_layers[4096] = "";
  if (run_peer) snprintf(peer_layers, sizeof peer_layers, "%s", peer_ask(&peer, "breakdown %d", o.steps));
  for (int i = 0; rank == 0 && i < nlayers; i++) {
    const char *kind;
    double f, b, pf = -1, pb = -1;
    CHECK(gaaw_model_layer_times(model, i, &kind, &f, &b));
    f /= steps_done;
    b /= steps_done;
    fsum += f;
    bsum += b;
    /* the peer's modules in the same order: embedding, block0.., head */
    const char *at = peer_layers;
    for (int j = 0; j < i && at; j++) at = strchr(at, ';'), at = at ? at + 1 : NULL;
    if (run_peer && at) sscanf(at, "%*s %lf %lf", &pf, &pb);
    char name[64];
    snprintf(name, sizeof name, "%s", kind);
    for (char *c = name; *c; c++)
      if (*c == ' ') *c = '_';
    printf("bench=gpt_fwdbwd_layer tp=%d layer=%d kind=%s forward_ms=%.2f backward_ms=%.2f", o.tp, i, name, 1e3 * f,
           1e3 * b);
    if (run_peer && pf >= 0) printf(" peer=torch peer_forward_ms=%.2f peer_backward_ms=%.2f", 1e3 * pf, 1e3 * pb);
    printf("\n");
  }
  if (run_peer) peer_stop(&peer);

  if (rank == 0) {
    const char *coretype = getenv("OPENBLAS_CORETYPE"), *l2 = getenv("OPENBLAS_L2_SIZE");
    double tok = (double)B * T, step = bench_median(step_s, o.repeats), value = tok / step;
    printf("bench=gpt_fwdbwd backend=host ranks=%d tp=%d vocab=%d dim=%d heads=%d layers=%d seq=%d batch=%d "
           "threads=%d openblas_threads=%d steps=%d repeats=%d layers_ms=%.1f step_ms=%.1f value=%.0f unit=tok/s",
           size, o.tp, g.vocab, g.dim, g.heads, g.layers, T, B, threads,
           openblas_get_num_threads ? openblas_get_num_threads() : -1, o.steps, o.repeats, 1e3 * (fsum + bsum),
           1e3 * step, value);
    if (o.peer) {
      double peer_value = tok / bench_median(peer_step_s, o.repeats);
      printf(" peer=torch peer_value=%.0f ratio=%.3f", peer_value, value / peer_value);
    } else {
      printf(" peer=none peer_value=0 ratio=0");
    }
    printf(" cpu_s_per_step=%.3f peer_cpu_s_per_step=%.3f openblas_coretype=%s openblas_l2_size=%s peer_threads=%d\n",
           bench_median(cpu_s, o.repeats), o.peer ? bench_median(peer_cpu_s, o.repeats) : 0.0, coretype ? coretype : "unset",
           l2 ? l2 : "unset", threads * size);
  }
  free(tokens);
  free(targets);
  gaaw_model_destroy(&model);
  gaaw_finalize(&ctx);
  gaaw_config_destroy(&cfg);
  MPI_Finalize();
  return 0;
}
