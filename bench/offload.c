/* Offload's costs, side by side in one run:
 *  1. the step time of the reference GPT (gaaw_gpt_config_default: 4 layers, dim 256,
 *     seq 128, vocab 256, f32; AdamW, ZeRO 1, batch 8 per rank, zero_bucket_bytes
 *     1 MiB so that the shard is 13 pieces and nvme streams them) with
 *     offload_optimizer none, host and nvme: three contexts built at once, then
 *     ROUNDS rounds of STEPS steps each, alternating, medians;
 *  2. the nvme store's file I/O (zero/nvme_file.c: three slots, io_uring and O_DIRECT
 *     where the system allows, as the store drives it) writing then reading FILE_MIB
 *     in RECORD_KIB records, against plain sequential pwrite and pread with O_DIRECT
 *     of the same records in the same directory, alternating, medians.
 *
 *   mpiexec -n P ./bench/offload [--steps K] [--rounds R] [--file-mib M] [--record-kib K]
 *                                [--nvme-path DIR] [--GAAW_OPTION=VALUE ...]
 *
 * Prints on rank 0 (DIR defaults to TMPDIR or /tmp):
 *   offload_step backend=.. store=none|host|nvme step_s=.. vs_none=..
 *   offload_io op=write|read bytes=.. gaaw_gb_s=.. direct=0|1 async=0|1 peer_gb_s=.. ratio=..
 * The peer of the I/O lines is the plain loop; of the step lines, offload none. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench_util.h"
#include "gaaw.h"
#include "backends/runtime/allocator.h"
#include "zero/nvme_file.h"

#define CHECK(call) BENCH_CHECK("offload bench", ctx, call)
enum { STORES = 3, BATCH = 8 };
static const char *const stores[STORES] = {"none", "host", "nvme"};

typedef struct {
  int steps, rounds, file_mib, record_kib;
} bench_options;

typedef struct {
  gaaw_context_t ctx;
  gaaw_model_t model;
  gaaw_optimizer_t opt;
  int dp_rank;
} trainer;

static void make_batch(int dp_rank, int step, int seq, int32_t *tokens, int32_t *targets)
{
  for (int i = 0; i < BATCH * seq; i++) {
    uint32_t h = ((uint32_t)dp_rank * 1000003u + (uint32_t)step * 7919u + (uint32_t)i) * 2654435761u;
    tokens[i] = (int32_t)((h ^ (h >> 15)) & 255u);
    targets[i] = (int32_t)((h >> 7) & 255u);
  }
}

static void start_trainer(trainer *t, const char *store, const char *nvme_path, int argc, char **argv)
{
  gaaw_config_t cfg = NULL;
  gaaw_context_t ctx = NULL;
  CHECK(gaaw_config_create(&cfg));
  CHECK(gaaw_config_set(cfg, "backend", "host")); /* unless the command line says otherwise */
  CHECK(gaaw_config_set(cfg, "zero_bucket_bytes", "1048576"));
  char **args = malloc(sizeof *args * (size_t)(argc + 1));
  memcpy(args, argv, sizeof *args * (size_t)(argc + 1));
  int n = argc;
  CHECK(gaaw_config_parse_args(cfg, &n, args));
  free(args);
  CHECK(gaaw_config_set(cfg, "offload_optimizer", store));
  CHECK(gaaw_config_set(cfg, "nvme_path", nvme_path));
  CHECK(gaaw_init(MPI_COMM_WORLD, cfg, &t->ctx));
  gaaw_config_destroy(&cfg);
  ctx = t->ctx;
  gaaw_gpt_config_t g;
  gaaw_gpt_config_default(&g);
  CHECK(gaaw_model_create_gpt(ctx, &g, &t->model));
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  oc.zero_stage = 1;
  CHECK(gaaw_optimizer_create(t->model, &oc, &t->opt));
  int dp;
  CHECK(gaaw_topology_group_rank(ctx, GAAW_GROUP_DP, &t->dp_rank, &dp));
}

/* Seconds per step over steps steps, from a barrier to the last rank's return. */
static double time_steps(trainer *t, int first_step, int steps)
{
  gaaw_context_t ctx = t->ctx;
  gaaw_gpt_config_t g;
  gaaw_gpt_config_default(&g);
  size_t n = (size_t)BATCH * (size_t)g.max_seq;
  int32_t *tokens = malloc(sizeof(int32_t) * n), *targets = malloc(sizeof(int32_t) * n);
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int s = 0; s < steps; s++) {
    make_batch(t->dp_rank, first_step + s, g.max_seq, tokens, targets);
    gaaw_batch_t batch = {.batch = BATCH, .seq = g.max_seq, .tokens = tokens, .targets = targets};
    float loss;
    CHECK(gaaw_model_forward_backward(t->model, &batch, &loss));
    CHECK(gaaw_optimizer_step(t->opt));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  free(tokens), free(targets);
  return (MPI_Wtime() - t0) / steps;
}

/* The store's way: records through three slots, the next started before the
 * previous is waited for. Returns seconds. */
static double gaaw_io(gaaw_context_t ctx, gaaw_nvme_file *f, char **slot, size_t record, int records, int write)
{
  double t0 = MPI_Wtime();
  for (int r = 0; r < records; r++) {
    int i = r % GAAW_NVME_SLOTS;
    CHECK(gaaw_nvme_wait(f, i));
    CHECK(gaaw_nvme_start(f, i, write, slot[i], record, (uint64_t)r * record));
  }
  for (int i = 0; i < GAAW_NVME_SLOTS; i++) CHECK(gaaw_nvme_wait(f, i));
  return MPI_Wtime() - t0;
}

