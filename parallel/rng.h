/* Counter-based random numbers for parameter initialisation: element `index` of a
 * parameter depends only on (seed, the parameter's name, index), so every parallel
 * layout starts from the same logical weights as a serial run, whichever slice a
 * rank holds and in whatever order it fills it. */
#ifndef GAAW_PARALLEL_RNG_H
#define GAAW_PARALLEL_RNG_H

#include <stdint.h>

/* The stream of one parameter: a hash of its name mixed with the seed. */
uint64_t gaaw_rng_stream(uint64_t seed, const char *name);
/* Uniform in (0, 1), never 0 or 1. */
double gaaw_rng_uniform(uint64_t stream, uint64_t index);
/* Standard normal (Box-Muller on two uniforms of the same counter). */
double gaaw_rng_normal(uint64_t stream, uint64_t index);

#endif
