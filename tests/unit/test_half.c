/* bf16 and f16 conversions (backends/runtime/half.h): known bit patterns for rounding
 * ties (to even), subnormals, infinities, nan and overflow; every 16-bit value
 * survives the round trip through f32. Needs no context. */
#include "tests/harness/test_util.h"
#include "backends/runtime/half.h"

typedef struct {
  uint32_t f32;
  uint16_t h;
  const char *what;
} pair;

static const pair to_bf16[] = {
  {0x3f800000u, 0x3f80, "1"},
  {0x3f808000u, 0x3f80, "tie below an even bf16: down"},
  {0x3f818000u, 0x3f82, "tie below an odd bf16: up to even"},
  {0x3f808001u, 0x3f81, "just above a tie: up"},
  {0x3f807fffu, 0x3f80, "just below a tie: down"},
  {0x80000000u, 0x8000, "-0"},
  {0x7f800000u, 0x7f80, "inf"},
  {0xff800000u, 0xff80, "-inf"},
  {0x7fc00000u, 0x7fc0, "quiet nan"},
  {0x7f800001u, 0x7fc0, "signalling nan stays nan (not inf)"},
  {0x7f7fffffu, 0x7f80, "largest f32 rounds to inf"},
  {0x00010000u, 0x0001, "f32 subnormal kept"},
  {0x00008000u, 0x0000, "subnormal tie to even zero"},
  {0x00018000u, 0x0002, "subnormal tie to even 2"},
  {0xc0200000u, 0xc020, "-2.5"},
};

static const pair to_f16[] = {
  {0x3f800000u, 0x3c00, "1"},
  {0x3f801000u, 0x3c00, "1 + 2^-11: tie to even (down)"},
  {0x3f803000u, 0x3c02, "1 + 3 2^-11: tie to even (up)"},
  {0x3f801001u, 0x3c01, "just above a tie: up"},
  {0x477fe000u, 0x7bff, "65504, the largest f16"},
  {0x477fefffu, 0x7bff, "just below 65520: 65504"},
  {0x477ff000u, 0x7c00, "65520: tie, to even = inf"},
  {0x49742400u, 0x7c00, "1e6 overflows to inf"},
  {0xc9742400u, 0xfc00, "-1e6 overflows to -inf"},
  {0x7f800000u, 0x7c00, "inf"},
  {0xff800000u, 0xfc00, "-inf"},
  {0x7fc00000u, 0x7e00, "nan"},
  {0xffc00000u, 0xfe00, "-nan keeps its sign"},
  {0x38800000u, 0x0400, "2^-14, the smallest normal"},
  {0x387fc000u, 0x03ff, "the largest subnormal"},
  {0x387fe000u, 0x0400, "tie above the largest subnormal: up into the normals"},
  {0x33800000u, 0x0001, "2^-24, the smallest subnormal"},
  {0x33000000u, 0x0000, "2^-25: tie to even zero"},
  {0x33000001u, 0x0001, "just above 2^-25: the smallest subnormal"},
  {0x33c00000u, 0x0002, "1.5 2^-24: tie to even 2"},
  {0x80000000u, 0x8000, "-0"},
  {0x2f800000u, 0x0000, "far below: zero"},
  {0xc0200000u, 0xc100, "-2.5"},
};

static const pair from_f16[] = {
  {0x33800000u, 0x0001, "smallest subnormal"},
  {0x387fc000u, 0x03ff, "largest subnormal"},
  {0x38800000u, 0x0400, "smallest normal"},
  {0x477fe000u, 0x7bff, "65504"},
  {0x7f800000u, 0x7c00, "inf"},
  {0xff800000u, 0xfc00, "-inf"},
  {0x80000000u, 0x8000, "-0"},
  {0xbf800000u, 0xbc00, "-1"},
};

int main(void)
{
  for (size_t i = 0; i < sizeof to_bf16 / sizeof *to_bf16; i++) {
    uint16_t got = gaaw_f32_to_bf16(gaaw_bits_f32(to_bf16[i].f32));
    expect_true(got == to_bf16[i].h, "bf16 of 0x%08x (%s) is 0x%04x, expected 0x%04x", to_bf16[i].f32,
                to_bf16[i].what, got, to_bf16[i].h);
  }
  for (size_t i = 0; i < sizeof to_f16 / sizeof *to_f16; i++) {
    uint16_t got = gaaw_f32_to_f16(gaaw_bits_f32(to_f16[i].f32));
    expect_true(got == to_f16[i].h, "f16 of 0x%08x (%s) is 0x%04x, expected 0x%04x", to_f16[i].f32, to_f16[i].what,
                got, to_f16[i].h);
  }
  for (size_t i = 0; i < sizeof from_f16 / sizeof *from_f16; i++) {
    uint32_t got = gaaw_f32_bits(gaaw_f16_to_f32(from_f16[i].h));
    expect_true(got == from_f16[i].f32, "f32 of f16 0x%04x (%s) is 0x%08x, expected 0x%08x", from_f16[i].h,
                from_f16[i].what, got, from_f16[i].f32);
  }
  expect_true(gaaw_f32_bits(gaaw_bf16_to_f32(0x3f80)) == 0x3f800000u, "bf16 0x3f80 is not 1");
  expect_true(isnan(gaaw_f16_to_f32(0x7e00)) && isnan(gaaw_bf16_to_f32(0x7fc1)), "16-bit nan does not load as nan");

  /* Every 16-bit pattern: to f32 and back is the identity (nan stays nan). */
  int bad_bf16 = 0, bad_f16 = 0;
  for (uint32_t u = 0; u <= 0xffff; u++) {
    uint16_t h = (uint16_t)u;
    float fb = gaaw_bf16_to_f32(h), fh = gaaw_f16_to_f32(h);
    int nan_b = (h & 0x7f80) == 0x7f80 && (h & 0x7f), nan_h = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
    if (nan_b ? !isnan(fb) || !isnan(gaaw_bf16_to_f32(gaaw_f32_to_bf16(fb))) : gaaw_f32_to_bf16(fb) != h) bad_bf16++;
    if (nan_h ? !isnan(fh) || !isnan(gaaw_f16_to_f32(gaaw_f32_to_f16(fh))) : gaaw_f32_to_f16(fh) != h) bad_f16++;
  }
  expect_true(bad_bf16 == 0, "%d bf16 patterns do not survive the round trip through f32", bad_bf16);
  expect_true(bad_f16 == 0, "%d f16 patterns do not survive the round trip through f32", bad_f16);

  /* Loads and stores by dtype use the same conversions (i32 toward zero). */
  uint16_t buf16[1];
  int32_t buf32[1];
  gaaw_store_f32(buf16, GAAW_F16, 0, 0.1f);
  expect_true(buf16[0] == 0x2e66, "store f16 0.1 gave 0x%04x, expected 0x2e66", buf16[0]);
  gaaw_store_f32(buf32, GAAW_I32, 0, -7.9f);
  expect_true(buf32[0] == -7 && gaaw_load_f32(buf32, GAAW_I32, 0) == -7.0f, "i32 store of -7.9 gave %d", buf32[0]);
  return test_finish("test_half");
}
