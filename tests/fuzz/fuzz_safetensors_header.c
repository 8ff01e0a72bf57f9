/* libFuzzer target: the safetensors header parser (zero/safetensors_header.c) on
 * arbitrary bytes taken as a whole file. Whatever the bytes, it returns success or
 * GAAW_ERR_CORRUPT (GAAW_ERR_NO_MEMORY aside); a failure has a message naming the
 * file and leaves the header empty; a success gives tensors whose shapes, dtypes
 * and data lie inside the file and tile its data exactly, and every element of a
 * tensor gaaw reads can be loaded (the sanitizers watch those reads). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gaaw.h"
#include "zero/safetensors_header.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken promise of the parser: libFuzzer reports the abort as a crash. */
static void require(int cond, const char *what)
{
  if (cond) return;
  fprintf(stderr, "fuzz_safetensors_header: %s\n", what);
  abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  /* a copy of exactly size bytes, so that a read past the end is ASan's to see */
  unsigned char *bytes = malloc(size ? size : 1);
  if (!bytes) return 0;
  if (size) memcpy(bytes, data, size);
  gaaw_st_header h;
  gaaw_status_t st = gaaw_st_header_parse(NULL, "fuzz.safetensors", bytes, size, &h);
  require(st == GAAW_SUCCESS || st == GAAW_ERR_CORRUPT || st == GAAW_ERR_NO_MEMORY, "an unexpected status");
  if (st != GAAW_SUCCESS) {
    require(strstr(gaaw_last_error(NULL), "fuzz.safetensors") != NULL, "a failure that does not name the file");
    require(h.count == 0 && h.tensors == NULL, "a failed parse left tensors behind");
  } else {
    uint64_t at = 0;
    require(h.data_start >= 10 && h.data_start <= size, "data_start outside the file");
    for (int i = 0; i < h.count; i++) {
      const gaaw_st_tensor *t = &h.tensors[i];
      require(t->name != NULL, "a tensor without a name");
      require(t->ndim >= 0 && t->ndim <= GAAW_ST_MAX_DIMS, "ndim out of range");
      require(t->begin == at && t->end >= t->begin, "tensors that do not tile the data");
      uint64_t numel = 1;
      for (int k = 0; k < t->ndim; k++) {
        require(t->shape[k] >= 0, "a negative dimension");
        numel *= (uint64_t)t->shape[k];
      }
      require(t->end - t->begin == numel * (uint64_t)t->elem_size, "data_offsets unlike the shape");
      if (t->dtype != GAAW_ST_OTHER)
        for (uint64_t e = 0; e < numel; e++) (void)gaaw_st_load(t, bytes + h.data_start + t->begin, (int64_t)e);
      at = t->end;
    }
    require(h.data_start + at == size, "data that does not end at the end of the file");
  }
  gaaw_st_header_free(&h);
  free(bytes);
  return 0;
}
