/* Datasets (gaaw/data.h) on 4 ranks:
 *  - one token stream written as a Megatron indexed dataset (uint16 and int32, in
 *    uneven documents) and as llm.c files (uint16 and uint32): every sample comes
 *    from the same place and every batch holds the same tokens in all four;
 *  - the permutation is one (every window once per epoch), and epochs differ;
 *  - each rank's rows of a global batch (dp 4 x 2 rows) are the rows a single
 *    reader of the whole global batch gets (any layout reads the same windows);
 *  - blends of 2 and 5 datasets: at every prefix up to 20,000 samples each
 *    dataset's count is within 2 of its share (0.5 and 1.5: depth 1 and 3), the picks add
 *    up to gaaw_dataset_blend_counts, and the counts at sample 10^9 come at once;
 *    weights of 1e308 each (their sum beyond a double) still split in halves;
 *  - one bytes file alone gives gaaw-train's historical windows (the formula
 *    written out here);
 *  - damaged files (magic, version, dtype, size, pointers, document indices, the
 *    .bin's size; llm.c's magic, version and count) are GAAW_ERR_CORRUPT naming
 *    the file on every rank, also when only rank 2 opens the damaged one;
 *  - a token >= vocab in one rank's rows is GAAW_ERR_CORRUPT on every rank, and
 *    gaaw_dataset_verify names its byte offset; a sidecar (FILE.gaaw.json) with a
 *    larger vocabulary is refused at open;
 *  - memory: a sparse 2 GiB llm.c file (2^30 zero tokens) opens and serves 2,000
 *    batches with RssAnon within 4 MiB of what the 10 KB file left (mapped pages
 *    are file-backed, never anonymous), and 8 such opens add nothing. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/harness/test_util.h"

enum { TOKENS = 5000, SEQ = 16, VOCAB = 1000, DOCS = 7 };

static int rank;
static char dir[64];

static void put(FILE *f, uint64_t v, int bytes)
{
  for (int b = 0; b < bytes; b++) fputc((int)(v >> (8 * b)) & 0xff, f);
}

/* Rank 0 writes the stream as PREFIX.bin / PREFIX.idx (dtype code, token bytes):
 * DOCS documents of uneven lengths, one sequence each. */
static void write_megatron(const char *prefix, const uint32_t *t, int n, int code, int bytes)
{
  if (rank != 0) return;
  char path[160];
  snprintf(path, sizeof path, "%s.bin", prefix);
  FILE *f = fopen(path, "wb");
  for (int i = 0; i < n; i++) put(f, t[i], bytes);
  fclose(f);
  int64_t len[DOCS], at = 0;
  for (int d = 0; d < DOCS; d++) len[d] = d < DOCS - 1 ? (n / DOCS) + (d % 3) * 11 - 11 : 0;
  for (int d = 0; d < DOCS - 1; d++) at += len[d];
  len[DOCS - 1] = n - at;
  snprintf(path, sizeof path, "%s.idx", prefix);
  f = fopen(path, "wb");
  fwrite("MMIDIDX\0\0", 1, 9, f);
  put(f, 1, 8);
  put(f, (uint64_t)code, 1);
  put(f, DOCS, 8);
  put(f, DOCS + 1, 8);
  for (int d = 0; d < DOCS; d++) put(f, (uint64_t)len[d], 4);
  at = 0;
  for (int d = 0; d < DOCS; d++) put(f, (uint64_t)at, 8), at += len[d] * bytes;
  for (int d = 0; d <= DOCS; d++) put(f, (uint64_t)d, 8);
  fclose(f);
}

static void write_llmc(const char *path, const uint32_t *t, int n, int version)
{
  if (rank != 0) return;
  FILE *f = fopen(path, "wb");
  put(f, 20240520, 4);
  put(f, (uint64_t)version, 4);
  put(f, (uint64_t)n, 4);
  for (int i = 3; i < 256; i++) put(f, 0, 4);
  for (int i = 0; i < n; i++) put(f, t[i], version == 1 ? 2 : 4);
  fclose(f);
}

/* Overwrites `bytes` bytes at offset of path with v (rank 0), after copying src
 * there. */
