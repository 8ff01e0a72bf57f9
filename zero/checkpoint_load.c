/* gaaw_checkpoint_load and gaaw_model_load: which checkpoint (latest, or with
 * checkpoint_fallback the newest intact one), its metadata checked against the
 * model, the stored runs that meet what this rank owns read once each, checked
 * and copied into host staging, and only when every rank has all of its state,
 * the staging uploaded. A failure anywhere before the upload changes nothing. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "backends/host_share.h"
#include "backends/runtime/log.h"
#include "backends/runtime/trace.h"
#include "zero/checkpoint_impl.h"

#define PATH_MAX_BYTES 4096

/* What a load fills: a model, and its optimizer when there is one. */
typedef struct {
  gaaw_context_t ctx;
  gaaw_model_t m;
  gaaw_optimizer_t opt;  /* NULL: parameters only (gaaw_model_load) */
  int nfields;
  ckpt_range *ranges;
  int nranges;
  ckpt_run *runs;        /* what this rank holds, as runs over the staging */
  int nruns;
  int64_t numel;         /* staging elements of each field */
  float *staging[CKPT_FIELDS];
  int borrowed;          /* the staging is the optimizer's (kept from save to save) */
  float **sampler_rows;  /* each added sample buffer's rows of this replica, read */
  const ckpt_sampler_part **sampler_part;
  int nsamplers;
} load_target;

/* One stored run that meets one owned run, for one field. */
typedef struct {
  int64_t stored;
  int owned;
} load_pair;

/* ---------------------------------------------------------------- the model against the metadata */

/* Fields that may differ between the saved model and this one: the layout's. */
static int layout_field(const char *name)
{
  return !strcmp(name, "dtype") || !strcmp(name, "seed") || !strcmp(name, "sequence_parallel");
}

static gaaw_status_t check_model(const load_target *t, const ckpt_meta *meta)
{
  gaaw_context_t ctx = t->ctx;
  ckpt_meta here;
  memset(&here, 0, sizeof here);
  gaaw_ckpt_describe(t->m, &here);
  GAAW_ARG_CHECK(ctx, !strcmp(here.model_kind, meta->model_kind),
                 "the checkpoint is of another model: a %s there, a %s here", meta->model_kind, here.model_kind);
  for (int i = 0; i < here.nconfig; i++) {
    if (layout_field(here.config_names[i])) continue;
    int j = 0;
    while (j < meta->nconfig && strcmp(meta->config_names[j], here.config_names[i]) != 0) j++;
    GAAW_ARG_CHECK(ctx, j < meta->nconfig, "the checkpoint is of another model: it has no %s", here.config_names[i]);
    GAAW_ARG_CHECK(ctx, !strcmp(meta->config_values[j], here.config_values[i]),
                   "the checkpoint is of another model: %s is %s there, %s here", here.config_names[i],
                   meta->config_values[j], here.config_values[i]);
  }
  if (t->opt) {
    const char *kind = gaaw_zero_kind_name(t->opt->cfg.kind);
    GAAW_ARG_CHECK(ctx, !strcmp(meta->optimizer, kind), "the checkpoint is of another optimizer: %s there, %s here",
                   meta->optimizer, kind);
    GAAW_ARG_CHECK(ctx, meta->nfields >= t->nfields, "the checkpoint holds %d fields, the optimizer needs %d",
                   meta->nfields, t->nfields);
  }
  int n = t->m->seq_inputs + t->m->seq_outputs;
  if (meta->norm_n != 0 && meta->norm_n != n)
    GAAW_FAIL(ctx, GAAW_ERR_CORRUPT, "meta.json: %d normalisation statistics for a model of %d features",
              meta->norm_n, n);
  return GAAW_SUCCESS;
}

