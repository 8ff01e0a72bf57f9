/* The nvme store (offload_optimizer=nvme, ZeRO-Infinity): the shard's f32 master
 * weights and moments in a file under nvme_path (zero/nvme_file.h), one record
 * per bucket piece:
 *   record b: [master (piece) | m1 (piece) | m2 (piece, AdamW)] f32, padded to
 *             GAAW_NVME_ALIGN, at record_at[b]
 * Host memory holds GAAW_NVME_SLOTS records, bucket b in slot b % SLOTS, so that
 * the step overlaps I/O with CPU Adam: while piece b is updated, piece b + 1 is
 * read and piece b - 1 written. A slot whose write completed still holds what the
 * file holds, so with few buckets nothing is read again. The update itself is the
 * host store's: the gradient piece to host, CPU Adam, the compute-dtype piece back. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/runtime/allocator.h"
#include "backends/runtime/context_impl.h"
#include "zero/nvme_file.h"
#include "zero/zero_impl.h"

typedef enum { SLOT_EMPTY = 0, SLOT_READING, SLOT_READY, SLOT_WRITING } slot_state;

typedef struct {
  gaaw_nvme_file *file;
  uint64_t *record_at;       /* (nbuckets + 1) file offsets; the last is the file's size */
  float *slot[GAAW_NVME_SLOTS];
  int slot_bucket[GAAW_NVME_SLOTS];
  slot_state state[GAAW_NVME_SLOTS];
  int nstate;                /* f32 arrays per element: master, m1 and (AdamW) m2 */
  void *grad, *out;          /* (largest piece) in the compute dtype */
  gaaw_cpu_simd simd;
} nvme_store;

static size_t record_bytes(const nvme_store *s, int64_t piece)
{
  size_t raw = sizeof(float) * (size_t)s->nstate * (size_t)piece;
  return (raw + GAAW_NVME_ALIGN - 1) / GAAW_NVME_ALIGN * GAAW_NVME_ALIGN;
}

/* Waits for slot i's transfer; a completed read or write leaves it READY. */
static gaaw_status_t settle(gaaw_optimizer_t opt, nvme_store *s, int i)
{
  gaaw_context_t ctx = opt->ctx;
  if (s->state[i] != SLOT_READING && s->state[i] != SLOT_WRITING) return GAAW_SUCCESS;
  gaaw_status_t st = gaaw_nvme_wait(s->file, i);
  s->state[i] = st == GAAW_SUCCESS ? SLOT_READY : SLOT_EMPTY;
  GAAW_CHECK(st);
  return GAAW_SUCCESS;
}

static gaaw_status_t start(gaaw_optimizer_t opt, nvme_store *s, int b, int write)
{
  gaaw_context_t ctx = opt->ctx;
  int i = b % GAAW_NVME_SLOTS;
  s->slot_bucket[i] = b;
  s->state[i] = write ? SLOT_WRITING : SLOT_READING;
  gaaw_status_t st = gaaw_nvme_start(s->file, i, write, s->slot[i], (size_t)(s->record_at[b + 1] - s->record_at[b]),
                                     s->record_at[b]);
  if (st != GAAW_SUCCESS) s->state[i] = SLOT_EMPTY;
  GAAW_CHECK(st);
  return GAAW_SUCCESS;
}

/* Starts reading bucket b into its slot unless the slot holds it already. */
static gaaw_status_t prefetch(gaaw_optimizer_t opt, nvme_store *s, int b)
{
  gaaw_context_t ctx = opt->ctx;
  int i = b % GAAW_NVME_SLOTS;
  if (b >= opt->nbuckets || !opt->buckets[b].piece) return GAAW_SUCCESS;
  if (s->slot_bucket[i] == b && s->state[i] != SLOT_EMPTY) return GAAW_SUCCESS;
  GAAW_CHECK(settle(opt, s, i)); /* bucket b - SLOTS's write */
  GAAW_CHECK(start(opt, s, b, 0));
  return GAAW_SUCCESS;
}

/* Bucket b's record, in its slot and complete: master, m1, m2 (NULL for SGD). */
static gaaw_status_t fetch(gaaw_optimizer_t opt, nvme_store *s, int b, float **w, float **m1, float **m2)
{
  gaaw_context_t ctx = opt->ctx;
  int i = b % GAAW_NVME_SLOTS;
  int64_t piece = opt->buckets[b].piece;
  GAAW_CHECK(prefetch(opt, s, b));
  GAAW_CHECK(settle(opt, s, i));
  *w = s->slot[i];
  *m1 = s->slot[i] + piece;
  *m2 = s->nstate == 3 ? s->slot[i] + 2 * piece : NULL;
  return GAAW_SUCCESS;
}

