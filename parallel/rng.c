/* Counter-based random numbers (see rng.h): a 64-bit mix of (stream, counter),
 * SplitMix64's finaliser, which passes BigCrush as a counter-based generator. */
#include <math.h>

#include "parallel/rng.h"

static uint64_t mix64(uint64_t z)
{
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t gaaw_rng_stream(uint64_t seed, const char *name)
{
  uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a of the name */
  for (const unsigned char *p = (const unsigned char *)name; *p; p++) h = (h ^ *p) * 0x100000001b3ull;
  return mix64(h ^ mix64(seed + 0x9e3779b97f4a7c15ull));
}

/* 53 random bits mapped into (0, 1). */
static double to_unit(uint64_t bits)
{
  return ((double)(bits >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

double gaaw_rng_uniform(uint64_t stream, uint64_t index)
{
  return to_unit(mix64(stream ^ mix64(2 * index)));
}

double gaaw_rng_normal(uint64_t stream, uint64_t index)
{
  double u1 = to_unit(mix64(stream ^ mix64(2 * index)));
  double u2 = to_unit(mix64(stream ^ mix64(2 * index + 1)));
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
