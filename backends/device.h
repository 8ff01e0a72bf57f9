/* The device layer: a device backend is a table of functions, registered by name.
 * Code above backends/ never calls a backend directly: it calls the public kernel
 * functions (backends/kernels.c), which check their arguments and dispatch here.
 *
 * Every kernel entry takes the context first and the already-checked tensors of its
 * public function (include/gaaw/kernels.h). An operation a backend lacks is left NULL
 * in its table; gaaw_device_register fills such entries with a stub that reports
 * GAAW_ERR_UNSUPPORTED naming the operation and backend, so no entry is ever NULL
 * when called. */
#ifndef GAAW_BACKENDS_DEVICE_H
#define GAAW_BACKENDS_DEVICE_H

#include "gaaw/info.h"
#include "gaaw/kernels.h"

typedef const gaaw_tensor_t *gaaw_cten; /* an input tensor */
typedef gaaw_tensor_t *gaaw_ten;        /* an output (or in/out) tensor */

/* X(name, (parameters)): the kernels, in the order of include/gaaw/kernels.h. */
#define GAAW_DEVICE_KERNEL_LIST(X)                                                                 \
  X(gemm, (gaaw_context_t ctx, gaaw_transpose_t ta, gaaw_transpose_t tb, float alpha, gaaw_cten a,  \
           gaaw_cten b, float beta, gaaw_ten c))                                                    \
  X(gemm_batched, (gaaw_context_t ctx, gaaw_transpose_t ta, gaaw_transpose_t tb, float alpha,       \
                   gaaw_cten a, gaaw_cten b, float beta, gaaw_ten c))                               \
  X(layernorm_forward, (gaaw_context_t ctx, gaaw_cten x, gaaw_cten w, gaaw_cten b, float eps,       \
                        gaaw_ten y, gaaw_ten mean, gaaw_ten rstd))                                  \
  X(layernorm_backward, (gaaw_context_t ctx, gaaw_cten dy, gaaw_cten x, gaaw_cten w, gaaw_cten mean, \
                         gaaw_cten rstd, gaaw_ten dx, gaaw_ten dw, gaaw_ten db))                    \
  X(rmsnorm_forward, (gaaw_context_t ctx, gaaw_cten x, gaaw_cten w, float eps, gaaw_ten y,          \
                      gaaw_ten rstd))                                                               \
  X(rmsnorm_backward, (gaaw_context_t ctx, gaaw_cten dy, gaaw_cten x, gaaw_cten w, gaaw_cten rstd,  \
                       gaaw_ten dx, gaaw_ten dw))                                                   \
  X(activation_forward, (gaaw_context_t ctx, gaaw_activation_t act, gaaw_cten x, gaaw_ten y))        \
  X(activation_backward, (gaaw_context_t ctx, gaaw_activation_t act, gaaw_cten dy, gaaw_cten x,      \
                          gaaw_ten dx))                                                             \
  X(swiglu_forward, (gaaw_context_t ctx, gaaw_cten x, gaaw_ten y))                                  \
  X(swiglu_backward, (gaaw_context_t ctx, gaaw_cten dy, gaaw_cten x, gaaw_ten dx))                  \
  X(rope, (gaaw_context_t ctx, gaaw_cten x, gaaw_cten table, int64_t heads, int inverse, gaaw_ten y)) \
  X(qkv_heads, (gaaw_context_t ctx, gaaw_ten qkv, int64_t kv_heads, int backward, gaaw_ten q, gaaw_ten k,  \
                gaaw_ten v))                                                                        \
  X(moe_router, (gaaw_context_t ctx, gaaw_cten logits, int sigmoid, gaaw_ten scores, gaaw_ten lse))  \
  X(moe_router_backward, (gaaw_context_t ctx, gaaw_cten logits, gaaw_cten scores, gaaw_cten lse,      \
                          gaaw_cten dscores, int sigmoid, float zscale, gaaw_ten dlogits))           \
  X(moe_topk, (gaaw_context_t ctx, gaaw_cten scores, gaaw_cten bias, int renormalize, gaaw_ten idx,  \
               gaaw_ten weights))                                                                   \
  X(moe_topk_backward, (gaaw_context_t ctx, gaaw_cten scores, gaaw_cten idx, gaaw_cten weights,      \
                        gaaw_cten dweights, int renormalize, gaaw_ten dscores))                     \
  X(moe_permute, (gaaw_context_t ctx, gaaw_cten x, gaaw_cten src, gaaw_ten out))                    \
  X(moe_permute_backward, (gaaw_context_t ctx, gaaw_cten dout, gaaw_cten pos, gaaw_ten dx))         \
  X(moe_unpermute, (gaaw_context_t ctx, gaaw_cten y, gaaw_cten pos, gaaw_cten weights, gaaw_ten out)) \
  X(moe_unpermute_backward, (gaaw_context_t ctx, gaaw_cten dout, gaaw_cten y, gaaw_cten pos,         \
                             gaaw_cten weights, gaaw_ten dy, gaaw_ten dweights))                    \
  X(bias_add, (gaaw_context_t ctx, gaaw_ten y, gaaw_cten b))                                        \
  X(bias_backward, (gaaw_context_t ctx, gaaw_cten dy, gaaw_ten db))                                 \
  X(add, (gaaw_context_t ctx, gaaw_cten a, gaaw_cten b, gaaw_ten y))                                \
  X(axpy, (gaaw_context_t ctx, float alpha, gaaw_cten x, gaaw_ten y))                               \
  X(scale, (gaaw_context_t ctx, gaaw_ten x, float alpha))                                           \
  X(causal_softmax_forward, (gaaw_context_t ctx, float scale, gaaw_cten x, gaaw_ten y))             \
  X(causal_softmax_backward, (gaaw_context_t ctx, float scale, gaaw_cten y, gaaw_cten dy,           \
                              gaaw_ten dx))                                                         \
  X(attention_forward, (gaaw_context_t ctx, gaaw_cten q, gaaw_cten k, gaaw_cten v, gaaw_ten probs,  \
                        gaaw_ten out))                                                              \
  X(attention_backward, (gaaw_context_t ctx, gaaw_cten dout, gaaw_cten q, gaaw_cten k, gaaw_cten v, \
                         gaaw_cten probs, gaaw_ten dprobs, gaaw_ten dq, gaaw_ten dk, gaaw_ten dv))  \
  X(embedding_forward, (gaaw_context_t ctx, gaaw_cten tokens, gaaw_cten table, int64_t vocab_start, \
                        gaaw_ten y))                                                                \
  X(embedding_backward, (gaaw_context_t ctx, gaaw_cten tokens, gaaw_cten dy, int64_t vocab_start,   \
                         gaaw_ten dtable))                                                          \
  X(row_max, (gaaw_context_t ctx, gaaw_cten logits, gaaw_ten max))                                  \
  X(row_sum_exp, (gaaw_context_t ctx, gaaw_cten logits, gaaw_cten max, gaaw_ten sumexp))            \
  X(target_logit, (gaaw_context_t ctx, gaaw_cten logits, gaaw_cten targets, int64_t vocab_start,    \
                   gaaw_ten target))                                                                \
  X(cross_entropy_backward, (gaaw_context_t ctx, gaaw_cten logits, gaaw_cten max, gaaw_cten sumexp, \
                             gaaw_cten targets, int64_t vocab_start, float dloss, gaaw_ten dlogits)) \
  X(regression_loss, (gaaw_context_t ctx, gaaw_loss_t kind, float delta, gaaw_cten pred, gaaw_cten target,   \
                       gaaw_cten weights, gaaw_ten loss, gaaw_ten grad))                                 \
  X(adamw_update, (gaaw_context_t ctx, gaaw_ten params, gaaw_cten grads, gaaw_ten master,           \
                   gaaw_ten m, gaaw_ten v, const gaaw_adamw_args_t *args))                          \
  X(cast, (gaaw_context_t ctx, gaaw_cten x, gaaw_ten y))                                            \
  X(permute_0213, (gaaw_context_t ctx, gaaw_cten x, gaaw_ten y))                                   \
  X(sum_squares, (gaaw_context_t ctx, gaaw_cten x, gaaw_ten out))                                   \
  X(check_finite, (gaaw_context_t ctx, gaaw_cten x, gaaw_ten flag))                                 \
  X(fill, (gaaw_context_t ctx, gaaw_ten x, float value))                                            \
  X(synchronize, (gaaw_context_t ctx))