/* map[i]: the metadata's tensor for catalog entry i, shapes checked. */
static gaaw_status_t map_tensors(const load_target *t, const ckpt_meta *meta, int *map)
{
  gaaw_context_t ctx = t->ctx;
  for (int i = 0; i < t->m->ncatalog; i++) {
    const gaaw_param_entry *e = &t->m->catalog[i];
    map[i] = -1;
    for (int j = 0; j < meta->ntensors && map[i] < 0; j++)
      if (!strcmp(meta->tensors[j].name, e->name)) map[i] = j;
    if (map[i] < 0) GAAW_FAIL(ctx, GAAW_ERR_CORRUPT, "meta.json has no tensor %s", e->name);
    const ckpt_tensor *s = &meta->tensors[map[i]];
    if (s->ndim != e->ndim || s->shape[0] != e->shape[0] || (e->ndim == 2 && s->shape[1] != e->shape[1]))
      GAAW_FAIL(ctx, GAAW_ERR_CORRUPT, "meta.json: tensor %s has another shape than the model's", e->name);
  }
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- reading the runs */

/* The stored runs of each (tensor, field), as index lists: order[start[k] ..
 * start[k + 1]) with k = tensor * CKPT_FIELDS + field. */
typedef struct {
  int64_t *order, *start;
} run_index;

/* qsort has no context argument: the metadata being sorted, one per thread */
static _Thread_local const ckpt_meta *sort_meta;
static int by_key(const void *a, const void *b)
{
  const ckpt_run *x = &sort_meta->runs[*(const int64_t *)a], *y = &sort_meta->runs[*(const int64_t *)b];
  int kx = x->tensor * CKPT_FIELDS + x->field, ky = y->tensor * CKPT_FIELDS + y->field;
  return kx < ky ? -1 : kx > ky;
}

static int by_place(const void *a, const void *b)
{
  const load_pair *p = a, *q = b;
  const ckpt_run *x = &sort_meta->runs[p->stored], *y = &sort_meta->runs[q->stored];
  if (x->file != y->file) return x->file < y->file ? -1 : 1;
  if (x->at != y->at) return x->at < y->at ? -1 : 1;
  return p->owned < q->owned ? -1 : p->owned > q->owned;
}

static gaaw_status_t index_runs(gaaw_context_t ctx, const ckpt_meta *meta, run_index *ix)
{
  size_t keys = (size_t)meta->ntensors * CKPT_FIELDS;
  ix->order = malloc(sizeof *ix->order * (size_t)(meta->nruns + 1));
  ix->start = calloc(keys + 2, sizeof *ix->start);
  if (!ix->order || !ix->start) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot index %lld runs", (long long)meta->nruns);
  for (int64_t i = 0; i < meta->nruns; i++) ix->order[i] = i;
  sort_meta = meta; /* qsort has no context argument; loads are not concurrent within a process */
  qsort(ix->order, (size_t)meta->nruns, sizeof *ix->order, by_key);
  for (int64_t i = 0; i < meta->nruns; i++) {
    const ckpt_run *r = &meta->runs[ix->order[i]];
    ix->start[(size_t)(r->tensor * CKPT_FIELDS + r->field) + 1]++;
  }
  for (size_t k = 0; k < keys; k++) ix->start[k + 1] += ix->start[k];
  return GAAW_SUCCESS;
}

/* Every (stored, owned) pair that shares elements, in file order. The owned run
 * of field f is number f * nruns + i. */
static gaaw_status_t find_pairs(const load_target *t, const ckpt_meta *meta, const int *map, const run_index *ix,
                                load_pair **pairs, int64_t *npairs)
{
  gaaw_context_t ctx = t->ctx;
  int64_t cap = 0;
  *pairs = NULL, *npairs = 0;
  for (int f = 0; f < t->nfields; f++)
    for (int i = 0; i < t->nruns; i++) {
      ckpt_run w = t->runs[i];
      const ckpt_tensor *e = &meta->tensors[map[w.tensor]];
      int64_t rows, cols;
      gaaw_ckpt_tensor_dims(e->ndim, e->shape, &rows, &cols);
      size_t k = (size_t)(map[w.tensor] * CKPT_FIELDS + f);
      for (int64_t j = ix->start[k]; j < ix->start[k + 1]; j++) {
        if (!gaaw_ckpt_runs_meet(&meta->runs[ix->order[j]], &w, rows, cols)) continue;
        if (*npairs == cap) {
          load_pair *grown = realloc(*pairs, sizeof *grown * (size_t)(cap = cap ? 2 * cap : 256));
          if (!grown) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot list the runs to read");
          *pairs = grown;
        }
        (*pairs)[(*npairs)++] = (load_pair){ix->order[j], f * t->nruns + i};
      }
    }
  sort_meta = meta;
  if (*npairs) qsort(*pairs, (size_t)*npairs, sizeof **pairs, by_place);
  return GAAW_SUCCESS;
}

/* The file of stored run r, opened once and its size checked against the metadata. */
static gaaw_status_t open_file(const load_target *t, const ckpt_meta *meta, const char *stepdir, int file, int *fds)
{
  gaaw_context_t ctx = t->ctx;
  if (fds[file] >= 0) return GAAW_SUCCESS;
  char path[PATH_MAX_BYTES + 64], name[32];
  snprintf(name, sizeof name, "rank-%05d.bin", meta->files[file].world_rank);
  GAAW_CHECK(gaaw_ckpt_join(ctx, path, sizeof path, stepdir, name));
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) GAAW_FAIL(ctx, GAAW_ERR_CORRUPT, "%s is missing", path);
  struct stat sb;
  if (fstat(fd, &sb) != 0 || sb.st_size != meta->files[file].bytes) {
    long long have = fstat(fd, &sb) == 0 ? (long long)sb.st_size : -1;
    close(fd);
    GAAW_FAIL(ctx, GAAW_ERR_CORRUPT, "%s has %lld bytes, meta.json says %lld (truncated or replaced)", path, have,
              (long long)meta->files[file].bytes);
  }
  fds[file] = fd;
  return GAAW_SUCCESS;
}

