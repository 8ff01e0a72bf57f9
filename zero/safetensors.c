/* The model's weights out and in as one safetensors file (gaaw_model_export,
 * gaaw_model_import): the parameter registry of gaaw/model.h matched against the
 * file's tensors, the collective moves, and the atomic write. The file's layout
 * is zero/safetensors_header.c's business. */
#include <errno.h>
#include <jansson.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/agree.h"
#include "backends/runtime/abort.h"
#include "backends/runtime/config_impl.h"
#include "backends/runtime/context_impl.h"
#include "backends/runtime/error.h"
#include "backends/runtime/half.h"
#include "parallel/model_impl.h"
#include "zero/hf_layout.h"
#include "zero/safetensors_header.h"
#include "zero/safetensors_registry.h"

/* The buffers of nanoGPT (and Hugging Face GPT-2) checkpoints that are not
 * parameters: the causal masks h.N.attn.bias and h.N.attn.masked_bias, skipped
 * when the model is a GPT. */
static const char *const st_buffers[] = {".attn.bias", ".attn.masked_bias"};

/* ---- export: world rank 0 writes path.tmp-XXXXXX, fsyncs it, renames it */

typedef struct {
  char *tmp;         /* the temporary file's name */
  int fd;
} st_writer;

static gaaw_status_t write_all(gaaw_context_t ctx, int fd, const char *file, const unsigned char *p, size_t n)
{
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) GAAW_FAIL(ctx, GAAW_ERR_IO, "cannot write %s: %s", file, w < 0 ? strerror(errno) : "no progress");
    p += w;
    n -= (size_t)w;
  }
  return GAAW_SUCCESS;
}

