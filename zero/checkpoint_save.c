/* gaaw_checkpoint_save: the state copied into host staging (all that a training
 * step waits for with checkpoint_async), each rank's file checksummed and written
 * (by a background thread with checkpoint_async), and the commit: every rank
 * agrees that it wrote, world rank 0 gathers every rank's runs into meta.json,
 * the ranks agree again, and rank 0 renames the temporary directory and then
 * replaces `latest`. Also the optimizer's checkpoint state (staging, the pending
 * save). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "backends/host_share.h"
#include "backends/runtime/log.h"
#include "backends/runtime/trace.h"
#include "zero/checkpoint_impl.h"

#define PATH_MAX_BYTES 4096
/* A rank's record for the metadata: [nruns, nsamplers, bytes], then RECORD_WIDTH per
 * run, then SAMPLER_WIDTH per sample buffer it writes. */
#define RECORD_HEAD 3
#define RECORD_WIDTH 12  /* tensor, field, offset, r0, nr, c0, nc, a, b, hash, split_axis, fused_blocks */
#define SAMPLER_WIDTH 8  /* sampler, dp_rank, offset, held, pushed, drawn, width, hash */

/* A save written (or being written) but not committed. */
struct gaaw_ckpt_pending {
  char dir[PATH_MAX_BYTES], temp[96], name[32];
  int64_t step;
  int keep, rank;
  /* what this rank writes: its file's pieces, and its record for the metadata,
   * each run's data at run_data[i] and each sample buffer's copy in
   * sampler_rows[k] (the writer fills in the checksums) */
  const void **parts;
  size_t *sizes;
  int nparts;
  int64_t *record;
  size_t record_bytes;
  const float **run_data;
  float **sampler_rows;
  int nsampler_rows;
  ckpt_meta head;             /* the metadata's scalars as at the call (rank 0) */
  gaaw_status_t written;      /* the writer's verdict */
  char error[512];            /* its first line */
  pthread_t thread;
  int threaded;
};

/* ---------------------------------------------------------------- state and staging */

static void pending_free(gaaw_ckpt_pending *p)
{
  if (!p) return;
  if (p->threaded) pthread_join(p->thread, NULL);
  free(p->parts), free(p->sizes), free(p->record), free(p->run_data);
  for (int k = 0; k < p->nsampler_rows; k++) free(p->sampler_rows[k]);
  free(p->sampler_rows);
  gaaw_ckpt_meta_free(&p->head);
  free(p);
}

void gaaw_ckpt_state_free(gaaw_optimizer_t opt)
{
  struct gaaw_ckpt_state *s = opt->ckpt;
  if (!s) return;
  if (s->pending) gaaw_log(GAAW_LOG_WARN, "checkpoint %s: not committed (the optimizer was destroyed first); "
                           "the previous checkpoint stays latest", s->pending->name);
  pending_free(s->pending);
  for (int f = 0; f < CKPT_FIELDS; f++) free(s->staging[f]);
  for (int i = 0; i < s->nentries; i++) free(s->entries[i].value);
  free(s->entries), free(s->samplers), free(s);
  opt->ckpt = NULL;
}

gaaw_status_t gaaw_ckpt_state_ensure(gaaw_optimizer_t opt)
{
  if (opt->ckpt) return GAAW_SUCCESS;
  gaaw_context_t ctx = opt->ctx;
  if (!(opt->ckpt = calloc(1, sizeof *opt->ckpt))) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate checkpoint state");
  opt->ckpt_commit = gaaw_ckpt_commit_pending;
  opt->ckpt_free = gaaw_ckpt_state_free;
  return GAAW_SUCCESS;
}

/* Host staging of the shard's fields, kept from save to save (fresh memory costs
 * a page fault per page on first touch). */
