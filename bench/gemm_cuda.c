/* bench/gemm_cuda: the CUDA backend through gaaw's public API, side by side with a
 * plain CUDA peer in the same run (alternating, medians of REPEATS timings of ITERS
 * calls each, after a warm-up):
 *   - bf16 GEMM M=N=K (default 8192; argv[1]) in TFLOP/s, peer cublasGemmEx
 *     (bf16 in/out, f32 compute) on its own arrays of the same sizes;
 *   - layernorm forward and backward (bf16, 16384 x 1024) and AdamW (bf16 params and
 *     grads, f32 master/m/v, 64 Mi elements) in effective GB/s (bytes each kernel
 *     must move / time), peer cudaMemcpyAsync device-to-device (GB/s read + written).
 * Prints one line per result; prints a skip line and exits 0 without a GPU. */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "gaaw.h"
#include "bench/bench_util.h"

enum { REPEATS = 7, ITERS = 10 };

static double now(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

#define CHECK(call)                                                                       \
  do {                                                                                    \
    if ((call) != 0) {                                                                    \
      fprintf(stderr, "gemm_cuda: %s failed at line %d: %s\n", #call, __LINE__,           \
              gaaw_last_error(ctx));                                                      \
      exit(1);                                                                            \
    }                                                                                     \
  } while (0)

static gaaw_context_t ctx;

/* The gaaw side and the peer side of one benchmark, each running ITERS calls. */
typedef void (*run_fn)(void *arg);
typedef struct {
  run_fn gaaw, peer;
  void *arg;
} pair_t;

/* Seconds per call of each side: warm-up, then alternating timings; medians. */
static void time_pair(pair_t p, cudaStream_t peer_stream, double *t_gaaw, double *t_peer)
{
  double g[REPEATS], q[REPEATS];
  p.gaaw(p.arg);
  CHECK(gaaw_synchronize(ctx));
  p.peer(p.arg);
  CHECK(cudaStreamSynchronize(peer_stream));
  for (int r = 0; r < REPEATS; r++) {
    double t0 = now();
    for (int i = 0; i < ITERS; i++) p.gaaw(p.arg);
    CHECK(gaaw_synchronize(ctx));
    double t1 = now();
    for (int i = 0; i < ITERS; i++) p.peer(p.arg);
    CHECK(cudaStreamSynchronize(peer_stream));
    double t2 = now();
    g[r] = (t1 - t0) / ITERS;
    q[r] = (t2 - t1) / ITERS;
  }
  *t_gaaw = bench_median(g, REPEATS);
  *t_peer = bench_median(q, REPEATS);
}

static const char *coretype(void)
{
  const char *c = getenv("OPENBLAS_CORETYPE");
  return c ? c : "unset";
}

/* ---------------------------------------------------------------- GEMM */

typedef struct {
  int64_t n;
  gaaw_tensor_t a, b, c;
  void *pa, *pb, *pc;
  cublasHandle_t blas;
} gemm_bench;

static void gemm_gaaw(void *arg)
{
  gemm_bench *g = arg;
  CHECK(gaaw_gemm(ctx, GAAW_OP_N, GAAW_OP_N, 1.0f, &g->a, &g->b, 0.0f, &g->c));
}

static void gemm_peer(void *arg)
{
  gemm_bench *g = arg;
  float one = 1.0f, zero = 0.0f;
  int n = (int)g->n;
  /* row-major C = A B as column-major C^T = B^T A^T */
  CHECK(cublasGemmEx(g->blas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, g->pb, CUDA_R_16BF, n, g->pa, CUDA_R_16BF, n,
                     &zero, g->pc, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

static void bench_gemm(int64_t n, cudaStream_t s)
{
  gemm_bench g = {.n = n};
  int64_t shape[2] = {n, n};
  size_t bytes = (size_t)(n * n) * 2;
  CHECK(gaaw_tensor_alloc(ctx, GAAW_BF16, 2, shape, GAAW_MEM_WORKSPACE, &g.a));
  CHECK(gaaw_tensor_alloc(ctx, GAAW_BF16, 2, shape, GAAW_MEM_WORKSPACE, &g.b));
  CHECK(gaaw_tensor_alloc(ctx, GAAW_BF16, 2, shape, GAAW_MEM_WORKSPACE, &g.c));
  CHECK(gaaw_fill(ctx, &g.a, 0.01f));
  CHECK(gaaw_fill(ctx, &g.b, 0.02f));
  CHECK(cudaMalloc(&g.pa, bytes));
  CHECK(cudaMalloc(&g.pb, bytes));
  CHECK(cudaMalloc(&g.pc, bytes));
  CHECK(cudaMemset(g.pa, 0x3c, bytes)); /* bf16 0x3c3c ~ 0.0115 */
  CHECK(cudaMemset(g.pb, 0x3c, bytes));
  CHECK(cublasCreate(&g.blas));
  CHECK(cublasSetStream(g.blas, s));
  double tg, tp;
  time_pair((pair_t){gemm_gaaw, gemm_peer, &g}, s, &tg, &tp);
  double flop = 2.0 * n * n * n;
  printf("bench=gemm_cuda dtype=bf16 m=%lld n=%lld k=%lld value=%.1f unit=TFLOP/s peer=cublasGemmEx "
         "peer_value=%.1f ratio=%.3f OPENBLAS_CORETYPE=%s\n",
         (long long)n, (long long)n, (long long)n, flop / tg / 1e12, flop / tp / 1e12, tp / tg, coretype());
  cublasDestroy(g.blas);
  cudaFree(g.pa), cudaFree(g.pb), cudaFree(g.pc);
  gaaw_buffer_free(ctx, &g.a.buf), gaaw_buffer_free(ctx, &g.b.buf), gaaw_buffer_free(ctx, &g.c.buf);
}

/* ---------------------------------------------------------------- bandwidth-bound kernels */

typedef struct {
  gaaw_tensor_t x, w, b, y, mean, rstd, dy, dx, dw, db; /* layernorm */
  gaaw_tensor_t p, g, master, m, v;                    /* AdamW */
  gaaw_adamw_args_t args;
  void *src, *dst;
  size_t copy_bytes;
  cudaStream_t s;
} bw_bench;

static void ln_forward(void *arg)
{
  bw_bench *k = arg;
  CHECK(gaaw_layernorm_forward(ctx, &k->x, &k->w, &k->b, 1e-5f, &k->y, &k->mean, &k->rstd));
}

static void ln_backward(void *arg)
{
  bw_bench *k = arg;
  CHECK(gaaw_layernorm_backward(ctx, &k->dy, &k->x, &k->w, &k->mean, &k->rstd, &k->dx, &k->dw, &k->db));
}

static void adamw(void *arg)
{
  bw_bench *k = arg;
  CHECK(gaaw_adamw_update(ctx, &k->p, &k->g, &k->master, &k->m, &k->v, &k->args));
}

static void copy_peer(void *arg)
{
  bw_bench *k = arg;
  CHECK(cudaMemcpyAsync(k->dst, k->src, k->copy_bytes, cudaMemcpyDeviceToDevice, k->s));
}

static void alloc(gaaw_tensor_t *t, gaaw_dtype_t dt, int64_t rows, int64_t cols, float value)
{
  int64_t shape[2] = {rows, cols};
  CHECK(gaaw_tensor_alloc(ctx, dt, 2, shape, GAAW_MEM_WORKSPACE, t));
  CHECK(gaaw_fill(ctx, t, value));
}

static void report(const char *name, const char *config, double bytes, bw_bench *k, run_fn fn)
{
  double tg, tp;
  k->copy_bytes = (size_t)(bytes / 2); /* a copy reads and writes: the same bytes moved */
  time_pair((pair_t){fn, copy_peer, k}, k->s, &tg, &tp);
  double gg = bytes / tg / 1e9, gp = 2.0 * k->copy_bytes / tp / 1e9;
  printf("bench=%s %s value=%.0f unit=GB/s peer=cudaMemcpyD2D peer_value=%.0f ratio=%.3f OPENBLAS_CORETYPE=%s\n", name,
         config, gg, gp, gg / gp, coretype());
}

static void bench_bandwidth(cudaStream_t s)
{
  enum { N = 16384, C = 1024 };
  const int64_t P = 64 << 20;
  bw_bench k = {.s = s};
  alloc(&k.x, GAAW_BF16, N, C, 0.5f), alloc(&k.y, GAAW_BF16, N, C, 0), alloc(&k.dy, GAAW_BF16, N, C, 0.1f);
  alloc(&k.dx, GAAW_BF16, N, C, 0), alloc(&k.w, GAAW_BF16, 1, C, 1), alloc(&k.b, GAAW_BF16, 1, C, 0);
  alloc(&k.dw, GAAW_BF16, 1, C, 0), alloc(&k.db, GAAW_BF16, 1, C, 0);
  alloc(&k.mean, GAAW_F32, 1, N, 0), alloc(&k.rstd, GAAW_F32, 1, N, 1);
  alloc(&k.p, GAAW_BF16, 1, P, 0), alloc(&k.g, GAAW_BF16, 1, P, 0.01f), alloc(&k.master, GAAW_F32, 1, P, 0.1f);
  alloc(&k.m, GAAW_F32, 1, P, 0), alloc(&k.v, GAAW_F32, 1, P, 0);
  k.args = (gaaw_adamw_args_t){.lr = 1e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f,
                               .grad_scale = 1.0f, .step = 1};
  size_t max_bytes = (size_t)P * 28;
  CHECK(cudaMalloc(&k.src, max_bytes / 2));
  CHECK(cudaMalloc(&k.dst, max_bytes / 2));
  CHECK(cudaMemset(k.src, 0, max_bytes / 2));
  double act = (double)N * C * 2;
  /* forward: x read, y written; backward: dy, x read, dx read and written */
  report("layernorm_forward_cuda", "dtype=bf16 N=16384 C=1024", 2 * act, &k, ln_forward);
  report("layernorm_backward_cuda", "dtype=bf16 N=16384 C=1024", 4 * act, &k, ln_backward);
  /* per element: grad 2, params 2 written, master, m, v 4 each read and written */
  report("adamw_cuda", "params=bf16 state=f32 n=67108864", 28.0 * P, &k, adamw);
  cudaFree(k.src), cudaFree(k.dst);
  gaaw_tensor_t *all[] = {&k.x, &k.y, &k.dy, &k.dx, &k.w, &k.b, &k.dw, &k.db, &k.mean, &k.rstd,
                          &k.p, &k.g, &k.master, &k.m, &k.v};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) gaaw_buffer_free(ctx, &all[i]->buf);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    printf("bench=gemm_cuda skipped=no-cuda-device\n");
    MPI_Finalize();
    return 0;
  }
  int64_t n = argc > 1 ? atoll(argv[1]) : 8192;
  gaaw_config_t cfg;
  CHECK(gaaw_config_create(&cfg));
  CHECK(gaaw_config_set(cfg, "backend", "cuda"));
  CHECK(gaaw_init(MPI_COMM_WORLD, cfg, &ctx));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  bench_gemm(n, s);
  bench_bandwidth(s);
  cudaStreamDestroy(s);
  CHECK(gaaw_finalize(&ctx));
  gaaw_config_destroy(&cfg);
  MPI_Finalize();
  return 0;
}