static void damage(const char *src, const char *path, long offset, uint64_t v, int bytes)
{
  if (rank != 0) return;
  FILE *in = fopen(src, "rb"), *out = fopen(path, "wb");
  int c;
  while ((c = fgetc(in)) != EOF) fputc(c, out);
  fclose(in);
  fseek(out, offset, SEEK_SET);
  put(out, v, bytes);
  fclose(out);
}

static gaaw_dataset_t open_one(gaaw_context_t ctx, const char *path, gaaw_data_format_t format)
{
  gaaw_dataset_t d;
  require_ok(ctx, gaaw_dataset_open(ctx, 1, &path, NULL, format, SEQ, VOCAB, &d));
  return d;
}

/* The four formats of one stream give the same samples and batches. */
static void same_tokens_every_format(gaaw_context_t ctx, const char *const *paths, int count)
{
  int32_t want_t[4 * SEQ], want_y[4 * SEQ], got_t[4 * SEQ], got_y[4 * SEQ];
  gaaw_dataset_t first = open_one(ctx, paths[0], GAAW_DATA_AUTO);
  for (int k = 1; k < count; k++) {
    gaaw_dataset_t d = open_one(ctx, paths[k], GAAW_DATA_AUTO);
    int64_t tokens_a, tokens_b, windows;
    gaaw_dataset_info(first, 0, NULL, NULL, &tokens_a, NULL);
    gaaw_dataset_info(d, 0, NULL, NULL, &tokens_b, &windows);
    expect_true(tokens_a == TOKENS && tokens_b == TOKENS, "%s: %lld tokens, expected %d", paths[k],
                (long long)tokens_b, TOKENS);
    expect_true(windows == (TOKENS - TOKENS / 10 - 1) / SEQ, "%s: %lld windows", paths[k], (long long)windows);
    for (int64_t step = 0; step < 40; step++) {
      require_ok(ctx, gaaw_dataset_train_batch(first, 7, step, 16, 4 * rank, 4, want_t, want_y));
      require_ok(ctx, gaaw_dataset_train_batch(d, 7, step, 16, 4 * rank, 4, got_t, got_y));
      expect_true(!memcmp(want_t, got_t, sizeof got_t) && !memcmp(want_y, got_y, sizeof got_y),
                  "%s: step %lld's rows differ from %s's", paths[k], (long long)step, paths[0]);
    }
    require_ok(ctx, gaaw_dataset_val_batch(first, 4 * rank, 16, 4, want_t, want_y));
    require_ok(ctx, gaaw_dataset_val_batch(d, 4 * rank, 16, 4, got_t, got_y));
    expect_true(!memcmp(want_t, got_t, sizeof got_t), "%s: validation rows differ", paths[k]);
    gaaw_dataset_close(&d);
  }
  gaaw_dataset_close(&first);
}