static gaaw_status_t ensure_staging(gaaw_optimizer_t opt)
{
  gaaw_context_t ctx = opt->ctx;
  struct gaaw_ckpt_state *s = opt->ckpt;
  if (s->staging_numel == opt->shard_numel && s->staging[0]) return GAAW_SUCCESS;
  for (int f = 0; f < CKPT_FIELDS; f++) {
    free(s->staging[f]);
    s->staging[f] = NULL;
  }
  s->staging_numel = 0;
  for (int f = 0; f < gaaw_ckpt_nfields(opt); f++)
    if (!(s->staging[f] = malloc(sizeof(float) * (size_t)(opt->shard_numel ? opt->shard_numel : 1))))
      GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate %lld floats of checkpoint staging",
                (long long)opt->shard_numel);
  s->staging_numel = opt->shard_numel;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_ckpt_staging(gaaw_optimizer_t opt, float ***staging)
{
  GAAW_CHECK_CTX(opt->ctx, gaaw_ckpt_state_ensure(opt));
  GAAW_CHECK_CTX(opt->ctx, ensure_staging(opt));
  *staging = opt->ckpt->staging;
  return GAAW_SUCCESS;
}

/* The fields every rank's samplers must agree on: how many, and their configs. */
int gaaw_ckpt_sampler_fields(gaaw_optimizer_t opt, gaaw_field *f)
{
  int n = opt->ckpt ? opt->ckpt->nsamplers : 0;
  uint64_t digest = 0;
  for (int i = 0; i < n; i++) {
    gaaw_sampler_state st;
    gaaw_sampler_get_state(opt->ckpt->samplers[i], &st);
    int64_t c[5] = {st.cfg.inputs, st.cfg.outputs, st.cfg.capacity, st.cfg.policy, (int64_t)st.cfg.seed};
    digest = digest * 1099511628211ull ^ gaaw_digest(c, sizeof c);
  }
  f[0] = GAAW_FIELD_INT("sample buffers added", n);
  f[1] = GAAW_FIELD_DIGEST("the sample buffers' configs", digest);
  return 2;
}

