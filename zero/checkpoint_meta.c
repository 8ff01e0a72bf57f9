/* meta.json <-> ckpt_meta, through Jansson: the only code that knows the JSON.
 * The first key, meta_xxh3, holds the XXH3-64 of the file's bytes as written with
 * its 16 hex digits read as '0's; everything else is checked on read, so that any
 * input gives a named GAAW_ERR_CORRUPT and never a crash. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "backends/runtime/error.h"
#include "gaaw/version.h"
#include "zero/checkpoint_impl.h"

#define META_FORMAT "gaaw checkpoint 1"
#define HASH_KEY "{\"meta_xxh3\": \""
#define RUN_WIDTH 11 /* [tensor, field, file, offset, r0, nr, c0, nc, a, b, "hash"] */
#define SAMPLER_PART_WIDTH 9 /* [sampler, dp_rank, file, offset, held, pushed, drawn, width, "hash"] */

/* ---------------------------------------------------------------- writing */

static json_t *int_array(const int64_t *v, int n)
{
  json_t *a = json_array();
  for (int i = 0; a && i < n; i++) json_array_append_new(a, json_integer((json_int_t)v[i]));
  return a;
}

/* JSON has no infinity or NaN (json_real refuses them): a gradient norm or a
 * statistic that overflowed is stored as the string "inf", "-inf" or "nan". */
static json_t *real_json(double v)
{
  if (isfinite(v)) return json_real(v);
  return json_string(isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
}

static json_t *real_array(const double *v, int n)
{
  json_t *a = json_array();
  for (int i = 0; a && i < n; i++) json_array_append_new(a, real_json(v[i]));
  return a;
}

static json_t *hex64(uint64_t h)
{
  char text[17];
  snprintf(text, sizeof text, "%016llx", (unsigned long long)h);
  return json_string(text);
}

static json_t *layout_json(const ckpt_meta *m)
{
  return json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:s, s:s, s:s, s:s}", "world", m->world, "dp", m->dp,
                   "cp", m->cp, "pp", m->pp,
                   "tp", m->tp, "virtual_stages", m->virtual_stages, "zero_stage", m->zero_stage, "pp_layout",
                   m->pp_layout, "pp_schedule", m->pp_schedule, "dtype", m->dtype, "backend", m->backend);
}

static json_t *model_json(const ckpt_meta *m)
{
  json_t *config = json_object();
  for (int i = 0; config && i < m->nconfig; i++)
    json_object_set_new(config, m->config_names[i], json_string(m->config_values[i]));
  return json_pack("{s:s, s:o}", "kind", m->model_kind, "config", config);
}

static json_t *optimizer_json(const ckpt_meta *m)
{
  return json_pack("{s:s, s:I, s:I, s:o, s:o, s:o, s:i, s:i, s:i}", "kind", m->optimizer, "steps",
                   (json_int_t)m->steps, "updates", (json_int_t)m->updates, "lr", real_json(m->lr), "grad_norm",
                   real_json(m->grad_norm), "loss_scale", real_json(m->loss_scale), "skipped", m->skipped,
                   "good_steps", m->good_steps, "overflows_since_change", m->overflows_since_change);
}

static json_t *tables_json(const ckpt_meta *m, json_t *root)
{
  json_t *tensors = json_array(), *files = json_array(), *runs = json_array(), *fields = json_array();
  json_object_set_new(root, "fields", fields);
  json_object_set_new(root, "tensors", tensors);
  json_object_set_new(root, "files", files);
  json_object_set_new(root, "runs", runs);
  if (!tensors || !files || !runs || !fields) return NULL;
  for (int f = 0; f < m->nfields; f++) json_array_append_new(fields, json_string(gaaw_ckpt_field_names[f]));
  for (int t = 0; t < m->ntensors; t++) {
    const ckpt_tensor *e = &m->tensors[t];
    json_array_append_new(tensors, json_pack("{s:s, s:o, s:s, s:i, s:i}", "name", e->name, "shape",
                                             int_array(e->shape, e->ndim), "dtype", "f32", "split_axis",
                                             e->split_axis, "fused_blocks", e->fused_blocks));
  }
  for (int f = 0; f < m->nfiles; f++) {
    char name[32];
    snprintf(name, sizeof name, "rank-%05d.bin", m->files[f].world_rank);
    json_array_append_new(files, json_pack("{s:s, s:i, s:I}", "name", name, "rank", m->files[f].world_rank, "bytes",
                                           (json_int_t)m->files[f].bytes));
  }
  for (int64_t i = 0; i < m->nruns; i++) {
    const ckpt_run *r = &m->runs[i];
    int64_t v[RUN_WIDTH - 1] = {r->tensor, r->field, r->file, r->at, r->r0, r->nr, r->c0, r->nc, r->a, r->b};
    json_t *row = int_array(v, RUN_WIDTH - 1);
    json_array_append_new(row, hex64(r->hash));
    json_array_append_new(runs, row);
  }
  return root;
}

