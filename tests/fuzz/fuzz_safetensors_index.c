/* libFuzzer target: the reader of a sharded set's index (model.safetensors.index.json,
 * gaaw_st_index_parse in zero/safetensors_header.c) on arbitrary bytes. Whatever the
 * bytes, it returns success or GAAW_ERR_CORRUPT (GAAW_ERR_NO_MEMORY aside); a
 * failure names the file and leaves the index empty; a success gives at least one
 * tensor, each with a file that is a plain name beside the index (no '/', not "."
 * or ".."), listed once, and found again by gaaw_st_index_file_of. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gaaw.h"
#include "zero/safetensors_header.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken promise of the reader: libFuzzer reports the abort as a crash. */
static void require(int cond, const char *what)
{
  if (cond) return;
  fprintf(stderr, "fuzz_safetensors_index: %s\n", what);
  abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char *text = malloc(size ? size : 1); /* exactly size bytes, not NUL-terminated */
  if (!text) return 0;
  if (size) memcpy(text, data, size);
  gaaw_st_index ix;
  gaaw_status_t st = gaaw_st_index_parse(NULL, "fuzz.index.json", text, size, &ix);
  require(st == GAAW_SUCCESS || st == GAAW_ERR_CORRUPT || st == GAAW_ERR_NO_MEMORY, "an unexpected status");
  if (st != GAAW_SUCCESS) {
    require(strstr(gaaw_last_error(NULL), "fuzz.index.json") != NULL, "a failure that does not name the file");
    require(ix.ntensors == 0 && ix.nfiles == 0 && !ix.tensor && !ix.file, "a failed parse left entries behind");
  } else {
    require(ix.ntensors > 0 && ix.nfiles > 0 && ix.nfiles <= ix.ntensors, "an empty or inconsistent index");
    for (int f = 0; f < ix.nfiles; f++) {
      const char *name = ix.file[f];
      require(name[0] && !strchr(name, '/') && strcmp(name, ".") && strcmp(name, ".."), "a file not beside it");
      for (int g = 0; g < f; g++) require(strcmp(ix.file[g], name) != 0, "a file listed twice");
    }
    for (int k = 0; k < ix.ntensors; k++) {
      require(ix.file_of[k] >= 0 && ix.file_of[k] < ix.nfiles, "a tensor without a file");
      require(gaaw_st_index_file_of(&ix, ix.tensor[k]) == ix.file[ix.file_of[k]], "a tensor not found again");
    }
  }
  gaaw_st_index_free(&ix);
  free(text);
  return 0;
}