/* The shard's values and moments into the staging. */
static gaaw_status_t download_shard(gaaw_optimizer_t opt)
{
  gaaw_context_t ctx = opt->ctx;
  float **st = opt->ckpt->staging;
  for (int b = 0; b < opt->nbuckets; b++) {
    const zero_bucket *k = &opt->buckets[b];
    if (!k->piece) continue;
    float *m2 = opt->cfg.kind == GAAW_ADAMW ? st[CKPT_EXP_AVG_SQ] + k->shard_at : NULL;
    GAAW_CHECK(opt->store->read(opt, b, st[CKPT_VALUES] + k->shard_at, st[CKPT_EXP_AVG] + k->shard_at, m2));
  }
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- this rank's file */

/* Appends bytes at data to the file's pieces (merged with the last when adjacent). */
static void add_part(gaaw_ckpt_pending *p, const void *data, size_t bytes)
{
  if (p->nparts && (const char *)p->parts[p->nparts - 1] + p->sizes[p->nparts - 1] == (const char *)data)
    p->sizes[p->nparts - 1] += bytes;
  else
    p->parts[p->nparts] = data, p->sizes[p->nparts++] = bytes;
}

/* The sample buffers this rank writes (rank 0 of its model-parallel group, for
 * its replica): each copied as it is now, after the runs in the file. */
static gaaw_status_t plan_samplers(gaaw_optimizer_t opt, gaaw_ckpt_pending *p, int64_t *offset, int64_t *rec)
{
  gaaw_context_t ctx = opt->ctx;
  for (int k = 0; k < p->nsampler_rows; k++) {
    gaaw_sampler_state st;
    gaaw_sampler_get_state(opt->ckpt->samplers[k], &st);
    size_t bytes = sizeof(float) * (size_t)(st.held * st.width);
    if (!(p->sampler_rows[k] = malloc(bytes ? bytes : 1)))
      GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot copy sample buffer %d (%zu bytes)", k, bytes);
    if (bytes) memcpy(p->sampler_rows[k], st.rows, bytes);
    int64_t v[SAMPLER_WIDTH] = {k, st.dp_rank, *offset, st.held, st.pushed, (int64_t)st.drawn, st.width, 0};
    memcpy(rec + SAMPLER_WIDTH * k, v, sizeof v);
    add_part(p, p->sampler_rows[k], bytes);
    *offset += (int64_t)bytes;
  }
  return GAAW_SUCCESS;
}

/* The runs this rank writes, each field's after the other, then its sample
 * buffers, with their offsets: the file's pieces and the record. */
static gaaw_status_t plan_file(gaaw_optimizer_t opt, gaaw_ckpt_pending *p)
{
  gaaw_context_t ctx = opt->ctx;
  gaaw_model_t m = opt->model;
  ckpt_range *ranges = NULL;
  ckpt_run *runs = NULL;
  int nranges = 0, nruns = 0, nfields = gaaw_ckpt_nfields(opt);
  gaaw_status_t st = GAAW_SUCCESS;
  GAAW_CHECK_GOTO(st, gaaw_ckpt_shard_ranges(opt, &ranges, &nranges), out);
  if (!opt->is.shard_state) { /* at ZeRO 0 a bucket's group holds it whole alike: its rank 0 writes it */
    int kept = 0;
    for (int b = 0; b < nranges; b++)
      if (gaaw_zero_rank(opt, &opt->buckets[b]) == 0) ranges[kept++] = ranges[b];
    nranges = kept;
  }
  GAAW_CHECK_GOTO(st, gaaw_ckpt_owned_runs(m, ranges, nranges, 1, &runs, &nruns), out);
  gaaw_sampler_state first;
  if (opt->ckpt->nsamplers) gaaw_sampler_get_state(opt->ckpt->samplers[0], &first);
  p->nsampler_rows = opt->ckpt->nsamplers && first.writer ? opt->ckpt->nsamplers : 0;
  size_t total = (size_t)nruns * (size_t)nfields, nsamp = (size_t)p->nsampler_rows;
  p->record_bytes = sizeof(int64_t) * (RECORD_HEAD + RECORD_WIDTH * total + SAMPLER_WIDTH * nsamp);
  p->record = malloc(p->record_bytes);
  p->run_data = malloc(sizeof *p->run_data * (total + 1));
  p->parts = malloc(sizeof *p->parts * (total + nsamp + 1));
  p->sizes = malloc(sizeof *p->sizes * (total + nsamp + 1));
  p->sampler_rows = calloc(nsamp + 1, sizeof *p->sampler_rows);
  if (!p->record || !p->run_data || !p->parts || !p->sizes || !p->sampler_rows) {
    st = gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__, "cannot plan %zu runs", total);
    goto out;
  }
  int64_t offset = 0, *rec = p->record + RECORD_HEAD;
  for (int f = 0, i = 0; f < nfields; f++)
    for (int k = 0; k < nruns; k++, i++) {
      const ckpt_run *r = &runs[k];
      const float *data = opt->ckpt->staging[f] + r->at;
      size_t bytes = sizeof(float) * (size_t)(r->b - r->a);
      const gaaw_param *prm = &m->params.items[gaaw_params_find(&m->params, m->catalog[r->tensor].name)];
      int64_t v[RECORD_WIDTH] = {r->tensor, f, offset, r->r0, r->nr, r->c0, r->nc, r->a, r->b, 0,
                                 prm->split_axis, prm->blocks.n};
      memcpy(rec + RECORD_WIDTH * i, v, sizeof v);
      p->run_data[i] = data;
      add_part(p, data, bytes);
      offset += (int64_t)bytes;
    }
  GAAW_CHECK_GOTO(st, plan_samplers(opt, p, &offset, rec + RECORD_WIDTH * total), out);
  p->record[0] = (int64_t)total;
  p->record[1] = (int64_t)nsamp;
  p->record[2] = offset;
out:
  free(ranges), free(runs);
  return st;
}

/* This rank's runs checksummed and its file written into the temporary
 * directory. POSIX only: it runs on the background thread with checkpoint_async,
 * and reports into p (the thread's failures go to its own thread-local record). */
