/* The host backend: the reference every other backend is tested against. */
#ifndef GAAW_HOST_HOST_H
#define GAAW_HOST_HOST_H

#include "backends/device.h"

/* Applies the option `threads` to OpenMP. */
gaaw_status_t gaaw_host_threads_configure(gaaw_context_t ctx);

/* The kernels this backend implements, as designated initialisers of its table.
 * Each is defined in one of the host_*.c files. */
#define GAAW_HOST_KERNEL_ENTRIES /* filled as kernels land */

#endif
