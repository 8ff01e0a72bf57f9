/* Weights out and in as safetensors (gaaw_model_export, gaaw_model_import):
 *  - a GPT exported under tp 2 imports bitwise into models built under pp 2 and
 *    dp 2, and one exported with an optimizer at ZeRO 3 (dp 2) into tp 2; an MLP
 *    from tp 2 into dp 2;
 *  - the file's bytes, read here by hand: header length, names, shapes, offsets,
 *    the data of the first and last tensors;
 *  - files this test writes itself: nanoGPT's names ("transformer." prefix, a tied
 *    lm_head.weight, the attn.bias masks), BF16 and F16 data (the expected
 *    rounding of each element);
 *  - every way a file can be wrong, each the named status on both ranks, the
 *    message naming the file and the tensor, and the model unchanged. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "backends/runtime/half.h"
#include "tests/harness/model_util.h"

static int world_rank;

static gaaw_gpt_config_t small_gpt(uint64_t seed)
{
  gaaw_gpt_config_t g = model_tiny_gpt(8, GAAW_F32);
  g.seed = seed;
  return g;
}

static gaaw_model_t gpt(gaaw_context_t ctx, uint64_t seed)
{
  gaaw_model_t m;
  gaaw_gpt_config_t g = small_gpt(seed);
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g, &m));
  return m;
}

static gaaw_model_t mlp(gaaw_context_t ctx, uint64_t seed)
{
  gaaw_model_t m;
  gaaw_mlp_config_t c = {.nsizes = 4, .sizes = {3, 8, 6, 2}, .activation = GAAW_ACT_GELU, .seed = seed};
  require_ok(ctx, gaaw_model_create_mlp(ctx, &c, &m));
  return m;
}

/* All parameters in registry order (get_params: collective over the work group). */
static float *params_of(gaaw_context_t ctx, gaaw_model_t m, long *n)
{
  int64_t count;
  require_ok(ctx, gaaw_model_num_params(m, &count, NULL));
  float *v = malloc(sizeof(float) * (size_t)count);
  require_ok(ctx, gaaw_model_get_params(m, v));
  *n = (long)count;
  return v;
}

/* got == want bit for bit, or say where they first differ. */
static void expect_bitwise(const float *got, const float *want, long n, const char *what)
{
  long first = 0;
  while (first < n && memcmp(&got[first], &want[first], sizeof(float)) == 0) first++;
  expect_true(first == n, "rank %d, %s: element %ld of %ld is %.9g, expected %.9g", world_rank, what, first, n,
              first < n ? got[first] : 0.0, first < n ? want[first] : 0.0);
}

