/* The safetensors header, read and written (zero/safetensors_header.h): the
 * bounds of everything a file claims are checked here, before any caller looks
 * at its data. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/runtime/error.h"
#include "backends/runtime/half.h"
#include "zero/safetensors_header.h"

/* Every dtype of the format, with its size; gaaw reads the first three. */
static const struct {
  const char *name;
  gaaw_st_dtype dtype;
  int size;
} st_dtypes[] = {
  {"F32", GAAW_ST_F32, 4},    {"BF16", GAAW_ST_BF16, 2},  {"F16", GAAW_ST_F16, 2},
  {"F64", GAAW_ST_OTHER, 8},  {"I64", GAAW_ST_OTHER, 8},  {"U64", GAAW_ST_OTHER, 8},
  {"I32", GAAW_ST_OTHER, 4},  {"U32", GAAW_ST_OTHER, 4},  {"I16", GAAW_ST_OTHER, 2},
  {"U16", GAAW_ST_OTHER, 2},  {"I8", GAAW_ST_OTHER, 1},   {"U8", GAAW_ST_OTHER, 1},
  {"BOOL", GAAW_ST_OTHER, 1}, {"F8_E4M3", GAAW_ST_OTHER, 1}, {"F8_E5M2", GAAW_ST_OTHER, 1},
};

/* A dimension larger than this is a corrupt file, whatever the memory: it keeps
 * every product below 2^63. */
#define ST_MAX_DIM ((int64_t)1 << 40)

void gaaw_st_header_free(gaaw_st_header *h)
{
  if (!h) return;
  for (int i = 0; i < h->count; i++) free(h->tensors[i].name);
  free(h->tensors);
  memset(h, 0, sizeof *h);
}

