/* Where ZeRO stage 3 keeps this rank's shard of the parameters, in the compute
 * dtype (option offload_params):
 *   none  a device buffer (opt->shard_params)
 *   host  host memory (pinned on CUDA): a bucket's piece is uploaded into the
 *         gather's buffer
 *   nvme  a file under nvme_path (zero/nvme_file.h), a record per piece: a piece
 *         is read into host staging, then uploaded
 * The gathers (zero/hooks.c) and the CPU optimizer stores (zero/store_cpu.c) move
 * pieces through the functions below and never ask where the shard is. Below
 * stage 3 the parameter piece is the model's own buffer (gaaw_zero_param_piece). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/runtime/allocator.h"
#include "backends/runtime/context_impl.h"
#include "gaaw/estimate.h"
#include "zero/nvme_file.h"
#include "zero/zero_impl.h"

struct zero_param_shard {
  zero_params_place place;
  char *host;              /* host: (shard_numel) elements of the compute dtype */
  gaaw_nvme_file *file;    /* nvme */
  uint64_t *record_at;     /* nvme: (nbuckets + 1) file offsets of the pieces */
  char *staging;           /* nvme: (largest piece), aligned for O_DIRECT */
};

int gaaw_zero_params_place_parse(const char *name)
{
  return strcmp(name, "none") == 0 ? ZERO_PARAMS_DEVICE
         : strcmp(name, "host") == 0 ? ZERO_PARAMS_HOST
         : strcmp(name, "nvme") == 0 ? ZERO_PARAMS_NVME
                                     : -1;
}

static size_t piece_bytes(gaaw_optimizer_t opt, int b)
{
  return (size_t)opt->buckets[b].piece * gaaw_dtype_size(opt->dtype);
}

static size_t record_bytes(gaaw_optimizer_t opt, int b)
{
  return (piece_bytes(opt, b) + GAAW_NVME_ALIGN - 1) / GAAW_NVME_ALIGN * GAAW_NVME_ALIGN;
}

/* host: bucket b's piece in the host shard. */
static char *host_piece(gaaw_optimizer_t opt, int b)
{
  return opt->param_shard->host + (size_t)opt->buckets[b].shard_at * gaaw_dtype_size(opt->dtype);
}

/* nvme: one synchronous transfer of bucket b's record through slot 0. */
static gaaw_status_t nvme_transfer(gaaw_optimizer_t opt, int b, int write)
{
  gaaw_context_t ctx = opt->ctx;
  zero_param_shard *s = opt->param_shard;
  GAAW_CHECK(gaaw_nvme_start(s->file, 0, write, s->staging, record_bytes(opt, b), s->record_at[b]));
  GAAW_CHECK(gaaw_nvme_wait(s->file, 0));
  return GAAW_SUCCESS;
}

void gaaw_zero_shard_bytes(gaaw_optimizer_t opt, int64_t bytes[3])
{
  int64_t shard = (int64_t)gaaw_dtype_size(opt->dtype) * (opt->shard_numel ? opt->shard_numel : 1), records = 0;
  for (int b = 0; b < opt->nbuckets; b++) records += (int64_t)record_bytes(opt, b);
  int64_t staging = (int64_t)gaaw_dtype_size(opt->dtype) * gaaw_zero_largest_piece(opt);
  bytes[GAAW_SPACE_DEVICE] = opt->params_place == ZERO_PARAMS_DEVICE ? shard : 0;
  bytes[GAAW_SPACE_HOST] = opt->params_place == ZERO_PARAMS_HOST   ? (int64_t)gaaw_host_bytes((size_t)shard)
             : opt->params_place == ZERO_PARAMS_NVME ? (staging + GAAW_NVME_ALIGN - 1) / GAAW_NVME_ALIGN * GAAW_NVME_ALIGN
                                                     : 0;
  bytes[GAAW_SPACE_NVME] = opt->params_place == ZERO_PARAMS_NVME ? records : 0;
}

gaaw_status_t gaaw_zero_shard_create(gaaw_optimizer_t opt)
{
  zero_params_place place = opt->params_place;
  gaaw_context_t ctx = opt->ctx;
  size_t es = gaaw_dtype_size(opt->dtype), bytes = (size_t)(opt->shard_numel ? opt->shard_numel : 1) * es;
  zero_param_shard *s = calloc(1, sizeof *s);
  if (!s) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate the parameter shard");
  opt->param_shard = s;
  s->place = place;
  if (place == ZERO_PARAMS_DEVICE) GAAW_CHECK(gaaw_buffer_alloc(ctx, bytes, GAAW_MEM_PARAMS, &opt->shard_params));
  if (place == ZERO_PARAMS_HOST && !(s->host = gaaw_host_alloc(ctx, bytes)))
    GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "offload_params=host: cannot allocate %zu bytes of host memory", bytes);
  if (place != ZERO_PARAMS_NVME) return GAAW_SUCCESS;
  s->record_at = calloc((size_t)opt->nbuckets + 1, sizeof *s->record_at);
  s->staging = gaaw_host_alloc(ctx, (size_t)gaaw_zero_largest_piece(opt) * es);
  if (!s->record_at || !s->staging) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "offload_params=nvme: cannot allocate its staging");
  for (int b = 0; b < opt->nbuckets; b++) s->record_at[b + 1] = s->record_at[b] + record_bytes(opt, b);
  GAAW_CHECK(gaaw_nvme_create(ctx, "params", (size_t)s->record_at[opt->nbuckets], &s->file));
  return GAAW_SUCCESS;
}

