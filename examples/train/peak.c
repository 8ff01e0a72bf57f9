/* gaaw-train's peak behind the MFU: option peak_tflops, or measured. */
#include "examples/train/peak.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum { PEAK_N = 1024, PEAK_REPEATS = 5 };

void train_peak_option(gaaw_context_t ctx, double *peak, int *measure)
{
  gaaw_config_t cfg = NULL;
  char text[64] = "";
  *peak = 0;
  *measure = 0;
  if (gaaw_context_config(ctx, &cfg) != GAAW_SUCCESS ||
      gaaw_config_get_string(cfg, "peak_tflops", text, sizeof text) != GAAW_SUCCESS || !text[0])
    return;
  if (strcasecmp(text, "measure") == 0) *measure = 1;
  else *peak = strtod(text, NULL); /* gaaw_config_check took only numbers > 0 */
}

int train_peak_measure(gaaw_context_t ctx, double *tflops, char *err, size_t len)
{
  const int64_t shape[2] = {PEAK_N, PEAK_N};
  const double flops = 2.0 * PEAK_N * PEAK_N * PEAK_N;
  gaaw_tensor_t t[3];
  gaaw_status_t st = GAAW_SUCCESS;
  const char *call = "gaaw_tensor_alloc";
  double best = 0;
  memset(t, 0, sizeof t);
  for (int k = 0; k < 3 && st == GAAW_SUCCESS; k++)
    st = gaaw_tensor_alloc(ctx, GAAW_F32, 2, shape, GAAW_MEM_WORKSPACE, &t[k]);
  if (st == GAAW_SUCCESS) call = "gaaw_fill";
  for (int k = 0; k < 3 && st == GAAW_SUCCESS; k++) st = gaaw_fill(ctx, &t[k], k < 2 ? 0.01f : 0.0f);
  for (int r = 0; r <= PEAK_REPEATS && st == GAAW_SUCCESS; r++) {
    double began = MPI_Wtime();
    call = "gaaw_gemm";
    st = gaaw_gemm(ctx, GAAW_OP_N, GAAW_OP_N, 1.0f, &t[0], &t[1], 0.0f, &t[2]);
    if (st == GAAW_SUCCESS) st = gaaw_synchronize(ctx);
    double seconds = MPI_Wtime() - began;
    if (r > 0 && seconds > 0 && flops / seconds / 1e12 > best) best = flops / seconds / 1e12;
  }
  if (st != GAAW_SUCCESS) snprintf(err, len, "measuring the peak (peak_tflops=measure): %s failed:\n%s", call, gaaw_last_error(ctx));
  for (int k = 0; k < 3; k++)
    if (t[k].buf) gaaw_buffer_free(ctx, &t[k].buf);
  gaaw_memory_release_cached(ctx);
  *tflops = best;
  return st == GAAW_SUCCESS;
}