static void *write_files(void *arg)
{
  gaaw_ckpt_pending *p = arg;
  char path[PATH_MAX_BYTES + 200];
  for (int64_t i = 0; i < p->record[0]; i++) {
    int64_t *v = p->record + RECORD_HEAD + RECORD_WIDTH * i;
    v[9] = (int64_t)XXH3_64bits(p->run_data[i], sizeof(float) * (size_t)(v[8] - v[7]));
  }
  for (int64_t k = 0; k < p->record[1]; k++) {
    int64_t *v = p->record + RECORD_HEAD + RECORD_WIDTH * p->record[0] + SAMPLER_WIDTH * k;
    v[7] = (int64_t)XXH3_64bits(p->sampler_rows[k], sizeof(float) * (size_t)(v[3] * v[6]));
  }
  gaaw_status_t st = GAAW_SUCCESS;
  if (p->nparts) {
    snprintf(path, sizeof path, "%s/%s/rank-%05d.bin", p->dir, p->temp, p->rank);
    st = gaaw_ckpt_write_file(NULL, path, p->parts, p->sizes, p->nparts);
  }
  if (st != GAAW_SUCCESS) gaaw_error_first_line(NULL, p->error, sizeof p->error);
  p->written = st;
  return NULL;
}

/* ---------------------------------------------------------------- the metadata, on rank 0 */

/* The tensors (the catalog, with the split each was seen with), files and runs
 * from every rank's record. */
static gaaw_status_t tables_from_records(gaaw_optimizer_t opt, const int64_t *all, const size_t *counts, ckpt_meta *meta)
{
  gaaw_context_t ctx = opt->ctx;
  gaaw_model_t m = opt->model;
  int64_t nruns = 0, nparts = 0;
  const int64_t *rec = all;
  for (int r = 0; r < ctx->size; rec += counts[r++] / sizeof(int64_t)) nruns += rec[0], nparts += rec[1];
  meta->ntensors = m->ncatalog;
  meta->tensors = calloc((size_t)m->ncatalog + 1, sizeof *meta->tensors);
  meta->files = calloc((size_t)ctx->size, sizeof *meta->files);
  meta->runs = calloc((size_t)nruns + 1, sizeof *meta->runs);
  meta->sampler_parts = calloc((size_t)nparts + 1, sizeof *meta->sampler_parts);
  if (!meta->tensors || !meta->files || !meta->runs || !meta->sampler_parts)
    GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot build the metadata");
  for (int t = 0; t < m->ncatalog; t++) {
    ckpt_tensor *e = &meta->tensors[t];
    snprintf(e->name, sizeof e->name, "%s", m->catalog[t].name);
    e->ndim = m->catalog[t].ndim;
    e->shape[0] = m->catalog[t].shape[0], e->shape[1] = m->catalog[t].shape[1];
    e->split_axis = -1, e->fused_blocks = 1;
  }
  rec = all;
  for (int r = 0; r < ctx->size; rec += counts[r++] / sizeof(int64_t)) {
    if (rec[0] <= 0 && rec[1] <= 0) continue;
    int file = meta->nfiles++;
    meta->files[file] = (ckpt_file){r, rec[2]};
    const int64_t *v = rec + RECORD_HEAD;
    for (int64_t i = 0; i < rec[0]; i++, v += RECORD_WIDTH) {
      meta->runs[meta->nruns++] = (ckpt_run){.tensor = (int)v[0], .field = (int)v[1], .at = v[2], .r0 = v[3],
                                             .nr = v[4], .c0 = v[5], .nc = v[6], .a = v[7], .b = v[8],
                                             .file = file, .hash = (uint64_t)v[9]};
      meta->tensors[v[0]].split_axis = (int)v[10];
      meta->tensors[v[0]].fused_blocks = (int)v[11];
    }
    for (int64_t k = 0; k < rec[1]; k++, v += SAMPLER_WIDTH)
      meta->sampler_parts[meta->nsampler_parts++] =
        (ckpt_sampler_part){.sampler = (int)v[0], .dp_rank = (int)v[1], .file = file, .offset = v[2], .held = v[3],
                            .pushed = v[4], .drawn = (uint64_t)v[5], .width = v[6], .hash = (uint64_t)v[7]};
  }
  return GAAW_SUCCESS;
}