void gaaw_zero_shard_destroy(gaaw_optimizer_t opt)
{
  zero_param_shard *s = opt->param_shard;
  gaaw_buffer_free(opt->ctx, &opt->shard_params);
  if (!s) return;
  gaaw_nvme_close(&s->file);
  gaaw_host_free(opt->ctx, s->host);
  free(s->record_at);
  gaaw_host_free(opt->ctx, s->staging);
  free(s);
  opt->param_shard = NULL;
}

gaaw_status_t gaaw_zero_shard_read(gaaw_optimizer_t opt, int b, void *dst)
{
  gaaw_context_t ctx = opt->ctx;
  zero_param_shard *s = opt->param_shard;
  size_t bytes = piece_bytes(opt, b);
  if (!bytes) return GAAW_SUCCESS;
  if (!s || s->place == ZERO_PARAMS_DEVICE) {
    gaaw_tensor_t piece = gaaw_zero_param_piece(opt, b);
    GAAW_CHECK(gaaw_buffer_read(ctx, piece.buf, piece.offset, dst, bytes));
  } else if (s->place == ZERO_PARAMS_HOST) {
    memcpy(dst, host_piece(opt, b), bytes);
  } else {
    GAAW_CHECK(nvme_transfer(opt, b, 0));
    memcpy(dst, s->staging, bytes);
  }
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_zero_shard_write(gaaw_optimizer_t opt, int b, const void *src)
{
  gaaw_context_t ctx = opt->ctx;
  zero_param_shard *s = opt->param_shard;
  size_t bytes = piece_bytes(opt, b);
  if (!bytes) return GAAW_SUCCESS;
  if (!s || s->place == ZERO_PARAMS_DEVICE) {
    gaaw_tensor_t piece = gaaw_zero_param_piece(opt, b);
    GAAW_CHECK(gaaw_buffer_write(ctx, piece.buf, piece.offset, src, bytes));
  } else if (s->place == ZERO_PARAMS_HOST) {
    memcpy(host_piece(opt, b), src, bytes);
  } else {
    memcpy(s->staging, src, bytes);
    GAAW_CHECK(nvme_transfer(opt, b, 1));
  }
  return GAAW_SUCCESS;
}

/* The device's side: a device piece (piece elements of the compute dtype) to and
 * from the shard. On the device, a copy (gaaw_cast); elsewhere through host. */
gaaw_status_t gaaw_zero_shard_to_device(gaaw_optimizer_t opt, int b, gaaw_tensor_t *dst)
{
  gaaw_context_t ctx = opt->ctx;
  zero_param_shard *s = opt->param_shard;
  if (!piece_bytes(opt, b)) return GAAW_SUCCESS;
  if (!s || s->place == ZERO_PARAMS_DEVICE) {
    gaaw_tensor_t piece = gaaw_zero_param_piece(opt, b);
    GAAW_CHECK(gaaw_cast(ctx, &piece, dst));
  } else if (s->place == ZERO_PARAMS_HOST) {
    GAAW_CHECK(gaaw_buffer_write(ctx, dst->buf, dst->offset, host_piece(opt, b), piece_bytes(opt, b)));
  } else {
    GAAW_CHECK(nvme_transfer(opt, b, 0));
    GAAW_CHECK(gaaw_buffer_write(ctx, dst->buf, dst->offset, s->staging, piece_bytes(opt, b)));
  }
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_zero_shard_from_device(gaaw_optimizer_t opt, int b, const gaaw_tensor_t *src)
{
  gaaw_context_t ctx = opt->ctx;
  zero_param_shard *s = opt->param_shard;
  if (!piece_bytes(opt, b)) return GAAW_SUCCESS;
  if (!s || s->place == ZERO_PARAMS_DEVICE) {
    gaaw_tensor_t piece = gaaw_zero_param_piece(opt, b);
    GAAW_CHECK(gaaw_cast(ctx, src, &piece));
  } else if (s->place == ZERO_PARAMS_HOST) {
    GAAW_CHECK(gaaw_buffer_read(ctx, src->buf, src->offset, host_piece(opt, b), piece_bytes(opt, b)));
  } else {
    GAAW_CHECK(gaaw_buffer_read(ctx, src->buf, src->offset, s->staging, piece_bytes(opt, b)));
    GAAW_CHECK(nvme_transfer(opt, b, 1));
  }
  return GAAW_SUCCESS;
}