/* Reads each stored run of the pairs once into one buffer, checks its checksum,
 * and copies what each owned run needs; copied[] counts per owned run. */
static gaaw_status_t read_pairs(const load_target *t, const ckpt_meta *meta, const char *stepdir, const int *map,
                                const load_pair *pairs, int64_t npairs, int64_t *copied)
{
  gaaw_context_t ctx = t->ctx;
  gaaw_status_t st = GAAW_SUCCESS;
  int *fds = malloc(sizeof *fds * (size_t)(meta->nfiles + 1));
  float *buf = NULL;
  size_t cap = 0;
  if (!fds) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate %d file handles", meta->nfiles);
  for (int f = 0; f < meta->nfiles; f++) fds[f] = -1;
  for (int64_t i = 0; i < npairs; i++) {
    const ckpt_run *s = &meta->runs[pairs[i].stored];
    if (i == 0 || pairs[i - 1].stored != pairs[i].stored) {
      size_t bytes = sizeof(float) * (size_t)(s->b - s->a);
      if (bytes > cap) {
        free(buf);
        if (!(buf = malloc(cap = bytes))) {
          st = gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__, "cannot allocate a read "
                                "buffer of %zu bytes", bytes);
          goto out;
        }
      }
      char path[PATH_MAX_BYTES + 64];
      snprintf(path, sizeof path, "%s/rank-%05d.bin", stepdir, meta->files[s->file].world_rank);
      GAAW_CHECK_GOTO(st, open_file(t, meta, stepdir, s->file, fds), out);
      GAAW_CHECK_GOTO(st, gaaw_ckpt_pread(ctx, fds[s->file], buf, bytes, s->at, path), out);
      uint64_t h = XXH3_64bits(buf, bytes);
      if (h != s->hash) {
        st = gaaw_error_raise(ctx, GAAW_ERR_CORRUPT, __FILE__, __LINE__, __func__,
                              "%s: checksum mismatch in tensor %s (%s), bytes %lld..%lld (stored %016llx, read "
                              "%016llx)", path, meta->tensors[s->tensor].name, gaaw_ckpt_field_names[s->field],
                              (long long)s->at, (long long)(s->at + (int64_t)bytes), (unsigned long long)s->hash,
                              (unsigned long long)h);
        goto out;
      }
    }
    int owned = pairs[i].owned, f = owned / (t->nruns ? t->nruns : 1);
    const ckpt_run *w = &t->runs[owned % t->nruns];
    const ckpt_tensor *e = &meta->tensors[map[w->tensor]];
    int64_t rows, cols;
    gaaw_ckpt_tensor_dims(e->ndim, e->shape, &rows, &cols);
    copied[owned] += gaaw_ckpt_copy_overlap(s, buf, w, t->staging[f], rows, cols);
  }
out:
  for (int f = 0; f < meta->nfiles; f++)
    if (fds[f] >= 0) close(fds[f]);
  free(fds), free(buf);
  return st;
}

/* Every element this rank holds came from the checkpoint, once. */
static gaaw_status_t check_coverage(const load_target *t, const ckpt_meta *meta, const int *map, const int64_t *copied)
{
  gaaw_context_t ctx = t->ctx;
  for (int f = 0; f < t->nfields; f++)
    for (int i = 0; i < t->nruns; i++) {
      const ckpt_run *w = &t->runs[i];
      const ckpt_tensor *e = &meta->tensors[map[w->tensor]];
      int64_t rows, cols, want;
      gaaw_ckpt_tensor_dims(e->ndim, e->shape, &rows, &cols);
      want = gaaw_ckpt_real_elements(w, rows, cols);
      if (copied[f * t->nruns + i] != want)
        GAAW_FAIL(ctx, GAAW_ERR_CORRUPT, "meta.json does not match its files: tensor %s (%s) rows %lld.. has %lld "
                  "of its %lld elements here", e->name, gaaw_ckpt_field_names[f], (long long)w->r0,
                  (long long)copied[f * t->nruns + i], (long long)want);
    }
  return GAAW_SUCCESS;
}