/* The metadata's scalars as at the call: what a step after an asynchronous save
 * changes must not reach it. */
static gaaw_status_t snapshot_head(gaaw_optimizer_t opt, ckpt_meta *h)
{
  gaaw_context_t ctx = opt->ctx;
  gaaw_model_t m = opt->model;
  gaaw_ckpt_describe(m, h);
  h->step = opt->steps;
  h->zero_stage = opt->cfg.zero_stage;
  snprintf(h->optimizer, sizeof h->optimizer, "%s", gaaw_zero_kind_name(opt->cfg.kind));
  h->steps = opt->steps, h->updates = opt->updates;
  h->lr = opt->lr, h->grad_norm = opt->grad_norm, h->loss_scale = opt->loss_scale;
  h->skipped = opt->skipped, h->good_steps = opt->good_steps, h->overflows_since_change = opt->overflows_since_change;
  h->nfields = gaaw_ckpt_nfields(opt);
  h->norm_count = m->norm.count;
  h->norm_n = m->norm.mean ? m->seq_inputs + m->seq_outputs : 0;
  h->norm_mean = calloc((size_t)h->norm_n + 1, sizeof(double));
  h->norm_m2 = calloc((size_t)h->norm_n + 1, sizeof(double));
  h->entries = calloc((size_t)opt->ckpt->nentries + 1, sizeof *h->entries);
  if (!h->norm_mean || !h->norm_m2 || !h->entries) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot copy the state");
  if (h->norm_n) memcpy(h->norm_mean, m->norm.mean, sizeof(double) * (size_t)h->norm_n);
  if (h->norm_n) memcpy(h->norm_m2, m->norm.m2, sizeof(double) * (size_t)h->norm_n);
  h->nsamplers = opt->ckpt->nsamplers, h->sampler_dp = opt->replicas;
  if (!(h->sampler_cfg = calloc((size_t)h->nsamplers + 1, sizeof *h->sampler_cfg)))
    GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot copy the samplers' configs");
  for (int k = 0; k < h->nsamplers; k++) {
    gaaw_sampler_state st;
    gaaw_sampler_get_state(opt->ckpt->samplers[k], &st);
    h->sampler_cfg[k] = st.cfg;
  }
  for (int i = 0; i < opt->ckpt->nentries; i++, h->nentries++) {
    h->entries[i] = opt->ckpt->entries[i];
    if (!(h->entries[i].value = strdup(opt->ckpt->entries[i].value)))
      GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot copy the entries");
  }
  return GAAW_SUCCESS;
}

/* Rank 0: every rank's record into meta.json in the temporary directory. */
static gaaw_status_t write_meta(gaaw_optimizer_t opt, gaaw_ckpt_pending *p, const int64_t *all, const size_t *counts)
{
  gaaw_context_t ctx = opt->ctx;
  ckpt_meta *meta = &p->head;
  char dir[PATH_MAX_BYTES + 100], path[PATH_MAX_BYTES + 200], *text = NULL;
  size_t bytes = 0;
  gaaw_status_t st = tables_from_records(opt, all, counts, meta);
  if (st == GAAW_SUCCESS) st = gaaw_ckpt_meta_write(ctx, meta, &text, &bytes);
  snprintf(dir, sizeof dir, "%s/%s", p->dir, p->temp);
  snprintf(path, sizeof path, "%s/meta.json", dir);
  const void *parts[1] = {text};
  if (st == GAAW_SUCCESS) st = gaaw_ckpt_write_file(ctx, path, parts, &bytes, 1);
  if (st == GAAW_SUCCESS) st = gaaw_ckpt_fsync_dir(ctx, dir);
  free(text);
  return st;
}

/* ---------------------------------------------------------------- the commit */