/* Every transfer finished (the step's end, before a checkpoint's reads). */
static gaaw_status_t settle_all(gaaw_optimizer_t opt, nvme_store *s)
{
  gaaw_status_t first = GAAW_SUCCESS;
  for (int i = 0; i < GAAW_NVME_SLOTS; i++) {
    gaaw_status_t st = settle(opt, s, i);
    if (first == GAAW_SUCCESS) first = st;
  }
  return first;
}

static gaaw_status_t nvme_update(gaaw_optimizer_t opt, int b, const gaaw_cpu_update_args *args)
{
  gaaw_context_t ctx = opt->ctx;
  nvme_store *s = opt->store_state;
  const zero_bucket *k = &opt->buckets[b];
  if (!k->piece) return GAAW_SUCCESS;
  float *w, *m1, *m2;
  GAAW_CHECK(fetch(opt, s, b, &w, &m1, &m2));
  GAAW_CHECK(prefetch(opt, s, b + 1)); /* read while this piece is updated */
  zero_cpu_piece p = {w, m1, m2, s->grad, s->out, s->simd};
  GAAW_CHECK(gaaw_zero_cpu_update_piece(opt, b, args, &p));
  GAAW_CHECK(start(opt, s, b, 1)); /* written while the next piece is updated */
  return GAAW_SUCCESS;
}

static gaaw_status_t nvme_finish(gaaw_optimizer_t opt)
{
  return settle_all(opt, opt->store_state);
}

static gaaw_status_t nvme_read(gaaw_optimizer_t opt, int b, float *values, float *m1, float *m2)
{
  gaaw_context_t ctx = opt->ctx;
  nvme_store *s = opt->store_state;
  const zero_bucket *k = &opt->buckets[b];
  size_t bytes = sizeof(float) * (size_t)k->piece;
  float *w, *sm1, *sm2;
  if (!k->piece) return GAAW_SUCCESS;
  GAAW_CHECK(fetch(opt, s, b, &w, &sm1, &sm2));
  memcpy(values, w, bytes);
  memcpy(m1, sm1, bytes);
  if (m2) memcpy(m2, sm2, bytes);
  return GAAW_SUCCESS;
}

/* Bucket b's slot, idle and about to be filled: its master weights at [0, piece),
 * m1 after them, m2 after m1. */
static gaaw_status_t claim_slot(gaaw_optimizer_t opt, nvme_store *s, int b, float **record)
{
  gaaw_context_t ctx = opt->ctx;
  int i = b % GAAW_NVME_SLOTS;
  GAAW_CHECK(settle(opt, s, i));
  s->state[i] = SLOT_EMPTY; /* while it is being filled */
  *record = s->slot[i];
  return GAAW_SUCCESS;
}

/* Bucket b's record from values and moments (NULL: zero) into its slot and the
 * file, waiting for the write (checkpoint loads). */
static gaaw_status_t store_record(gaaw_optimizer_t opt, nvme_store *s, int b, const float *values, const float *m1,
                                  const float *m2)
{
  gaaw_context_t ctx = opt->ctx;
  int64_t piece = opt->buckets[b].piece;
  size_t bytes = sizeof(float) * (size_t)piece;
  float *record = NULL;
  GAAW_CHECK(claim_slot(opt, s, b, &record));
  memcpy(record, values, bytes);
  memcpy(record + piece, m1, bytes);
  if (s->nstate == 3) memcpy(record + 2 * piece, m2, bytes);
  GAAW_CHECK(start(opt, s, b, 1));
  GAAW_CHECK(settle(opt, s, b % GAAW_NVME_SLOTS));
  return GAAW_SUCCESS;
}

static gaaw_status_t nvme_write(gaaw_optimizer_t opt, int b, const float *values, const float *m1, const float *m2)
{
  gaaw_context_t ctx = opt->ctx;
  nvme_store *s = opt->store_state;
  const zero_bucket *k = &opt->buckets[b];
  if (!k->piece) return GAAW_SUCCESS;
  GAAW_CHECK(store_record(opt, s, b, values, m1, m2));
  GAAW_CHECK(gaaw_zero_param_piece_from_f32(opt, b, values, s->out));
  return GAAW_SUCCESS;
}

