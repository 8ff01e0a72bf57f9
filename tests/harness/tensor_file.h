/* Named tensors in a file, the exchange format with the PyTorch reference
 * (tests/reference/gpt_reference.py): records of
 *   u32 name length, name, u32 dtype (0 f32, 3 i32), u32 ndim, ndim x i64 shape, data
 * little-endian. */
#ifndef GAAW_TEST_TENSOR_FILE_H
#define GAAW_TEST_TENSOR_FILE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  char name[96];
  int is_int;
  int ndim;
  int64_t shape[4];
  int64_t count;
  void *data; /* float or int32_t */
} tf_tensor;

static inline void tf_write(FILE *f, const char *name, int is_int, int ndim, const int64_t *shape, const void *data)
{
  uint32_t n = (uint32_t)strlen(name), dtype = is_int ? 3 : 0, nd = (uint32_t)ndim;
  int64_t count = 1;
  for (int i = 0; i < ndim; i++) count *= shape[i];
  fwrite(&n, 4, 1, f);
  fwrite(name, 1, n, f);
  fwrite(&dtype, 4, 1, f);
  fwrite(&nd, 4, 1, f);
  fwrite(shape, 8, (size_t)ndim, f);
  fwrite(data, 4, (size_t)count, f);
}

/* Reads every record; returns the count (-1 on a malformed file). Free with tf_free. */
static inline int tf_read(const char *path, tf_tensor **out)
{
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  int n = 0, cap = 0;
  tf_tensor *ts = NULL;
  uint32_t len;
  while (fread(&len, 4, 1, f) == 1) {
    if (n == cap) ts = realloc(ts, sizeof *ts * (size_t)(cap = cap ? 2 * cap : 64));
    tf_tensor *t = &ts[n];
    memset(t, 0, sizeof *t);
    uint32_t dtype, nd;
    if (len >= sizeof t->name || fread(t->name, 1, len, f) != len || fread(&dtype, 4, 1, f) != 1 ||
        fread(&nd, 4, 1, f) != 1 || nd > 4 || fread(t->shape, 8, nd, f) != nd) {
      fclose(f);
      free(ts);
      return -1;
    }
    t->is_int = dtype == 3;
    t->ndim = (int)nd;
    t->count = 1;
    for (uint32_t i = 0; i < nd; i++) t->count *= t->shape[i];
    t->data = malloc((size_t)t->count * 4 + 4);
    if (fread(t->data, 4, (size_t)t->count, f) != (size_t)t->count) {
      fclose(f);
      free(ts);
      return -1;
    }
    n++;
  }
  fclose(f);
  *out = ts;
  return n;
}

static inline const tf_tensor *tf_find(const tf_tensor *ts, int n, const char *name)
{
  for (int i = 0; i < n; i++)
    if (strcmp(ts[i].name, name) == 0) return &ts[i];
  return NULL;
}

static inline void tf_free(tf_tensor *ts, int n)
{
  for (int i = 0; i < n; i++) free(ts[i].data);
  free(ts);
}

#endif
