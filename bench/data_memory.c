/* bench/data_memory: what a dataset costs in memory as the corpus grows. For each
 * corpus size (10 MB, 256 MiB, 2 GiB: sparse llm.c files of zero tokens, made here
 * in DIR and removed after), every rank opens the dataset, reads BATCHES training
 * batches (8 x 1024 tokens each) at random places, and reports its anonymous and
 * file-backed resident memory (/proc/self/status RssAnon, RssFile) and its peak
 * (VmHWM), and the allocator's bytes (gaaw_memory_total, current and peak: the
 * dataset allocates none). The line to compare: rss_anon_kib at each size.
 *
 *   mpiexec -n 2 bench/data_memory [DIR] [BATCHES]    (DIR: default ., BATCHES: 500) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gaaw.h"

static long status_kib(const char *field)
{
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kb = -1;
  size_t n = strlen(field);
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, field, n) && line[n] == ':') {
      kb = atol(line + n + 1);
      break;
    }
  if (f) fclose(f);
  return kb;
}

/* A sparse llm.c file of `tokens` uint16 zeros. */
static int make_corpus(const char *path, long long tokens)
{
  FILE *f = fopen(path, "wb");
  int32_t head[256] = {20240520, 1, (int32_t)tokens};
  int ok = f && fwrite(head, sizeof head, 1, f) == 1;
  if (f) ok = fclose(f) == 0 && ok;
  return ok && truncate(path, 1024 + 2 * tokens) == 0;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char *dir = argc > 1 ? argv[1] : ".";
  int batches = argc > 2 ? atoi(argv[2]) : 500;
  gaaw_context_t ctx;
  if (gaaw_init(MPI_COMM_WORLD, NULL, &ctx) != GAAW_SUCCESS) {
    fprintf(stderr, "data_memory: gaaw_init: %s\n", gaaw_last_error(NULL));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  enum { SEQ = 1024, BATCH = 8 };
  int32_t *t = malloc(sizeof *t * SEQ * BATCH), *y = malloc(sizeof *y * SEQ * BATCH);
  const long long sizes[] = {5000000LL, 128LL << 20, 1LL << 30}; /* tokens: 10 MB, 256 MiB, 2 GiB */
  for (int k = 0; k < 3; k++) {
    char path[512];
    snprintf(path, sizeof path, "%s/data_memory.%d.llmc", dir, k);
    int made = rank != 0 || make_corpus(path, sizes[k]);
    MPI_Bcast(&made, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!made) {
      if (rank == 0) fprintf(stderr, "data_memory: cannot make %s\n", path);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    const char *p = path;
    gaaw_dataset_t d;
    if (gaaw_dataset_open(ctx, 1, &p, NULL, GAAW_DATA_LLMC, SEQ, 32000, &d) != GAAW_SUCCESS) {
      fprintf(stderr, "data_memory: %s\n", gaaw_last_error(ctx));
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    double t0 = MPI_Wtime();
    for (int s = 0; s < batches; s++)
      gaaw_dataset_train_batch(d, 1, s, (int64_t)BATCH * size, (int64_t)BATCH * rank, BATCH, t, y);
    double ms = (MPI_Wtime() - t0) * 1e3 / batches;
    size_t in_use = 0, peak = 0;
    gaaw_memory_total(ctx, &in_use, &peak);
    long anon = status_kib("RssAnon"), file = status_kib("RssFile"), hwm = status_kib("VmHWM");
    long all[3] = {anon, file, hwm}, max[3];
    MPI_Reduce(all, max, 3, MPI_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0)
      printf("bench=data_memory ranks=%d corpus_bytes=%lld batches=%d ms_per_batch=%.3f rss_anon_kib=%ld "
             "rss_file_kib=%ld vm_hwm_kib=%ld allocator_bytes=%zu allocator_peak=%zu\n",
             size, 1024 + 2 * sizes[k], batches, ms, max[0], max[1], max[2], in_use, peak);
    gaaw_dataset_close(&d);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) remove(path);
  }
  free(t);
  free(y);
  gaaw_finalize(&ctx);
  MPI_Finalize();
  return 0;
}
