/* The optimizer's update on host memory, for offloaded state (CPU Adam): AdamW or
 * SGD on f32 master weights and moments, reading the gradient and writing the
 * updated weights in the model's compute dtype in the same pass, OpenMP over the
 * elements. Each SIMD version is a function with its own target attribute, picked
 * at run time (option cpu_simd); the build never uses -march=native. The versions
 * do the same operations in the same order without fused multiply-adds, so they
 * give the same bits as each other and as the host backend's kernels
 * (backends/host/host_adamw.c; zero/step.c's SGD). */
#ifndef GAAW_ZERO_CPU_UPDATE_H
#define GAAW_ZERO_CPU_UPDATE_H

#include <stdint.h>

#include "gaaw/kernels.h"
#include "gaaw/optimizer.h"

typedef enum {
  GAAW_CPU_SIMD_SCALAR = 0, /* one element at a time (no vectorization): the reference */
  GAAW_CPU_SIMD_AVX2 = 1,   /* 8 lanes */
  GAAW_CPU_SIMD_AVX512 = 2, /* 16 lanes */
  GAAW_CPU_SIMD_COUNT
} gaaw_cpu_simd;

/* "scalar", "avx2", "avx512"; "auto" is the widest this CPU runs. -1 for another
 * name. */
int gaaw_cpu_simd_parse(const char *name);
const char *gaaw_cpu_simd_name(gaaw_cpu_simd simd);
/* Whether this build has the version and this CPU runs it. */
int gaaw_cpu_simd_runs(gaaw_cpu_simd simd);

typedef struct {
  gaaw_optimizer_kind_t kind;
  gaaw_adamw_args_t adam; /* lr, betas, eps, weight decay, gradient scale, step (SGD: lr, wd, scale) */
  float momentum;         /* SGD */
} gaaw_cpu_update_args;

/* One piece's update, elementwise over n:
 *   w: (n) f32 master weights, updated      m1, m2: (n) f32 moments, updated (SGD: m1 is
 *   the momentum, m2 unused and may be NULL)
 *   grad: (n) the raw gradient in dtype      out: (n) the updated weights in dtype
 * dtype: GAAW_F32, GAAW_BF16 or GAAW_F16 (rounded to nearest even). Not collective. */
void gaaw_cpu_update(gaaw_cpu_simd simd, int64_t n, float *w, float *m1, float *m2, const void *grad, void *out,
                     gaaw_dtype_t dtype, const gaaw_cpu_update_args *args);

/* Elements of dtype (f32, bf16, f16) to f32 and back (nearest even), n of them. */
void gaaw_cpu_to_f32(int64_t n, const void *src, gaaw_dtype_t dtype, float *dst);
void gaaw_cpu_from_f32(int64_t n, const float *src, void *dst, gaaw_dtype_t dtype);

#endif
