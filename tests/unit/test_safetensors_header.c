/* The safetensors header parser (zero/safetensors_header.h) on small files made
 * here: a tensor with a dimension of 0 is a valid, empty tensor (not a division by
 * zero); shapes of 2^60 elements or more are refused as corrupt; a shape's bytes
 * must match its data_offsets; a shape of more dimensions than a tensor holds is
 * refused. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gaaw.h"
#include "tests/harness/test_util.h"
#include "zero/safetensors_header.h"

/* A file: 8-byte little-endian header length, the header, then data bytes of 0. */
static size_t make_file(unsigned char *out, const char *header, size_t data)
{
  size_t n = strlen(header);
  for (int i = 0; i < 8; i++) out[i] = (unsigned char)((uint64_t)n >> (8 * i));
  memcpy(out + 8, header, n);
  memset(out + 8 + n, 0, data);
  return 8 + n + data;
}

static gaaw_status_t parse(const char *header, size_t data, gaaw_st_header *h)
{
  static unsigned char file[4096];
  size_t size = make_file(file, header, data);
  return gaaw_st_header_parse(NULL, "t.safetensors", file, size, h);
}

int main(void)
{
  gaaw_st_header h;
  expect_status(parse("{\"e\":{\"dtype\":\"F32\",\"shape\":[0,4],\"data_offsets\":[0,0]},"
                      "\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}", 24, &h),
                GAAW_SUCCESS);
  expect_true(h.count == 2, "two tensors, read %d", h.count);
  for (int i = 0; i < h.count; i++) {
    const gaaw_st_tensor *t = &h.tensors[i];
    int empty = !strcmp(t->name, "e");
    expect_true(t->ndim == 2 && t->shape[0] == (empty ? 0 : 2) && t->shape[1] == (empty ? 4 : 3),
                "%s: shape [%lld, %lld]", t->name, (long long)t->shape[0], (long long)t->shape[1]);
    expect_true(t->end - t->begin == (empty ? 0u : 24u), "%s: %llu bytes", t->name,
                (unsigned long long)(t->end - t->begin));
  }
  gaaw_st_header_free(&h);
  /* 2^20 x 2^20 x 2^20 = 2^60 elements: refused before any size overflows */
  expect_status(parse("{\"big\":{\"dtype\":\"F32\",\"shape\":[1048576,1048576,1048576],\"data_offsets\":[0,0]}}", 0,
                      &h),
                GAAW_ERR_CORRUPT);
  expect_true(strstr(gaaw_last_error(NULL), "2^60") != NULL, "2^60 elements: %s", gaaw_last_error(NULL));
  /* 2^20 x 2^20 x 2^19: 2^59 elements pass the size check; the offsets then disagree */
  expect_status(parse("{\"big\":{\"dtype\":\"F32\",\"shape\":[1048576,1048576,524288],\"data_offsets\":[0,0]}}", 0,
                      &h),
                GAAW_ERR_CORRUPT);
  expect_true(strstr(gaaw_last_error(NULL), "2^60") == NULL, "2^59 elements called 2^60: %s", gaaw_last_error(NULL));
  /* more dimensions than a tensor holds: refused, naming the count */
  expect_status(parse("{\"d\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, &h),
                GAAW_ERR_CORRUPT);
  expect_true(strstr(gaaw_last_error(NULL), "a shape of 9 dimensions") != NULL, "9 dimensions: %s",
              gaaw_last_error(NULL));
  return test_finish("test_safetensors_header");
}
