/* gaaw memory estimate: the bytes one rank of a training layout will hold, by
 * category (params, grads, optimizer, activations, communication, workspace) and
 * by space (device, host, nvme), computed from the configurations alone, before
 * anything is allocated and without the ranks of that layout (a planner may ask
 * about 1000-device layouts from one process).
 *
 * It runs the library's own planning on a model without memory: the GPT's layers
 * and parameters (their padding and flat-buffer offsets), the pipeline stage plan
 * (pp_layout, virtual stages), the ZeRO bucket plan, the schedule's actions for the
 * rank; then it walks one training step (gaaw_model_forward_backward of the
 * step's microbatches, then gaaw_optimizer_step) on a ledger, each layer, ZeRO hook
 * and optimizer store replaying what it allocates and frees, in order.
 *
 * What it counts is what gaaw_memory_usage and gaaw_memory_total count: device
 * bytes in use, as asked for. The caching allocator's rounding to size classes
 * and the blocks it keeps cached are not in it (gaaw_memory_cached tells them;
 * device_memory_limit counts them, but frees the cache before it refuses). Not in
 * it either: temporaries that a device backend's kernels take for themselves (the
 * host backend's partial sums and its f32 copies of 16-bit tensors; CUDA and
 * OpenCL workspaces) and the collectives' memory except the MPI communicator's
 * scratch on the host backend. A send's tensor is taken to be freed at the
 * exchange that posted it (the pipeline frees it once the send completes).
 *
 * Supported: the GPT (gaaw_gpt_config_t), any tp, pp, dp, virtual stages,
 * pp_layout, schedule (gpipe, 1f1b, interleaved, zb-h1), microbatch count,
 * recompute (none, selective, full), sequence parallelism, ZeRO stage 0..3,
 * zero_bucket_bytes, zero_keep_gathered, offload_optimizer (none, host), dtype,
 * AdamW or SGD. */
#ifndef GAAW_ESTIMATE_H
#define GAAW_ESTIMATE_H

#include <stdint.h>
#include "gaaw/config.h"
#include "gaaw/model.h"
#include "gaaw/optimizer.h"
#include "gaaw/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where bytes live. */
#define GAAW_MEMORY_SPACE_LIST(X) \
  X(GAAW_SPACE_DEVICE, 0, "device") \
  X(GAAW_SPACE_HOST, 1, "host")     \
  X(GAAW_SPACE_NVME, 2, "nvme")
#define GAAW_MEMORY_SPACE_ENTRY(name, value, text) name = value,
typedef enum { GAAW_MEMORY_SPACE_LIST(GAAW_MEMORY_SPACE_ENTRY) } gaaw_mem_space_t;
#undef GAAW_MEMORY_SPACE_ENTRY
#define GAAW_MEM_SPACE_COUNT 3

/* What the estimate is about beyond the configurations. */
typedef struct {
  int batch; /* rows (sequences) per microbatch, >= 1 */
  int seq;   /* tokens per row, 1..max_seq */
  int rank;  /* world rank of the layout to report; -1: the rank with the largest device peak */
} gaaw_estimate_options_t;

typedef struct {
  int rank;           /* the world rank reported */
  int dp, tp, pp;     /* the layout's sizes */
  int zero_stage;
  /* device: each category's peak over the step (what gaaw_memory_usage's peak
   * reports); host, nvme: what the optimizer store holds there */
  uint64_t bytes[GAAW_MEM_SPACE_COUNT][GAAW_MEM_CATEGORY_COUNT];
  /* device: the most in use at one instant, every category together (what
   * gaaw_memory_total's peak reports, and what device_memory_limit must hold);
   * host, nvme: the sums of bytes[space] */
  uint64_t total[GAAW_MEM_SPACE_COUNT];
} gaaw_memory_estimate_t;

/* batch 1, seq 0 (must be set), rank -1. Not collective. */
void gaaw_estimate_options_default(gaaw_estimate_options_t *options);
/* "device", "host", "nvme"; "invalid" otherwise. Not collective. */
const char *gaaw_mem_space_name(gaaw_mem_space_t space);

/* The bytes of one training step (a gaaw_model_forward_backward of the layout's
 * `microbatches` microbatches of options->batch x options->seq tokens, then
 * gaaw_optimizer_step) for a GPT of config model, trained with optimizer, on the
 * layout of the options in layout: tp, cp, cp_kind, pp, dp (0: the context's world
 * size / (tp x cp x pp)), rank_order, virtual_stages, pp_layout, pp_schedule, microbatches,
 * recompute, zero_bucket_bytes, zero_keep_gathered, offload_optimizer,
 * allreduce_ring_bytes (the other options are not read); layout NULL: the
 * context's own options and world. The ZeRO stage comes from optimizer; the dtype
 * from model. ctx only receives errors and may have any world size.
 * Errors: GAAW_ERR_INVALID_ARG for a NULL argument, an option out of range, a
 * layout that does not divide (heads % tp, the body layers over pp x virtual
 * stages, a schedule that does not take pp, microbatches and virtual stages, tp x
 * pp not dividing the world), a batch or seq out of range, a rank outside the
 * layout, or an offload_optimizer value no store has; GAAW_ERR_UNSUPPORTED for a
 * model kind without an estimate. Not collective. */
gaaw_status_t gaaw_memory_estimate(gaaw_context_t ctx, const gaaw_gpt_config_t *model, gaaw_config_t layout,
                                   const gaaw_optimizer_config_t *optimizer, const gaaw_estimate_options_t *options,
                                   gaaw_memory_estimate_t *out);

#ifdef __cplusplus
}
#endif
#endif
