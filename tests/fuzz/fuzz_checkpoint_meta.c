/* libFuzzer target: the checkpoint metadata reader (zero/checkpoint_meta.c) on
 * arbitrary bytes. Inputs whose first byte is odd are resealed first (their
 * meta_xxh3 digits replaced by the checksum of the rest) so that the fuzzer gets
 * past the checksum into the JSON checks. Whatever the bytes, the reader returns
 * success or GAAW_ERR_CORRUPT (GAAW_ERR_NO_MEMORY under pressure) and never reads
 * outside them; a success gives runs that lie inside their boxes and files. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "zero/checkpoint_impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(int cond, const char *what)
{
  if (cond) return;
  fprintf(stderr, "fuzz_checkpoint_meta: %s\n", what);
  abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 1) return 0;
  int reseal = data[0] & 1;
  data++, size--;
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  const char *key = "{\"meta_xxh3\": \"";
  size_t at = strlen(key);
  if (reseal && size >= at + 16 && !memcmp(text, key, at)) {
    char digits[17];
    memset(text + at, '0', 16);
    snprintf(digits, sizeof digits, "%016llx", (unsigned long long)XXH3_64bits(text, size));
    memcpy(text + at, digits, 16);
  }
  ckpt_meta m;
  gaaw_status_t st = gaaw_ckpt_meta_read(NULL, text, size, "fuzz", &m);
  require(st == GAAW_SUCCESS || st == GAAW_ERR_CORRUPT || st == GAAW_ERR_NO_MEMORY, "an unexpected status");
  if (st == GAAW_SUCCESS) {
    for (int64_t i = 0; i < m.nruns; i++) {
      const ckpt_run *r = &m.runs[i];
      require(r->tensor >= 0 && r->tensor < m.ntensors && r->file >= 0 && r->file < m.nfiles, "a run names nothing");
      require(r->a < r->b && r->b <= r->nr * r->nc, "a run outside its box");
      require(r->at + 4 * (r->b - r->a) <= m.files[r->file].bytes, "a run outside its file");
    }
    gaaw_ckpt_meta_free(&m);
  }
  free(text);
  return 0;
}
