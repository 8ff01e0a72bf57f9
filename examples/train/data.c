/* gaaw-train's data: loading, the train/validation split and microbatches. */
#include "examples/train/data.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef GAAW_TRAIN_CORPUS
#define GAAW_TRAIN_CORPUS ""
#endif
#ifndef GAAW_TRAIN_CORPUS_SRC
#define GAAW_TRAIN_CORPUS_SRC ""
#endif

const char *train_data_default_path(void)
{
  static const char *const candidates[] = {GAAW_TRAIN_CORPUS, GAAW_TRAIN_CORPUS_SRC};
  for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++)
    if (candidates[i][0] && access(candidates[i], R_OK) == 0) return candidates[i];
  return NULL;
}

static int read_file(const char *path, unsigned char **bytes, size_t *size, char *err, size_t len)
{
  errno = 0;
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, len, "cannot read the data file '%s': %s", path, strerror(errno));
    return 0;
  }
  size_t cap = 1 << 16, n = 0;
  unsigned char *buf = malloc(cap);
  for (;;) {
    if (!buf) break;
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap) break;
    unsigned char *grown = realloc(buf, cap * 2);
    if (!grown) {
      free(buf);
      buf = NULL;
      break;
    }
    buf = grown;
    cap *= 2;
  }
  int bad = ferror(f) ? (errno ? errno : EIO) : 0;
  fclose(f);
  if (!buf || bad) {
    snprintf(err, len, "cannot read the data file '%s': %s", path, buf ? strerror(bad) : "out of memory");
    free(buf);
    return 0;
  }
  *bytes = buf;
  *size = n;
  return 1;
}

int train_data_load(train_data *d, const char *path, int seq, int vocab, char *err, size_t len)
{
  memset(d, 0, sizeof *d);
  if (!read_file(path, &d->bytes, &d->size, err, len)) return 0;
  if (d->size == 0) {
    snprintf(err, len, "the data file '%s' is empty", path);
    train_data_free(d);
    return 0;
  }
  uint64_t h = 14695981039346656037ull;
  for (size_t i = 0; i < d->size; i++) {
    if (d->bytes[i] >= vocab) {
      snprintf(err, len, "the data file '%s' holds byte %d at offset %zu, outside --vocab %d", path, d->bytes[i], i,
               vocab);
      train_data_free(d);
      return 0;
    }
    h = (h ^ d->bytes[i]) * 1099511628211ull;
  }
  d->checksum = h;
  d->train_size = d->size - d->size / 10;
  d->val_size = d->size - d->train_size;
  d->train = d->bytes;
  d->val = d->bytes + d->train_size;
  if (d->val_size < (size_t)seq + 1) {
    snprintf(err, len,
             "the data file '%s' (%zu bytes) is too short for --seq %d: its 10%% validation split (%zu bytes) "
             "must hold one sequence and its targets (%d bytes)",
             path, d->size, seq, d->val_size, seq + 1);
    train_data_free(d);
    return 0;
  }
  return 1;
}

void train_data_free(train_data *d)
{
  free(d->bytes);
  memset(d, 0, sizeof *d);
}

/* splitmix64's finaliser: a bijective mix of 64 bits. */
static uint64_t mix(uint64_t x)
{
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* tokens = window, targets = window shifted by one byte. */
static void window(const unsigned char *text, size_t start, int seq, int32_t *tokens, int32_t *targets)
{
  for (int t = 0; t < seq; t++) {
    tokens[t] = text[start + t];
    targets[t] = text[start + t + 1];
  }
}

void train_data_batch(const train_data *d, uint64_t seed, int64_t step, int64_t first_row, int batch, int seq,
                      int32_t *tokens, int32_t *targets)
{
  size_t starts = d->train_size - (size_t)seq; /* windows of seq + 1 bytes */
  uint64_t base = mix(mix(seed) ^ (uint64_t)step);
  for (int b = 0; b < batch; b++) {
    uint64_t h = mix(base ^ (uint64_t)(first_row + b));
    window(d->train, (size_t)(h % starts), seq, tokens + (size_t)b * seq, targets + (size_t)b * seq);
  }
}

void train_data_val_batch(const train_data *d, int64_t first_row, int64_t rows, int batch, int seq, int32_t *tokens,
                          int32_t *targets)
{
  uint64_t last = d->val_size - (size_t)seq - 1; /* the last window's start */
  for (int b = 0; b < batch; b++) {
    uint64_t w = (uint64_t)(first_row + b);
    size_t start = rows > 1 ? (size_t)(w * last / (uint64_t)(rows - 1)) : 0;
    window(d->val, start, seq, tokens + (size_t)b * seq, targets + (size_t)b * seq);
  }
}