/* X(name, (parameters)): the kernels a backend may lack. Its table need not declare
 * them; an entry left NULL gets the unsupported stub, which gaaw_device_has_NAME and
 * gaaw_kernel_available report, and the caller takes another path:
 *   - fused kernels, internal (backends/fused.h): each does in one pass what a
 *     sequence of the kernels above does; without it backends/fused.c runs the
 *     sequence;
 *   - the blocked attention (a block of queries against a block of keys, causal or
 *     not, and the merge of two blocks' results): without it the GPT block keeps the
 *     (T, T) path;
 *   - the attention on the QKV projection's (B, T, 3H, D) layout, writing the merged
 *     (B, T, H, D) output: without it the GPT block permutes into heads and back
 *     around the (BH, T, D) kernels.
 * Host and OpenCL have them all; CUDA the blocked attention only. */
#define GAAW_DEVICE_OPTIONAL_KERNEL_LIST(X)                                                        \
  X(bias_gelu_forward, (gaaw_context_t ctx, gaaw_ten u, gaaw_cten b, gaaw_ten a))                   \
  X(bias_residual_add, (gaaw_context_t ctx, gaaw_cten x, gaaw_cten y, gaaw_cten bias, gaaw_ten out))   \
  X(add_layernorm_forward, (gaaw_context_t ctx, gaaw_cten x, gaaw_cten y, gaaw_cten bias,           \
                            gaaw_cten w, gaaw_cten b, float eps, gaaw_ten x2, gaaw_ten h,           \
                            gaaw_ten mean, gaaw_ten rstd))                                          \
  X(cross_entropy_forward, (gaaw_context_t ctx, gaaw_cten logits, gaaw_cten targets,                \
                            int64_t vocab_start, float dloss, gaaw_ten max, gaaw_ten sumexp,         \
                            gaaw_ten target, gaaw_ten dlogits))                                     \
  X(gelu_backward_set, (gaaw_context_t ctx, gaaw_cten dy, gaaw_cten x, gaaw_ten dx))                \
  X(attention_block_forward, (gaaw_context_t ctx, gaaw_cten q, gaaw_cten k, gaaw_cten v,           \
                              int64_t q_start, int64_t k_start, int causal, gaaw_ten out,          \
                              gaaw_ten lse))                                                        \
  X(attention_block_backward, (gaaw_context_t ctx, gaaw_cten dout, gaaw_cten q, gaaw_cten k,         \
                               gaaw_cten v, gaaw_cten out, gaaw_cten lse, int64_t q_start,          \
                               int64_t k_start, int causal, gaaw_ten dq, gaaw_ten dk, gaaw_ten dv)) \
  X(attention_merge, (gaaw_context_t ctx, gaaw_ten out, gaaw_ten lse, gaaw_cten part_out,            \
                      gaaw_cten part_lse))                                                          \
  X(attention_qkv_forward, (gaaw_context_t ctx, gaaw_cten qkv, gaaw_ten probs, gaaw_ten out))        \
  X(attention_qkv_backward, (gaaw_context_t ctx, gaaw_cten dout, gaaw_cten qkv, gaaw_cten probs,      \
                             gaaw_ten dprobs, gaaw_ten dqkv))