/* The peer: one record after the other with pwrite or pread on an O_DIRECT file
 * (fsync after the writes, as O_DIRECT leaves no dirty pages but the metadata). */
static double plain_io(int fd, char *buf, size_t record, int records, int write)
{
  double t0 = MPI_Wtime();
  for (int r = 0; r < records; r++) {
    off_t at = (off_t)r * (off_t)record;
    ssize_t n = write ? pwrite(fd, buf, record, at) : pread(fd, buf, record, at);
    if (n != (ssize_t)record) {
      fprintf(stderr, "offload bench: plain %s: %s\n", write ? "pwrite" : "pread", n < 0 ? strerror(errno) : "short");
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  if (write) fsync(fd);
  return MPI_Wtime() - t0;
}

static void bench_io(gaaw_context_t ctx, const char *dir, const bench_options *o, int rank)
{
  size_t record = (size_t)o->record_kib * 1024, bytes = (size_t)o->file_mib * 1024 * 1024;
  int records = (int)(bytes / record);
  char name[64], path[4200];
  snprintf(name, sizeof name, "bench-offload-rank%d.bin", rank);
  gaaw_nvme_file *f = NULL;
  CHECK(gaaw_nvme_open(ctx, dir, name, (size_t)records * record, &f));
  snprintf(path, sizeof path, "%s/bench-offload-plain-rank%d.bin", dir, rank);
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0600), direct = fd >= 0;
  if (fd < 0) fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) {
    fprintf(stderr, "offload bench: cannot create %s: %s\n", path, strerror(errno));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  unlink(path);
  posix_fallocate(fd, 0, (off_t)records * (off_t)record);
  char *slot[GAAW_NVME_SLOTS];
  for (int i = 0; i < GAAW_NVME_SLOTS; i++) {
    slot[i] = gaaw_host_alloc(ctx, record);
    memset(slot[i], 1 + i, record);
  }
  double *g[2], *p[2];
  for (int w = 0; w < 2; w++) {
    g[w] = calloc((size_t)o->rounds, sizeof(double));
    p[w] = calloc((size_t)o->rounds, sizeof(double));
  }
  for (int r = 0; r < o->rounds; r++)
    for (int w = 1; w >= 0; w--) { /* write, then read back */
      MPI_Barrier(MPI_COMM_WORLD);
      g[w][r] = gaaw_io(ctx, f, slot, record, records, w);
      MPI_Barrier(MPI_COMM_WORLD);
      p[w][r] = plain_io(fd, slot[0], record, records, w);
    }
  if (rank == 0)
    for (int w = 1; w >= 0; w--) {
      double gs = bench_median(g[w], o->rounds), ps = bench_median(p[w], o->rounds);
      double gbs = (double)records * record / gs / 1e9, pbs = (double)records * record / ps / 1e9;
      printf("offload_io op=%s bytes=%zu record=%zu gaaw_gb_s=%.3f direct=%d async=%d peer_gb_s=%.3f peer_direct=%d "
             "ratio=%.2f\n", w ? "write" : "read", (size_t)records * record, record, gbs, gaaw_nvme_direct(f),
             gaaw_nvme_async(f), pbs, direct, gbs / pbs);
    }
  for (int i = 0; i < GAAW_NVME_SLOTS; i++) gaaw_host_free(ctx, slot[i]);
  for (int w = 0; w < 2; w++) free(g[w]), free(p[w]);
  close(fd);
  gaaw_nvme_close(&f);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  bench_options o = {5, 5, 512, 4096};
  static const char *const keys[] = {"steps", "rounds", "file-mib", "record-kib"};
  int *const slots[] = {&o.steps, &o.rounds, &o.file_mib, &o.record_kib};
  if (!bench_take_int_options("offload bench", &argc, argv, keys, slots, 4) || o.steps < 1 || o.rounds < 1 ||
      o.file_mib < 1 || o.record_kib < 4 || o.record_kib % 4) {
    if (rank == 0) fprintf(stderr, "offload bench: --steps, --rounds, --file-mib >= 1, --record-kib a multiple of 4\n");
    MPI_Finalize();
    return 2;
  }
  const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], "--nvme-path") == 0) dir = argv[i + 1];

  trainer t[STORES];
  for (int s = 0; s < STORES; s++) start_trainer(&t[s], stores[s], dir, argc, argv);
  for (int s = 0; s < STORES; s++) time_steps(&t[s], 0, 1); /* warm-up: first touch, kernel builds */
  double *secs[STORES];
  for (int s = 0; s < STORES; s++) secs[s] = calloc((size_t)o.rounds, sizeof(double));
  for (int r = 0; r < o.rounds; r++)
    for (int s = 0; s < STORES; s++) secs[s][r] = time_steps(&t[s], 1 + r * o.steps, o.steps);
  const char *backend = "?";
  gaaw_context_t ctx = t[0].ctx;
  CHECK(gaaw_backend_name(ctx, &backend));
  double none = bench_median(secs[0], o.rounds);
  for (int s = 0; s < STORES && rank == 0; s++) {
    double m = bench_median(secs[s], o.rounds);
    printf("offload_step backend=%s np=%d store=%s rounds=%d steps=%d step_s=%.4f vs_none=%.2f\n", backend, size,
           stores[s], o.rounds, o.steps, m, m / none);
  }
  bench_io(ctx, dir, &o, rank);
  for (int s = 0; s < STORES; s++) {
    gaaw_optimizer_destroy(&t[s].opt);
    gaaw_model_destroy(&t[s].model);
    gaaw_finalize(&t[s].ctx);
    free(secs[s]);
  }
  MPI_Finalize();
  return 0;
}
