/* The MPI communicator under an MPI-backed gaaw communicator, for backends that
 * bootstrap over MPI (NCCL's unique id). */
#ifndef GAAW_MPI_HANDLE_H
#define GAAW_MPI_HANDLE_H

#include <mpi.h>

#include "backends/comm.h"

/* comm's MPI communicator, or MPI_COMM_NULL when comm is NULL or not MPI-backed. */
MPI_Comm gaaw_mpi_comm_handle(gaaw_comm_t comm);

#endif
