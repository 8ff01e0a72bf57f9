/* gaaw sample buffers: where a simulation puts the training samples its subdomain
 * produced this timestep, and where training draws its minibatches from.
 *
 * A sample is a row of `inputs` floats and a row of `outputs` floats (C row-major
 * (n, features); a Fortran array (features, n) is the same memory). The buffer is in
 * host memory and keeps at most `capacity` samples: the newest ones, or a uniform
 * reservoir sample of everything pushed. Draws are reproducible: minibatch rows come
 * from a counter-based random stream of (seed, the rank's dp coordinate, the number
 * of rows drawn so far), so the same pushes and draws give the same batches in every
 * run, whatever the timing.
 *
 * The ranks of one model replica (its tp x pp ranks: the model-parallel group) must
 * feed the model the same batch, but a simulation gives each rank its own subdomain.
 * So a push appends the samples of all the ranks of the model-parallel group, in
 * group rank order: every rank of a replica then holds the same buffer and, drawing from the same stream, the same minibatches. Across data-
 * parallel replicas the buffers differ (each holds its part of the domain);
 * gaaw_sampler_exchange mixes them. */
#ifndef GAAW_SAMPLER_H
#define GAAW_SAMPLER_H

#include <stdint.h>

#include "gaaw/context.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gaaw_sampler_s *gaaw_sampler_t;

typedef enum {
  GAAW_SAMPLER_NEWEST = 0,    /* keep the newest capacity samples (a ring) */
  GAAW_SAMPLER_RESERVOIR = 1  /* keep a uniform sample of all pushed (Vitter's algorithm R) */
} gaaw_sampler_policy_t;

typedef struct {
  int inputs;                  /* floats of a sample's input row (>= 1) */
  int outputs;                 /* floats of its target row (>= 0) */
  int64_t capacity;            /* samples kept on each rank (>= 1) */
  gaaw_sampler_policy_t policy;
  uint64_t seed;               /* of the draws and of the reservoir's choices */
} gaaw_sampler_config_t;

/* inputs 1, outputs 1, capacity 65536, newest, seed 1337. */
void gaaw_sampler_config_default(gaaw_sampler_config_t *cfg);

/* Creates a sample buffer of this rank. Collective over world: the config must be
 * the same on every rank (a difference, or a bad config on one rank, is
 * GAAW_ERR_INVALID_ARG on every rank naming the field). *sampler is NULL after a
 * failure. */
gaaw_status_t gaaw_sampler_create(gaaw_context_t ctx, const gaaw_sampler_config_t *cfg, gaaw_sampler_t *sampler);
/* Frees the buffer; NULL is a no-op. Not collective. */
gaaw_status_t gaaw_sampler_destroy(gaaw_sampler_t *sampler);

/* Appends n samples, inputs (n, cfg.inputs) and outputs (n, cfg.outputs) f32
 * (outputs may be NULL when cfg.outputs is 0), and those the other ranks of this
 * rank's model-parallel group push in the same call (n may differ between ranks; 0
 * is allowed). Collective over world (the samples move only within model-parallel
 * groups): a bad argument on one rank fails every rank with its message, and
 * nothing is pushed anywhere. */
gaaw_status_t gaaw_sampler_push(gaaw_sampler_t sampler, int64_t n, const float *inputs, const float *outputs);

/* Draws batch samples with replacement, uniformly from the held ones, into inputs
 * (batch, cfg.inputs) and outputs (batch, cfg.outputs) (NULL when cfg.outputs is 0).
 * GAAW_ERR_STATE when nothing is held. Not collective: the ranks of a
 * model-parallel group get the same rows because they hold the same buffer. */
gaaw_status_t gaaw_sampler_draw(gaaw_sampler_t sampler, int64_t batch, float *inputs, float *outputs);

/* Mixes the buffers over the data-parallel group: every rank draws n samples (as
 * gaaw_sampler_draw does), sends n/dp of them to each rank of its dp group (itself
 * included) and pushes the n it receives, so that after a few exchanges every
 * rank's buffer samples the whole domain. n must be the same on every rank and a
 * multiple of dp. With dp 1 there is nothing to mix and nothing changes.
 * Collective over world; GAAW_ERR_STATE on every rank when some rank holds
 * nothing. */
gaaw_status_t gaaw_sampler_exchange(gaaw_sampler_t sampler, int64_t n);

/* Samples held now (at most capacity) and pushed in all (on this rank, counting
 * the group's and the exchanged ones). Either may be NULL. Not collective. */
gaaw_status_t gaaw_sampler_size(gaaw_sampler_t sampler, int64_t *held, int64_t *pushed);

/* "newest", "reservoir"; "invalid" otherwise. */
const char *gaaw_sampler_policy_name(gaaw_sampler_policy_t policy);

#ifdef __cplusplus
}
#endif
#endif
