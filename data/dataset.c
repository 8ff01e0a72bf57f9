/* Opening a dataset blend (gaaw/data.h): each file resolved to its format, mapped
 * read-only, checked (data/formats.c), split; the ranks agree on the verdict. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/agree.h"
#include "backends/runtime/error.h"
#include "data/data_impl.h"

const char *gaaw_data_format_name(gaaw_data_format_t format)
{
  switch (format) {
  case GAAW_DATA_AUTO: return "auto";
  case GAAW_DATA_MEGATRON: return "megatron";
  case GAAW_DATA_LLMC: return "llmc";
  case GAAW_DATA_BYTES: return "bytes";
  default: return NULL;
  }
}

static int has_suffix(const char *s, const char *suffix)
{
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

static int readable(const char *path)
{
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* path's Megatron prefix + ext ("PREFIX.bin" for "PREFIX", "PREFIX.idx" or
 * "PREFIX.bin"), malloc'ed. */
static char *megatron_file(const char *path, const char *ext)
{
  size_t n = strlen(path);
  if (has_suffix(path, ".bin") || has_suffix(path, ".idx")) n -= 4;
  char *out = malloc(n + 5);
  if (out) snprintf(out, n + 5, "%.*s%s", (int)n, path, ext);
  return out;
}

/* Maps file whole, read-only; *size its bytes. */
static gaaw_status_t map_file(gaaw_context_t ctx, const char *file, const unsigned char **map, size_t *size)
{
  *map = NULL;
  *size = 0;
  int fd = open(file, O_RDONLY);
  if (fd < 0) GAAW_FAIL(ctx, GAAW_ERR_IO, "cannot open %s: %s", file, strerror(errno));
  struct stat st;
  gaaw_status_t s = GAAW_SUCCESS;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    s = gaaw_error_raise(ctx, GAAW_ERR_IO, __FILE__, __LINE__, __func__, "%s is not a regular file", file);
  else if (st.st_size == 0)
    s = gaaw_error_raise(ctx, GAAW_ERR_CORRUPT, __FILE__, __LINE__, __func__, "%s (byte offset 0): the file is empty",
                         file);
  if (s == GAAW_SUCCESS) {
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
      s = gaaw_error_raise(ctx, GAAW_ERR_IO, __FILE__, __LINE__, __func__, "cannot map %s: %s", file, strerror(errno));
    else
      *map = p, *size = (size_t)st.st_size;
  }
  close(fd);
  return s;
}

/* The format of path under `format`; AUTO: a Megatron dataset when path is
 * PREFIX.bin or PREFIX.idx, or a PREFIX that is no file, and PREFIX.idx exists;
 * else llm.c's when the file starts with its magic; else bytes. */
static gaaw_data_format_t resolve(const char *path, gaaw_data_format_t format)
{
  if (format != GAAW_DATA_AUTO) return format;
  char *idx = megatron_file(path, ".idx");
  int megatron = idx && readable(idx) && (has_suffix(path, ".bin") || has_suffix(path, ".idx") || !readable(path));
  free(idx);
  if (megatron) return GAAW_DATA_MEGATRON;
  unsigned char head[4] = {0};
  FILE *f = fopen(path, "rb");
  size_t n = f ? fread(head, 1, sizeof head, f) : 0;
  if (f) fclose(f);
  return gaaw_data_is_llmc(head, n) ? GAAW_DATA_LLMC : GAAW_DATA_BYTES;
}

/* gaaw-prep's sidecar beside dataset s (PREFIX.gaaw.json, FILE.gaaw.json), when
 * there: its "vocab_size" must fit vocab. */