/* Every window once in each epoch; each rank's rows as one reader's. */
static void windows_and_layouts(gaaw_context_t ctx, const char *path, const uint32_t *stream)
{
  gaaw_dataset_t d = open_one(ctx, path, GAAW_DATA_AUTO);
  int64_t windows;
  gaaw_dataset_info(d, 0, NULL, NULL, NULL, &windows);
  char *seen = calloc((size_t)windows, 1);
  int order_differs = 0;
  for (int64_t n = 0; n < 2 * windows; n++) {
    int which;
    int64_t start, again;
    require_ok(ctx, gaaw_dataset_sample_source(d, 3, n, &which, &start));
    expect_true(which == 0 && start % SEQ == 0 && start / SEQ < windows, "sample %lld: dataset %d, start %lld",
                (long long)n, which, (long long)start);
    if (n < windows) seen[start / SEQ]++;
    if (n >= windows) {
      gaaw_dataset_sample_source(d, 3, n - windows, &which, &again);
      order_differs |= again != start;
    }
  }
  int once = 1;
  for (int64_t w = 0; w < windows; w++) once &= seen[w] == 1;
  expect_true(once, "the first epoch does not hold every window exactly once");
  expect_true(order_differs, "epoch 2 repeats epoch 1's order");
  free(seen);

  /* dp 4 x 2 rows against one reader of the 8 rows; and the tokens are the stream's */
  int32_t mine_t[2 * SEQ], mine_y[2 * SEQ], all_t[8 * SEQ], all_y[8 * SEQ];
  for (int64_t step = 0; step < 20; step++) {
    require_ok(ctx, gaaw_dataset_train_batch(d, 11, step, 8, 2 * rank, 2, mine_t, mine_y));
    require_ok(ctx, gaaw_dataset_train_batch(d, 11, step, 8, 0, 8, all_t, all_y));
    expect_true(!memcmp(mine_t, all_t + 2 * rank * SEQ, sizeof mine_t) &&
                  !memcmp(mine_y, all_y + 2 * rank * SEQ, sizeof mine_y),
                "rank %d's rows of step %lld differ from one reader's", rank, (long long)step);
    int which;
    int64_t start;
    gaaw_dataset_sample_source(d, 11, step * 8 + 2 * rank, &which, &start);
    int match = 1;
    for (int t = 0; t < SEQ; t++) match &= mine_t[t] == (int32_t)stream[start + t] && mine_y[t] == (int32_t)stream[start + t + 1];
    expect_true(match, "step %lld, rank %d: the window is not the stream's tokens at %lld", (long long)step, rank,
                (long long)start);
  }
  gaaw_dataset_close(&d);
}

/* Counts within `bound` of the shares at every prefix, consistent with the picks. */
static void blend(gaaw_context_t ctx, int count, const char *path, const double *weights, double bound)
{
  const char *paths[5];
  for (int i = 0; i < count; i++) paths[i] = path;
  gaaw_dataset_t d;
  require_ok(ctx, gaaw_dataset_open(ctx, count, paths, weights, GAAW_DATA_AUTO, SEQ, VOCAB, &d));
  double total = 0, worst = 0;
  for (int i = 0; i < count; i++) total += weights[i];
  int64_t run[5] = {0}, closed[5];
  int consistent = 1;
  for (int64_t n = 1; n <= 20000; n++) {
    int which;
    int64_t start;
    gaaw_dataset_sample_source(d, 5, n - 1, &which, &start);
    run[which]++;
    gaaw_dataset_blend_counts(d, n, closed);
    for (int i = 0; i < count; i++) {
      double off = (double)run[i] - (double)n * weights[i] / total;
      if (off < 0) off = -off;
      if (off > worst) worst = off;
      consistent &= closed[i] == run[i];
    }
  }
  expect_true(worst <= bound, "blend of %d: a prefix is %.3f samples off its share (bound %.1f)", count, worst, bound);
  expect_true(consistent, "blend of %d: gaaw_dataset_blend_counts differs from the picks", count);
  int64_t sum = 0;
  require_ok(ctx, gaaw_dataset_blend_counts(d, 1000000000, closed));
  for (int i = 0; i < count; i++) {
    double off = (double)closed[i] - 1e9 * weights[i] / total;
    expect_true(off <= bound && off >= -bound, "blend of %d at 10^9: dataset %d has %lld", count, i,
                (long long)closed[i]);
    sum += closed[i];
  }
  expect_true(sum == 1000000000, "blend of %d at 10^9: the counts add up to %lld", count, (long long)sum);
  gaaw_dataset_close(&d);
}

/* Weights whose sum is beyond a double: the shares are still halves. */
static void huge_weights(gaaw_context_t ctx, const char *path)
{
  const char *paths[2] = {path, path};
  const double weights[2] = {1e308, 1e308};
  gaaw_dataset_t d;
  require_ok(ctx, gaaw_dataset_open(ctx, 2, paths, weights, GAAW_DATA_AUTO, SEQ, VOCAB, &d));
  int64_t counts[2];
  require_ok(ctx, gaaw_dataset_blend_counts(d, 1000, counts));
  expect_true(counts[0] == 500 && counts[1] == 500, "weights 1e308 and 1e308: counts %lld and %lld of 1000",
              (long long)counts[0], (long long)counts[1]);
  int32_t t[SEQ], y[SEQ];
  require_ok(ctx, gaaw_dataset_train_batch(d, 1, 3, 4, rank, 1, t, y));
  gaaw_dataset_close(&d);
}