/* The little-endian f32 at p. */
static float le_f32(const unsigned char *p)
{
  return gaaw_bits_f32((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

/* import of path into m must work and give m exactly want's n values. */
static void expect_import_gives(gaaw_context_t ctx, gaaw_model_t m, const char *path, const float *want, long n,
                                const char *what)
{
  long got_n;
  expect_status_ctx(ctx, gaaw_model_import(m, path), GAAW_SUCCESS);
  float *got = params_of(ctx, m, &got_n);
  expect_bitwise(got, want, n, what);
  free(got);
}

static unsigned char *read_file(const char *path, long *size)
{
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  *size = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc((size_t)*size + 1);
  if (fread(b, 1, (size_t)*size, f) != (size_t)*size) *size = -1;
  fclose(f);
  return b;
}

static void write_bytes(const char *path, const unsigned char *b, long n)
{
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(b, 1, (size_t)n, f) != (size_t)n) {
    fprintf(stderr, "FATAL: cannot write %s\n", path);
    exit(1);
  }
  fclose(f);
}

static uint64_t le64(const unsigned char *p)
{
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

/* ---- a safetensors writer of this test's own (the library's is under test) */

typedef struct {
  char name[80];
  const char *dtype;   /* "F32", "BF16", "F16", "F64", ... */
  int ndim;
  int64_t shape[4];
  unsigned char *data; /* owned */
  long bytes;
} st_entry;

typedef struct {
  st_entry e[64];
  int n;
} st_file;

static void st_add(st_file *f, const char *name, const char *dtype, int ndim, const int64_t *shape, const void *data,
                   long bytes)
{
  st_entry *e = &f->e[f->n++];
  snprintf(e->name, sizeof e->name, "%s", name);
  e->dtype = dtype;
  e->ndim = ndim;
  memcpy(e->shape, shape, sizeof(int64_t) * (size_t)ndim);
  e->data = malloc((size_t)bytes + 1);
  memcpy(e->data, data, (size_t)bytes);
  e->bytes = bytes;
}

/* The model's parameters (values v in registry order) as F32, BF16 or F16
 * entries named prefix + name. */
static void st_add_model(st_file *f, gaaw_model_t m, const float *v, const char *prefix, const char *dtype)
{
  int count;
  require_ok(NULL, gaaw_model_param_count(m, &count));
  for (int k = 0; k < count; k++) {
    const char *name;
    int ndim;
    int64_t shape[2];
    char full[80];
    gaaw_model_param_info(m, k, &name, &ndim, shape);
    long n = (long)(shape[0] * shape[1]);
    int es = strcmp(dtype, "F32") == 0 ? 4 : 2;
    unsigned char *d = malloc((size_t)n * (size_t)es);
    for (long i = 0; i < n; i++) {
      uint32_t u = es == 4 ? gaaw_f32_bits(v[i]) : strcmp(dtype, "BF16") == 0 ? gaaw_f32_to_bf16(v[i])
                                                                                : gaaw_f32_to_f16(v[i]);
      for (int b = 0; b < es; b++) d[i * es + b] = (unsigned char)(u >> (8 * b));
    }
    snprintf(full, sizeof full, "%s%s", prefix, name);
    st_add(f, full, dtype, ndim, shape, d, n * es);
    free(d);
    v += n;
  }
}

static st_entry *st_find(st_file *f, const char *name)
{
  for (int i = 0; i < f->n; i++)
    if (strcmp(f->e[i].name, name) == 0) return &f->e[i];
  return NULL;
}

static void st_remove(st_file *f, const char *name)
{
  st_entry *e = st_find(f, name);
  free(e->data);
  *e = f->e[--f->n];
}

/* Rank 0 writes f to path (the entries in reverse order: the reader must not
 * care), then both ranks go on. */
static void st_write(const st_file *f, const char *path)
{
  if (world_rank == 0) {
    char *json = malloc(65536);
    size_t at = (size_t)snprintf(json, 65536, "{\"__metadata__\":{\"format\":\"pt\"}");
    long off = 0;
    for (int i = f->n - 1; i >= 0; i--) {
      const st_entry *e = &f->e[i];
      at += (size_t)snprintf(json + at, 65536 - at, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", e->name, e->dtype);
      for (int k = 0; k < e->ndim; k++) at += (size_t)snprintf(json + at, 65536 - at, "%s%lld", k ? "," : "",
                                                               (long long)e->shape[k]);
      at += (size_t)snprintf(json + at, 65536 - at, "],\"data_offsets\":[%ld,%ld]}", off, off + e->bytes);
      off += e->bytes;
    }
    at += (size_t)snprintf(json + at, 65536 - at, "}");
    FILE *out = fopen(path, "wb");
    unsigned char len[8];
    for (int b = 0; b < 8; b++) len[b] = (unsigned char)((uint64_t)at >> (8 * b));
    fwrite(len, 1, 8, out);
    fwrite(json, 1, at, out);
    for (int i = f->n - 1; i >= 0; i--) fwrite(f->e[i].data, 1, (size_t)f->e[i].bytes, out);
    fclose(out);
    free(json);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

static void st_free(st_file *f)
{
  for (int i = 0; i < f->n; i++) free(f->e[i].data);
  f->n = 0;
}

/* ---- the checks */

/* The exported file, read by hand: its length, the header's length, first tensor
 * and last tensor, and their data against the model's values. */
static void check_file_bytes(const char *path, const float *v, long n)
{
  if (world_rank != 0) return;
  long size;
  unsigned char *b = read_file(path, &size);
  expect_true(b != NULL, "%s was not written", path);
  if (!b) return;
  uint64_t hl = le64(b);
  expect_true(hl % 8 == 0, "header length %llu is not a multiple of 8", (unsigned long long)hl);
  expect_true((uint64_t)size == 8 + hl + 4 * (uint64_t)n, "file of %ld bytes, expected 8 + %llu + 4 x %ld", size,
              (unsigned long long)hl, n);
  char *header = malloc(hl + 1); /* as a string */
  memcpy(header, b + 8, hl);
  header[hl] = '\0';
  const char *want[] = {"{\"__metadata__\":{\"format\":\"pt\"},\"wte.weight\":{\"dtype\":\"F32\",\"shape\":[40,16],"
                        "\"data_offsets\":[0,2560]},\"wpe.weight\":{\"dtype\":\"F32\",\"shape\":[8,16],"
                        "\"data_offsets\":[2560,3072]},\"h.0.ln_1.weight\":{\"dtype\":\"F32\",\"shape\":[16],"
                        "\"data_offsets\":[3072,3136]}",
                        "\"h.1.attn.c_attn.weight\":{\"dtype\":\"F32\",\"shape\":[48,16],",
                        "\"ln_f.bias\":{\"dtype\":\"F32\",\"shape\":[16],"};
  for (int i = 0; i < 3; i++)
    expect_true(strstr(header, want[i]) != NULL, "the header lacks %s; it is %s", want[i], header);
  expect_true(strstr(header, "lm_head") == NULL, "a tied model's file has an lm_head");
  char last[64];
  snprintf(last, sizeof last, "\"data_offsets\":[%ld,%ld]}", 4 * n - 64, 4 * n);
  expect_true(strstr(header, last) != NULL, "the last tensor (ln_f.bias) is not at %s", last);
  float first[4], tail[16];
  for (int i = 0; i < 4; i++) first[i] = le_f32(b + 8 + hl + 4 * i);
  for (int i = 0; i < 16; i++) tail[i] = le_f32(b + size - 64 + 4 * i);
  expect_bitwise(first, v, 4, "the first bytes of wte.weight's data");
  expect_bitwise(tail, v + n - 16, 16, "ln_f.bias's data, the file's last bytes");
  free(header);
  free(b);
}

/* import must fail on both ranks with want, its message containing text (and,
 * when given, text2), and leave m's parameters as before. */
static void expect_import_fails(gaaw_context_t ctx, gaaw_model_t m, const char *path, gaaw_status_t want,
                                const char *text, const char *text2, const char *what)
{
  long n, n2;
  float *before = params_of(ctx, m, &n);
  double start = MPI_Wtime();
  expect_status_ctx(ctx, gaaw_model_import(m, path), want);
  const char *msg = gaaw_last_error(ctx);
  expect_true(strstr(msg, text) != NULL, "rank %d, %s: '%s' not in: %s", world_rank, what, text, msg);
  if (text2) expect_true(strstr(msg, text2) != NULL, "rank %d, %s: '%s' not in: %s", world_rank, what, text2, msg);
  expect_true(MPI_Wtime() - start < 20, "%s took %.1f s", what, MPI_Wtime() - start);
  float *after = params_of(ctx, m, &n2);
  expect_bitwise(after, before, n, what);
  free(before);
  free(after);
}

/* The expected value of a 16-bit element: decoded here independently of half.h. */
static float decode_bf16(uint16_t h)
{
  return gaaw_bits_f32((uint32_t)h << 16);
}

static float decode_f16(uint16_t h)
{
  int e = (h >> 10) & 31, mant = h & 1023;
  double v = e == 0 ? ldexp(mant, -24) : ldexp(1024 + mant, e - 25);
  return (float)((h & 0x8000) ? -v : v);
}

/* Imports a file of the model's values v written as dtype (BF16 or F16) and
 * checks every element against its decoded 16-bit value, and that value against
 * v within the dtype's half unit in the last place. */
static void check_half_import(gaaw_context_t ctx, gaaw_model_t m, const float *v, long n, const char *dtype,
                              const char *path)
{
  st_file f = {.n = 0};
  st_add_model(&f, m, v, "", dtype);
  st_write(&f, path);
  float *want = malloc(sizeof(float) * (size_t)n);
  int bf = strcmp(dtype, "BF16") == 0;
  /* half a unit in the last place: 2^-8 (bf16, 7 stored bits), 2^-11 (f16, 10)
   * of the value, and 2^-25 absolute among f16's subnormals */
  double half_ulp = bf ? 1.0 / 256 : 1.0 / 2048;
  long worst = -1;
  for (long i = 0; i < n; i++) {
    uint16_t h = bf ? gaaw_f32_to_bf16(v[i]) : gaaw_f32_to_f16(v[i]);
    want[i] = bf ? decode_bf16(h) : decode_f16(h);
    double allowed = fmax(fabs(v[i]) * half_ulp, bf ? 0.0 : ldexp(1.0, -25));
    if (fabs((double)want[i] - v[i]) > allowed && worst < 0) worst = i;
  }
  expect_true(worst < 0, "%s rounding of element %ld: %.9g for %.9g", dtype, worst, worst < 0 ? 0.0 : want[worst],
              worst < 0 ? 0.0 : v[worst]);
  expect_import_gives(ctx, m, path, want, n, bf ? "a BF16 file's values" : "an F16 file's values");
  free(want);
  st_free(&f);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  const char *file = "test_safetensors_np2.safetensors";
  const char *mine = "test_safetensors_np2.mine.safetensors";
  long n, got_n;

  /* a GPT exported under tp 2 */
  gaaw_context_t tp = test_context(MPI_COMM_WORLD, "backend=host tp=2 comm_timeout=30");
  gaaw_model_t a = gpt(tp, 1);
  model_randomise(a, 7);
  float *pa = params_of(tp, a, &n);
  remove("model.safetensors.index.json");
  expect_status_ctx(tp, gaaw_model_export(a, file), GAAW_SUCCESS);
  check_file_bytes(file, pa, n);
  /* one file holds the whole model: no index of a sharded set is written beside it */
  expect_true(access("model.safetensors.index.json", F_OK) != 0,
              "a single-file export wrote model.safetensors.index.json");

  /* ... into pp 2 and dp 2 (a model of another seed each), bitwise */
  gaaw_context_t pp = test_context(MPI_COMM_WORLD, "backend=host pp=2 comm_timeout=30");
  gaaw_model_t b = gpt(pp, 2);
  expect_import_gives(pp, b, file, pa, n, "GPT exported at tp 2, imported at pp 2");
  gaaw_context_t dp = test_context(MPI_COMM_WORLD, "backend=host comm_timeout=30");
  gaaw_model_t c = gpt(dp, 3);
  expect_import_gives(dp, c, file, pa, n, "GPT exported at tp 2, imported at dp 2");

  /* export with an optimizer at ZeRO 3 (each gather spans dp), after a step */
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  oc.zero_stage = 3;
  oc.lr = 1e-2f;
  gaaw_optimizer_t opt;
  require_ok(dp, gaaw_optimizer_create(c, &oc, &opt));
  float loss;
  model_train(dp, c, opt, 1, 2, 8, 40, 11, 1, &loss);
  float *trained = params_of(dp, c, &got_n);
  expect_status_ctx(dp, gaaw_model_export(c, mine), GAAW_SUCCESS);
  /* import refuses a model with an optimizer: its master weights and moments would stay */
  expect_import_fails(dp, c, file, GAAW_ERR_STATE, "optimizer", NULL, "import with an optimizer attached");
  gaaw_optimizer_destroy(&opt);
  gaaw_model_destroy(&c);
  expect_import_gives(tp, a, mine, trained, n, "GPT exported at dp 2 with ZeRO 3, imported at tp 2");
  free(trained);

  /* an MLP from tp 2 into dp 2 */
  gaaw_model_t ma = mlp(tp, 1), mc = mlp(dp, 2);
  long mn;
  float *ma_v = params_of(tp, ma, &mn);
  expect_status_ctx(tp, gaaw_model_export(ma, mine), GAAW_SUCCESS);
  expect_import_gives(dp, mc, mine, ma_v, mn, "MLP exported at tp 2, imported at dp 2");

  /* BF16 and F16 files load with each element's expected rounding */
  check_half_import(dp, mc, ma_v, mn, "BF16", mine);
  check_half_import(dp, mc, ma_v, mn, "F16", mine);
  gaaw_model_destroy(&mc);
  gaaw_model_destroy(&ma);
  free(ma_v);

  /* nanoGPT's names: the prefix, a tied lm_head.weight, the causal masks */
  st_file f = {.n = 0};
  float mask[64];
  for (int i = 0; i < 64; i++) mask[i] = (i % 8) <= (i / 8);
  st_add_model(&f, a, pa, "transformer.", "F32");
  st_add(&f, "lm_head.weight", "F32", 2, (int64_t[]){40, 16}, st_find(&f, "transformer.wte.weight")->data, 2560 * 1);
  st_add(&f, "transformer.h.0.attn.bias", "F32", 4, (int64_t[]){1, 1, 8, 8}, mask, sizeof mask);
  st_add(&f, "transformer.h.1.attn.bias", "F32", 4, (int64_t[]){1, 1, 8, 8}, mask, sizeof mask);
  st_write(&f, mine);
  gaaw_model_t d = gpt(pp, 4);
  expect_import_gives(pp, d, mine, pa, n, "a nanoGPT file (prefix, tied lm_head.weight, attn.bias masks) at pp 2");
  gaaw_model_destroy(&d);

  /* ---- every way a file can be wrong, into the tp 2 model holding pa ---- */
  require_ok(tp, gaaw_model_set_params(a, pa));
  expect_import_fails(tp, a, "no-such-file.safetensors", GAAW_ERR_IO, "no-such-file.safetensors", "cannot open",
                      "a missing file");
  expect_import_fails(tp, a, "no-such-set.index.json", GAAW_ERR_IO, "no-such-set.index.json", "cannot open",
                      "a missing index of a sharded set");
  expect_status_ctx(tp, gaaw_model_import(a, NULL), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(tp, gaaw_model_export(a, NULL), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_model_import(NULL, file), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_model_export(NULL, file), GAAW_ERR_INVALID_ARG);
  /* different paths on the two ranks */
  expect_import_fails(tp, a, world_rank ? mine : file, GAAW_ERR_INVALID_ARG, "path", NULL, "paths that differ");

  long size;
  unsigned char *good = world_rank == 0 ? read_file(file, &size) : NULL;
  const char *bad = "test_safetensors_np2.bad.safetensors";
  if (world_rank == 0) write_bytes(bad, good, size - 100);
  MPI_Barrier(MPI_COMM_WORLD);
  expect_import_fails(tp, a, bad, GAAW_ERR_CORRUPT, bad, "ln_f", "a truncated file");
  if (world_rank == 0) write_bytes(bad, good, 5);
  MPI_Barrier(MPI_COMM_WORLD);
  expect_import_fails(tp, a, bad, GAAW_ERR_CORRUPT, bad, "offset 0", "a file of 5 bytes");
  if (world_rank == 0) {
    unsigned char *b = malloc((size_t)size);
    memcpy(b, good, (size_t)size);
    b[4] = 1; /* a header length of 2^32 + ... */
    write_bytes(bad, b, size);
    free(b);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  expect_import_fails(tp, a, bad, GAAW_ERR_CORRUPT, bad, "past the end of the file", "a header length past the end");
  if (world_rank == 0) {
    unsigned char *b = malloc((size_t)size);
    memcpy(b, good, (size_t)size);
    char *at = strstr((char *)b + 8, "\"shape\":[40,16]");
    at[10] = '#'; /* not JSON */
    write_bytes(bad, b, size);
    free(b);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  expect_import_fails(tp, a, bad, GAAW_ERR_CORRUPT, bad, "not valid JSON at file offset", "a header that is not JSON");
  free(good);

  st_file g = {.n = 0};
  float zeros[32] = {0};
  /* a wrong shape */
  st_add_model(&g, a, pa, "", "F32");
  st_remove(&g, "ln_f.weight");
  st_add(&g, "ln_f.weight", "F32", 1, (int64_t[]){17}, zeros, 17 * 4);
  st_write(&g, bad);
  expect_import_fails(tp, a, bad, GAAW_ERR_INVALID_ARG, "'ln_f.weight' is [17] in the file", "is [16]",
                      "a wrong shape");
  /* a missing tensor */
  st_remove(&g, "ln_f.weight");
  st_write(&g, bad);
  expect_import_fails(tp, a, bad, GAAW_ERR_INVALID_ARG, "ln_f.weight [16] is not in the file", bad,
                      "a missing tensor");
  /* an unknown extra tensor */
  st_add(&g, "ln_f.weight", "F32", 1, (int64_t[]){16}, pa + n - 32, 16 * 4);
  st_add(&g, "h.0.attn.rotary", "F32", 1, (int64_t[]){8}, zeros, 8 * 4);
  st_write(&g, bad);
  expect_import_fails(tp, a, bad, GAAW_ERR_INVALID_ARG, "tensor 'h.0.attn.rotary'", "does not have",
                      "an unknown extra tensor");
  st_remove(&g, "h.0.attn.rotary");
  /* a tensor named almost like a GPT-2 mask buffer (h.N.attn.bias), which import skips */
  st_add(&g, "hx0.attn.bias", "F32", 1, (int64_t[]){8}, zeros, 8 * 4);
  st_write(&g, bad);
  expect_import_fails(tp, a, bad, GAAW_ERR_INVALID_ARG, "tensor 'hx0.attn.bias'", "does not have",
                      "a tensor named almost like a mask buffer");
  st_remove(&g, "hx0.attn.bias");
  /* a sharded set's index that names no file for a tensor its shard holds: the
   * message names the shard, the tensor and the index */
  const char *partial = "test_safetensors_np2.partial.index.json";
  if (world_rank == 0) {
    FILE *ix = fopen(partial, "w");
    fprintf(ix, "{\"metadata\": {}, \"weight_map\": {\"ln_f.weight\": \"%s\"}}\n", bad);
    fclose(ix);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  expect_import_fails(tp, a, partial, GAAW_ERR_CORRUPT, "but test_safetensors_np2.partial.index.json names no file",
                      bad, "an index that misses a tensor of its shard");
  if (world_rank == 0) remove(partial);
  /* a dtype gaaw does not read, and one that does not exist */
  st_remove(&g, "ln_f.weight");
  st_add(&g, "ln_f.weight", "F64", 1, (int64_t[]){16}, zeros, 16 * 8);
  st_write(&g, bad);
  expect_import_fails(tp, a, bad, GAAW_ERR_UNSUPPORTED, "'ln_f.weight'", "F64", "an F64 tensor");
  st_remove(&g, "ln_f.weight");
  st_add(&g, "ln_f.weight", "Q4", 1, (int64_t[]){16}, zeros, 16 * 4);
  st_write(&g, bad);
  expect_import_fails(tp, a, bad, GAAW_ERR_CORRUPT, "'ln_f.weight'", "unknown dtype", "an unknown dtype");
  /* offsets that do not match the shape */
  st_remove(&g, "ln_f.weight");
  st_add(&g, "ln_f.weight", "F32", 1, (int64_t[]){16}, zeros, 15 * 4);
  st_write(&g, bad);
  expect_import_fails(tp, a, bad, GAAW_ERR_CORRUPT, "'ln_f.weight'", "need 64", "data_offsets shorter than the shape");
  /* a tied lm_head.weight that is not the embedding */
  st_remove(&g, "ln_f.weight");
  st_add(&g, "ln_f.weight", "F32", 1, (int64_t[]){16}, pa + n - 32, 16 * 4);
  float *head = malloc(2560);
  memcpy(head, pa, 2560);
  head[17] += 1.0f;
  st_add(&g, "lm_head.weight", "F32", 2, (int64_t[]){40, 16}, head, 2560);
  st_write(&g, bad);
  expect_import_fails(tp, a, bad, GAAW_ERR_INVALID_ARG, "differs", "element 17", "an lm_head.weight unlike wte");
  free(head);
  st_remove(&g, "lm_head.weight");
  /* the same parameter twice (with and without the prefix) */
  st_add(&g, "transformer.ln_f.bias", "F32", 1, (int64_t[]){16}, pa + n - 16, 16 * 4);
  st_write(&g, bad);
  expect_import_fails(tp, a, bad, GAAW_ERR_INVALID_ARG, "twice", "ln_f.bias", "a parameter twice");
  st_remove(&g, "transformer.ln_f.bias");
  /* and the good file still loads after all that */
  st_write(&g, bad);
  expect_import_gives(tp, a, bad, pa, n, "the good file after all the bad ones");
  st_free(&g);
  st_free(&f);

  /* export to a directory that does not exist: the same IO error on both ranks */
  expect_status_ctx(tp, gaaw_model_export(a, "no-such-dir/x.safetensors"), GAAW_ERR_IO);
  expect_true(strstr(gaaw_last_error(tp), "no-such-dir/x.safetensors") != NULL, "rank %d: %s", world_rank,
              gaaw_last_error(tp));

  if (world_rank == 0) {
    remove(file);
    remove(mine);
    remove(bad);
  }
  free(pa);
  gaaw_model_destroy(&a);
  gaaw_model_destroy(&b);
  gaaw_finalize(&dp);
  gaaw_finalize(&pp);
  gaaw_finalize(&tp);
  return test_finish_mpi("test_safetensors_np2");
}