/* Rank 0 commits what every rank wrote: rename, then `latest`, then keep. */
static gaaw_status_t commit_on_root(gaaw_context_t ctx, const gaaw_ckpt_pending *p)
{
  gaaw_ckpt_test_kill("before_rename");
  GAAW_CHECK(gaaw_ckpt_commit_rename(ctx, p->dir, p->temp, p->name));
  GAAW_CHECK(gaaw_ckpt_fsync_dir(ctx, p->dir));
  gaaw_ckpt_test_kill("after_rename");
  GAAW_CHECK(gaaw_ckpt_write_latest(ctx, p->dir, p->name));
  /* the save is committed: a checkpoint that cannot be removed is only left over */
  if (gaaw_ckpt_prune(ctx, p->dir, p->keep, p->step) != GAAW_SUCCESS) {
    char why[512];
    gaaw_error_first_line(ctx, why, sizeof why);
    gaaw_log(GAAW_LOG_WARN, "checkpoint_keep: %s (the save itself is committed)", why);
  }
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_ckpt_commit_pending(gaaw_optimizer_t opt)
{
  gaaw_context_t ctx = opt->ctx;
  gaaw_ckpt_pending *p = opt->ckpt ? opt->ckpt->pending : NULL;
  if (!p) return GAAW_SUCCESS;
  double t0 = gaaw_clock_seconds();
  opt->ckpt->pending = NULL;
  if (p->threaded) pthread_join(p->thread, NULL);
  p->threaded = 0;
  int64_t *all = NULL;
  size_t *counts = NULL;
  gaaw_status_t st = p->written;
  if (st != GAAW_SUCCESS) st = gaaw_error_raise(ctx, st, __FILE__, __LINE__, __func__, "%s", p->error);
  GAAW_CHECK_GOTO(st, gaaw_agree_world(ctx, st, "writing the checkpoint's files", NULL, 0), out);
  GAAW_CHECK_GOTO(st, gaaw_gather_bytes(ctx, p->record, p->record_bytes, 0, (void **)&all, &counts), out);
  if (ctx->rank == 0) st = write_meta(opt, p, all, counts);
  GAAW_CHECK_GOTO(st, gaaw_agree_world(ctx, st, "writing the checkpoint's metadata", NULL, 0), out);
  if (ctx->rank == 0) st = commit_on_root(ctx, p);
  GAAW_CHECK_GOTO(st, gaaw_agree_world(ctx, st, "committing the checkpoint", NULL, 0), out);
  gaaw_log(GAAW_LOG_INFO, "checkpoint %s/%s committed", p->dir, p->name);
  if (gaaw_trace_on(ctx))
    gaaw_trace_span(ctx, gaaw_trace_lane(ctx, "checkpoint"), "checkpoint commit", t0,
                    "\"step\":%lld,\"bytes\":%lld", (long long)p->step, (long long)p->record[2]);
out:
  free(all), free(counts);
  pending_free(p);
  return st;
}

/* ---------------------------------------------------------------- the save */

/* The local checks of a save (the agreement follows). */
static gaaw_status_t check_save(gaaw_optimizer_t opt, const char *dir)
{
  gaaw_context_t ctx = opt->ctx;
  GAAW_ARG_NOT_NULL(ctx, dir);
  GAAW_ARG_CHECK(ctx, dir[0] != '\0' && strlen(dir) < PATH_MAX_BYTES - 128, "the checkpoint directory must be a "
                 "path of 1..%d bytes", PATH_MAX_BYTES - 129);
  if (opt->backward_passes > 0)
    GAAW_FAIL(ctx, GAAW_ERR_STATE, "a checkpoint cannot be saved between a backward pass and gaaw_optimizer_step "
              "(%d backward passes are in flight)", opt->backward_passes);
  return GAAW_SUCCESS;
}

/* Everything the call itself waits for: the staging, this rank's plan, the
 * metadata's scalars and the temporary directory every rank writes into.
 * Collective over world. */
static gaaw_status_t prepare(gaaw_optimizer_t opt, const char *dir, gaaw_ckpt_pending *p)
{
  gaaw_context_t ctx = opt->ctx;
  gaaw_status_t st = GAAW_SUCCESS;
  snprintf(p->dir, sizeof p->dir, "%s", dir);
  p->step = opt->steps;
  p->rank = ctx->rank;
  p->keep = (int)gaaw_ctx_int(ctx, "checkpoint_keep");
  snprintf(p->name, sizeof p->name, "step-%08lld", (long long)p->step);
  float **staging;
  GAAW_CHECK_GOTO(st, gaaw_ckpt_staging(opt, &staging), agree);
  GAAW_CHECK_GOTO(st, download_shard(opt), agree);
  GAAW_CHECK_GOTO(st, plan_file(opt, p), agree);
  if (ctx->rank == 0) {
    GAAW_CHECK_GOTO(st, snapshot_head(opt, &p->head), agree);
    GAAW_CHECK_GOTO(st, gaaw_ckpt_mkdirs(ctx, dir), agree);
    GAAW_CHECK_GOTO(st, gaaw_ckpt_make_temp(ctx, dir, p->step, p->temp, sizeof p->temp), agree);
  }
agree:
  GAAW_CHECK(gaaw_agree_world(ctx, st, "preparing the checkpoint", NULL, 0));
  char *temp = p->temp;
  size_t temp_bytes = strlen(p->temp) + 1;
  GAAW_CHECK(gaaw_share_bytes(ctx, (void **)&temp, &temp_bytes, 0));
  if (temp != p->temp) {
    snprintf(p->temp, sizeof p->temp, "%.*s", (int)temp_bytes, temp);
    free(temp);
  }
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_checkpoint_save(gaaw_optimizer_t opt, const char *dir)
{
  GAAW_ARG_NOT_NULL(NULL, opt);
  gaaw_context_t ctx = opt->ctx;
  gaaw_status_t st = check_save(opt, dir);
  if (st == GAAW_SUCCESS) st = gaaw_ckpt_state_ensure(opt);
  int async = gaaw_ctx_bool(ctx, "checkpoint_async");
  double t0 = gaaw_clock_seconds();
  gaaw_field fields[5] = {GAAW_FIELD_TEXT("dir", st == GAAW_SUCCESS ? dir : ""),
                          GAAW_FIELD_INT("checkpoint_async", async),
                          GAAW_FIELD_INT("checkpoint_keep", gaaw_ctx_int(ctx, "checkpoint_keep"))};
  int n = st == GAAW_SUCCESS ? 3 + gaaw_ckpt_sampler_fields(opt, fields + 3) : 0;
  gaaw_ckpt_pending *p = st == GAAW_SUCCESS ? calloc(1, sizeof *p) : NULL;
  if (st == GAAW_SUCCESS && !p)
    st = gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__, "cannot allocate a save"), n = 0;
  st = gaaw_agree_world(ctx, st, "gaaw_checkpoint_save", fields, n);
  if (st == GAAW_SUCCESS) st = gaaw_ckpt_commit_pending(opt); /* the previous save first: it owns the staging */
  if (st == GAAW_SUCCESS) st = prepare(opt, dir, p);
  if (st != GAAW_SUCCESS) {
    pending_free(p);
    return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  }
  opt->ckpt->pending = p;
  if (gaaw_trace_on(ctx)) /* the stall: staging copy and plan (and with async, all the call waits for) */
    gaaw_trace_span(ctx, gaaw_trace_lane(ctx, "checkpoint"), "checkpoint prepare", t0, "\"step\":%lld",
                    (long long)p->step);
  if (!async) {
    double t_write = gaaw_clock_seconds();
    write_files(p);
    if (gaaw_trace_on(ctx))
      gaaw_trace_span(ctx, gaaw_trace_lane(ctx, "checkpoint"), "checkpoint write", t_write, "\"bytes\":%lld",
                      (long long)p->record[2]);
    return gaaw_ckpt_commit_pending(opt);
  }
  /* every rank commits at the same later call, whether its thread started or not */
  if (pthread_create(&p->thread, NULL, write_files, p) == 0) p->threaded = 1;
  else write_files(p);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_checkpoint_wait(gaaw_optimizer_t opt)
{
  GAAW_ARG_NOT_NULL(NULL, opt);
  GAAW_CHECK_CTX(opt->ctx, gaaw_agree_world(opt->ctx, GAAW_SUCCESS, "gaaw_checkpoint_wait", NULL, 0));
  return gaaw_ckpt_commit_pending(opt);
}