#define GAAW_DEVICE_OP_FIELD(name, params) gaaw_status_t(*name) params;

/* A device's streams: kernels, copies and allocations are ordered on the compute
 * stream; collectives run on the communication stream. */
enum { GAAW_STREAM_COMPUTE = 0, GAAW_STREAM_COMM = 1, GAAW_STREAM_COUNT = 2 };

typedef struct gaaw_device_ops {
  const char *name;
  /* Devices this backend sees on this node (0: the backend cannot run here). */
  gaaw_status_t (*device_count)(int *count);
  /* Of those, the ones `backend=auto` should prefer to the host backend (GPUs and
   * accelerators, not an OpenCL driver for the CPU itself); NULL: all of them. */
  gaaw_status_t (*accelerator_count)(int *count);
  /* Describes device `index` (0..count-1) without a context; NULL: the backend
   * cannot (gaaw_info_device reports GAAW_ERR_UNSUPPORTED). */
  gaaw_status_t (*device_info)(int index, gaaw_device_info_t *info);
  /* Opens device `index` for ctx; the backend keeps its state in ctx->device_state. */
  gaaw_status_t (*open)(gaaw_context_t ctx, int index);
  void (*close)(gaaw_context_t ctx);
  /* Raw device memory (the caching allocator sits above these). */
  gaaw_status_t (*mem_alloc)(gaaw_context_t ctx, size_t bytes, void **handle);
  void (*mem_free)(gaaw_context_t ctx, void *handle);
  gaaw_status_t (*mem_write)(gaaw_context_t ctx, void *handle, size_t offset, const void *src, size_t bytes);
  gaaw_status_t (*mem_read)(gaaw_context_t ctx, void *handle, size_t offset, void *dst, size_t bytes);
  /* The host address of handle + offset, or NULL when device memory has none. */
  void *(*host_ptr)(void *handle, size_t offset);
  /* Host memory the device copies to and from at full speed (CUDA: page-locked),
   * page-aligned, for the offloaded optimizer state and its staging; NULL where
   * ordinary host memory is as good (host, OpenCL): see gaaw_host_alloc. */
  gaaw_status_t (*pinned_alloc)(gaaw_context_t ctx, size_t bytes, void **ptr);
  void (*pinned_free)(gaaw_context_t ctx, void *ptr);
  /* Events on the device's streams, for the stream-aware caching allocator
   * (runtime/allocator.h). event_record makes an event that happens once the work
   * queued so far on `stream` (GAAW_STREAM_*) is done; event_query says whether it
   * has (*done = 1); event_destroy frees it. NULL in a backend whose memory is only
   * ever used in the order of its calls (host, OpenCL): then no freed block waits. */
  gaaw_status_t (*event_record)(gaaw_context_t ctx, int stream, void **event);
  gaaw_status_t (*event_query)(gaaw_context_t ctx, void *event, int *done);
  void (*event_destroy)(gaaw_context_t ctx, void *event);
  GAAW_DEVICE_KERNEL_LIST(GAAW_DEVICE_OP_FIELD)
  GAAW_DEVICE_OPTIONAL_KERNEL_LIST(GAAW_DEVICE_OP_FIELD)
} gaaw_device_ops;

/* Whether a completed table (gaaw_device_backends) has optional kernel NAME, i.e. its
 * entry is not the unsupported stub: int gaaw_device_has_NAME(ops). */
#define GAAW_DEVICE_HAS_DECLARE(name, params) int gaaw_device_has_##name(const gaaw_device_ops *ops);
GAAW_DEVICE_OPTIONAL_KERNEL_LIST(GAAW_DEVICE_HAS_DECLARE)
#undef GAAW_DEVICE_HAS_DECLARE

/* Backends known to this build, in auto-selection order (cuda > opencl > host);
 * count receives their number. */
const gaaw_device_ops *const *gaaw_device_backends(int *count);
/* The backend named name, or NULL. */
const gaaw_device_ops *gaaw_device_backend(const char *name);

/* Whether ops (a table from gaaw_device_backends) has the kernel named op (a name of
 * either list above) rather than the 'unsupported' stub: 1 or 0; -1 for an unknown name. */
int gaaw_device_provides(const gaaw_device_ops *ops, const char *op);

/* The host backend's table (always built). */
extern const gaaw_device_ops gaaw_host_device_ops;

#endif