/* {"dp": D, "configs": [...], "parts": [[sampler, dp_rank, file, offset, held,
 * pushed, drawn, width, "hash"], ...]} */
static json_t *samplers_json(const ckpt_meta *m)
{
  json_t *configs = json_array(), *parts = json_array();
  for (int k = 0; configs && k < m->nsamplers; k++) {
    const gaaw_sampler_config_t *c = &m->sampler_cfg[k];
    json_array_append_new(configs, json_pack("{s:i, s:i, s:I, s:i, s:I}", "inputs", c->inputs, "outputs", c->outputs,
                                             "capacity", (json_int_t)c->capacity, "policy", (int)c->policy, "seed",
                                             (json_int_t)c->seed));
  }
  for (int i = 0; parts && i < m->nsampler_parts; i++) {
    const ckpt_sampler_part *q = &m->sampler_parts[i];
    int64_t v[SAMPLER_PART_WIDTH - 1] = {q->sampler, q->dp_rank, q->file, q->offset, q->held, q->pushed,
                                         (int64_t)q->drawn, q->width};
    json_t *row = int_array(v, SAMPLER_PART_WIDTH - 1);
    json_array_append_new(row, hex64(q->hash));
    json_array_append_new(parts, row);
  }
  return json_pack("{s:i, s:o, s:o}", "dp", m->sampler_dp, "configs", configs, "parts", parts);
}

static json_t *meta_json(const ckpt_meta *m)
{
  json_t *root = json_object();
  if (!root) return NULL;
  json_object_set_new(root, "meta_xxh3", json_string("0000000000000000"));
  json_object_set_new(root, "format", json_string(META_FORMAT));
  json_object_set_new(root, "gaaw_version", json_string(GAAW_VERSION_STRING));
  json_object_set_new(root, "step", json_integer((json_int_t)m->step));
  json_object_set_new(root, "layout", layout_json(m));
  json_object_set_new(root, "model", model_json(m));
  json_object_set_new(root, "optimizer", optimizer_json(m));
  json_object_set_new(root, "normalization", json_pack("{s:o, s:o, s:o}", "count", real_json(m->norm_count), "mean",
                                                       real_array(m->norm_mean, m->norm_n), "m2",
                                                       real_array(m->norm_m2, m->norm_n)));
  json_t *user = json_object();
  for (int i = 0; user && i < m->nentries; i++)
    json_object_set_new(user, m->entries[i].key, json_string(m->entries[i].value));
  json_object_set_new(root, "user", user);
  json_object_set_new(root, "samplers", samplers_json(m));
  return tables_json(m, root);
}