static gaaw_status_t read_state(load_target *t, const ckpt_meta *meta, const char *stepdir)
{
  gaaw_context_t ctx = t->ctx;
  int *map = malloc(sizeof *map * (size_t)(t->m->ncatalog + 1));
  run_index ix = {NULL, NULL};
  load_pair *pairs = NULL;
  int64_t npairs = 0, *copied = calloc((size_t)t->nruns * (size_t)t->nfields + 1, sizeof *copied);
  gaaw_status_t st = GAAW_SUCCESS;
  if (!map || !copied) {
    st = gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__, "cannot plan the load");
    goto out;
  }
  GAAW_CHECK_GOTO(st, map_tensors(t, meta, map), out);
  GAAW_CHECK_GOTO(st, index_runs(ctx, meta, &ix), out);
  GAAW_CHECK_GOTO(st, find_pairs(t, meta, map, &ix, &pairs, &npairs), out);
  GAAW_CHECK_GOTO(st, read_pairs(t, meta, stepdir, map, pairs, npairs, copied), out);
  GAAW_CHECK_GOTO(st, check_coverage(t, meta, map, copied), out);
out:
  free(map), free(ix.order), free(ix.start), free(pairs), free(copied);
  return st;
}

/* ---------------------------------------------------------------- sample buffers */

/* The sample buffers the optimizer added, against the checkpoint's: the same
 * number, configs and dp (a replica's buffer and streams are its dp coordinate's). */
static gaaw_status_t check_samplers(const load_target *t, const ckpt_meta *meta)
{
  gaaw_context_t ctx = t->ctx;
  if (!t->nsamplers) return GAAW_SUCCESS; /* a checkpoint's sample buffers are the caller's to want */
  GAAW_ARG_CHECK(ctx, meta->nsamplers == t->nsamplers, "the checkpoint holds %d sample buffers, %d are added here",
                 meta->nsamplers, t->nsamplers);
  GAAW_ARG_CHECK(ctx, meta->sampler_dp == t->opt->replicas, "sample buffers load into the same dp only: %d there, "
                 "%d here", meta->sampler_dp, t->opt->replicas);
  for (int k = 0; k < t->nsamplers; k++) {
    gaaw_sampler_state st;
    gaaw_sampler_get_state(t->opt->ckpt->samplers[k], &st);
    const gaaw_sampler_config_t *c = &meta->sampler_cfg[k];
    GAAW_ARG_CHECK(ctx, c->inputs == st.cfg.inputs && c->outputs == st.cfg.outputs,
                   "sample buffer %d: %d inputs and %d outputs there, %d and %d here", k, c->inputs, c->outputs,
                   st.cfg.inputs, st.cfg.outputs);
    GAAW_ARG_CHECK(ctx, c->capacity == st.cfg.capacity, "sample buffer %d: capacity %lld there, %lld here", k,
                   (long long)c->capacity, (long long)st.cfg.capacity);
    GAAW_ARG_CHECK(ctx, c->policy == st.cfg.policy && c->seed == st.cfg.seed,
                   "sample buffer %d: another policy or seed there (%s, %llu) than here (%s, %llu)", k,
                   gaaw_sampler_policy_name(c->policy), (unsigned long long)c->seed,
                   gaaw_sampler_policy_name(st.cfg.policy), (unsigned long long)st.cfg.seed);
  }
  return GAAW_SUCCESS;
}

