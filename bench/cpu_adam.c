/* CPU Adam (zero/cpu_update.c) on one large piece: elements/s of each SIMD version
 * this CPU runs, for compute dtypes f32 and bf16, against the STREAM triad bandwidth
 * measured in the same run on the same threads. bench/cpu_adam.sh runs it beside
 * PyTorch's AdamW (bench/cpu_adam_torch.py).
 *
 *   ./bench/cpu_adam [--elements N] [--threads T] [--repeats R] [--warmup W]
 *                    [--stream-elements S]
 *
 * N elements (default 16 Mi) of f32 master weights w, moments m and v, a gradient g
 * and an output copy out in the compute dtype; each call is one AdamW step over all
 * N (lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight decay 0.01, step counting up).
 * T OpenMP threads (default: the processors OpenMP sees); every array is first
 * touched in parallel, by the threads that later use it. Each round times every
 * configuration once, in turn, then the triad; W untimed rounds, then R timed ones;
 * each figure is the median of its R times.
 *
 * Bytes per element of one update, the ones the program must move at least:
 *   f32:  reads w, m, v, g (16 B), writes w, m, v, out (16 B): 32 B
 *   bf16: reads w, m, v (12 B) and g (2 B), writes w, m, v (12 B) and out (2 B): 28 B
 * The STREAM triad a[i] = b[i] + s * c[i] runs on three f64 arrays of S elements
 * (default 2 N: 3 x 256 MiB, far beyond the caches), counted the standard way, 3 x
 * 8 = 24 B per element (the write-allocate read of a, which the cache does too, is
 * not counted, as STREAM does not). stream_fraction = elements/s x bytes/element /
 * the triad's bytes/s.
 *
 * incache: the same configuration on a piece of INCACHE elements (256 Ki: 4-5 MiB,
 * inside the last-level cache), INCACHE_CALLS calls per timing, as many rounds, the
 * fastest timing (a ceiling: other load on the cores only lowers it): what the
 * version computes per second when memory is not what bounds it (the scalar
 * version's: its divisions and square root, one element at a time).
 *
 * Before timing, every version's result (w, m, v, out after two steps on the first
 * min(N, 4 Mi) + 7 elements, the second at an unaligned start) is compared bit for
 * bit with the scalar version's.
 * Prints one line per configuration, then the triad:
 *   cpu_adam simd=V dtype=D elements=N threads=T repeats=R value=X unit=elements/s
 *     bytes_per_element=B gbytes_s=.. stream_gbytes_s=.. stream_fraction=..
 *     incache=.. same_bits=1
 *   cpu_adam_stream kernel=triad type=f64 elements=S threads=T repeats=R value=.. unit=GB/s bytes_per_element=24
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "bench/bench_util.h"
#include "zero/cpu_update.h"

#define PROGRAM "cpu_adam bench"
#define MAX_CONFIGS (2 * GAAW_CPU_SIMD_COUNT)
#define INCACHE (256 * 1024)
#define INCACHE_CALLS 20

static double now(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *alloc_or_die(size_t bytes)
{
  void *p = NULL;
  if (posix_memalign(&p, 64, bytes ? bytes : 64)) {
    fprintf(stderr, "%s: out of memory (%zu bytes)\n", PROGRAM, bytes);
    exit(1);
  }
  return p;
}

/* One dtype's arrays: f32 state and the gradient and output in dtype. */
typedef struct {
  gaaw_dtype_t dtype;
  size_t esize;
  float *w, *m, *v;
  void *g, *out;
} piece;

static float start_value(int64_t i, uint32_t salt)
{
  uint32_t h = (uint32_t)i * 2654435761u + salt;
  h ^= h >> 15;
  return (float)(h & 65535u) / 32768.0f - 1.0f; /* [-1, 1) */
}

/* Fills the piece, in parallel with the same static split the update uses. */
static void piece_fill(piece *p, int64_t n)
{
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; i++) {
    p->w[i] = 0.5f * start_value(i, 1);
    p->m[i] = 0;
    p->v[i] = 0;
    float g = 1e-2f * start_value(i, 2);
    if (p->dtype == GAAW_F32) {
      ((float *)p->g)[i] = g;
      ((float *)p->out)[i] = 0;
    } else {
      gaaw_cpu_from_f32(1, &g, (char *)p->g + (size_t)i * p->esize, p->dtype);
      ((uint16_t *)p->out)[i] = 0;
    }
  }
}