static gaaw_status_t writer_open(gaaw_context_t ctx, const char *path, gaaw_st_dtype dtype, gaaw_st_tensor *tensors,
                                 int count, st_writer *w)
{
  unsigned char *head = NULL;
  size_t head_bytes;
  size_t len = strlen(path) + sizeof ".tmp-XXXXXX";
  w->tmp = malloc(len);
  if (!w->tmp) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate a file name for %s", path);
  snprintf(w->tmp, len, "%s.tmp-XXXXXX", path);
  w->fd = mkstemp(w->tmp);
  if (w->fd < 0) {
    gaaw_status_t st = gaaw_error_raise(ctx, GAAW_ERR_IO, __FILE__, __LINE__, __func__, "cannot create %s: %s",
                                        w->tmp, strerror(errno));
    free(w->tmp); /* not ours to remove */
    w->tmp = NULL;
    return st;
  }
  if (fchmod(w->fd, 0644) != 0) GAAW_FAIL(ctx, GAAW_ERR_IO, "cannot chmod %s: %s", w->tmp, strerror(errno));
  if (count < 0) return GAAW_SUCCESS; /* not a safetensors file: the caller writes it all */
  GAAW_CHECK(gaaw_st_header_build(ctx, dtype, tensors, count, &head, &head_bytes));
  gaaw_status_t st = write_all(ctx, w->fd, w->tmp, head, head_bytes);
  free(head);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

/* Commits the file (st: how writing went): fsync, close, rename over path,
 * fsync the directory; or, after a failure, removes the temporary file. */
static gaaw_status_t writer_close(gaaw_context_t ctx, const char *path, st_writer *w, gaaw_status_t st)
{
  if (st == GAAW_SUCCESS && fsync(w->fd) != 0)
    st = gaaw_error_raise(ctx, GAAW_ERR_IO, __FILE__, __LINE__, __func__, "cannot fsync %s: %s", w->tmp,
                          strerror(errno));
  if (w->fd >= 0 && close(w->fd) != 0 && st == GAAW_SUCCESS)
    st = gaaw_error_raise(ctx, GAAW_ERR_IO, __FILE__, __LINE__, __func__, "cannot close %s: %s", w->tmp,
                          strerror(errno));
  w->fd = -1;
  if (st == GAAW_SUCCESS && rename(w->tmp, path) != 0)
    st = gaaw_error_raise(ctx, GAAW_ERR_IO, __FILE__, __LINE__, __func__, "cannot rename %s to %s: %s", w->tmp,
                          path, strerror(errno));
  if (st != GAAW_SUCCESS && w->tmp) {
    unlink(w->tmp);
  } else if (st == GAAW_SUCCESS) { /* the rename itself is durable once the directory is */
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    int dfd = dir ? open(dir, O_RDONLY) : -1;
    if (dfd >= 0 && fsync(dfd) != 0 && errno != EINVAL)
      st = gaaw_error_raise(ctx, GAAW_ERR_IO, __FILE__, __LINE__, __func__, "cannot fsync the directory %s: %s", dir,
                            strerror(errno));
    if (dfd >= 0) close(dfd);
    free(dir);
  }
  free(w->tmp);
  w->tmp = NULL;
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

/* The files an export writes: path alone, or (Hugging Face's layout, more bytes
 * than export_shard_size) shards model-0000K-of-0000N.safetensors in path's
 * directory, shard s holding the file tensors [first[s], first[s + 1]): each
 * tensor joins the current shard unless that would pass the limit (a tensor
 * larger than the limit is a shard of its own), as transformers' save_pretrained
 * cuts them. */
typedef struct {
  int n;
  int *first;  /* n + 1 entries */
  char **file;
} st_shards;

static void shards_free(st_shards *sh)
{
  for (int s = 0; s < sh->n; s++) free(sh->file[s]);
  free(sh->file);
  free(sh->first);
  memset(sh, 0, sizeof *sh);
}

static gaaw_status_t plan_shards(gaaw_model_t m, const st_registry *r, const char *path, int elem_size,
                                 st_shards *sh)
{
  gaaw_context_t ctx = m->ctx;
  size_t limit = 0;
  if (r->hf) gaaw_bytes_parse(gaaw_ctx_string(ctx, "export_shard_size"), &limit); /* checked at init */
  sh->first = calloc((size_t)r->n + 2, sizeof *sh->first);
  sh->file = calloc((size_t)r->n + 1, sizeof *sh->file);
  if (!sh->first || !sh->file) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot plan the shards of %d tensors", r->n);
  uint64_t used = 0;
  for (int k = 0; k < r->n; k++) {
    uint64_t bytes = (uint64_t)elem_size * (uint64_t)gaaw_st_numel(&r->t[k]);
    if (limit && k > 0 && used > 0 && used + bytes > limit) {
      sh->first[++sh->n] = k;
      used = 0;
    }
    used += bytes;
  }
  sh->first[++sh->n] = r->n;
  const char *slash = strrchr(path, '/');
  int dir = slash ? (int)(slash - path) + 1 : 0;
  for (int s = 0; s < sh->n; s++) {
    size_t len = (size_t)dir + 64;
    sh->file[s] = malloc(sh->n == 1 ? strlen(path) + 1 : len);
    if (!sh->file[s]) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot name shard %d", s + 1);
    if (sh->n == 1)
      strcpy(sh->file[s], path);
    else
      snprintf(sh->file[s], len, "%.*smodel-%05d-of-%05d.safetensors", dir, path, s + 1, sh->n);
  }
  return GAAW_SUCCESS;
}

/* model.safetensors.index.json beside the shards: the bytes of all tensors and
 * each tensor's file. */
static gaaw_status_t write_index(gaaw_model_t m, const st_registry *r, const st_shards *sh, int elem_size)
{
  gaaw_context_t ctx = m->ctx;
  json_t *map = json_object(), *root = json_object();
  uint64_t total = 0;
  for (int s = 0; s < sh->n; s++) {
    const char *base = strrchr(sh->file[s], '/') ? strrchr(sh->file[s], '/') + 1 : sh->file[s];
    for (int k = sh->first[s]; k < sh->first[s + 1]; k++) {
      json_object_set_new(map, r->t[k].name, json_string(base));
      total += (uint64_t)elem_size * (uint64_t)gaaw_st_numel(&r->t[k]);
    }
  }
  json_object_set_new(root, "metadata", json_pack("{sI}", "total_size", (json_int_t)total));
  json_object_set_new(root, "weight_map", map);
  char *text = json_dumps(root, JSON_INDENT(2) | JSON_SORT_KEYS);
  json_decref(root);
  const char *slash = strrchr(sh->file[0], '/');
  int dir = slash ? (int)(slash - sh->file[0]) + 1 : 0;
  size_t len = (size_t)dir + sizeof "model.safetensors.index.json";
  char *path = malloc(len);
  gaaw_status_t st = text && path ? GAAW_SUCCESS
                                  : gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__,
                                                     "cannot build the shards' index");
  st_writer w = {NULL, -1};
  if (st == GAAW_SUCCESS) {
    snprintf(path, len, "%.*smodel.safetensors.index.json", dir, sh->file[0]);
    st = writer_open(ctx, path, GAAW_ST_F32, NULL, -1, &w);
  }
  if (st == GAAW_SUCCESS) st = write_all(ctx, w.fd, w.tmp, (const unsigned char *)text, strlen(text));
  if (w.tmp) st = writer_close(ctx, path, &w, st);
  free(text);
  free(path);
  return st;
}

/* The option export_dtype (checked at init) as the file's dtype. */
static gaaw_st_dtype export_dtype(gaaw_context_t ctx)
{
  const char *d = gaaw_ctx_string(ctx, "export_dtype");
  return strcmp(d, "bf16") == 0 ? GAAW_ST_BF16 : strcmp(d, "f16") == 0 ? GAAW_ST_F16 : GAAW_ST_F32;
}

gaaw_status_t gaaw_model_export(gaaw_model_t m, const char *path)
{
  GAAW_ARG_NOT_NULL(NULL, m);
  gaaw_context_t ctx = m->ctx;
  int rank = 0;
  st_registry r = {0};
  float *v = NULL;
  unsigned char *bytes = NULL;
  st_writer w = {NULL, -1};
  gaaw_status_t st = gaaw_world_rank(ctx, &rank);
  if (st == GAAW_SUCCESS && !path)
    st = gaaw_error_raise(ctx, GAAW_ERR_INVALID_ARG, __FILE__, __LINE__, __func__, "path must not be NULL");
  if (st == GAAW_SUCCESS) st = gaaw_st_registry_read(m, &r);
  if (st == GAAW_SUCCESS) {
    v = malloc((size_t)r.max_numel * sizeof *v);
    bytes = malloc((size_t)r.max_numel * 4);
    if (!v || !bytes)
      st = gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__,
                            "cannot allocate %lld floats for the largest parameter", (long long)r.max_numel);
  }
  gaaw_field f[2] = {GAAW_FIELD_TEXT("path", path ? path : ""), GAAW_FIELD_DIGEST("the model's parameters", r.digest)};
  st = gaaw_agree_world(ctx, st, "the safetensors export", f, st == GAAW_SUCCESS ? 2 : 0);
  if (st != GAAW_SUCCESS) goto out;
  /* Every rank gathers every parameter (collective over the model's work group:
   * with an optimizer at ZeRO 3 each gather spans dp, at pp > 1 the owning stage
   * sends it); rank 0 writes what it gets. A failed write on rank 0 does not stop
   * the gathers its peers are in: it is carried to the agreement at the end. */
  /* the files: one, or Hugging Face's shards of at most export_shard_size bytes */
  st_shards sh = {0};
  gaaw_st_dtype dtype = export_dtype(ctx);
  int elem = gaaw_st_dtype_size(dtype);
  gaaw_status_t io = rank == 0 ? plan_shards(m, &r, path, elem, &sh) : GAAW_SUCCESS;
  if (rank == 0 && io == GAAW_SUCCESS) io = writer_open(ctx, sh.file[0], dtype, r.t, sh.first[1], &w);
  for (int k = 0, s = 0; k < r.n && st == GAAW_SUCCESS; k++) {
    if (rank == 0 && io == GAAW_SUCCESS && k == sh.first[s + 1]) { /* the next shard */
      io = writer_close(ctx, sh.file[s], &w, io);
      s++;
      if (io == GAAW_SUCCESS) io = writer_open(ctx, sh.file[s], dtype, r.t + k, sh.first[s + 1] - k, &w);
    }
    /* a parameter's file tensors are consecutive: it is gathered at its first */
    int p = r.param[k];
    if (k == 0 || r.param[k - 1] != p) st = gaaw_model_get_param(m, r.param_name[p], v); /* the whole work group */
    int64_t n = gaaw_st_numel(&r.t[k]);
    if (st == GAAW_SUCCESS && rank == 0 && io == GAAW_SUCCESS) {
      for (int64_t i = 0; i < n; i++) gaaw_st_store(dtype, bytes, i, v[gaaw_st_param_index(&r, k, i)]);
      io = write_all(ctx, w.fd, w.tmp, bytes, (size_t)n * (size_t)elem);
    }
  }
  if (rank == 0 && w.tmp) io = writer_close(ctx, sh.file[sh.n - 1], &w, st != GAAW_SUCCESS ? st : io);
  if (rank == 0 && sh.n > 1 && io == GAAW_SUCCESS && st == GAAW_SUCCESS) io = write_index(m, &r, &sh, elem);
  if (rank == 0 && r.hf && io == GAAW_SUCCESS && st == GAAW_SUCCESS) io = gaaw_hf_config_write(m, r.hf, path, dtype == GAAW_ST_F32 ? "float32" : dtype == GAAW_ST_BF16 ? "bfloat16" : "float16");
  shards_free(&sh);
  if (st == GAAW_SUCCESS) st = io;
  st = gaaw_agree_world(ctx, st, "writing the safetensors file", NULL, 0);
out:
  free(v);
  free(bytes);
  gaaw_st_registry_free(&r);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

/* ---- import: world rank 0 reads and checks the file, then sends each parameter */

/* What rank 0 read: the file's bytes, its header, and for each registry entry the
 * file tensor that holds it. */
typedef struct {
  unsigned char *bytes;
  size_t size;
  gaaw_st_header h;
  int *of_param;
} st_file;

static void file_free(st_file *f)
{
  free(f->bytes);
  free(f->of_param);
  gaaw_st_header_free(&f->h);
  memset(f, 0, sizeof *f);
}

static gaaw_status_t read_bytes(gaaw_context_t ctx, const char *path, st_file *f)
{
  FILE *in = fopen(path, "rb");
  if (!in) GAAW_FAIL(ctx, GAAW_ERR_IO, "cannot open %s: %s", path, strerror(errno));
  struct stat s;
  gaaw_status_t st = GAAW_SUCCESS;
  if (fstat(fileno(in), &s) != 0 || !S_ISREG(s.st_mode))
    st = gaaw_error_raise(ctx, GAAW_ERR_IO, __FILE__, __LINE__, __func__, "%s is not a regular file", path);
  if (st == GAAW_SUCCESS) {
    f->size = (size_t)s.st_size;
    f->bytes = malloc(f->size ? f->size : 1);
    if (!f->bytes)
      st = gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__, "cannot allocate %zu bytes for %s",
                            f->size, path);
  }
  if (st == GAAW_SUCCESS && fread(f->bytes, 1, f->size, in) != f->size)
    st = gaaw_error_raise(ctx, GAAW_ERR_IO, __FILE__, __LINE__, __func__, "cannot read the %zu bytes of %s", f->size,
                          path);
  fclose(in);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

/* Whether name (prefix stripped) is one of the mask buffers h.N<buffer>. */
static int is_mask_buffer(const char *name)
{
  if (strncmp(name, "h.", 2) != 0) return 0;
  const char *p = name + 2;
  if (*p < '0' || *p > '9') return 0;
  while (*p >= '0' && *p <= '9') p++;
  for (size_t b = 0; b < sizeof st_buffers / sizeof st_buffers[0]; b++)
    if (strcmp(p, st_buffers[b]) == 0) return 1;
  return 0;
}

static const unsigned char *data_of(const st_file *f, const gaaw_st_tensor *t)
{
  return f->bytes + f->h.data_start + t->begin;
}

/* The file's tensor t against the registry's entry want: a dtype gaaw reads,
 * the same shape. */
static gaaw_status_t check_tensor(gaaw_context_t ctx, const char *path, const gaaw_st_tensor *t,
                                  const gaaw_st_tensor *want, uint64_t data_start)
{
  char a[96], b[96];
  if (t->dtype == GAAW_ST_OTHER)
    GAAW_FAIL(ctx, GAAW_ERR_UNSUPPORTED, "%s: tensor '%s' (data at file offset %llu) is %s: gaaw reads F32, BF16 and "
              "F16", path, t->name, (unsigned long long)(data_start + t->begin), t->dtype_name);
  int same = t->ndim == want->ndim;
  for (int k = 0; same && k < t->ndim; k++) same = t->shape[k] == want->shape[k];
  if (!same)
    GAAW_FAIL(ctx, GAAW_ERR_INVALID_ARG, "%s: tensor '%s' is %s in the file, the model's %s is %s", path, t->name,
              gaaw_st_shape_text(t, a, sizeof a), want->name, gaaw_st_shape_text(want, b, sizeof b));
  return GAAW_SUCCESS;
}

/* A tied model: the file's lm_head.weight must be the file's wte.weight. */
static gaaw_status_t check_tied_head(gaaw_context_t ctx, const char *path, const st_file *f, const st_registry *r,
                                     const gaaw_st_tensor *head)
{
  int w = gaaw_st_registry_find(r, "wte.weight");
  const gaaw_st_tensor *wte = &f->h.tensors[f->of_param[w]];
  GAAW_CHECK(check_tensor(ctx, path, head, &r->t[w], f->h.data_start));
  for (int64_t i = 0, n = gaaw_st_numel(wte); i < n; i++) {
    float x = gaaw_st_load(head, data_of(f, head), i), y = gaaw_st_load(wte, data_of(f, wte), i);
    if (gaaw_f32_bits(x) != gaaw_f32_bits(y))
      GAAW_FAIL(ctx, GAAW_ERR_INVALID_ARG, "%s: the model ties its LM head to wte.weight, but the file's %s differs "
                "from its %s at element %lld (%g, %g)", path, head->name, wte->name, (long long)i, x, y);
  }
  return GAAW_SUCCESS;
}

/* Matches the file's tensors with the registry: every parameter found once with
 * its shape, nothing else but a tied lm_head.weight and the mask buffers. */
static gaaw_status_t match(gaaw_context_t ctx, const char *path, const st_registry *r, st_file *f)
{
  const gaaw_st_tensor *head = NULL;
  f->of_param = malloc((r->n ? (size_t)r->n : 1) * sizeof *f->of_param);
  if (!f->of_param) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate %d entries", r->n);
  for (int k = 0; k < r->n; k++) f->of_param[k] = -1;
  for (int i = 0; i < f->h.count; i++) {
    const gaaw_st_tensor *t = &f->h.tensors[i];
    char buf[GAAW_HF_NAME_MAX + sizeof GAAW_ST_NANOGPT_PREFIX];
    const char *name = gaaw_st_registry_key(r, t->name, buf, sizeof buf);
    int k = gaaw_st_registry_find_file(r, name);
    if (k >= 0 && f->of_param[k] >= 0)
      GAAW_FAIL(ctx, GAAW_ERR_INVALID_ARG, "%s: the model's %s is in the file twice, as '%s' and '%s'", path, name,
                f->h.tensors[f->of_param[k]].name, t->name);
    if (k >= 0) {
      if (r->gpt && !r->hf && t->ndim == 2 && t->shape[0] != t->shape[1] && t->shape[0] == r->t[k].shape[1] &&
          t->shape[1] == r->t[k].shape[0])
        GAAW_FAIL(ctx, GAAW_ERR_INVALID_ARG, "%s: tensor '%s' is the transpose of the model's: a file in Hugging "
                  "Face's GPT-2 layout (Conv1D weights as (in, out)) reads with the option gpt2_names=hf", path,
                  t->name);
      GAAW_CHECK(check_tensor(ctx, path, t, &r->t[k], f->h.data_start));
      f->of_param[k] = i;
    } else if (r->tied && strcmp(name, "lm_head.weight") == 0 && !head) {
      head = t;
    } else if (!(r->gpt && r->hf != GAAW_HF_LLAMA && is_mask_buffer(gaaw_st_strip_prefix(name)))) {
      GAAW_FAIL(ctx, GAAW_ERR_INVALID_ARG, "%s: the file holds tensor '%s' (data at file offset %llu), which the "
                "model does not have%s", path, t->name, (unsigned long long)(f->h.data_start + t->begin),
                strcmp(name, "lm_head.weight") == 0 ? " (twice?)" : "");
    }
  }
  for (int k = 0; k < r->n; k++) {
    char s[96];
    if (f->of_param[k] < 0 && r->hf)
      GAAW_FAIL(ctx, GAAW_ERR_INVALID_ARG, "%s: the model's tensor %s %s (Hugging Face's %s name) is not in the "
                "file", path, r->t[k].name, gaaw_st_shape_text(&r->t[k], s, sizeof s),
                r->hf == GAAW_HF_LLAMA ? "LLaMA" : "GPT-2");
    if (f->of_param[k] < 0)
      GAAW_FAIL(ctx, GAAW_ERR_INVALID_ARG, "%s: the model's parameter %s %s is not in the file (nor as %s%s)", path,
                r->t[k].name, gaaw_st_shape_text(&r->t[k], s, sizeof s), GAAW_ST_NANOGPT_PREFIX, r->t[k].name);
  }
  if (head) GAAW_CHECK(check_tied_head(ctx, path, f, r, head));
  return GAAW_SUCCESS;
}

/* What path names: a safetensors file, the index of Hugging Face's sharded set
 * (*.index.json), or a directory holding either (model.safetensors.index.json
 * first, else model.safetensors). *file (malloc'ed) is what to read. */
static gaaw_status_t resolve(gaaw_context_t ctx, const char *path, char **file, int *index)
{
  struct stat s;
  size_t len = strlen(path);
  *index = len > 11 && !strcmp(path + len - 11, ".index.json");
  if (stat(path, &s) != 0 || !S_ISDIR(s.st_mode)) {
    *file = strdup(path);
  } else {
    *file = malloc(len + 40);
    if (*file) {
      snprintf(*file, len + 40, "%s/model.safetensors.index.json", path);
      *index = stat(*file, &s) == 0;
      if (!*index) snprintf(*file, len + 40, "%s/model.safetensors", path);
    }
  }
  if (!*file) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot name the file of %s", path);
  return GAAW_SUCCESS;
}

/* Appends shard `name` (data from its header's data_start on) to f: its bytes at
 * the end of f->bytes, its tensors with their offsets moved there; each must be
 * in that file by the index ix. */
static gaaw_status_t add_shard(gaaw_context_t ctx, const char *index, const char *dir, const char *name,
                               const gaaw_st_index *ix, st_file *f)
{
  char *path = malloc(strlen(dir) + strlen(name) + 2);
  st_file one = {0};
  if (!path) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot name shard %s", name);
  sprintf(path, "%s%s", dir, name);
  gaaw_status_t st = read_bytes(ctx, path, &one);
  if (st == GAAW_SUCCESS) st = gaaw_st_header_parse(ctx, path, one.bytes, one.size, &one.h);
  size_t data = one.size - (size_t)one.h.data_start;
  unsigned char *grown = st == GAAW_SUCCESS ? realloc(f->bytes, f->size + data + 1) : NULL;
  gaaw_st_tensor *more = st == GAAW_SUCCESS ? realloc(f->h.tensors, sizeof *more * (size_t)(f->h.count + one.h.count + 1))
                                            : NULL;
  if (st == GAAW_SUCCESS && (!grown || !more))
    st = gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__, "cannot hold shard %s", path);
  if (grown) f->bytes = grown;
  if (more) f->h.tensors = more;
  for (int i = 0; st == GAAW_SUCCESS && i < one.h.count; i++) {
    gaaw_st_tensor t = one.h.tensors[i];
    const char *where = gaaw_st_index_file_of(ix, t.name);
    if (!where || strcmp(where, name) != 0)
      st = gaaw_error_raise(ctx, GAAW_ERR_CORRUPT, __FILE__, __LINE__, __func__,
                            "%s: tensor '%s' is in %s, but %s names %s", path, t.name, name, index,
                            where ? where : "no file for it");
    t.begin += f->size, t.end += f->size;
    one.h.tensors[i].name = NULL; /* moved */
    f->h.tensors[f->h.count++] = t;
  }
  if (st == GAAW_SUCCESS) {
    memcpy(f->bytes + f->size, one.bytes + one.h.data_start, data);
    f->size += data;
  }
  file_free(&one);
  free(path);
  return st;
}