gaaw_status_t gaaw_ckpt_meta_write(gaaw_context_t ctx, const ckpt_meta *m, char **text, size_t *bytes)
{
  json_t *root = meta_json(m);
  char *out = root ? json_dumps(root, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17)) : NULL;
  json_decref(root);
  if (!out) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot write the checkpoint's metadata as JSON");
  size_t n = strlen(out);
  /* json_dumps writes {"meta_xxh3": "0000000000000000", ...: seal it in place */
  if (strncmp(out, HASH_KEY, strlen(HASH_KEY)) != 0) {
    free(out);
    GAAW_FAIL(ctx, GAAW_ERR_INTERNAL, "the metadata's JSON does not start with its checksum");
  }
  char digits[17];
  snprintf(digits, sizeof digits, "%016llx", (unsigned long long)XXH3_64bits(out, n));
  memcpy(out + strlen(HASH_KEY), digits, 16);
  /* Jansson drops a key whose value it could not build (json_pack, set_new): read
   * the text back so that such a file is never committed. */
  ckpt_meta back;
  gaaw_status_t st = gaaw_ckpt_meta_read(ctx, out, n, "meta.json as written", &back);
  if (st != GAAW_SUCCESS) {
    free(out);
    char why[GAAW_ERROR_TEXT_MAX];
    gaaw_error_first_line(ctx, why, sizeof why);
    /* out of memory while reading it back is not a bug: said as such */
    GAAW_FAIL(ctx, st == GAAW_ERR_NO_MEMORY ? st : GAAW_ERR_INTERNAL, "the checkpoint's metadata does not read back: %s",
              why);
  }
  gaaw_ckpt_meta_free(&back);
  *text = out, *bytes = n;
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- reading */

/* The reader's cursor: what names the file, for messages. */
typedef struct {
  gaaw_context_t ctx;
  const char *what;
} reader;

#define BAD(rd, ...) GAAW_FAIL((rd)->ctx, GAAW_ERR_CORRUPT, __VA_ARGS__)

static gaaw_status_t get(const reader *rd, json_t *obj, const char *key, json_type type, json_t **out)
{
  json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
  if (!v || json_typeof(v) != type) BAD(rd, "%s: '%s' is missing or of the wrong type", rd->what, key);
  *out = v;
  return GAAW_SUCCESS;
}

static gaaw_status_t get_int(const reader *rd, json_t *obj, const char *key, int64_t lo, int64_t hi, int64_t *out)
{
  json_t *v;
  GAAW_CHECK_CTX(rd->ctx, get(rd, obj, key, JSON_INTEGER, &v));
  int64_t i = (int64_t)json_integer_value(v);
  if (i < lo || i > hi) BAD(rd, "%s: '%s' is %lld, outside %lld..%lld", rd->what, key, (long long)i, (long long)lo,
                            (long long)hi);
  *out = i;
  return GAAW_SUCCESS;
}

static gaaw_status_t get_i(const reader *rd, json_t *obj, const char *key, int lo, int hi, int *out)
{
  int64_t v;
  GAAW_CHECK_CTX(rd->ctx, get_int(rd, obj, key, lo, hi, &v));
  *out = (int)v;
  return GAAW_SUCCESS;
}

/* A number, or one of the strings real_json writes for the non-finite ones. */
static int real_value(json_t *v, double *out)
{
  const char *s = json_string_value(v);
  if (json_is_number(v)) *out = json_number_value(v);
  else if (s && strcmp(s, "inf") == 0) *out = INFINITY;
  else if (s && strcmp(s, "-inf") == 0) *out = -INFINITY;
  else if (s && strcmp(s, "nan") == 0) *out = NAN;
  else return 0;
  return 1;
}

static gaaw_status_t get_real(const reader *rd, json_t *obj, const char *key, double *out)
{
  json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
  if (!v || !real_value(v, out)) BAD(rd, "%s: '%s' is missing or not a number", rd->what, key);
  return GAAW_SUCCESS;
}

static gaaw_status_t get_text(const reader *rd, json_t *obj, const char *key, char *out, size_t size)
{
  json_t *v;
  GAAW_CHECK_CTX(rd->ctx, get(rd, obj, key, JSON_STRING, &v));
  if (json_string_length(v) >= size) BAD(rd, "%s: '%s' is longer than %zu bytes", rd->what, key, size - 1);
  snprintf(out, size, "%s", json_string_value(v));
  return GAAW_SUCCESS;
}

static int parse_hex64(const char *s, uint64_t *out)
{
  if (!s || strlen(s) != 16) return 0;
  uint64_t h = 0;
  for (int i = 0; i < 16; i++) {
    char c = s[i];
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return 0;
    h = h << 4 | (uint64_t)d;
  }
  *out = h;
  return 1;
}

