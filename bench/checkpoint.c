/* bench/checkpoint: checkpoint save and load bandwidth against plain POSIX I/O of
 * the same bytes on the same filesystem, and the training stall of an
 * asynchronous save against a synchronous one and against a host copy of the
 * same bytes. Rounds alternate gaaw and its peer; medians of --rounds.
 *
 *   mpiexec -n N ./bench/checkpoint [--layers 6] [--dim 512] [--rounds 5] [--dir ckpt-bench]
 *
 * Every rank holds a GPT (byte vocabulary, context 64) at ZeRO stage 1 over dp N,
 * AdamW in f32: its fp32 values and two moments are the bytes a checkpoint holds.
 * Figures (the slowest rank's time, since a save or load is collective):
 *   save   gaaw_checkpoint_save      vs write + fsync of each rank's bytes to a new file
 *   load   gaaw_checkpoint_load      vs pread of the same files (page cache as the load finds it)
 *   stall  gaaw_checkpoint_save with checkpoint_async (until it returns)
 *          vs a synchronous save and vs memcpy of the rank's bytes into touched memory */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench_util.h"

#define PROGRAM "bench/checkpoint"

static double now(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The slowest rank's seconds for a collective operation timed on each rank. */
static double slowest(double seconds)
{
  double max;
  MPI_Allreduce(&seconds, &max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return max;
}

static void check_io(int ok, const char *what, const char *path)
{
  if (ok) return;
  perror(what);
  fprintf(stderr, "%s: %s %s failed\n", PROGRAM, what, path);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

/* The peer of a save: bytes written to a new file and fsynced. */
static double peer_write(const char *path, const char *data, size_t bytes)
{
  double t0 = now();
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  check_io(fd >= 0, "open", path);
  for (size_t done = 0; done < bytes;) {
    ssize_t w = write(fd, data + done, bytes - done);
    check_io(w > 0, "write", path);
    done += (size_t)w;
  }
  check_io(fsync(fd) == 0 && close(fd) == 0, "fsync", path);
  return now() - t0;
}

/* The peer of a load: the same bytes read back. */
static double peer_read(const char *path, char *data, size_t bytes)
{
  double t0 = now();
  int fd = open(path, O_RDONLY);
  check_io(fd >= 0, "open", path);
  for (size_t done = 0; done < bytes;) {
    ssize_t r = pread(fd, data + done, bytes - done, (off_t)done);
    check_io(r > 0, "pread", path);
    done += (size_t)r;
  }
  close(fd);
  return now() - t0;
}

typedef struct {
  gaaw_context_t ctx;
  gaaw_model_t model;
  gaaw_optimizer_t opt;
} run;

static run open_run(int layers, int dim, int async, int argc, char **argv)
{
  run r;
  gaaw_config_t cfg;
  BENCH_CHECK(PROGRAM, NULL, gaaw_config_create(&cfg));
  BENCH_CHECK(PROGRAM, NULL, gaaw_config_set(cfg, "checkpoint_async", async ? "yes" : "no"));
  BENCH_CHECK(PROGRAM, NULL, gaaw_config_set(cfg, "checkpoint_keep", "0"));
  /* gaaw's options from the command line, on a copy of it (two contexts read it) */
  char **args = malloc(sizeof(char *) * (size_t)(argc + 1));
  memcpy(args, argv, sizeof(char *) * (size_t)(argc + 1));
  int n = argc;
  if (bench_gaaw_start(PROGRAM, cfg, &n, args, &r.ctx) != 0) MPI_Abort(MPI_COMM_WORLD, 2);
  free(args);
  gaaw_config_destroy(&cfg);
  gaaw_gpt_config_t g;
  gaaw_gpt_config_default(&g);
  g.vocab = 256, g.max_seq = 64, g.layers = layers, g.dim = dim, g.heads = dim / 64 > 0 ? dim / 64 : 1;
  BENCH_CHECK(PROGRAM, r.ctx, gaaw_model_create_gpt(r.ctx, &g, &r.model));
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  oc.zero_stage = 1;
  BENCH_CHECK(PROGRAM, r.ctx, gaaw_optimizer_create(r.model, &oc, &r.opt));
  return r;
}

static void close_run(run *r)
{
  gaaw_optimizer_destroy(&r->opt);
  gaaw_model_destroy(&r->model);
  gaaw_finalize(&r->ctx);
}

/* This rank's file in the newest checkpoint of dir, and its size. */
static size_t rank_file(const char *dir, int rank, char *path, size_t size)
{
  char latest[64] = "";
  char lp[600];
  snprintf(lp, sizeof lp, "%s/latest", dir);
  FILE *f = fopen(lp, "r");
  check_io(f && fgets(latest, sizeof latest, f), "read", lp);
  fclose(f);
  latest[strcspn(latest, "\n")] = '\0';
  snprintf(path, size, "%s/%s/rank-%05d.bin", dir, latest, rank);
  struct stat sb;
  check_io(stat(path, &sb) == 0, "stat", path);
  return (size_t)sb.st_size;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int rank, np, layers = 6, dim = 512, rounds = 5;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &np);
  const char *keys[] = {"layers", "dim", "rounds"};
  int *slots[] = {&layers, &dim, &rounds};
  if (!bench_take_int_options(PROGRAM, &argc, argv, keys, slots, 3)) MPI_Abort(MPI_COMM_WORLD, 2);
  char dir[256] = "ckpt-bench";
  for (int i = 1; i + 1 < argc; i++)
    if (!strcmp(argv[i], "--dir")) {
      snprintf(dir, sizeof dir, "%s", argv[i + 1]);
      memmove(&argv[i], &argv[i + 2], sizeof(char *) * (size_t)(argc - i - 1));
      argc -= 2;
      break;
    }
  if (rounds < 1) rounds = 1;
  run sync = open_run(layers, dim, 0, argc, argv);
  char path[600], peer[600];
  /* a first save makes the files (and touches the staging) */
  BENCH_CHECK(PROGRAM, sync.ctx, gaaw_checkpoint_save(sync.opt, dir));
  size_t bytes = rank_file(dir, rank, path, sizeof path);
  snprintf(peer, sizeof peer, "%s/peer-rank-%05d.bin", dir, rank);
  char *data = malloc(bytes), *copy = malloc(bytes);
  memset(data, 1, bytes), memset(copy, 2, bytes);
  double *save = calloc((size_t)rounds, sizeof(double)), *save_peer = calloc((size_t)rounds, sizeof(double));
  double *load = calloc((size_t)rounds, sizeof(double)), *load_peer = calloc((size_t)rounds, sizeof(double));
  double *stall = calloc((size_t)rounds, sizeof(double)), *memcpy_s = calloc((size_t)rounds, sizeof(double));
  for (int i = 0; i < rounds; i++) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    BENCH_CHECK(PROGRAM, sync.ctx, gaaw_checkpoint_save(sync.opt, dir));
    save[i] = slowest(now() - t0);
    MPI_Barrier(MPI_COMM_WORLD);
    save_peer[i] = slowest(peer_write(peer, data, bytes));
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = now();
    BENCH_CHECK(PROGRAM, sync.ctx, gaaw_checkpoint_load(sync.opt, dir));
    load[i] = slowest(now() - t0);
    rank_file(dir, rank, path, sizeof path);
    MPI_Barrier(MPI_COMM_WORLD);
    load_peer[i] = slowest(peer_read(path, data, bytes));
  }
  close_run(&sync);
  run async = open_run(layers, dim, 1, argc, argv);
  BENCH_CHECK(PROGRAM, async.ctx, gaaw_checkpoint_save(async.opt, dir)); /* touches the staging */
  BENCH_CHECK(PROGRAM, async.ctx, gaaw_checkpoint_wait(async.opt));
  for (int i = 0; i < rounds; i++) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    BENCH_CHECK(PROGRAM, async.ctx, gaaw_checkpoint_save(async.opt, dir));
    stall[i] = slowest(now() - t0);
    BENCH_CHECK(PROGRAM, async.ctx, gaaw_checkpoint_wait(async.opt));
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = now();
    memcpy(copy, data, bytes);
    memcpy_s[i] = slowest(now() - t0);
  }
  close_run(&async);
  unlink(peer);
  double total = 0, mine = (double)bytes;
  MPI_Allreduce(&mine, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) {
    double s = bench_median(save, rounds), sp = bench_median(save_peer, rounds);
    double l = bench_median(load, rounds), lp = bench_median(load_peer, rounds);
    double st = bench_median(stall, rounds), mc = bench_median(memcpy_s, rounds);
    const char *core = getenv("OPENBLAS_CORETYPE");
    printf("bench=checkpoint what=save np=%d layers=%d dim=%d bytes=%.0f rounds=%d gaaw_GBps=%.3f "
           "peer=write+fsync peer_GBps=%.3f ratio=%.2f\n", np, layers, dim, total, rounds, total / s * 1e-9,
           total / sp * 1e-9, sp / s);
    printf("bench=checkpoint what=load np=%d layers=%d dim=%d bytes=%.0f rounds=%d gaaw_GBps=%.3f "
           "peer=pread peer_GBps=%.3f ratio=%.2f\n", np, layers, dim, total, rounds, total / l * 1e-9,
           total / lp * 1e-9, lp / l);
    printf("bench=checkpoint what=async_stall np=%d layers=%d dim=%d bytes=%.0f rounds=%d stall_ms=%.1f "
           "sync_save_ms=%.1f peer=memcpy peer_ms=%.1f ratio=%.2f OPENBLAS_CORETYPE=%s\n", np, layers, dim, total,
           rounds, st * 1e3, s * 1e3, mc * 1e3, mc / st, core ? core : "unset");
  }
  free(data), free(copy), free(save), free(save_peer), free(load), free(load_peer), free(stall), free(memcpy_s);
  MPI_Finalize();
  return 0;
}
