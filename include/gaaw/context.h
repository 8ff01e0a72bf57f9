/* gaaw context: the library's state on one rank (device backend, communicators,
 * topology, memory accounting, options) and the error report of the last failure. */
#ifndef GAAW_CONTEXT_H
#define GAAW_CONTEXT_H

#include <mpi.h>
#include "gaaw/config.h"
#include "gaaw/status.h"
#include "gaaw/version.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gaaw_context_s *gaaw_context_t;

/* Starts gaaw on every rank of comm: reads the options of cfg (NULL: defaults and
 * GAAW_* environment), picks the device backend (`backend`: auto = cuda > opencl >
 * host), binds a device by node-local rank, and builds the dp x pp x tp topology
 * and its communicators. comm is duplicated; MPI must already be initialised.
 * Collective over comm. Ranks agree or fail together: when one rank's options are
 * wrong, every rank returns that rank's error; the options that must be the same
 * everywhere (tp, pp, dp, rank_order, zero_bucket_bytes, allreduce_ring_bytes,
 * zero_keep_gathered, nccl, comm_timeout, microbatches, pp_schedule,
 * virtual_stages, pp_layout, recompute) are compared, and a difference is
 * GAAW_ERR_INVALID_ARG on every rank naming the option and each rank's value ("tp:
 * 4 on rank 0, 2 on ranks 1-3"). The pipeline options are checked against each
 * other (a schedule that takes pp, microbatches and virtual_stages; a well-formed
 * pp_layout).
 * gaaw_init is a macro so that the library can check the header version it was
 * compiled against (GAAW_ERR_VERSION when they differ). */
#define gaaw_init(comm, cfg, ctx) gaaw_init_version((comm), (cfg), (ctx), GAAW_VERSION_NUMBER)
gaaw_status_t gaaw_init_version(MPI_Comm comm, gaaw_config_t cfg, gaaw_context_t *ctx,
                                int header_version);

/* The same, for callers that hold a Fortran MPI handle (the integer MPI_COMM_WORLD). */
gaaw_status_t gaaw_init_fortran(MPI_Fint comm, gaaw_config_t cfg, gaaw_context_t *ctx,
                                int header_version);

/* Frees everything the context owns and sets *ctx to NULL; NULL is a no-op.
 * Collective over the comm given to gaaw_init. */
gaaw_status_t gaaw_finalize(gaaw_context_t *ctx);

/* The library's version as "major.minor.patch" and as GAAW_VERSION_NUMBER.
 * Not collective. */
const char *gaaw_version(void);
int gaaw_version_number(void);

/* The report of the last failure on this context (file, line and function where it
 * was raised, the message naming the bad values, the native backend text if any,
 * and the chain of functions it passed through). With ctx == NULL: the last failure
 * on the calling thread that happened without a context (config, init).
 * Never NULL; "" when nothing failed. Not collective. */
const char *gaaw_last_error(gaaw_context_t ctx);
/* The status of that failure (GAAW_SUCCESS when none). */
gaaw_status_t gaaw_last_status(gaaw_context_t ctx);
/* Forgets the last failure. */
gaaw_status_t gaaw_clear_error(gaaw_context_t ctx);

/* This rank in the comm given to gaaw_init, and its size. Not collective. */
gaaw_status_t gaaw_world_rank(gaaw_context_t ctx, int *rank);
gaaw_status_t gaaw_world_size(gaaw_context_t ctx, int *size);
/* The name of the device backend in use ("host", "opencl", "cuda"). Not collective. */
gaaw_status_t gaaw_backend_name(gaaw_context_t ctx, const char **name);
/* The context's options (read-only; owned by the context). Not collective. */
gaaw_status_t gaaw_context_config(gaaw_context_t ctx, gaaw_config_t *cfg);

#ifdef __cplusplus
}
#endif
#endif