static gaaw_status_t read_head(const reader *rd, json_t *root, ckpt_meta *m)
{
  gaaw_context_t ctx = rd->ctx;
  char format[64];
  json_t *layout, *model, *opt, *config;
  GAAW_CHECK(get_text(rd, root, "format", format, sizeof format));
  if (strcmp(format, META_FORMAT) != 0) BAD(rd, "%s: format '%s' is not '%s'", rd->what, format, META_FORMAT);
  GAAW_CHECK(get_int(rd, root, "step", 0, INT64_MAX, &m->step));
  GAAW_CHECK(get(rd, root, "layout", JSON_OBJECT, &layout));
  GAAW_CHECK(get_i(rd, layout, "world", 1, 1 << 24, &m->world));
  GAAW_CHECK(get_i(rd, layout, "dp", 1, m->world, &m->dp));
  m->cp = 1; /* written since context parallelism */
  if (json_object_get(layout, "cp")) GAAW_CHECK(get_i(rd, layout, "cp", 1, m->world, &m->cp));
  GAAW_CHECK(get_i(rd, layout, "pp", 1, m->world, &m->pp));
  GAAW_CHECK(get_i(rd, layout, "tp", 1, m->world, &m->tp));
  GAAW_CHECK(get_i(rd, layout, "virtual_stages", 1, 1 << 16, &m->virtual_stages));
  GAAW_CHECK(get_i(rd, layout, "zero_stage", 0, 3, &m->zero_stage));
  GAAW_CHECK(get_text(rd, layout, "pp_layout", m->pp_layout, sizeof m->pp_layout));
  GAAW_CHECK(get_text(rd, layout, "pp_schedule", m->pp_schedule, sizeof m->pp_schedule));
  GAAW_CHECK(get_text(rd, layout, "dtype", m->dtype, sizeof m->dtype));
  GAAW_CHECK(get_text(rd, layout, "backend", m->backend, sizeof m->backend));
  GAAW_CHECK(get(rd, root, "model", JSON_OBJECT, &model));
  GAAW_CHECK(get_text(rd, model, "kind", m->model_kind, sizeof m->model_kind));
  GAAW_CHECK(get(rd, model, "config", JSON_OBJECT, &config));
  const char *key;
  json_t *value;
  json_object_foreach(config, key, value)
  {
    if (m->nconfig == GAAW_AGREE_MAX_FIELDS || strlen(key) >= sizeof m->config_names[0] || !json_is_string(value) ||
        json_string_length(value) >= sizeof m->config_values[0])
      BAD(rd, "%s: the model config's entry '%.40s' is malformed", rd->what, key);
    snprintf(m->config_names[m->nconfig], sizeof m->config_names[0], "%s", key);
    snprintf(m->config_values[m->nconfig++], sizeof m->config_values[0], "%s", json_string_value(value));
  }
  GAAW_CHECK(get(rd, root, "optimizer", JSON_OBJECT, &opt));
  double lr, norm, scale;
  GAAW_CHECK(get_text(rd, opt, "kind", m->optimizer, sizeof m->optimizer));
  GAAW_CHECK(get_int(rd, opt, "steps", 0, INT64_MAX, &m->steps));
  GAAW_CHECK(get_int(rd, opt, "updates", 0, INT64_MAX, &m->updates));
  GAAW_CHECK(get_real(rd, opt, "lr", &lr));
  GAAW_CHECK(get_real(rd, opt, "grad_norm", &norm));
  GAAW_CHECK(get_real(rd, opt, "loss_scale", &scale));
  m->lr = (float)lr, m->grad_norm = (float)norm, m->loss_scale = (float)scale;
  GAAW_CHECK(get_i(rd, opt, "skipped", 0, 1, &m->skipped));
  GAAW_CHECK(get_i(rd, opt, "good_steps", 0, INT32_MAX, &m->good_steps));
  GAAW_CHECK(get_i(rd, opt, "overflows_since_change", 0, INT32_MAX, &m->overflows_since_change));
  return GAAW_SUCCESS;
}

