/* Helpers for checkpoint tests: a checkpoint's whole global state read back
 * densely (every tensor, every field, from its runs), and compared bit for bit. */
#ifndef GAAW_TEST_CHECKPOINT_UTIL_H
#define GAAW_TEST_CHECKPOINT_UTIL_H

#include <dirent.h>
#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include "tests/harness/test_util.h"
#include "zero/checkpoint_impl.h"

/* The global state of step directory dir: dense[f][t] holds tensor t's field f,
 * row-major; filled[f][t] counts the elements the runs covered. */
typedef struct {
  ckpt_meta meta;
  float **dense[CKPT_FIELDS];
  int64_t *filled[CKPT_FIELDS];
} ckpt_dense;

static inline int ckpt_dense_read(const char *dir, ckpt_dense *d)
{
  char path[4200];
  char *text = NULL;
  size_t bytes = 0;
  memset(d, 0, sizeof *d);
  snprintf(path, sizeof path, "%s/meta.json", dir);
  if (gaaw_ckpt_read_file(NULL, path, &text, &bytes) != GAAW_SUCCESS ||
      gaaw_ckpt_meta_read(NULL, text, bytes, path, &d->meta) != GAAW_SUCCESS) {
    fprintf(stderr, "cannot read %s: %s\n", path, gaaw_last_error(NULL));
    free(text);
    return 0;
  }
  free(text);
  const ckpt_meta *m = &d->meta;
  for (int f = 0; f < m->nfields; f++) {
    d->dense[f] = calloc((size_t)m->ntensors, sizeof(float *));
    d->filled[f] = calloc((size_t)m->ntensors, sizeof(int64_t));
    for (int t = 0; t < m->ntensors; t++) {
      int64_t rows, cols;
      gaaw_ckpt_tensor_dims(m->tensors[t].ndim, m->tensors[t].shape, &rows, &cols);
      d->dense[f][t] = calloc((size_t)(rows * cols), sizeof(float));
    }
  }
  for (int64_t i = 0; i < m->nruns; i++) {
    const ckpt_run *s = &m->runs[i];
    int64_t rows, cols, n = s->b - s->a;
    gaaw_ckpt_tensor_dims(m->tensors[s->tensor].ndim, m->tensors[s->tensor].shape, &rows, &cols);
    float *buf = malloc(sizeof(float) * (size_t)n);
    snprintf(path, sizeof path, "%s/rank-%05d.bin", dir, m->files[s->file].world_rank);
    int fd = open(path, O_RDONLY);
    if (fd < 0 || pread(fd, buf, sizeof(float) * (size_t)n, s->at) != (ssize_t)(sizeof(float) * (size_t)n)) {
      fprintf(stderr, "cannot read run %lld of %s\n", (long long)i, path);
      if (fd >= 0) close(fd);
      free(buf);
      return 0;
    }
    close(fd);
    ckpt_run whole = {.tensor = s->tensor, .r0 = 0, .nr = rows, .c0 = 0, .nc = cols, .a = 0, .b = rows * cols};
    d->filled[s->field][s->tensor] += gaaw_ckpt_copy_overlap(s, buf, &whole, d->dense[s->field][s->tensor], rows, cols);
    free(buf);
  }
  return 1;
}

static inline void ckpt_dense_free(ckpt_dense *d)
{
  for (int f = 0; f < d->meta.nfields; f++) {
    for (int t = 0; t < d->meta.ntensors; t++) free(d->dense[f][t]);
    free(d->dense[f]), free(d->filled[f]);
  }
  gaaw_ckpt_meta_free(&d->meta);
}

/* Every tensor of a covered exactly once, and a's fields (up to nfields) bitwise
 * equal to b's, tensor by tensor (found by name). */
static inline void expect_same_state(const ckpt_dense *a, const ckpt_dense *b, int nfields, const char *what)
{
  for (int t = 0; t < a->meta.ntensors; t++) {
    const ckpt_tensor *e = &a->meta.tensors[t];
    int u = 0;
    while (u < b->meta.ntensors && strcmp(b->meta.tensors[u].name, e->name) != 0) u++;
    expect_true(u < b->meta.ntensors, "%s: %s is missing", what, e->name);
    if (u == b->meta.ntensors) continue;
    int64_t rows, cols;
    gaaw_ckpt_tensor_dims(e->ndim, e->shape, &rows, &cols);
    for (int f = 0; f < nfields; f++) {
      expect_true(a->filled[f][t] == rows * cols && b->filled[f][u] == rows * cols,
                  "%s: %s %s covered %lld and %lld times of %lld", what, e->name, gaaw_ckpt_field_names[f],
                  (long long)a->filled[f][t], (long long)b->filled[f][u], (long long)(rows * cols));
      int64_t bad = -1, nbad = 0;
      for (int64_t i = 0; i < rows * cols; i++)
        if (memcmp(&a->dense[f][t][i], &b->dense[f][u][i], sizeof(float)) != 0) {
          if (bad < 0) bad = i;
          nbad++;
        }
      expect_true(nbad == 0, "%s: %s %s: %lld of %lld elements differ, first [%lld] %.9g vs %.9g", what, e->name,
                  gaaw_ckpt_field_names[f], (long long)nbad, (long long)(rows * cols), (long long)bad,
                  bad >= 0 ? a->dense[f][t][bad] : 0.0, bad >= 0 ? b->dense[f][u][bad] : 0.0);
    }
  }
}

/* A fresh directory prefixXXXXXX in the working directory, made by world rank 0
 * and named on every rank (base[size], "" when it cannot be made). Collective. */
static inline void ckpt_test_dir(char *base, int size, const char *prefix)
{
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  snprintf(base, (size_t)size, "%sXXXXXX", prefix);
  if (rank == 0 && !mkdtemp(base)) base[0] = '\0';
  MPI_Bcast(base, size, MPI_CHAR, 0, MPI_COMM_WORLD);
}

/* Whether dir holds no entry but . and .. (what the nvme offload must leave). */
static inline int test_dir_empty(const char *dir)
{
  DIR *d = opendir(dir);
  struct dirent *e;
  int n = 0;
  if (!d) return 0;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
  closedir(d);
  return n == 0;
}

/* Removes it when every check passed here (left for a look otherwise). Collective. */
static inline void ckpt_test_dir_remove(const char *base)
{
  int rank;
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0 || test_failures || !base[0]) return;
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
  if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", base);
}

#endif