/* One bytes file alone: gaaw-train's historical windows, written out. */
static uint64_t mix(uint64_t x)
{
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static void historical_bytes(gaaw_context_t ctx, const char *path, const unsigned char *text, size_t size)
{
  gaaw_dataset_t d = open_one(ctx, path, GAAW_DATA_BYTES);
  size_t train = size - size / 10, val = size / 10;
  int32_t t[3 * SEQ], y[3 * SEQ];
  int same = 1;
  for (int64_t step = 0; step < 10; step++) {
    require_ok(ctx, gaaw_dataset_train_batch(d, 1337, step, 12, 3 * rank, 3, t, y));
    uint64_t base = mix(mix(1337) ^ (uint64_t)step);
    for (int b = 0; b < 3; b++) {
      size_t start = (size_t)(mix(base ^ (uint64_t)(3 * rank + b)) % (train - SEQ));
      for (int k = 0; k < SEQ; k++) same &= t[b * SEQ + k] == text[start + k] && y[b * SEQ + k] == text[start + k + 1];
    }
  }
  require_ok(ctx, gaaw_dataset_val_batch(d, 3 * rank, 12, 3, t, y));
  for (int b = 0; b < 3; b++) {
    size_t start = train + (size_t)(3 * rank + b) * (val - SEQ - 1) / 11;
    for (int k = 0; k < SEQ; k++) same &= t[b * SEQ + k] == text[start + k];
  }
  expect_true(same, "the bytes windows are not gaaw-train's historical ones");
  gaaw_dataset_close(&d);
}

static void expect_open_fails(gaaw_context_t ctx, const char *path, gaaw_data_format_t format, const char *name)
{
  gaaw_dataset_t d = NULL;
  expect_status_ctx(ctx, gaaw_dataset_open(ctx, 1, &path, NULL, format, SEQ, VOCAB, &d), GAAW_ERR_CORRUPT);
  expect_true(strstr(gaaw_last_error(ctx), name) != NULL, "the error does not name %s: %s", name,
              gaaw_last_error(ctx));
  expect_true(d == NULL, "a failed open left a dataset");
}

static void damaged(gaaw_context_t ctx, const char *good, const char *llmc)
{
  char src[160], bad[160], badbin[160], prefix[160];
  snprintf(src, sizeof src, "%s.idx", good);
  snprintf(prefix, sizeof prefix, "%s/bad", dir);
  snprintf(bad, sizeof bad, "%s/bad.idx", dir);
  snprintf(badbin, sizeof badbin, "%s/bad.bin", dir);
  /* offset, value, bytes: magic, version, dtype float32, sequence count,
   * a pointer, a document index */
  const long at[] = {0, 9, 17, 18, 34 + 4 * DOCS + 8 * 2, 34 + 12 * DOCS + 8 * 3};
  const uint64_t v[] = {'X', 2, 7, DOCS + 1, 3, 99};
  const int bytes[] = {1, 8, 1, 8, 8, 8};
  char good_bin[160];
  snprintf(good_bin, sizeof good_bin, "%s.bin", good);
  damage(good_bin, badbin, 0, 0, 0);
  for (int k = 0; k < 6; k++) {
    damage(src, bad, at[k], v[k], bytes[k]);
    MPI_Barrier(MPI_COMM_WORLD);
    expect_open_fails(ctx, prefix, GAAW_DATA_MEGATRON, "bad.idx");
  }
  /* the .bin one token short */
  damage(src, bad, 0, 'M', 1);
  if (rank == 0) truncate(badbin, 2 * TOKENS - 2);
  MPI_Barrier(MPI_COMM_WORLD);
  expect_open_fails(ctx, prefix, GAAW_DATA_MEGATRON, "bad.idx");
  /* llm.c: magic, version, count */
  const long lat[] = {0, 4, 8};
  const uint64_t lv[] = {20240521, 3, TOKENS + 1};
  for (int k = 0; k < 3; k++) {
    damage(llmc, bad, lat[k], lv[k], 4);
    MPI_Barrier(MPI_COMM_WORLD);
    expect_open_fails(ctx, bad, GAAW_DATA_LLMC, "bad.idx");
  }
  /* only rank 2 opens a damaged file: every rank fails, naming it */
  damage(llmc, bad, 8, TOKENS - 1, 4);
  MPI_Barrier(MPI_COMM_WORLD);
  const char *mine = rank == 2 ? bad : llmc;
  gaaw_dataset_t d = NULL;
  expect_status_ctx(ctx, gaaw_dataset_open(ctx, 1, &mine, NULL, GAAW_DATA_LLMC, SEQ, VOCAB, &d), GAAW_ERR_CORRUPT);
  expect_true(strstr(gaaw_last_error(ctx), "bad.idx") != NULL, "rank %d: not rank 2's error: %s", rank,
              gaaw_last_error(ctx));
}

/* A token >= vocab where only rank 1's rows read it. */
static void token_out_of_range(gaaw_context_t ctx, uint32_t *stream)
{
  char path[160];
  snprintf(path, sizeof path, "%s/big.llmc", dir);
  gaaw_dataset_t d;
  const char *p = path;
  /* find a window rank 1 reads at step 0 (rows 2, 3 of 8) that the others do not */
  write_llmc(path, stream, TOKENS, 2);
  MPI_Barrier(MPI_COMM_WORLD);
  require_ok(ctx, gaaw_dataset_open(ctx, 1, &p, NULL, GAAW_DATA_LLMC, SEQ, VOCAB, &d));
  int which;
  int64_t start;
  gaaw_dataset_sample_source(d, 9, 2, &which, &start);
  gaaw_dataset_close(&d);
  uint32_t saved = stream[start + 3];
  stream[start + 3] = 70000; /* beyond uint16 too */
  write_llmc(path, stream, TOKENS, 2);
  stream[start + 3] = saved;
  MPI_Barrier(MPI_COMM_WORLD);
  require_ok(ctx, gaaw_dataset_open(ctx, 1, &p, NULL, GAAW_DATA_LLMC, SEQ, VOCAB, &d));
  int32_t t[2 * SEQ], y[2 * SEQ];
  expect_status_ctx(ctx, gaaw_dataset_train_batch(d, 9, 0, 8, 2 * rank, 2, t, y), GAAW_ERR_CORRUPT);
  expect_true(strstr(gaaw_last_error(ctx), "big.llmc") && strstr(gaaw_last_error(ctx), "70000"),
              "rank %d: the error does not name the file and token: %s", rank, gaaw_last_error(ctx));
  /* the whole-file scan finds it too, at its byte offset */
  char where[64];
  snprintf(where, sizeof where, "70000 at byte offset %lld", (long long)(1024 + 4 * (start + 3)));
  expect_status_ctx(ctx, gaaw_dataset_verify(d, 0), GAAW_ERR_CORRUPT);
  expect_true(strstr(gaaw_last_error(ctx), where) != NULL, "verify: %s", gaaw_last_error(ctx));
  gaaw_dataset_close(&d);
  /* a sidecar whose vocabulary exceeds the run's is refused at open */
  char side[192];
  snprintf(side, sizeof side, "%s.gaaw.json", path);
  if (rank == 0) {
    FILE *f = fopen(side, "w");
    fprintf(f, "{\"vocab_size\": %d}\n", VOCAB + 1);
    fclose(f);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  expect_status_ctx(ctx, gaaw_dataset_open(ctx, 1, &p, NULL, GAAW_DATA_LLMC, SEQ, VOCAB, &d), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(ctx), "big.llmc.gaaw.json") != NULL, "sidecar: %s", gaaw_last_error(ctx));
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) remove(side);
}