static gaaw_status_t read_reals(const reader *rd, json_t *obj, const char *key, int n, double *out)
{
  json_t *a;
  GAAW_CHECK_CTX(rd->ctx, get(rd, obj, key, JSON_ARRAY, &a));
  if ((int)json_array_size(a) != n) BAD(rd, "%s: normalization.%s has %zu values, not %d", rd->what, key,
                                         json_array_size(a), n);
  for (int i = 0; i < n; i++) {
    json_t *v = json_array_get(a, (size_t)i);
    if (!real_value(v, &out[i])) BAD(rd, "%s: normalization.%s[%d] is not a number", rd->what, key, i);
  }
  return GAAW_SUCCESS;
}

static gaaw_status_t read_state(const reader *rd, json_t *root, ckpt_meta *m)
{
  gaaw_context_t ctx = rd->ctx;
  json_t *norm, *mean, *user;
  GAAW_CHECK(get(rd, root, "normalization", JSON_OBJECT, &norm));
  GAAW_CHECK(get_real(rd, norm, "count", &m->norm_count));
  GAAW_CHECK(get(rd, norm, "mean", JSON_ARRAY, &mean));
  if (json_array_size(mean) > (1 << 24)) BAD(rd, "%s: %zu normalisation statistics", rd->what, json_array_size(mean));
  m->norm_n = (int)json_array_size(mean);
  m->norm_mean = calloc((size_t)m->norm_n + 1, sizeof(double));
  m->norm_m2 = calloc((size_t)m->norm_n + 1, sizeof(double));
  if (!m->norm_mean || !m->norm_m2) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate the statistics");
  GAAW_CHECK(read_reals(rd, norm, "mean", m->norm_n, m->norm_mean));
  GAAW_CHECK(read_reals(rd, norm, "m2", m->norm_n, m->norm_m2));
  GAAW_CHECK(get(rd, root, "user", JSON_OBJECT, &user));
  m->entries = calloc(json_object_size(user) + 1, sizeof *m->entries);
  if (!m->entries) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate the entries");
  const char *key;
  json_t *value;
  json_object_foreach(user, key, value)
  {
    if (!json_is_string(value) || strlen(key) >= sizeof m->entries[0].key)
      BAD(rd, "%s: the user entry '%.40s' is malformed", rd->what, key);
    ckpt_entry *e = &m->entries[m->nentries++];
    snprintf(e->key, sizeof e->key, "%s", key);
    if (!(e->value = strdup(json_string_value(value)))) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot copy an entry");
  }
  return GAAW_SUCCESS;
}

static gaaw_status_t read_tensor(const reader *rd, json_t *t, int index, ckpt_tensor *e)
{
  gaaw_context_t ctx = rd->ctx;
  json_t *shape;
  char dtype[8];
  GAAW_CHECK(get_text(rd, t, "name", e->name, sizeof e->name));
  GAAW_CHECK(get_text(rd, t, "dtype", dtype, sizeof dtype));
  if (strcmp(dtype, "f32") != 0) BAD(rd, "%s: tensor %d (%s) has dtype '%s', not f32", rd->what, index, e->name, dtype);
  GAAW_CHECK(get(rd, t, "shape", JSON_ARRAY, &shape));
  e->ndim = (int)json_array_size(shape);
  if (e->ndim < 1 || e->ndim > 2) BAD(rd, "%s: tensor %s has %d dimensions", rd->what, e->name, e->ndim);
  for (int d = 0; d < e->ndim; d++) {
    json_t *v = json_array_get(shape, (size_t)d);
    e->shape[d] = json_is_integer(v) ? (int64_t)json_integer_value(v) : -1;
    if (e->shape[d] < 1 || e->shape[d] > ((int64_t)1 << 40))
      BAD(rd, "%s: tensor %s has a bad extent in dimension %d", rd->what, e->name, d);
  }
  GAAW_CHECK(get_i(rd, t, "split_axis", -1, 1, &e->split_axis));
  GAAW_CHECK(get_i(rd, t, "fused_blocks", 1, 1 << 16, &e->fused_blocks));
  return GAAW_SUCCESS;
}