/* Hugging Face's sharded set: every file the index's weight_map names, read and
 * laid end to end as if one file of data_start 0. */
static gaaw_status_t read_shards(gaaw_context_t ctx, const char *index, st_file *f)
{
  st_file text = {0};
  gaaw_st_index ix = {0};
  const char *slash = strrchr(index, '/');
  char *dir = slash ? strndup(index, (size_t)(slash - index) + 1) : strdup("");
  if (!dir) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot name the directory of %s", index);
  gaaw_status_t st = read_bytes(ctx, index, &text);
  if (st == GAAW_SUCCESS) st = gaaw_st_index_parse(ctx, index, (const char *)text.bytes, text.size, &ix);
  for (int s = 0; st == GAAW_SUCCESS && s < ix.nfiles; s++) st = add_shard(ctx, index, dir, ix.file[s], &ix, f);
  if (st == GAAW_SUCCESS && f->h.count != ix.ntensors)
    st = gaaw_error_raise(ctx, GAAW_ERR_CORRUPT, __FILE__, __LINE__, __func__, "%s names %d tensors, its files hold %d",
                          index, ix.ntensors, f->h.count);
  gaaw_st_index_free(&ix);
  file_free(&text);
  free(dir);
  return st;
}

static gaaw_status_t file_load(gaaw_model_t m, const char *path, const st_registry *r, st_file *f)
{
  gaaw_context_t ctx = m->ctx;
  char *file = NULL;
  int index = 0;
  GAAW_CHECK(resolve(ctx, path, &file, &index));
  gaaw_status_t st = r->hf ? gaaw_hf_config_check(m, r->hf, file) : GAAW_SUCCESS;
  if (st == GAAW_SUCCESS && index) st = read_shards(ctx, file, f);
  if (st == GAAW_SUCCESS && !index) st = read_bytes(ctx, file, f);
  if (st == GAAW_SUCCESS && !index) st = gaaw_st_header_parse(ctx, file, f->bytes, f->size, &f->h);
  if (st == GAAW_SUCCESS) st = match(ctx, file, r, f);
  free(file);
  return st;
}