static gaaw_status_t check_sidecar(gaaw_dataset_t d, const gaaw_data_set *s, const char *path)
{
  gaaw_context_t ctx = d->ctx;
  size_t n = strlen(path);
  if (s->format == GAAW_DATA_MEGATRON && (has_suffix(path, ".bin") || has_suffix(path, ".idx"))) n -= 4;
  char *file = malloc(n + sizeof ".gaaw.json");
  if (!file) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot name the sidecar of %s", path);
  snprintf(file, n + sizeof ".gaaw.json", "%.*s.gaaw.json", (int)n, path);
  gaaw_status_t st = GAAW_SUCCESS;
  if (readable(file)) {
    json_error_t e;
    json_t *j = json_load_file(file, JSON_REJECT_DUPLICATES, &e), *v = json_object_get(j, "vocab_size");
    if (!json_is_integer(v) || json_integer_value(v) < 1)
      st = gaaw_error_raise(ctx, GAAW_ERR_CORRUPT, __FILE__, __LINE__, __func__,
                            "%s (byte offset 0): no \"vocab_size\" of 1 or more%s%s", file, j ? "" : ": ",
                            j ? "" : e.text);
    else if (json_integer_value(v) > d->vocab)
      st = gaaw_error_raise(ctx, GAAW_ERR_INVALID_ARG, __FILE__, __LINE__, __func__,
                            "%s: the dataset's tokenizer has %lld ids, more than the vocabulary of %d (gaaw-train "
                            "--vocab)", file, (long long)json_integer_value(v), d->vocab);
    json_decref(j);
  }
  free(file);
  return st;
}

/* Dataset s from path: its token file mapped and checked. */
static gaaw_status_t open_one(gaaw_dataset_t d, gaaw_data_set *s, const char *path, gaaw_data_format_t format)
{
  gaaw_context_t ctx = d->ctx;
  s->format = resolve(path, format);
  s->path = s->format == GAAW_DATA_MEGATRON ? megatron_file(path, ".bin") : strdup(path);
  if (!s->path) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot name the token file of %s", path);
  GAAW_CHECK(map_file(ctx, s->path, &s->map, &s->map_size));
  if (s->format == GAAW_DATA_MEGATRON) {
    char *idx = megatron_file(path, ".idx");
    const unsigned char *map = NULL;
    size_t size = 0;
    gaaw_status_t st = idx ? map_file(ctx, idx, &map, &size)
                           : gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__, "no memory");
    if (st == GAAW_SUCCESS) st = gaaw_data_check_megatron(ctx, idx, map, size, s->path, s->map_size, &s->s);
    if (st == GAAW_SUCCESS) s->digest = gaaw_digest(map, size);
    if (map) munmap((void *)map, size);
    free(idx);
    GAAW_CHECK(st);
  } else if (s->format == GAAW_DATA_LLMC) {
    GAAW_CHECK(gaaw_data_check_llmc(ctx, s->path, s->map, s->map_size, &s->s));
  } else {
    s->s = (gaaw_data_stream){.token_bytes = 1, .is_signed = 0, .data_offset = 0, .tokens = (int64_t)s->map_size};
  }
  if (s->format != GAAW_DATA_MEGATRON) s->digest = gaaw_digest(s->map, s->map_size < (1u << 20) ? s->map_size : 1u << 20);
  GAAW_CHECK(check_sidecar(d, s, path));
  madvise((void *)s->map, s->map_size, MADV_RANDOM); /* windows are read at random: no read-ahead of the corpus */
  s->val_tokens = s->s.tokens / 10;
  s->train_tokens = s->s.tokens - s->val_tokens;
  s->windows = s->train_tokens > d->seq ? (s->train_tokens - 1) / d->seq : 0;
  if (s->val_tokens < (int64_t)d->seq + 1 || s->windows < 1)
    GAAW_FAIL(ctx, GAAW_ERR_INVALID_ARG, "%s holds %lld tokens: too few for seq %d, whose 10%% validation split "
              "(%lld tokens) and training split must each hold a window of %d tokens", s->path,
              (long long)s->s.tokens, d->seq, (long long)s->val_tokens, d->seq + 1);
  return GAAW_SUCCESS;
}

