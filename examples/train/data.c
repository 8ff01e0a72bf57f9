/* gaaw-train's data: --data-path parsed and opened (examples/train/data.h). */
#include "examples/train/data.h"

#include <errno.h>
#include <math.h>
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

/* --data-path's words: one path, or pairs of a weight and a path (Megatron's
 * "0.7 a 0.3 b"). words is modified in place; paths point into it. */
static int parse_paths(char *words, const char **paths, double *weights, int *count, char *err, size_t len)
{
  char *word[2 * GAAW_DATA_MAX_DATASETS + 1], *save = NULL;
  int n = 0;
  for (char *w = strtok_r(words, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
    if (n == 2 * GAAW_DATA_MAX_DATASETS + 1) {
      snprintf(err, len, "--data-path names more than %d datasets", GAAW_DATA_MAX_DATASETS);
      return 0;
    }
    word[n++] = w;
  }
  if (n == 1) {
    paths[0] = word[0], weights[0] = 1, *count = 1;
    return 1;
  }
  if (n == 0 || n % 2) {
    snprintf(err, len, "--data-path takes one path, or weights and paths in pairs (0.7 a 0.3 b); got %d words", n);
    return 0;
  }
  for (int i = 0; i < n / 2; i++) {
    char *end;
    errno = 0;
    weights[i] = strtod(word[2 * i], &end);
    if (errno || *end || !(weights[i] > 0) || !isfinite(weights[i])) {
      snprintf(err, len, "--data-path: '%s' is not a weight > 0 (the words go in pairs: weight, then path)",
               word[2 * i]);
      return 0;
    }
    paths[i] = word[2 * i + 1];
  }
  *count = n / 2;
  return 1;
}

static gaaw_data_format_t format_of(const char *name)
{
  return !strcmp(name, "megatron") ? GAAW_DATA_MEGATRON
         : !strcmp(name, "llmc")   ? GAAW_DATA_LLMC
         : !strcmp(name, "bytes")  ? GAAW_DATA_BYTES
                                   : GAAW_DATA_AUTO;
}

int train_data_parse(const train_options *o, train_data *d, char *err, size_t len)
{
  memset(d, 0, sizeof *d);
  d->format = format_of(o->data_format);
  const char *given = o->data_path[0] ? o->data_path : o->data;
  if (!o->data_path[0] && d->format == GAAW_DATA_AUTO) d->format = GAAW_DATA_BYTES; /* --data, the shipped text */
  if (!given[0]) given = train_data_default_path();
  if (!given) {
    snprintf(err, len, "no --data-path given and the corpus shipped with gaaw is not installed");
    return TRAIN_EXIT_USAGE;
  }
  if (!o->data_path[0]) { /* --data or the shipped corpus: one path, spaces and all */
    d->paths[0] = given, d->weights[0] = 1, d->count = 1;
    return TRAIN_EXIT_OK;
  }
  snprintf(d->words, sizeof d->words, "%s", given);
  return parse_paths(d->words, d->paths, d->weights, &d->count, err, len) ? TRAIN_EXIT_OK : TRAIN_EXIT_USAGE;
}

int train_data_open(gaaw_context_t ctx, const train_options *o, train_data *d, char *err, size_t len)
{
  gaaw_status_t st = gaaw_dataset_open(ctx, d->count, d->paths, d->weights, d->format, (int)o->seq, (int)o->vocab,
                                       &d->set);
  if (st != GAAW_SUCCESS) {
    snprintf(err, len, "the data: %s", gaaw_last_error(ctx));
    /* what the user named (a path, a file, --vocab) is a usage error; the machine's
     * (memory, communication) a failure */
    return st == GAAW_ERR_NO_MEMORY || st == GAAW_ERR_COMM || st == GAAW_ERR_TIMEOUT ? TRAIN_EXIT_FAILURE
                                                                                      : TRAIN_EXIT_USAGE;
  }
  int rank = 0;
  gaaw_world_rank(ctx, &rank);
  for (int i = 0; i < d->count && rank == 0; i++) {
    gaaw_data_format_t f;
    int bytes;
    int64_t tokens, windows;
    gaaw_dataset_info(d->set, i, &f, &bytes, &tokens, &windows);
    char weight[48] = "";
    if (d->count > 1) snprintf(weight, sizeof weight, ", weight %g", d->weights[i]);
    if (d->count == 1 && f == GAAW_DATA_BYTES)
      printf("data: %s, %lld bytes (train %lld, validation %lld)\n", d->paths[i], (long long)tokens,
             (long long)(tokens - tokens / 10), (long long)(tokens / 10));
    else
      printf("data: %s (%s, %d-byte tokens%s), %lld tokens (train %lld, validation %lld), %lld windows\n",
             d->paths[i], gaaw_data_format_name(f), bytes, weight, (long long)tokens,
             (long long)(tokens - tokens / 10), (long long)(tokens / 10), (long long)windows);
  }
  return TRAIN_EXIT_OK;
}

void train_data_close(train_data *d)
{
  gaaw_dataset_close(&d->set);
  d->count = 0;
}