/* After the agreement: rank 0 assembles each parameter in f32 from its file
 * tensors, world gets it by broadcast, every rank keeps its slice. */
static gaaw_status_t send_params(gaaw_model_t m, const st_registry *r, const st_file *f, int rank, int size,
                                 gaaw_buffer_t buf, float *v)
{
  gaaw_context_t ctx = m->ctx;
  for (int k = 0, p = 0; p < r->nparams; p++) {
    int64_t n = r->param_numel[p];
    for (; k < r->n && r->param[k] == p; k++) {
      if (rank != 0) continue;
      const gaaw_st_tensor *t = &f->h.tensors[f->of_param[k]];
      for (int64_t i = 0, tn = gaaw_st_numel(t); i < tn; i++) v[gaaw_st_param_index(r, k, i)] = gaaw_st_load(t, data_of(f, t), i);
    }
    if (size > 1) {
      gaaw_tensor_t t;
      GAAW_CHECK(gaaw_tensor_view(buf, 0, GAAW_F32, 1, &n, &t));
      if (rank == 0) GAAW_CHECK(gaaw_buffer_write(ctx, buf, 0, v, (size_t)n * sizeof *v));
      GAAW_CHECK(gaaw_comm_broadcast(m->world, &t, 0));
      GAAW_CHECK(gaaw_buffer_read(ctx, buf, 0, v, (size_t)n * sizeof *v));
    }
    GAAW_CHECK(gaaw_model_set_param(m, r->param_name[p], v));
  }
  return GAAW_SUCCESS;
}