/* One stored run, checked against the tensors and files. */
static gaaw_status_t read_run(const reader *rd, json_t *row, int64_t index, const ckpt_meta *m, ckpt_run *r)
{
  int64_t v[RUN_WIDTH - 1];
  if (!json_is_array(row) || json_array_size(row) != RUN_WIDTH) BAD(rd, "%s: run %lld is malformed", rd->what,
                                                                   (long long)index);
  for (int i = 0; i < RUN_WIDTH - 1; i++) {
    json_t *x = json_array_get(row, (size_t)i);
    if (!json_is_integer(x) || json_integer_value(x) < 0) BAD(rd, "%s: run %lld is malformed", rd->what, (long long)index);
    v[i] = (int64_t)json_integer_value(x);
  }
  *r = (ckpt_run){.tensor = (int)(v[0] < m->ntensors ? v[0] : -1), .field = (int)(v[1] < m->nfields ? v[1] : -1),
                  .file = (int)(v[2] < m->nfiles ? v[2] : -1), .at = v[3], .r0 = v[4], .nr = v[5], .c0 = v[6],
                  .nc = v[7], .a = v[8], .b = v[9]};
  if (r->tensor < 0 || r->field < 0 || r->file < 0 || !parse_hex64(json_string_value(json_array_get(row, 10)), &r->hash))
    BAD(rd, "%s: run %lld names no tensor, field, file or checksum", rd->what, (long long)index);
  const ckpt_tensor *t = &m->tensors[r->tensor];
  int64_t lim = (int64_t)1 << 40;
  if (r->nr < 1 || r->nc < 1 || r->nr > lim || r->nc > lim || r->r0 > lim || r->c0 > lim || r->a >= r->b ||
      r->nr > ((int64_t)1 << 50) / r->nc || r->b > r->nr * r->nc || r->at > ((int64_t)1 << 60))
    BAD(rd, "%s: run %lld of tensor %s has a bad box or range", rd->what, (long long)index, t->name);
  if (r->at + (r->b - r->a) * 4 > m->files[r->file].bytes)
    BAD(rd, "%s: run %lld of tensor %s ends past its file (%lld bytes)", rd->what, (long long)index, t->name,
        (long long)m->files[r->file].bytes);
  return GAAW_SUCCESS;
}

static gaaw_status_t read_sampler_config(const reader *rd, json_t *c, gaaw_sampler_config_t *out)
{
  gaaw_context_t ctx = rd->ctx;
  int64_t capacity, seed;
  int policy = 0;
  GAAW_CHECK(get_i(rd, c, "inputs", 1, 1 << 24, &out->inputs));
  GAAW_CHECK(get_i(rd, c, "outputs", 0, 1 << 24, &out->outputs));
  GAAW_CHECK(get_int(rd, c, "capacity", 1, (int64_t)1 << 40, &capacity));
  GAAW_CHECK(get_i(rd, c, "policy", 0, 1, &policy));
  GAAW_CHECK(get_int(rd, c, "seed", INT64_MIN, INT64_MAX, &seed));
  out->capacity = capacity, out->policy = (gaaw_sampler_policy_t)policy, out->seed = (uint64_t)seed;
  return GAAW_SUCCESS;
}

/* One replica's sample buffer, checked against the configs and files. */
static gaaw_status_t read_sampler_part(const reader *rd, json_t *row, int i, const ckpt_meta *m, ckpt_sampler_part *q)
{
  int64_t v[SAMPLER_PART_WIDTH - 1];
  if (!json_is_array(row) || json_array_size(row) != SAMPLER_PART_WIDTH)
    BAD(rd, "%s: sample buffer part %d is malformed", rd->what, i);
  for (int k = 0; k < SAMPLER_PART_WIDTH - 1; k++) {
    json_t *x = json_array_get(row, (size_t)k);
    if (!json_is_integer(x) || json_integer_value(x) < 0) BAD(rd, "%s: sample buffer part %d is malformed", rd->what, i);
    v[k] = (int64_t)json_integer_value(x);
  }
  *q = (ckpt_sampler_part){(int)(v[0] < m->nsamplers ? v[0] : -1), (int)(v[1] < m->sampler_dp ? v[1] : -1),
                           (int)(v[2] < m->nfiles ? v[2] : -1), v[3], v[4], v[5], v[7], (uint64_t)v[6], 0};
  if (q->sampler < 0 || q->dp_rank < 0 || q->file < 0 || !parse_hex64(json_string_value(json_array_get(row, 8)), &q->hash))
    BAD(rd, "%s: sample buffer part %d names no buffer, replica, file or checksum", rd->what, i);
  const gaaw_sampler_config_t *c = &m->sampler_cfg[q->sampler];
  int64_t room = m->files[q->file].bytes - q->offset; /* divided, not multiplied: no overflow */
  if (q->width != (int64_t)c->inputs + c->outputs || q->width < 1 || q->held > c->capacity || room < 0 ||
      q->held > room / 4 / q->width)
    BAD(rd, "%s: sample buffer part %d does not fit its config or its file", rd->what, i);
  return GAAW_SUCCESS;
}

