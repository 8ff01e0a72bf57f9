/* The structural checks of the token formats (data/data_impl.h): Megatron-LM's
 * indexed dataset and llm.c's token files. Pure: bytes in, a verdict out. */
#include <string.h>

#include "backends/runtime/error.h"
#include "data/data_impl.h"

/* Megatron-LM's .idx: the magic "MMIDIDX\0\0", u64 version 1, u8 dtype code, u64
 * sequence count S, u64 document count D, then i32 lengths[S], i64 pointers[S]
 * (byte offsets into the .bin) and i64 document indices[D]; little-endian. */
static const unsigned char megatron_magic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};
#define MEGATRON_HEADER 34

/* llm.c's token file: 256 i32 (magic 20240520, version, token count, ...), then
 * the tokens: uint16 (version 1, GPT-2's) or uint32 (version 2, LLaMA-3's). */
#define LLMC_MAGIC 20240520
#define LLMC_HEADER 1024

static uint64_t load_le(const unsigned char *p, int bytes)
{
  uint64_t v = 0;
  for (int b = bytes - 1; b >= 0; b--) v = v << 8 | p[b];
  return v;
}

int gaaw_data_is_megatron(const unsigned char *head, size_t n)
{
  return n >= sizeof megatron_magic && memcmp(head, megatron_magic, sizeof megatron_magic) == 0;
}

int gaaw_data_is_llmc(const unsigned char *head, size_t n)
{
  return n >= 4 && load_le(head, 4) == LLMC_MAGIC;
}

/* Megatron's dtype codes: bytes per token and signedness (float64 and float32,
 * codes 6 and 7, are not tokens; code 2, int8, is refused too). */
static int megatron_dtype(unsigned code, int *bytes, int *is_signed)
{
  switch (code) {
  case 1: *bytes = 1, *is_signed = 0; return 1; /* uint8 */
  case 3: *bytes = 2, *is_signed = 1; return 1; /* int16 */
  case 4: *bytes = 4, *is_signed = 1; return 1; /* int32 */
  case 5: *bytes = 8, *is_signed = 1; return 1; /* int64 */
  case 8: *bytes = 2, *is_signed = 0; return 1; /* uint16 */
  default: return 0;
  }
}

/* GAAW_ERR_CORRUPT naming the file and the byte offset `at` (fmt takes at least
 * one argument). */
#define CORRUPT(at, fmt, ...)                                                                                 \
  GAAW_FAIL(ctx, GAAW_ERR_CORRUPT, "%s (byte offset %llu): " fmt, file, (unsigned long long)(at), __VA_ARGS__)

gaaw_status_t gaaw_data_check_megatron(gaaw_context_t ctx, const char *file, const unsigned char *b, size_t size,
                                       const char *bin, uint64_t bin_size, gaaw_data_stream *out)
{
  memset(out, 0, sizeof *out);
  if (size < MEGATRON_HEADER || !gaaw_data_is_megatron(b, size))
    CORRUPT(0, "not a Megatron-LM index: it does not start with the magic MMIDIDX and a 34-byte header%s", "");
  uint64_t version = load_le(b + 9, 8), S = load_le(b + 18, 8), D = load_le(b + 26, 8);
  unsigned code = b[17];
  int bytes, is_signed;
  if (version != 1) CORRUPT(9, "version %llu; gaaw reads version 1", (unsigned long long)version);
  if (!megatron_dtype(code, &bytes, &is_signed))
    CORRUPT(17, "dtype code %u is not a token type gaaw reads (1 uint8, 3 int16, 4 int32, 5 int64, 8 uint16)", code);
  /* exactly the size the counts imply (each count bounded first: no overflow) */
  if (S > size / 12 || D > size / 8)
    CORRUPT(18, "%llu sequences and %llu document indices need more than the file's %zu bytes",
            (unsigned long long)S, (unsigned long long)D, size);
  if (MEGATRON_HEADER + 12 * S + 8 * D != size)
    CORRUPT(18, "%llu sequences and %llu document indices need %llu bytes, the file has %zu", (unsigned long long)S,
            (unsigned long long)D, (unsigned long long)(MEGATRON_HEADER + 12 * S + 8 * D), size);
  const unsigned char *lengths = b + MEGATRON_HEADER, *pointers = lengths + 4 * S, *docs = pointers + 8 * S;
  uint64_t at = 0; /* where the next sequence starts in the .bin */
  for (uint64_t i = 0; i < S; i++) {
    int64_t len = (int32_t)(uint32_t)load_le(lengths + 4 * i, 4);
    uint64_t ptr = load_le(pointers + 8 * i, 8);
    if (len < 0) CORRUPT(MEGATRON_HEADER + 4 * i, "sequence %llu has length %lld", (unsigned long long)i, (long long)len);
    if (ptr != at)
      CORRUPT((size_t)(pointers - b) + 8 * i, "sequence %llu points to byte %llu of %s, expected %llu (the end of "
              "the one before)", (unsigned long long)i, (unsigned long long)ptr, bin, (unsigned long long)at);
    at += (uint64_t)len * (uint64_t)bytes;
    if (at > bin_size)
      CORRUPT((size_t)(pointers - b) + 8 * i, "sequence %llu ends at byte %llu, past the end of %s (%llu bytes)",
              (unsigned long long)i, (unsigned long long)at, bin, (unsigned long long)bin_size);
  }
  if (at != bin_size)
    CORRUPT(18, "the sequences hold %llu bytes of tokens, %s has %llu", (unsigned long long)at, bin,
            (unsigned long long)bin_size);
  uint64_t prev = 0;
  for (uint64_t i = 0; i < D; i++) {
    uint64_t doc = load_le(docs + 8 * i, 8);
    if ((i == 0 && doc != 0) || doc < prev || doc > S || (i == D - 1 && doc != S))
      CORRUPT((size_t)(docs - b) + 8 * i, "document index %llu is %llu: they must rise from 0 to the sequence count "
              "%llu", (unsigned long long)i, (unsigned long long)doc, (unsigned long long)S);
    prev = doc;
  }
  if (D == 0) CORRUPT(26, "no document indices (there is always at least the closing one)%s", "");
  out->token_bytes = bytes;
  out->is_signed = is_signed;
  out->data_offset = 0;
  out->tokens = (int64_t)(bin_size / (uint64_t)bytes);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_data_check_llmc(gaaw_context_t ctx, const char *file, const unsigned char *head,
                                   uint64_t file_size, gaaw_data_stream *out)
{
  memset(out, 0, sizeof *out);
  if (file_size < LLMC_HEADER || !gaaw_data_is_llmc(head, LLMC_HEADER))
    CORRUPT(0, "not an llm.c token file: it does not start with a 1024-byte header of magic %d", LLMC_MAGIC);
  uint64_t version = load_le(head + 4, 4), count = load_le(head + 8, 4);
  int bytes = version == 1 ? 2 : version == 2 ? 4 : 0;
  if (!bytes) CORRUPT(4, "version %llu; gaaw reads 1 (uint16 tokens) and 2 (uint32)", (unsigned long long)version);
  if (LLMC_HEADER + count * (uint64_t)bytes != file_size)
    CORRUPT(8, "the header counts %llu tokens (%llu bytes after it), the file has %llu bytes after the header",
            (unsigned long long)count, (unsigned long long)(count * (uint64_t)bytes),
            (unsigned long long)(file_size - LLMC_HEADER));
  out->token_bytes = bytes;
  out->is_signed = 0;
  out->data_offset = LLMC_HEADER;
  out->tokens = (int64_t)count;
  return GAAW_SUCCESS;
}
