/* gaaw-train's model FLOPs and MFU: the training FLOPs a token of the GPT costs,
 * and the peak a rank's device is measured against (option peak_tflops). */
#ifndef GAAW_TRAIN_THROUGHPUT_H
#define GAAW_TRAIN_THROUGHPUT_H

#include <stddef.h>
#include <stdint.h>

#include "examples/train/options.h"
#include "gaaw.h"

/* Training FLOPs per token of opts' GPT (forward and backward, DESIGN.md section
 * 10): 6 N + 12 layers seq dim, where N is every parameter of the model but the
 * position embedding, from params = gaaw_model_num_params' global count. Every
 * matmul weight does 2 FLOPs per token forward and 4 backward; the token
 * embedding counts once, as the weight of the LM head tied to it (the logit
 * matmul), while the position embedding is a table lookup and does no matmul.
 * Biases and norm weights stay in N (elementwise: 13 / (12 dim) of a block's
 * weights, 1% at dim 128), so that N is the reported count less one table.
 * 12 layers seq dim is attention's QK^T and its product with V over the whole
 * context (forward 4, backward 8 FLOPs per position and width), as in the
 * Megatron-LM and nanoGPT estimates. Recomputation is not counted: these are the
 * model's FLOPs, not the hardware's. */
double train_flops_per_token(const train_options *opts, int64_t params);

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