/* This replica's part of each added sample buffer, read and checked. */
static gaaw_status_t read_samplers(load_target *t, const ckpt_meta *meta, const char *stepdir)
{
  gaaw_context_t ctx = t->ctx;
  GAAW_CHECK(check_samplers(t, meta));
  for (int k = 0; k < t->nsamplers; k++) {
    const ckpt_sampler_part *q = NULL;
    for (int i = 0; i < meta->nsampler_parts && !q; i++)
      if (meta->sampler_parts[i].sampler == k && meta->sampler_parts[i].dp_rank == t->opt->replica_rank)
        q = &meta->sampler_parts[i];
    if (!q) GAAW_FAIL(ctx, GAAW_ERR_CORRUPT, "meta.json has no sample buffer %d of dp rank %d", k, t->opt->replica_rank);
    char path[PATH_MAX_BYTES + 64], name[32];
    snprintf(name, sizeof name, "rank-%05d.bin", meta->files[q->file].world_rank);
    GAAW_CHECK(gaaw_ckpt_join(ctx, path, sizeof path, stepdir, name));
    size_t bytes = sizeof(float) * (size_t)(q->held * q->width);
    if (!(t->sampler_rows[k] = malloc(bytes ? bytes : 1)))
      GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate sample buffer %d (%zu bytes)", k, bytes);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) GAAW_FAIL(ctx, GAAW_ERR_CORRUPT, "%s is missing", path);
    gaaw_status_t st = gaaw_ckpt_pread(ctx, fd, t->sampler_rows[k], bytes, q->offset, path);
    close(fd);
    GAAW_CHECK(st);
    uint64_t h = XXH3_64bits(t->sampler_rows[k], bytes);
    if (h != q->hash)
      GAAW_FAIL(ctx, GAAW_ERR_CORRUPT, "%s: checksum mismatch in sample buffer %d of dp rank %d, bytes %lld..%lld", path,
                k, q->dp_rank, (long long)q->offset, (long long)(q->offset + (int64_t)bytes));
    t->sampler_part[k] = q;
  }
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- what this rank holds */

static void target_free(load_target *t)
{
  for (int k = 0; k < t->nsamplers; k++) free(t->sampler_rows[k]);
  free(t->sampler_rows), free(t->sampler_part);
  free(t->ranges), free(t->runs);
  for (int f = 0; f < CKPT_FIELDS && !t->borrowed; f++) free(t->staging[f]);
  memset(t, 0, sizeof *t);
}

/* The optimizer's shard (in its staging: memory already touched is ten times
 * faster to fill than fresh memory), or without one each model chunk whole.
 * Staging starts at zero: padding and alignment gaps hold zeros, as after
 * initialisation. */
static gaaw_status_t target_init(load_target *t, gaaw_model_t m, gaaw_optimizer_t opt)
{
  gaaw_context_t ctx = m->ctx;
  memset(t, 0, sizeof *t);
  t->ctx = ctx, t->m = m, t->opt = opt;
  if (opt) {
    t->nfields = gaaw_ckpt_nfields(opt);
    t->numel = opt->shard_numel;
    GAAW_CHECK(gaaw_ckpt_shard_ranges(opt, &t->ranges, &t->nranges));
  } else {
    t->nfields = 1;
    t->numel = m->params.numel;
    if (!(t->ranges = calloc((size_t)m->params.nchunks + 1, sizeof *t->ranges)))
      GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate the chunks' ranges");
    for (int c = 0; c < m->params.nchunks; c++) {
      const gaaw_param_chunk *ch = &m->params.chunks[c];
      t->ranges[c] = (ckpt_range){ch->lo, ch->hi - ch->lo, ch->lo};
    }
    t->nranges = m->params.nchunks;
  }
  GAAW_CHECK(gaaw_ckpt_owned_runs(m, t->ranges, t->nranges, 0, &t->runs, &t->nruns));
  if (opt && opt->ckpt && opt->ckpt->nsamplers) {
    t->nsamplers = opt->ckpt->nsamplers;
    t->sampler_rows = calloc((size_t)t->nsamplers, sizeof *t->sampler_rows);
    t->sampler_part = calloc((size_t)t->nsamplers, sizeof *t->sampler_part);
    if (!t->sampler_rows || !t->sampler_part) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate the samplers");
  }
  if (opt) {
    float **staging;
    GAAW_CHECK(gaaw_ckpt_staging(opt, &staging));
    t->borrowed = 1;
    for (int f = 0; f < t->nfields; f++) {
      t->staging[f] = staging[f];
      memset(t->staging[f], 0, sizeof(float) * (size_t)t->numel);
    }
    return GAAW_SUCCESS;
  }
  for (int f = 0; f < t->nfields; f++)
    if (!(t->staging[f] = calloc((size_t)(t->numel ? t->numel : 1), sizeof(float))))
      GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate %lld floats of staging", (long long)t->numel);
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- the upload */

static gaaw_status_t write_view(gaaw_context_t ctx, const gaaw_tensor_t *v, const float *src)
{
  return gaaw_buffer_write(ctx, v->buf, v->offset, src, sizeof(float) * (size_t)gaaw_tensor_numel(v));
}

/* f32 host values into a view of the compute dtype (through an f32 device copy
 * and the backend's cast, the rounding every step uses). */
static gaaw_status_t write_cast(gaaw_context_t ctx, gaaw_tensor_t *v, const float *src)
{
  if (v->dtype == GAAW_F32) return write_view(ctx, v, src);
  gaaw_tensor_t tmp;
  int64_t n = gaaw_tensor_numel(v);
  GAAW_CHECK(gaaw_tensor_alloc(ctx, GAAW_F32, 1, &n, GAAW_MEM_WORKSPACE, &tmp));
  gaaw_status_t st = write_view(ctx, &tmp, src);
  if (st == GAAW_SUCCESS) st = gaaw_cast(ctx, &tmp, v);
  gaaw_buffer_free(ctx, &tmp.buf);
  return st;
}

static gaaw_status_t upload_shard(const load_target *t)
{
  gaaw_optimizer_t opt = t->opt;
  gaaw_context_t ctx = opt->ctx;
  GAAW_CHECK(gaaw_zero_release_gathered(opt));
  for (int b = 0; b < opt->nbuckets; b++) {
    const zero_bucket *k = &opt->buckets[b];
    if (!k->piece) continue;
    const float *m2 = opt->cfg.kind == GAAW_ADAMW ? t->staging[CKPT_EXP_AVG_SQ] + k->shard_at : NULL;
    GAAW_CHECK(opt->store->write(opt, b, t->staging[CKPT_VALUES] + k->shard_at, t->staging[CKPT_EXP_AVG] + k->shard_at, m2));
  }
  return GAAW_SUCCESS;
}

static gaaw_status_t upload_model(const load_target *t)
{
  gaaw_context_t ctx = t->ctx;
  const gaaw_param_table *p = &t->m->params;
  for (int c = 0; c < p->nchunks; c++) {
    gaaw_tensor_t v = gaaw_params_span(p, 0, p->chunks[c].lo, p->chunks[c].hi - p->chunks[c].lo);
    if (gaaw_tensor_numel(&v) > 0) GAAW_CHECK(write_cast(ctx, &v, t->staging[CKPT_VALUES] + p->chunks[c].lo));
  }
  return GAAW_SUCCESS;
}

/* The optimizer's counters; the loss scale only from an f16 run into an f16 run. */
static void restore_counters(gaaw_optimizer_t opt, const ckpt_meta *meta)
{
  opt->steps = meta->steps, opt->updates = meta->updates;
  opt->lr = meta->lr, opt->grad_norm = meta->grad_norm, opt->skipped = meta->skipped;
  if (opt->dtype == GAAW_F16 && !strcmp(meta->dtype, "f16")) {
    opt->loss_scale = meta->loss_scale;
    opt->good_steps = meta->good_steps, opt->overflows_since_change = meta->overflows_since_change;
    opt->model->loss_scale = opt->loss_scale;
  }
}

/* Collective over world: a rank whose device refuses the upload stops every rank
 * before the gather (the model is then partly loaded, and its error says so). */
static gaaw_status_t apply(load_target *t, ckpt_meta *meta)
{
  gaaw_context_t ctx = t->ctx;
  GAAW_CHECK(gaaw_agree_world(ctx, t->opt ? upload_shard(t) : upload_model(t),
                              "uploading the checkpoint (the model is left partly loaded)", NULL, 0));
  if (t->opt) {
    GAAW_CHECK(gaaw_zero_gather_params(t->opt)); /* stages 1, 2 */
    restore_counters(t->opt, meta);
    for (int k = 0; k < t->nsamplers; k++)
      gaaw_sampler_set_state(t->opt->ckpt->samplers[k], t->sampler_rows[k], t->sampler_part[k]->held,
                             t->sampler_part[k]->pushed, t->sampler_part[k]->drawn);
    GAAW_CHECK(gaaw_ckpt_take_entries(t->opt, meta));
    gaaw_zero_mark_comm(t->opt); /* the load's gather is not the next step's traffic */
  }
  return gaaw_normalization_set(t->m, meta->norm_count, meta->norm_n ? meta->norm_mean : NULL, meta->norm_m2);
}

/* ---------------------------------------------------------------- one checkpoint */

/* Rank 0's meta.json of stepdir, checked, on every rank. */
static gaaw_status_t read_meta(gaaw_context_t ctx, const char *stepdir, ckpt_meta *meta)
{
  char path[PATH_MAX_BYTES + 64];
  char *text = NULL;
  size_t bytes = 0;
  gaaw_status_t st = gaaw_ckpt_join(ctx, path, sizeof path, stepdir, "meta.json");
  if (st == GAAW_SUCCESS && ctx->rank == 0) st = gaaw_ckpt_read_file(ctx, path, &text, &bytes);
  GAAW_CHECK_GOTO(st, gaaw_agree_world(ctx, st, "reading the checkpoint's metadata", NULL, 0), out);
  GAAW_CHECK_GOTO(st, gaaw_share_bytes(ctx, (void **)&text, &bytes, 0), out);
  st = gaaw_ckpt_meta_read(ctx, text, bytes, path, meta);
out:
  free(text);
  return st;
}

static gaaw_status_t load_one(load_target *t, const char *stepdir)
{
  gaaw_context_t ctx = t->ctx;
  ckpt_meta meta;
  memset(&meta, 0, sizeof meta);
  double t0 = gaaw_clock_seconds();
  gaaw_status_t st = read_meta(ctx, stepdir, &meta);
  if (st == GAAW_SUCCESS) st = check_model(t, &meta);
  if (st == GAAW_SUCCESS) st = read_state(t, &meta, stepdir);
  if (st == GAAW_SUCCESS && t->opt) st = read_samplers(t, &meta, stepdir);
  GAAW_CHECK_GOTO(st, gaaw_agree_world(ctx, st, "loading the checkpoint", NULL, 0), out);
  /* from here on every rank has all it needs: nothing is left to fail but the device */
  st = gaaw_agree_world(ctx, apply(t, &meta), "finishing the load", NULL, 0);
  if (st == GAAW_SUCCESS)
    gaaw_log(GAAW_LOG_INFO, "loaded %s (step %lld, saved with dp %d cp %d pp %d tp %d zero %d %s)", stepdir,
             (long long)meta.step, meta.dp, meta.cp, meta.pp, meta.tp, meta.zero_stage, meta.dtype);
  if (st == GAAW_SUCCESS && gaaw_trace_on(ctx))
    gaaw_trace_span(ctx, gaaw_trace_lane(ctx, "checkpoint"), "checkpoint load", t0, "\"step\":%lld",
                    (long long)meta.step);
out:
  gaaw_ckpt_meta_free(&meta);
  return st;
}

/* ---------------------------------------------------------------- which checkpoint */

static gaaw_status_t append_candidate(gaaw_context_t ctx, char **list, size_t *len, const char *dir, const char *name)
{
  size_t add = strlen(dir) + strlen(name) + 2;
  char *grown = realloc(*list, *len + add + 1);
  if (!grown) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot list the checkpoints of %s", dir);
  *list = grown;
  *len += (size_t)snprintf(grown + *len, add + 1, "%s%s%s\n", dir, *name ? "/" : "", name);
  return GAAW_SUCCESS;
}

/* On rank 0: the step directories to try, one a line: path itself when it is one;
 * else its `latest` (or, without one, its newest), and with fallback every other
 * committed checkpoint of it, newest first. */
static gaaw_status_t resolve(gaaw_context_t ctx, const char *path, int fallback, char **list, size_t *len)
{
  char meta[PATH_MAX_BYTES + 64], latest[32] = "", name[32];
  struct stat sb;
  *list = NULL, *len = 0;
  if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) GAAW_FAIL(ctx, GAAW_ERR_NOT_FOUND, "no checkpoint at %s", path);
  GAAW_CHECK(gaaw_ckpt_join(ctx, meta, sizeof meta, path, "meta.json"));
  if (access(meta, F_OK) == 0) return append_candidate(ctx, list, len, path, "");
  gaaw_status_t st = gaaw_ckpt_read_latest(ctx, path, latest, sizeof latest);
  if (st == GAAW_ERR_CORRUPT && !fallback) return st;
  if (st == GAAW_SUCCESS) GAAW_CHECK(append_candidate(ctx, list, len, path, latest));
  else if (st != GAAW_ERR_NOT_FOUND && st != GAAW_ERR_CORRUPT) return st;
  int64_t *steps;
  int n;
  GAAW_CHECK(gaaw_ckpt_list_steps(ctx, path, &steps, &n));
  st = GAAW_SUCCESS;
  for (int i = 0; i < n && st == GAAW_SUCCESS; i++) {
    snprintf(name, sizeof name, "step-%08lld", (long long)steps[i]);
    if (!strcmp(name, latest)) continue;
    if (*len && !fallback) break; /* latest alone, or without it the newest alone */
    st = append_candidate(ctx, list, len, path, name);
  }
  free(steps);
  GAAW_CHECK(st);
  if (!*len) GAAW_FAIL(ctx, GAAW_ERR_NOT_FOUND, "no checkpoint in %s", path);
  return GAAW_SUCCESS;
}

/* Tries the candidates in order: the first that loads wins; a damaged one gives
 * way to the next only with fallback. */
static gaaw_status_t load_path(load_target *t, const char *path)
{
  gaaw_context_t ctx = t->ctx;
  int fallback = gaaw_ctx_bool(ctx, "checkpoint_fallback");
  char *list = NULL;
  size_t len = 0;
  gaaw_status_t st = ctx->rank == 0 ? resolve(ctx, path, fallback, &list, &len) : GAAW_SUCCESS;
  GAAW_CHECK_GOTO(st, gaaw_agree_world(ctx, st, "finding the checkpoint", NULL, 0), out);
  GAAW_CHECK_GOTO(st, gaaw_share_bytes(ctx, (void **)&list, &len, 0), out);
  st = GAAW_ERR_NOT_FOUND;
  for (char *line = list, *end; line < list + len && (end = memchr(line, '\n', (size_t)(list + len - line)));
       line = end + 1) {
    *end = '\0';
    if (line != list) gaaw_log(GAAW_LOG_WARN, "checkpoint_fallback: trying %s instead", line);
    st = load_one(t, line);
    /* ranks hold their own error or the group's worst: they try the next one
     * only if every rank saw this one damaged */
    int all_damaged = 0;
    if (fallback && st != GAAW_SUCCESS) {
      gaaw_status_t shared = gaaw_all_true(ctx, st == GAAW_ERR_CORRUPT, &all_damaged);
      if (shared != GAAW_SUCCESS) st = shared;
    }
    if (!all_damaged) break;
    char why[512];
    gaaw_error_first_line(ctx, why, sizeof why);
    gaaw_log(GAAW_LOG_WARN, "checkpoint %s is damaged: %s", line, why);
  }
out:
  free(list);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

static gaaw_status_t check_path(gaaw_context_t ctx, const char *path)
{
  GAAW_ARG_NOT_NULL(ctx, path);
  GAAW_ARG_CHECK(ctx, path[0] != '\0' && strlen(path) < PATH_MAX_BYTES - 128,
                 "the checkpoint path must be 1..%d bytes", PATH_MAX_BYTES - 129);
  return GAAW_SUCCESS;
}

/* The agreement every load starts with: good arguments, the same path everywhere. */
static gaaw_status_t agree_path(gaaw_context_t ctx, gaaw_status_t st, const char *path, const char *what)
{
  gaaw_field fields[2] = {GAAW_FIELD_TEXT("path", st == GAAW_SUCCESS ? path : ""),
                          GAAW_FIELD_INT("checkpoint_fallback", gaaw_ctx_bool(ctx, "checkpoint_fallback"))};
  return gaaw_agree_world(ctx, st, what, fields, st == GAAW_SUCCESS ? 2 : 0);
}

gaaw_status_t gaaw_checkpoint_load(gaaw_optimizer_t opt, const char *path)
{
  GAAW_ARG_NOT_NULL(NULL, opt);
  gaaw_context_t ctx = opt->ctx;
  gaaw_status_t st = check_path(ctx, path);
  if (st == GAAW_SUCCESS && opt->backward_passes > 0)
    st = gaaw_error_raise(ctx, GAAW_ERR_STATE, __FILE__, __LINE__, __func__, "a checkpoint cannot be loaded between "
                          "a backward pass and gaaw_optimizer_step (%d backward passes)", opt->backward_passes);
  GAAW_CHECK(agree_path(ctx, st, path, "gaaw_checkpoint_load"));
  gaaw_field samplers[2];
  int n = gaaw_ckpt_sampler_fields(opt, samplers);
  GAAW_CHECK(gaaw_agree_world(ctx, GAAW_SUCCESS, "the sample buffers added", samplers, n));
  if (opt->ckpt_commit) GAAW_CHECK(opt->ckpt_commit(opt)); /* a pending save first */
  load_target t;
  st = target_init(&t, opt->model, opt);
  st = gaaw_agree_world(ctx, st, "preparing the load", NULL, 0);
  if (st == GAAW_SUCCESS) st = load_path(&t, path);
  target_free(&t);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_load(gaaw_model_t model, const char *path)
{
  GAAW_ARG_NOT_NULL(NULL, model);
  gaaw_context_t ctx = model->ctx;
  gaaw_status_t st = check_path(ctx, path);
  if (st == GAAW_SUCCESS && model->hooks.before_layer)
    st = gaaw_error_raise(ctx, GAAW_ERR_STATE, __FILE__, __LINE__, __func__, "the model has an optimizer: load "
                          "with gaaw_checkpoint_load, which restores the optimizer's state too");
  GAAW_CHECK(agree_path(ctx, st, path, "gaaw_model_load"));
  load_target t;
  st = target_init(&t, model, NULL);
  st = gaaw_agree_world(ctx, st, "preparing the load", NULL, 0);
  if (st == GAAW_SUCCESS) st = load_path(&t, path);
  target_free(&t);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}