static gaaw_status_t check_args(gaaw_context_t ctx, int count, const char *const *paths, const double *weights,
                                gaaw_data_format_t format, int seq, int vocab)
{
  GAAW_ARG_CHECK(ctx, count >= 1 && count <= GAAW_DATA_MAX_DATASETS, "count %d must be 1..%d", count,
                 GAAW_DATA_MAX_DATASETS);
  GAAW_ARG_NOT_NULL(ctx, paths);
  GAAW_ARG_CHECK(ctx, gaaw_data_format_name(format) != NULL, "format %d is not a gaaw_data_format_t", (int)format);
  GAAW_ARG_CHECK(ctx, seq >= 1 && vocab >= 1, "seq %d and vocab %d must be >= 1", seq, vocab);
  for (int i = 0; i < count; i++) {
    GAAW_ARG_CHECK(ctx, paths[i] && paths[i][0], "paths[%d] is NULL or empty", i);
    GAAW_ARG_CHECK(ctx, !weights || (isfinite(weights[i]) && weights[i] > 0), "weights[%d] is %g: it must be > 0", i,
                   weights ? weights[i] : 0.0);
  }
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_dataset_open(gaaw_context_t ctx, int count, const char *const *paths, const double *weights,
                                gaaw_data_format_t format, int seq, int vocab, gaaw_dataset_t *out)
{
  GAAW_ARG_NOT_NULL(NULL, ctx);
  GAAW_ARG_NOT_NULL(ctx, out);
  *out = NULL;
  gaaw_dataset_t d = calloc(1, sizeof *d);
  gaaw_status_t st = check_args(ctx, count, paths, weights, format, seq, vocab);
  if (st == GAAW_SUCCESS && !d)
    st = gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__, "cannot allocate a dataset");
  uint64_t names = 0, sizes = 0, shares = 0;
  if (st == GAAW_SUCCESS) {
    d->ctx = ctx, d->count = count, d->seq = seq, d->vocab = vocab;
    /* scaled by the largest first, so that the sum is finite whatever the weights */
    double largest = 0, total = 0;
    for (int i = 0; i < count; i++) largest = fmax(largest, weights ? weights[i] : 1.0);
    for (int i = 0; i < count; i++) total += (weights ? weights[i] : 1.0) / largest;
    for (int i = 0; i < count; i++) {
      d->weight[i] = (weights ? weights[i] : 1.0) / largest / total;
      names = names * 1099511628211ull ^ gaaw_digest(paths[i], strlen(paths[i]));
      shares = shares * 1099511628211ull ^ gaaw_digest(&d->weight[i], sizeof d->weight[i]);
    }
  }
  for (int i = 0; st == GAAW_SUCCESS && i < count; i++) {
    st = open_one(d, &d->set[i], paths[i], format);
    int64_t facts[4] = {d->set[i].s.tokens, d->set[i].s.token_bytes, d->set[i].format, (int64_t)d->set[i].digest};
    sizes = sizes * 1099511628211ull ^ gaaw_digest(facts, sizeof facts);
  }
  if (st == GAAW_SUCCESS) d->legacy_bytes = count == 1 && d->set[0].format == GAAW_DATA_BYTES;
  gaaw_field f[7] = {GAAW_FIELD_INT("count", count),
                     GAAW_FIELD_NAMED("format", format, gaaw_data_format_name(format)),
                     GAAW_FIELD_INT("seq", seq),
                     GAAW_FIELD_INT("vocab", vocab),
                     GAAW_FIELD_DIGEST("paths", names),
                     GAAW_FIELD_DIGEST("weights", shares),
                     GAAW_FIELD_DIGEST("the files (format, token count, index or first MiB)", sizes)};
  st = gaaw_agree_world(ctx, st, "opening the datasets", f, st == GAAW_SUCCESS ? 7 : 0);
  if (st != GAAW_SUCCESS) {
    gaaw_dataset_close(&d);
    return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  }
  *out = d;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_dataset_close(gaaw_dataset_t *d)
{
  if (!d || !*d) return GAAW_SUCCESS;
  for (int i = 0; i < (*d)->count; i++) {
    gaaw_data_set *s = &(*d)->set[i];
    if (s->map) munmap((void *)s->map, s->map_size);
    free(s->path);
  }
  free(*d);
  *d = NULL;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_dataset_info(gaaw_dataset_t d, int i, gaaw_data_format_t *format, int *token_bytes,
                                int64_t *tokens, int64_t *windows)
{
  GAAW_ARG_NOT_NULL(NULL, d);
  GAAW_ARG_CHECK(d->ctx, i >= 0 && i < d->count, "dataset %d of %d", i, d->count);
  const gaaw_data_set *s = &d->set[i];
  if (format) *format = s->format;
  if (token_bytes) *token_bytes = s->s.token_bytes;
  if (tokens) *tokens = s->s.tokens;
  if (windows) *windows = s->windows;
  return GAAW_SUCCESS;
}
