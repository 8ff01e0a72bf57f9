/* CPU Adam and SGD (zero/cpu_update.c), every version this CPU runs, against a plain
 * loop over host_adamw_element (AdamW) and zero/step.c's SGD order, bit for bit:
 * w, the moments and the output, for f32, bf16 and f16, on pieces of one chunk's
 * worth and less (one thread), of many chunks (OpenMP), and of 3 Mi elements (the
 * vector versions then write the output with non-temporal stores), each at an
 * unaligned start. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/host/host_math.h"
#include "backends/runtime/half.h"
#include "tests/harness/test_util.h"
#include "zero/cpu_update.h"

/* One piece: f32 w, m1, m2; grad and out in dtype. */
typedef struct {
  float *w, *m1, *m2;
  char *grad, *out;
} piece;

static float start_value(int64_t i, uint32_t salt)
{
  uint32_t h = (uint32_t)i * 2654435761u + salt;
  h ^= h >> 15;
  return (float)(h & 65535u) / 32768.0f - 1.0f;
}

static void piece_make(piece *p, int64_t n, gaaw_dtype_t dtype)
{
  size_t es = gaaw_dtype_size(dtype);
  p->w = malloc((size_t)n * 4);
  p->m1 = malloc((size_t)n * 4);
  p->m2 = malloc((size_t)n * 4);
  p->grad = malloc((size_t)n * es);
  p->out = malloc((size_t)n * es);
  if (!p->w || !p->m1 || !p->m2 || !p->grad || !p->out) {
    fprintf(stderr, "test_cpu_update: out of memory\n");
    exit(1);
  }
  for (int64_t i = 0; i < n; i++) {
    p->w[i] = 0.5f * start_value(i, 1);
    p->m1[i] = 1e-3f * start_value(i, 3);
    p->m2[i] = 1e-6f * (start_value(i, 4) + 1.0f);
    gaaw_store_f32(p->grad, dtype, i, 1e-2f * start_value(i, 2));
  }
  memset(p->out, 0, (size_t)n * es);
}

static void piece_free(piece *p)
{
  free(p->w);
  free(p->m1);
  free(p->m2);
  free(p->grad);
  free(p->out);
}

/* The reference: one element at a time, in the host backend's order. */
static void reference(int64_t n, piece *p, gaaw_dtype_t dtype, const gaaw_cpu_update_args *a)
{
  const gaaw_adamw_args_t *h = &a->adam;
  float bc1 = (float)(1.0 - pow((double)h->beta1, (double)h->step));
  float bc2 = (float)(1.0 - pow((double)h->beta2, (double)h->step));
  for (int64_t i = 0; i < n; i++) {
    float g = gaaw_load_f32(p->grad, dtype, i) * h->grad_scale, w;
    if (a->kind == GAAW_ADAMW) {
      w = host_adamw_element(p->w[i], g, &p->m1[i], &p->m2[i], h->beta1, h->beta2, h->lr, h->eps, h->weight_decay,
                             bc1, bc2);
    } else {
      if (h->weight_decay != 0) g = g + h->weight_decay * p->w[i];
      float mom = p->m1[i] * a->momentum + g;
      w = p->w[i] + -h->lr * mom;
      p->m1[i] = mom;
    }
    p->w[i] = w;
    gaaw_store_f32(p->out, dtype, i, w);
  }
}

/* The first index where a and b differ (n: none). */
static int64_t first_difference(const void *a, const void *b, int64_t n, size_t es)
{
  for (int64_t i = 0; i < n; i++)
    if (memcmp((const char *)a + (size_t)i * es, (const char *)b + (size_t)i * es, es)) return i;
  return n;
}

static void check(gaaw_cpu_simd simd, gaaw_dtype_t dtype, gaaw_optimizer_kind_t kind, int64_t n)
{
  enum { AT = 3 }; /* the piece starts 3 elements into the arrays: nothing aligned */
  size_t es = gaaw_dtype_size(dtype);
  piece want, got;
  piece_make(&want, n + AT, dtype);
  piece_make(&got, n + AT, dtype);
  for (int step = 1; step <= 2; step++) {
    gaaw_cpu_update_args a = {0};
    a.kind = kind;
    a.adam.lr = 1e-3f;
    a.adam.beta1 = 0.9f;
    a.adam.beta2 = 0.999f;
    a.adam.eps = 1e-8f;
    a.adam.weight_decay = 0.01f;
    a.adam.grad_scale = 0.5f;
    a.adam.step = step;
    a.momentum = 0.9f;
    piece r = {want.w + AT, want.m1 + AT, want.m2 + AT, want.grad + AT * es, want.out + AT * es};
    reference(n, &r, dtype, &a);
    gaaw_cpu_update(simd, n, got.w + AT, got.m1 + AT, kind == GAAW_ADAMW ? got.m2 + AT : NULL, got.grad + AT * es,
                    got.out + AT * es, dtype, &a);
  }
  const char *what[] = {"w", "m1", "m2", "out"};
  const void *wa[] = {want.w, want.m1, want.m2, want.out}, *ga[] = {got.w, got.m1, got.m2, got.out};
  size_t sizes[] = {4, 4, 4, es};
  for (int k = 0; k < 4; k++) {
    int64_t at = first_difference(wa[k], ga[k], n + AT, sizes[k]);
    expect_true(at == n + AT, "%s, %s, %s, n = %lld: %s differs first at element %lld", gaaw_cpu_simd_name(simd),
                gaaw_dtype_name(dtype), kind == GAAW_ADAMW ? "AdamW" : "SGD", (long long)n, what[k],
                (long long)(at - AT));
  }
  piece_free(&want);
  piece_free(&got);
}

int main(void)
{
  const int64_t sizes[] = {1, 1000, 100 * 1024 + 5, 3 * 1024 * 1024 + 5};
  const gaaw_dtype_t dtypes[] = {GAAW_F32, GAAW_BF16, GAAW_F16};
  int versions = 0;
  for (int s = 0; s < GAAW_CPU_SIMD_COUNT; s++) {
    if (!gaaw_cpu_simd_runs((gaaw_cpu_simd)s)) continue;
    versions++;
    for (int d = 0; d < 3; d++)
      for (int k = 0; k < 4; k++) {
        check((gaaw_cpu_simd)s, dtypes[d], GAAW_ADAMW, sizes[k]);
        check((gaaw_cpu_simd)s, dtypes[d], GAAW_SGD, sizes[k]);
      }
  }
  printf("test_cpu_update: %d versions run on this CPU\n", versions);
  return test_finish("test_cpu_update");
}