static void piece_create(piece *p, gaaw_dtype_t dtype, int64_t n)
{
  p->dtype = dtype;
  p->esize = gaaw_dtype_size(dtype);
  p->w = alloc_or_die((size_t)n * sizeof(float));
  p->m = alloc_or_die((size_t)n * sizeof(float));
  p->v = alloc_or_die((size_t)n * sizeof(float));
  p->g = alloc_or_die((size_t)n * p->esize);
  p->out = alloc_or_die((size_t)n * p->esize);
  piece_fill(p, n);
}

static void piece_free(piece *p)
{
  free(p->w);
  free(p->m);
  free(p->v);
  free(p->g);
  free(p->out);
}

static gaaw_cpu_update_args adam_args(int64_t step)
{
  gaaw_cpu_update_args a = {0};
  a.kind = GAAW_ADAMW;
  a.adam.lr = 1e-3f;
  a.adam.beta1 = 0.9f;
  a.adam.beta2 = 0.999f;
  a.adam.eps = 1e-8f;
  a.adam.weight_decay = 0.01f;
  a.adam.grad_scale = 1.0f;
  a.adam.step = (int)step;
  return a;
}

/* Two steps of a version on n elements of dtype, the second on the elements from
 * the 3rd on (no array aligned): the same bits as scalar's? */
static int same_bits(gaaw_cpu_simd simd, gaaw_dtype_t dtype, int64_t n)
{
  piece ref, got;
  piece_create(&ref, dtype, n);
  piece_create(&got, dtype, n);
  for (int64_t step = 1; step <= 2; step++) {
    gaaw_cpu_update_args a = adam_args(step);
    int64_t at = step == 1 ? 0 : 3;
    size_t half_at = (size_t)at * ref.esize;
    gaaw_cpu_update(GAAW_CPU_SIMD_SCALAR, n - at, ref.w + at, ref.m + at, ref.v + at, (char *)ref.g + half_at,
                    (char *)ref.out + half_at, dtype, &a);
    gaaw_cpu_update(simd, n - at, got.w + at, got.m + at, got.v + at, (char *)got.g + half_at,
                    (char *)got.out + half_at, dtype, &a);
  }
  int same = !memcmp(ref.w, got.w, (size_t)n * 4) && !memcmp(ref.m, got.m, (size_t)n * 4) &&
             !memcmp(ref.v, got.v, (size_t)n * 4) && !memcmp(ref.out, got.out, (size_t)n * ref.esize);
  piece_free(&ref);
  piece_free(&got);
  return same;
}

/* The STREAM triad a = b + s c on f64, and its arrays. */
typedef struct {
  double *a, *b, *c;
  int64_t n;
} triad_arrays;

static double triad_seconds(triad_arrays *t, double s)
{
  double *a = t->a;
  const double *b = t->b, *c = t->c;
  int64_t n = t->n;
  double t0 = now();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; i++) a[i] = b[i] + s * c[i];
  return now() - t0;
}

static int64_t bytes_per_element(gaaw_dtype_t dtype)
{
  return 2 * (12 + (int64_t)gaaw_dtype_size(dtype)); /* w, m, v and one dtype array, each way */
}

