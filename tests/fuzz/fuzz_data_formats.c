/* libFuzzer target: the structural checks of the token formats (data/formats.c)
 * on arbitrary bytes. The first byte picks the reader: even, Megatron-LM's .idx
 * (the rest of the input) against a .bin whose size is the next 8 bytes' value;
 * odd, an llm.c file whose first 1024 bytes (zero-padded) are the rest and whose
 * size is the next 8 bytes' value. Whatever the bytes, the answer is success or
 * GAAW_ERR_CORRUPT naming the file, never a read out of bytes; a success gives a
 * stream whose tokens fill the file exactly after its header. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gaaw.h"
#include "data/data_impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(int cond, const char *what)
{
  if (cond) return;
  fprintf(stderr, "fuzz_data_formats: %s\n", what);
  abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 9) return 0;
  uint64_t file_size = 0;
  for (int b = 0; b < 8; b++) file_size |= (uint64_t)data[1 + b] << (8 * b);
  file_size >>= 16; /* up to 2^48 bytes */
  size_t n = size - 9;
  unsigned char *bytes = malloc(n ? n : 1); /* exactly the input, so ASan sees a read past it */
  if (!bytes) return 0;
  if (n) memcpy(bytes, data + 9, n);
  gaaw_data_stream s;
  gaaw_status_t st;
  if (data[0] % 2 == 0) {
    st = gaaw_data_check_megatron(NULL, "fuzz.idx", bytes, n, "fuzz.bin", file_size, &s);
    if (st == GAAW_SUCCESS)
      require(s.data_offset == 0 && (uint64_t)s.tokens * (uint64_t)s.token_bytes == file_size,
              "a Megatron stream that does not fill its .bin");
  } else {
    unsigned char head[1024] = {0};
    memcpy(head, bytes, n < sizeof head ? n : sizeof head);
    st = gaaw_data_check_llmc(NULL, "fuzz.llmc", head, file_size, &s);
    if (st == GAAW_SUCCESS)
      require(s.data_offset == 1024 && 1024 + (uint64_t)s.tokens * (uint64_t)s.token_bytes == file_size,
              "an llm.c stream that does not fill its file");
  }
  require(st == GAAW_SUCCESS || st == GAAW_ERR_CORRUPT, "an unexpected status");
  if (st != GAAW_SUCCESS) require(strstr(gaaw_last_error(NULL), "fuzz.") != NULL, "a failure that does not name the file");
  else require(s.token_bytes == 1 || s.token_bytes == 2 || s.token_bytes == 4 || s.token_bytes == 8, "a token size");
  free(bytes);
  return 0;
}