/* What nvme_create allocates: nothing on the device; on host the slots (the
 * largest record each) and two compute-dtype pieces; in the file every record. */
static void nvme_bytes(gaaw_optimizer_t opt, zero_store_bytes *out)
{
  nvme_store s = {.nstate = 1 + opt->is.moments};
  size_t piece = gaaw_dtype_size(opt->dtype) * (size_t)gaaw_zero_largest_piece(opt);
  memset(out, 0, sizeof *out);
  out->host = (int64_t)(GAAW_NVME_SLOTS * record_bytes(&s, gaaw_zero_largest_piece(opt)) +
                        2 * ((piece + GAAW_NVME_ALIGN - 1) / GAAW_NVME_ALIGN * GAAW_NVME_ALIGN));
  for (int b = 0; b < opt->nbuckets; b++) out->nvme += (int64_t)record_bytes(&s, opt->buckets[b].piece);
}

static gaaw_status_t nvme_create(gaaw_optimizer_t opt)
{
  gaaw_context_t ctx = opt->ctx;
  nvme_store *s = calloc(1, sizeof *s);
  if (!s) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate the nvme store");
  opt->store_state = s;
  s->simd = (gaaw_cpu_simd)gaaw_cpu_simd_parse(gaaw_ctx_string(ctx, "cpu_simd")); /* checked at create */
  s->nstate = 1 + opt->is.moments;
  s->record_at = calloc((size_t)opt->nbuckets + 1, sizeof *s->record_at);
  size_t largest_record = record_bytes(s, gaaw_zero_largest_piece(opt));
  size_t piece = gaaw_dtype_size(opt->dtype) * (size_t)gaaw_zero_largest_piece(opt);
  s->grad = gaaw_host_alloc(ctx, piece); /* pinned on CUDA, page-aligned for O_DIRECT */
  s->out = gaaw_host_alloc(ctx, piece);
  int ok = s->record_at && s->grad && s->out;
  for (int i = 0; i < GAAW_NVME_SLOTS; i++) {
    s->slot[i] = gaaw_host_alloc(ctx, largest_record);
    s->slot_bucket[i] = -1;
    ok = ok && s->slot[i];
  }
  if (!ok)
    GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "offload_optimizer=nvme: cannot allocate %zu bytes of host buffers",
              GAAW_NVME_SLOTS * largest_record + 2 * piece);
  for (int b = 0; b < opt->nbuckets; b++)
    s->record_at[b + 1] = s->record_at[b] + record_bytes(s, opt->buckets[b].piece);
  GAAW_CHECK(gaaw_nvme_create(ctx, "optimizer", (size_t)s->record_at[opt->nbuckets], &s->file));
  /* the master weights from the parameters, the moments zero; written behind */
  for (int b = 0; b < opt->nbuckets; b++) {
    int64_t piece = opt->buckets[b].piece;
    float *record = NULL;
    if (!piece) continue;
    GAAW_CHECK(claim_slot(opt, s, b, &record));
    GAAW_CHECK(gaaw_zero_param_piece_to_f32(opt, b, s->out, record));
    memset(record + piece, 0, sizeof(float) * (size_t)(s->nstate - 1) * (size_t)piece);
    GAAW_CHECK(start(opt, s, b, 1));
  }
  GAAW_CHECK(settle_all(opt, s));
  return GAAW_SUCCESS;
}

static void nvme_destroy(gaaw_optimizer_t opt)
{
  nvme_store *s = opt->store_state;
  if (!s) return;
  gaaw_nvme_close(&s->file); /* waits for what is in flight into the slots */
  for (int i = 0; i < GAAW_NVME_SLOTS; i++) gaaw_host_free(opt->ctx, s->slot[i]);
  free(s->record_at);
  gaaw_host_free(opt->ctx, s->grad);
  gaaw_host_free(opt->ctx, s->out);
  free(s);
  opt->store_state = NULL;
}

const zero_store_ops gaaw_zero_store_nvme = {
  .name = "nvme",
  .create = nvme_create,
  .update = nvme_update,
  .finish = nvme_finish,
  .read = nvme_read,
  .write = nvme_write,
  .destroy = nvme_destroy,
  .local_failures = 1,
  .bytes = nvme_bytes,
};