/* This process's anonymous resident memory, bytes (/proc/self/status RssAnon). */
static long rss_anon(void)
{
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kb = -1;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "RssAnon: %ld kB", &kb) == 1) break;
  if (f) fclose(f);
  return kb * 1024;
}

static void memory_independent_of_corpus(gaaw_context_t ctx, const char *small)
{
  char path[160];
  snprintf(path, sizeof path, "%s/sparse.llmc", dir);
  const int64_t tokens = (int64_t)1 << 30;
  if (rank == 0) {
    FILE *f = fopen(path, "wb");
    put(f, 20240520, 4);
    put(f, 1, 4);
    put(f, (uint64_t)tokens, 4);
    fclose(f);
    expect_true(truncate(path, 1024 + 2 * tokens) == 0, "cannot make the sparse file %s", path);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  int32_t t[8 * SEQ], y[8 * SEQ];
  long before = 0;
  const char *files[2] = {small, path};
  for (int k = 0; k < 2; k++) {
    gaaw_dataset_t d[8];
    for (int i = 0; i < 8; i++) d[i] = open_one(ctx, files[k], GAAW_DATA_LLMC);
    for (int64_t step = 0; step < 2000; step++)
      require_ok(ctx, gaaw_dataset_train_batch(d[step % 8], 1, step, 32, 8 * rank, 8, t, y));
    long now = rss_anon();
    if (k == 0) before = now;
    for (int i = 0; i < 8; i++) gaaw_dataset_close(&d[i]);
    if (k == 1)
      expect_true(now - before < 4 << 20, "rank %d: RssAnon %ld KiB with the 2 GiB file, %ld KiB with the small one",
                  rank, now / 1024, before / 1024);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) remove(path);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int pid = (int)getpid();
  MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
  snprintf(dir, sizeof dir, "test_data_np4.%d", pid);
  if (rank == 0) mkdir(dir, 0755);
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, "backend=host comm_timeout=60");

  uint32_t *stream = malloc(sizeof *stream * TOKENS);
  unsigned char *text = malloc(TOKENS);
  uint64_t x = 12345;
  for (int i = 0; i < TOKENS; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    stream[i] = (uint32_t)((x >> 33) % VOCAB);
    text[i] = (unsigned char)(x >> 40);
  }
  char m16[128], m32[128], l16[128], l32[128], bytes[128];
  snprintf(m16, sizeof m16, "%s/m16", dir);
  snprintf(m32, sizeof m32, "%s/m32.bin", dir); /* a .bin names its prefix too */
  snprintf(l16, sizeof l16, "%s/gpt2.llmc", dir);
  snprintf(l32, sizeof l32, "%s/llama3.llmc", dir);
  snprintf(bytes, sizeof bytes, "%s/text.txt", dir);
  write_megatron(m16, stream, TOKENS, 8, 2);
  snprintf(l32, sizeof l32, "%s/m32", dir);
  write_megatron(l32, stream, TOKENS, 4, 4);
  snprintf(l32, sizeof l32, "%s/llama3.llmc", dir);
  write_llmc(l16, stream, TOKENS, 1);
  write_llmc(l32, stream, TOKENS, 2);
  if (rank == 0) {
    FILE *f = fopen(bytes, "wb");
    fwrite(text, 1, TOKENS, f);
    fclose(f);
  }
  MPI_Barrier(MPI_COMM_WORLD);

  const char *formats[] = {m16, m32, l16, l32};
  same_tokens_every_format(ctx, formats, 4);
  windows_and_layouts(ctx, l16, stream);
  const double two[] = {0.7, 0.3}, five[] = {1, 2, 3, 4, 5};
  blend(ctx, 2, m16, two, 0.5);
  blend(ctx, 5, l16, five, 1.5);
  huge_weights(ctx, l16);
  historical_bytes(ctx, bytes, text, TOKENS);
  damaged(ctx, m16, l16);
  token_out_of_range(ctx, stream);
  memory_independent_of_corpus(ctx, l16);

  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    const char *files[] = {"m16.bin", "m16.idx", "m32.bin", "m32.idx", "gpt2.llmc", "llama3.llmc", "text.txt",
                           "bad.idx", "bad.bin", "big.llmc"};
    char path[160];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
      snprintf(path, sizeof path, "%s/%s", dir, files[i]);
      remove(path);
    }
    rmdir(dir);
  }
  free(stream);
  free(text);
  gaaw_finalize(&ctx);
  return test_finish_mpi("test_data_np4");
}