static gaaw_status_t read_samplers(const reader *rd, json_t *root, ckpt_meta *m)
{
  gaaw_context_t ctx = rd->ctx;
  json_t *samplers, *configs, *parts;
  GAAW_CHECK(get(rd, root, "samplers", JSON_OBJECT, &samplers));
  GAAW_CHECK(get_i(rd, samplers, "dp", 1, m->world, &m->sampler_dp));
  GAAW_CHECK(get(rd, samplers, "configs", JSON_ARRAY, &configs));
  GAAW_CHECK(get(rd, samplers, "parts", JSON_ARRAY, &parts));
  size_t nconfigs = json_array_size(configs), nparts = json_array_size(parts);
  if (nconfigs > 1024 || nparts > nconfigs * (size_t)m->sampler_dp)
    BAD(rd, "%s: %zu sample buffers in %zu parts", rd->what, nconfigs, nparts);
  m->nsamplers = (int)nconfigs;
  m->nsampler_parts = (int)nparts;
  m->sampler_cfg = calloc((size_t)m->nsamplers + 1, sizeof *m->sampler_cfg);
  m->sampler_parts = calloc((size_t)m->nsampler_parts + 1, sizeof *m->sampler_parts);
  if (!m->sampler_cfg || !m->sampler_parts) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate the samplers");
  for (int k = 0; k < m->nsamplers; k++)
    GAAW_CHECK(read_sampler_config(rd, json_array_get(configs, (size_t)k), &m->sampler_cfg[k]));
  for (int i = 0; i < m->nsampler_parts; i++)
    GAAW_CHECK(read_sampler_part(rd, json_array_get(parts, (size_t)i), i, m, &m->sampler_parts[i]));
  return GAAW_SUCCESS;
}

static gaaw_status_t read_tables(const reader *rd, json_t *root, ckpt_meta *m)
{
  gaaw_context_t ctx = rd->ctx;
  json_t *fields, *tensors, *files, *runs;
  GAAW_CHECK(get(rd, root, "fields", JSON_ARRAY, &fields));
  GAAW_CHECK(get(rd, root, "tensors", JSON_ARRAY, &tensors));
  GAAW_CHECK(get(rd, root, "files", JSON_ARRAY, &files));
  GAAW_CHECK(get(rd, root, "runs", JSON_ARRAY, &runs));
  m->nfields = (int)json_array_size(fields);
  if (m->nfields < 1 || m->nfields > CKPT_FIELDS) BAD(rd, "%s: %d fields", rd->what, m->nfields);
  for (int f = 0; f < m->nfields; f++)
    if (!json_is_string(json_array_get(fields, (size_t)f)) ||
        strcmp(json_string_value(json_array_get(fields, (size_t)f)), gaaw_ckpt_field_names[f]) != 0)
      BAD(rd, "%s: field %d is not '%s'", rd->what, f, gaaw_ckpt_field_names[f]);
  if (json_array_size(tensors) > INT32_MAX || json_array_size(files) > INT32_MAX)
    BAD(rd, "%s: %zu tensors in %zu files", rd->what, json_array_size(tensors), json_array_size(files));
  m->ntensors = (int)json_array_size(tensors), m->nfiles = (int)json_array_size(files);
  m->nruns = (int64_t)json_array_size(runs);
  m->tensors = calloc((size_t)m->ntensors + 1, sizeof *m->tensors);
  m->files = calloc((size_t)m->nfiles + 1, sizeof *m->files);
  m->runs = calloc((size_t)m->nruns + 1, sizeof *m->runs);
  if (!m->tensors || !m->files || !m->runs) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate the metadata");
  for (int t = 0; t < m->ntensors; t++) GAAW_CHECK(read_tensor(rd, json_array_get(tensors, (size_t)t), t, &m->tensors[t]));
  for (int f = 0; f < m->nfiles; f++) {
    json_t *e = json_array_get(files, (size_t)f);
    char name[32], want[32];
    GAAW_CHECK(get_i(rd, e, "rank", 0, m->world - 1, &m->files[f].world_rank));
    GAAW_CHECK(get_int(rd, e, "bytes", 0, INT64_MAX, &m->files[f].bytes));
    GAAW_CHECK(get_text(rd, e, "name", name, sizeof name));
    snprintf(want, sizeof want, "rank-%05d.bin", m->files[f].world_rank);
    if (strcmp(name, want) != 0) BAD(rd, "%s: file %d is '%s', not '%s'", rd->what, f, name, want);
  }
  for (int64_t i = 0; i < m->nruns; i++) GAAW_CHECK(read_run(rd, json_array_get(runs, (size_t)i), i, m, &m->runs[i]));
  return GAAW_SUCCESS;
}

