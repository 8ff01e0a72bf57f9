/* gaaw-train's MFU: the peak a rank's device is measured against (option
 * peak_tflops); the model's FLOPs come from gaaw_model_flops_per_token. */
#ifndef GAAW_TRAIN_PEAK_H
#define GAAW_TRAIN_PEAK_H

#include <stddef.h>
#include <stdint.h>

#include "gaaw.h"

/* Option peak_tflops as a rank's peak in TFLOP/s: *peak > 0 for a number, 0 for
 * empty (unknown; no MFU); *measure = 1 for "measure" (*peak 0: call
 * train_peak_measure). Not collective. */
void train_peak_option(gaaw_context_t ctx, double *peak, int *measure);

/* This rank's f32 GEMM rate in TFLOP/s: 1024^3 products through gaaw_gemm on the
 * context's backend, the fastest of 5 after one to warm up, each followed by
 * gaaw_synchronize. Returns 0 with the reason in err on failure. Not collective
 * (but every rank calls it at once, so that shared cores are measured shared). */
int train_peak_measure(gaaw_context_t ctx, double *tflops, char *err, size_t len);

#endif