int main(int argc, char **argv)
{
  int elements = 0, threads = 0, repeats = 9, warmup = 2, stream_elements = 0;
  const char *const keys[] = {"elements", "threads", "repeats", "warmup", "stream-elements"};
  int *const slots[] = {&elements, &threads, &repeats, &warmup, &stream_elements};
  if (!bench_take_int_options(PROGRAM, &argc, argv, keys, slots, 5)) return 2;
  if (argc > 1) {
    fprintf(stderr, "%s: unknown argument '%s'\n", PROGRAM, argv[1]);
    return 2;
  }
  int64_t n = elements ? elements : 16 * 1024 * 1024;
  int64_t sn = stream_elements ? stream_elements : 2 * n;
  if (repeats < 1) repeats = 1;
#ifdef _OPENMP
  if (threads > 0) omp_set_num_threads(threads);
  threads = omp_get_max_threads();
#else
  threads = 1;
#endif

  /* the configurations: each version this CPU runs, f32 and bf16 */
  gaaw_dtype_t dtypes[2] = {GAAW_F32, GAAW_BF16};
  struct {
    gaaw_cpu_simd simd;
    int dtype_index;
    int same;
    double *t, large, incache; /* median seconds of the large piece; elements/s in cache */
  } cfg[MAX_CONFIGS];
  int ncfg = 0;
  /* 4 Mi elements move 112-128 MiB, beyond zero/cpu_update.c's threshold for
   * non-temporal stores */
  int64_t check_n = (n < 4 * 1024 * 1024 ? n : 4 * 1024 * 1024) + 7;
  for (int d = 0; d < 2; d++)
    for (int s = 0; s < GAAW_CPU_SIMD_COUNT; s++) {
      if (!gaaw_cpu_simd_runs((gaaw_cpu_simd)s)) continue;
      cfg[ncfg].simd = (gaaw_cpu_simd)s;
      cfg[ncfg].dtype_index = d;
      cfg[ncfg].same = same_bits((gaaw_cpu_simd)s, dtypes[d], check_n);
      cfg[ncfg].t = alloc_or_die((size_t)repeats * sizeof(double));
      ncfg++;
    }

  piece pieces[2];
  for (int d = 0; d < 2; d++) piece_create(&pieces[d], dtypes[d], n);
  triad_arrays tri = {alloc_or_die((size_t)sn * 8), alloc_or_die((size_t)sn * 8), alloc_or_die((size_t)sn * 8), sn};
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < sn; i++) {
    tri.a[i] = 0;
    tri.b[i] = 1.0 + 1e-9 * (double)i;
    tri.c[i] = 2.0;
  }
  double *t_triad = alloc_or_die((size_t)repeats * sizeof(double));

  int64_t step = 0;
  for (int r = -warmup; r < repeats; r++) {
    for (int c = 0; c < ncfg; c++) {
      piece *p = &pieces[cfg[c].dtype_index];
      /* every configuration of a dtype continues the same run of steps; the step
       * only changes the bias corrections */
      gaaw_cpu_update_args a = adam_args(++step);
      double t0 = now();
      gaaw_cpu_update(cfg[c].simd, n, p->w, p->m, p->v, p->g, p->out, p->dtype, &a);
      double dt = now() - t0;
      if (r >= 0) cfg[c].t[r] = dt;
    }
    double dt = triad_seconds(&tri, 3.0);
    if (r >= 0) t_triad[r] = dt;
  }
  for (int c = 0; c < ncfg; c++) cfg[c].large = bench_median(cfg[c].t, repeats);

  /* in cache: INCACHE_CALLS calls per timing, configurations in turn */
  piece small[2];
  int64_t small_n = n < INCACHE ? n : INCACHE;
  for (int d = 0; d < 2; d++) piece_create(&small[d], dtypes[d], small_n);
  for (int r = -warmup; r < repeats; r++)
    for (int c = 0; c < ncfg; c++) {
      piece *p = &small[cfg[c].dtype_index];
      double t0 = now();
      for (int k = 0; k < INCACHE_CALLS; k++) {
        gaaw_cpu_update_args a = adam_args(++step);
        gaaw_cpu_update(cfg[c].simd, small_n, p->w, p->m, p->v, p->g, p->out, p->dtype, &a);
      }
      if (r >= 0) cfg[c].t[r] = now() - t0;
    }
  for (int c = 0; c < ncfg; c++) {
    double best = cfg[c].t[0];
    for (int r = 1; r < repeats; r++) best = cfg[c].t[r] < best ? cfg[c].t[r] : best;
    cfg[c].incache = (double)small_n * INCACHE_CALLS / best;
  }
  for (int d = 0; d < 2; d++) piece_free(&small[d]);

  double stream_bps = 24.0 * (double)sn / bench_median(t_triad, repeats);
  for (int c = 0; c < ncfg; c++) {
    gaaw_dtype_t dtype = dtypes[cfg[c].dtype_index];
    double eps = (double)n / cfg[c].large;
    double bps = eps * (double)bytes_per_element(dtype);
    printf("cpu_adam simd=%s dtype=%s elements=%lld threads=%d repeats=%d value=%.4g unit=elements/s "
           "bytes_per_element=%lld gbytes_s=%.2f stream_gbytes_s=%.2f stream_fraction=%.3f incache=%.4g same_bits=%d\n",
           gaaw_cpu_simd_name(cfg[c].simd), gaaw_dtype_name(dtype), (long long)n, threads, repeats, eps,
           (long long)bytes_per_element(dtype), 1e-9 * bps, 1e-9 * stream_bps, bps / stream_bps, cfg[c].incache,
           cfg[c].same);
  }
  printf("cpu_adam_stream kernel=triad type=f64 elements=%lld threads=%d repeats=%d value=%.2f unit=GB/s "
         "bytes_per_element=24\n",
         (long long)sn, threads, repeats, 1e-9 * stream_bps);
  fflush(stdout);

  int all_same = 1;
  for (int c = 0; c < ncfg; c++) {
    all_same &= cfg[c].same;
    free(cfg[c].t);
  }
  for (int d = 0; d < 2; d++) piece_free(&pieces[d]);
  free(tri.a);
  free(tri.b);
  free(tri.c);
  free(t_triad);
  return all_same ? 0 : 1;
}
