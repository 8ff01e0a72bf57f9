/* Runtime services for the layers above (parallel/, zero/) and the backends. */
#ifndef GAAW_RUNTIME_RUNTIME_H
#define GAAW_RUNTIME_RUNTIME_H

#include <mpi.h>
#include "backends/runtime/context_impl.h"

/* Creates the runtime part of a context (see gaaw_init). Collective over comm; all
 * ranks fail together. */
gaaw_status_t gaaw_runtime_open(MPI_Comm comm, gaaw_config_t cfg, int header_version, gaaw_context_t *ctx);
/* Frees it. Not collective (MPI_Comm_free is local). */
void gaaw_runtime_close(gaaw_context_t ctx);

/* Waits for an MPI request until the comm_timeout deadline (GAAW_ERR_TIMEOUT after,
 * naming what). On timeout the request stays active and is the caller's: it may
 * cancel a point-to-point one; a collective one can only be abandoned. */
gaaw_status_t gaaw_mpi_wait(gaaw_context_t ctx, MPI_Request *req, const char *what);
/* The same for n requests at once (entries already MPI_REQUEST_NULL are done). */
gaaw_status_t gaaw_mpi_waitall(gaaw_context_t ctx, int n, MPI_Request *reqs, const char *what);

/* Translates an MPI error code into GAAW_ERR_COMM with MPI's own text. */
gaaw_status_t gaaw_mpi_status(gaaw_context_t ctx, int mpi_err, const char *file, int line, const char *func,
                              const char *call);
#define GAAW_MPI_CHECK(ctx, call)                                                         \
  do {                                                                                    \
    int gaaw_mpi_err_ = (call);                                                           \
    if (gaaw_mpi_err_ != MPI_SUCCESS)                                                     \
      return gaaw_mpi_status((ctx), gaaw_mpi_err_, __FILE__, __LINE__, __func__, #call);  \
  } while (0)

#endif