/* The stored checksum against the bytes with its digits read as '0's. */
static gaaw_status_t check_seal(const reader *rd, const char *text, size_t bytes)
{
  size_t at = strlen(HASH_KEY);
  uint64_t stored;
  char digits[17];
  if (bytes < at + 16 || strncmp(text, HASH_KEY, at) != 0) BAD(rd, "%s does not start with its checksum", rd->what);
  memcpy(digits, text + at, 16);
  digits[16] = '\0';
  if (!parse_hex64(digits, &stored)) BAD(rd, "%s: its checksum '%s' is not 16 hex digits", rd->what, digits);
  char *copy = malloc(bytes);
  if (!copy) GAAW_FAIL(rd->ctx, GAAW_ERR_NO_MEMORY, "cannot check %s", rd->what);
  memcpy(copy, text, bytes);
  memset(copy + at, '0', 16);
  uint64_t h = XXH3_64bits(copy, bytes);
  free(copy);
  if (h != stored)
    BAD(rd, "%s: checksum mismatch (stored %016llx, computed %016llx over its %zu bytes)", rd->what,
        (unsigned long long)stored, (unsigned long long)h, bytes);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_ckpt_meta_read(gaaw_context_t ctx, const char *text, size_t bytes, const char *what, ckpt_meta *m)
{
  reader rd = {ctx, what};
  memset(m, 0, sizeof *m);
  GAAW_CHECK(check_seal(&rd, text, bytes));
  json_error_t err;
  json_t *root = json_loadb(text, bytes, JSON_REJECT_DUPLICATES, &err);
  if (!root) GAAW_FAIL(ctx, GAAW_ERR_CORRUPT, "%s: not JSON at byte %d: %s", what, err.position, err.text);
  gaaw_status_t st = GAAW_SUCCESS;
  GAAW_CHECK_GOTO(st, read_head(&rd, root, m), out);
  GAAW_CHECK_GOTO(st, read_state(&rd, root, m), out);
  GAAW_CHECK_GOTO(st, read_tables(&rd, root, m), out);
  GAAW_CHECK_GOTO(st, read_samplers(&rd, root, m), out);
out:
  json_decref(root);
  if (st != GAAW_SUCCESS) gaaw_ckpt_meta_free(m);
  return st;
}

void gaaw_ckpt_meta_free(ckpt_meta *m)
{
  for (int i = 0; m->entries && i < m->nentries; i++) free(m->entries[i].value);
  free(m->entries), free(m->norm_mean), free(m->norm_m2), free(m->tensors), free(m->files), free(m->runs);
  free(m->sampler_cfg), free(m->sampler_parts);
  memset(m, 0, sizeof *m);
}