/* Rank 0 alone reads the file: one reader on a shared file system instead of one
 * per rank, a path that only rank 0's node has works, and the verdict on the file
 * is one rank's, so it cannot differ between ranks; the others get its message
 * through the agreement and the values by broadcast. */
gaaw_status_t gaaw_model_import(gaaw_model_t m, const char *path)
{
  GAAW_ARG_NOT_NULL(NULL, m);
  gaaw_context_t ctx = m->ctx;
  int rank = 0, size = 1;
  st_registry r = {0};
  st_file f = {0};
  float *v = NULL;
  gaaw_buffer_t buf = NULL;
  gaaw_status_t st = gaaw_world_rank(ctx, &rank);
  if (st == GAAW_SUCCESS) st = gaaw_world_size(ctx, &size);
  if (st == GAAW_SUCCESS && !path)
    st = gaaw_error_raise(ctx, GAAW_ERR_INVALID_ARG, __FILE__, __LINE__, __func__, "path must not be NULL");
  if (st == GAAW_SUCCESS && m->hooks.user)
    st = gaaw_error_raise(ctx, GAAW_ERR_STATE, __FILE__, __LINE__, __func__,
                          "the model has an optimizer, whose master weights and moments would keep the old "
                          "values: import before gaaw_optimizer_create, or use gaaw_checkpoint_load");
  if (st == GAAW_SUCCESS) st = gaaw_st_registry_read(m, &r);
  if (st == GAAW_SUCCESS) {
    v = malloc((size_t)r.max_numel * sizeof *v);
    if (!v)
      st = gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__,
                            "cannot allocate %lld floats for the largest parameter", (long long)r.max_numel);
  }
  if (st == GAAW_SUCCESS && size > 1)
    st = gaaw_buffer_alloc(ctx, (size_t)r.max_numel * sizeof(float), GAAW_MEM_COMMUNICATION, &buf);
  if (st == GAAW_SUCCESS && rank == 0) st = file_load(m, path, &r, &f);
  gaaw_field fields[2] = {GAAW_FIELD_TEXT("path", path ? path : ""),
                          GAAW_FIELD_DIGEST("the model's parameters", r.digest)};
  st = gaaw_agree_world(ctx, st, "the safetensors import", fields, st == GAAW_SUCCESS ? 2 : 0);
  if (st == GAAW_SUCCESS) {
    /* only a device or communication failure can stop it now, when peers may be
     * inside a broadcast this rank will not join: the context is aborted */
    st = send_params(m, &r, &f, rank, size, buf, v);
    if (st != GAAW_SUCCESS && size > 1) gaaw_context_abort(ctx);
  }
  if (buf) gaaw_buffer_free(ctx, &buf);
  free(v);
  file_free(&f);
  gaaw_st_registry_free(&r);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}