static uint64_t load_u64_le(const unsigned char *p)
{
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

static void store_u64_le(unsigned char *p, uint64_t v)
{
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

void gaaw_st_store(gaaw_st_dtype dtype, unsigned char *data, int64_t i, float v)
{
  if (dtype == GAAW_ST_F32) {
    uint32_t u = gaaw_f32_bits(v);
    for (int k = 0; k < 4; k++) data[4 * i + k] = (unsigned char)(u >> (8 * k));
    return;
  }
  uint16_t h = dtype == GAAW_ST_BF16 ? gaaw_f32_to_bf16(v) : gaaw_f32_to_f16(v);
  data[2 * i] = (unsigned char)h, data[2 * i + 1] = (unsigned char)(h >> 8);
}

int gaaw_st_dtype_size(gaaw_st_dtype dtype)
{
  return dtype == GAAW_ST_F32 ? 4 : 2;
}

float gaaw_st_load(const gaaw_st_tensor *t, const unsigned char *data, int64_t i)
{
  const unsigned char *p = data + (size_t)i * (size_t)t->elem_size;
  if (t->dtype == GAAW_ST_F32)
    return gaaw_bits_f32((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
  uint16_t h = (uint16_t)(p[0] | p[1] << 8);
  return t->dtype == GAAW_ST_BF16 ? gaaw_bf16_to_f32(h) : gaaw_f16_to_f32(h);
}

/* A JSON integer in 0..max, into *v. */
static int get_count(const json_t *j, int64_t max, int64_t *v)
{
  if (!json_is_integer(j)) return 0;
  json_int_t x = json_integer_value(j);
  if (x < 0 || x > max) return 0;
  *v = (int64_t)x;
  return 1;
}

/* Reads one tensor's entry (key name, value e) into t; header_end is the file
 * offset where the data starts, for messages. */
static gaaw_status_t read_entry(gaaw_context_t ctx, const char *file, const char *name, json_t *e,
                                uint64_t header_end, gaaw_st_tensor *t)
{
#define ST_CORRUPT(...)                                                                                        \
  GAAW_FAIL(ctx, GAAW_ERR_CORRUPT, "%s: tensor '%s' (header, bytes 8..%llu): %s", file, name,                 \
            (unsigned long long)header_end, (snprintf(why, sizeof why, __VA_ARGS__), why))
  char why[160];
  if (!json_is_object(e)) ST_CORRUPT("its entry is not a JSON object");
  json_t *dtype = json_object_get(e, "dtype"), *shape = json_object_get(e, "shape");
  json_t *offsets = json_object_get(e, "data_offsets");
  if (!json_is_string(dtype)) ST_CORRUPT("no \"dtype\" string");
  const char *dn = json_string_value(dtype);
  int d = -1;
  for (int k = 0; k < (int)(sizeof st_dtypes / sizeof st_dtypes[0]); k++)
    if (strcmp(dn, st_dtypes[k].name) == 0) d = k;
  if (d < 0) ST_CORRUPT("unknown dtype \"%.32s\"", dn);
  snprintf(t->dtype_name, sizeof t->dtype_name, "%s", st_dtypes[d].name);
  t->dtype = st_dtypes[d].dtype;
  t->elem_size = st_dtypes[d].size;
  if (!json_is_array(shape)) ST_CORRUPT("no \"shape\" array");
  if (json_array_size(shape) > GAAW_ST_MAX_DIMS)
    ST_CORRUPT("a shape of %zu dimensions (at most %d)", json_array_size(shape), GAAW_ST_MAX_DIMS);
  t->ndim = (int)json_array_size(shape);
  uint64_t numel = 1;
  for (int k = 0; k < t->ndim; k++) {
    if (!get_count(json_array_get(shape, (size_t)k), ST_MAX_DIM, &t->shape[k]))
      ST_CORRUPT("shape[%d] is not an integer in 0..2^40", k);
    if (t->shape[k] != 0 && numel > (uint64_t)INT64_MAX / 8 / (uint64_t)t->shape[k])
      ST_CORRUPT("a shape of more than 2^60 elements");
    numel *= (uint64_t)t->shape[k];
  }
  int64_t b, en;
  if (!json_is_array(offsets) || json_array_size(offsets) != 2 ||
      !get_count(json_array_get(offsets, 0), INT64_MAX, &b) || !get_count(json_array_get(offsets, 1), INT64_MAX, &en))
    ST_CORRUPT("\"data_offsets\" is not two non-negative integers");
  t->begin = (uint64_t)b;
  t->end = (uint64_t)en;
  if (t->end < t->begin) ST_CORRUPT("data_offsets [%lld, %lld] end before they begin", (long long)b, (long long)en);
  if (t->end - t->begin != numel * (uint64_t)t->elem_size)
    ST_CORRUPT("data_offsets [%lld, %lld] hold %llu bytes, its shape and dtype %s need %llu", (long long)b,
               (long long)en, (unsigned long long)(t->end - t->begin), t->dtype_name,
               (unsigned long long)(numel * (uint64_t)t->elem_size));
  return GAAW_SUCCESS;
#undef ST_CORRUPT
}

static int by_begin(const void *a, const void *b)
{
  const gaaw_st_tensor *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  return x->end < y->end ? -1 : x->end > y->end; /* empty tensors first */
}

static gaaw_status_t check_metadata(gaaw_context_t ctx, const char *file, json_t *meta, uint64_t header_end)
{
  const char *key;
  json_t *v;
  if (!json_is_object(meta))
    GAAW_FAIL(ctx, GAAW_ERR_CORRUPT, "%s: \"__metadata__\" (header, bytes 8..%llu) is not a JSON object", file,
              (unsigned long long)header_end);
  json_object_foreach(meta, key, v)
  {
    if (!json_is_string(v))
      GAAW_FAIL(ctx, GAAW_ERR_CORRUPT, "%s: \"__metadata__\" entry '%s' (header, bytes 8..%llu) is not a string",
                file, key, (unsigned long long)header_end);
  }
  return GAAW_SUCCESS;
}

/* The tensors of root (the header's object), checked one by one, then sorted by
 * their data and checked to tile [0, data_bytes). */
static gaaw_status_t read_tensors(gaaw_context_t ctx, const char *file, json_t *root, uint64_t data_start,
                                  uint64_t data_bytes, gaaw_st_header *h)
{
  size_t n = json_object_size(root);
  h->tensors = calloc(n ? n : 1, sizeof *h->tensors);
  if (!h->tensors) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "%s: cannot allocate %zu tensor entries", file, n);
  const char *key;
  json_t *v;
  json_object_foreach(root, key, v)
  {
    if (strcmp(key, "__metadata__") == 0) {
      GAAW_CHECK(check_metadata(ctx, file, v, data_start));
      continue;
    }
    gaaw_st_tensor *t = &h->tensors[h->count];
    t->name = strdup(key);
    if (!t->name) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "%s: cannot copy a tensor name", file);
    h->count++;
    GAAW_CHECK(read_entry(ctx, file, key, v, data_start, t));
  }
  qsort(h->tensors, (size_t)h->count, sizeof *h->tensors, by_begin);
  uint64_t at = 0;
  for (int i = 0; i < h->count; i++) {
    const gaaw_st_tensor *t = &h->tensors[i];
    if (t->begin != at)
      GAAW_FAIL(ctx, GAAW_ERR_CORRUPT, "%s: tensor '%s' starts at data byte %llu (file offset %llu), but %s %llu",
                file, t->name, (unsigned long long)t->begin, (unsigned long long)(data_start + t->begin),
                t->begin < at ? "the tensor before it ends at" : "the data before it ends at (a gap) byte",
                (unsigned long long)at);
    if (t->end > data_bytes)
      GAAW_FAIL(ctx, GAAW_ERR_CORRUPT, "%s: tensor '%s' ends at data byte %llu (file offset %llu), past the end of "
                "the file (%llu data bytes: truncated?)", file, t->name, (unsigned long long)t->end,
                (unsigned long long)(data_start + t->end), (unsigned long long)data_bytes);
    at = t->end;
  }
  if (at != data_bytes)
    GAAW_FAIL(ctx, GAAW_ERR_CORRUPT, "%s: %llu bytes after the last tensor's data (file offset %llu on) belong to "
              "no tensor", file, (unsigned long long)(data_bytes - at), (unsigned long long)(data_start + at));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_st_header_parse(gaaw_context_t ctx, const char *file, const unsigned char *bytes, size_t size,
                                   gaaw_st_header *h)
{
  GAAW_ARG_NOT_NULL(ctx, h);
  memset(h, 0, sizeof *h);
  GAAW_ARG_NOT_NULL(ctx, file);
  GAAW_ARG_CHECK(ctx, bytes || size == 0, "bytes must not be NULL");
  if (size < 8)
    GAAW_FAIL(ctx, GAAW_ERR_CORRUPT, "%s: %zu bytes, too short for the 8-byte header length at offset 0", file, size);
  uint64_t n = load_u64_le(bytes);
  if (n > size - 8)
    GAAW_FAIL(ctx, GAAW_ERR_CORRUPT, "%s: the header length at offset 0 is %llu, past the end of the file "
              "(%zu bytes: truncated?)", file, (unsigned long long)n, size);
  if (n < 2 || n > GAAW_ST_MAX_HEADER)
    GAAW_FAIL(ctx, GAAW_ERR_CORRUPT, "%s: the header length at offset 0 is %llu (2..%u)", file,
              (unsigned long long)n, GAAW_ST_MAX_HEADER);
  if (bytes[8] != '{')
    GAAW_FAIL(ctx, GAAW_ERR_CORRUPT, "%s: the header at offset 8 does not start with '{'", file);
  json_error_t err;
  json_t *root = json_loadb((const char *)bytes + 8, (size_t)n, JSON_REJECT_DUPLICATES, &err);
  if (!root)
    GAAW_FAIL(ctx, GAAW_ERR_CORRUPT, "%s: the header is not valid JSON at file offset %llu: %s", file,
              (unsigned long long)(8 + (uint64_t)(err.position > 0 ? err.position : 0)), err.text);
  gaaw_status_t st = GAAW_SUCCESS;
  if (!json_is_object(root))
    st = gaaw_error_raise(ctx, GAAW_ERR_CORRUPT, __FILE__, __LINE__, __func__,
                          "%s: the header at offset 8 is not a JSON object", file);
  else
    st = read_tensors(ctx, file, root, 8 + n, (uint64_t)size - 8 - n, h);
  json_decref(root);
  if (st != GAAW_SUCCESS) {
    gaaw_st_header_free(h);
    return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  }
  h->data_start = 8 + n;
  return GAAW_SUCCESS;
}

/* One tensor's entry {"dtype": "F32", "shape": [...], "data_offsets": [b, e]}. */
static json_t *entry_json(const gaaw_st_tensor *t)
{
  json_t *e = json_object(), *shape = json_array(), *off = json_array();
  int ok = e && shape && off;
  for (int k = 0; ok && k < t->ndim; k++) ok = json_array_append_new(shape, json_integer(t->shape[k])) == 0;
  ok = ok && json_array_append_new(off, json_integer((json_int_t)t->begin)) == 0 &&
       json_array_append_new(off, json_integer((json_int_t)t->end)) == 0;
  ok = ok && json_object_set_new(e, "dtype", json_string(t->dtype_name)) == 0;
  ok = ok && json_object_set(e, "shape", shape) == 0 && json_object_set(e, "data_offsets", off) == 0;
  json_decref(shape);
  json_decref(off);
  if (!ok) {
    json_decref(e);
    return NULL;
  }
  return e;
}

gaaw_status_t gaaw_st_header_build(gaaw_context_t ctx, gaaw_st_dtype dtype, gaaw_st_tensor *tensors, int count,
                                   unsigned char **out, size_t *size)
{
  GAAW_ARG_NOT_NULL(ctx, out);
  GAAW_ARG_NOT_NULL(ctx, size);
  GAAW_ARG_CHECK(ctx, count >= 0 && (tensors || count == 0), "count %d tensors at %p", count, (void *)tensors);
  GAAW_ARG_CHECK(ctx, dtype == GAAW_ST_F32 || dtype == GAAW_ST_BF16 || dtype == GAAW_ST_F16, "dtype %d", (int)dtype);
  *out = NULL;
  *size = 0;
  for (int i = 0; i < count; i++)
    GAAW_ARG_CHECK(ctx, tensors[i].name && tensors[i].ndim >= 0 && tensors[i].ndim <= GAAW_ST_MAX_DIMS,
                   "tensor %d: name %s, ndim %d", i, tensors[i].name ? tensors[i].name : "(null)", tensors[i].ndim);
  json_t *root = json_object(), *meta = json_object();
  int ok = root && meta && json_object_set_new(meta, "format", json_string("pt")) == 0 &&
           json_object_set(root, "__metadata__", meta) == 0;
  json_decref(meta);
  uint64_t at = 0;
  for (int i = 0; ok && i < count; i++) {
    gaaw_st_tensor *t = &tensors[i];
    uint64_t numel = 1;
    for (int k = 0; k < t->ndim; k++) numel *= (uint64_t)t->shape[k];
    snprintf(t->dtype_name, sizeof t->dtype_name, "%s", st_dtypes[dtype].name); /* the table's first three */
    t->dtype = dtype;
    t->elem_size = gaaw_st_dtype_size(dtype);
    t->begin = at;
    t->end = at += (uint64_t)t->elem_size * numel;
    json_t *e = entry_json(t);
    ok = e && json_object_set_new(root, t->name, e) == 0;
  }
  char *text = ok ? json_dumps(root, JSON_COMPACT) : NULL;
  json_decref(root);
  if (!text) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot build the safetensors header of %d tensors", count);
  size_t len = strlen(text), padded = (len + 7) / 8 * 8;
  *out = malloc(8 + padded);
  if (!*out) {
    free(text);
    GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate a header of %zu bytes", 8 + padded);
  }
  store_u64_le(*out, padded);
  memcpy(*out + 8, text, len);
  memset(*out + 8 + len, ' ', padded - len);
  *size = 8 + padded;
  free(text);
  return GAAW_SUCCESS;
}

/* ---- the index of a sharded set */

void gaaw_st_index_free(gaaw_st_index *ix)
{
  if (!ix) return;
  for (int k = 0; k < ix->ntensors; k++) free(ix->tensor[k]);
  for (int f = 0; f < ix->nfiles; f++) free(ix->file[f]);
  free(ix->tensor);
  free(ix->file);
  free(ix->file_of);
  memset(ix, 0, sizeof *ix);
}

const char *gaaw_st_index_file_of(const gaaw_st_index *ix, const char *name)
{
  for (int k = 0; k < ix->ntensors; k++)
    if (strcmp(ix->tensor[k], name) == 0) return ix->file[ix->file_of[k]];
  return NULL;
}

/* Whether a weight_map value names a file beside the index. */
static int plain_file_name(const char *name)
{
  return name[0] && !strchr(name, '/') && strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}

static gaaw_status_t index_fill(gaaw_context_t ctx, const char *index, json_t *map, gaaw_st_index *ix)
{
  size_t n = json_object_size(map);
  ix->tensor = calloc(n, sizeof *ix->tensor);
  ix->file = calloc(n, sizeof *ix->file);
  ix->file_of = calloc(n, sizeof *ix->file_of);
  if (!ix->tensor || !ix->file || !ix->file_of) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot hold %s", index);
  const char *name;
  json_t *value;
  json_object_foreach(map, name, value)
  {
    const char *file = json_is_string(value) ? json_string_value(value) : NULL;
    if (!file || !plain_file_name(file) || strlen(file) != json_string_length(value))
      GAAW_FAIL(ctx, GAAW_ERR_CORRUPT, "%s: the file of tensor '%s' is not the plain name of a file beside the "
                "index", index, name);
    int f = 0;
    while (f < ix->nfiles && strcmp(ix->file[f], file) != 0) f++;
    if (f == ix->nfiles && !(ix->file[ix->nfiles++] = strdup(file)))
      GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot hold %s", index);
    if (!(ix->tensor[ix->ntensors] = strdup(name))) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot hold %s", index);
    ix->file_of[ix->ntensors++] = f;
  }
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_st_index_parse(gaaw_context_t ctx, const char *index, const char *text, size_t size,
                                  gaaw_st_index *ix)
{
  memset(ix, 0, sizeof *ix);
  json_error_t e;
  json_t *root = json_loadb(text, size, JSON_REJECT_DUPLICATES, &e), *map = json_object_get(root, "weight_map");
  gaaw_status_t st = GAAW_SUCCESS;
  if (!root)
    st = gaaw_error_raise(ctx, GAAW_ERR_CORRUPT, __FILE__, __LINE__, __func__, "%s is not JSON: %s (line %d)",
                          index, e.text, e.line);
  else if (!json_is_object(map) || json_object_size(map) == 0)
    st = gaaw_error_raise(ctx, GAAW_ERR_CORRUPT, __FILE__, __LINE__, __func__,
                          "%s has no \"weight_map\" object of tensor names", index);
  else
    st = index_fill(ctx, index, map, ix);
  json_decref(root);
  if (st != GAAW_SUCCESS) gaaw_st_index_free(ix);
  return st;
}
