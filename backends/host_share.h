/* Host bytes between the ranks of world, over the control communicator (the one
 * agreements use): small metadata that has no device tensor, such as a
 * checkpoint's list of stored runs. Each waits under the comm_timeout deadline;
 * a round that cannot complete aborts the context. */
#ifndef GAAW_BACKENDS_HOST_SHARE_H
#define GAAW_BACKENDS_HOST_SHARE_H

#include <stddef.h>

#include "gaaw/context.h"

/* World rank root's *bytes bytes at *data to every rank: on the others *data is
 * replaced by a malloc'd copy (the caller frees it) and *bytes set. Collective
 * over world. */
gaaw_status_t gaaw_share_bytes(gaaw_context_t ctx, void **data, size_t *bytes, int root);

/* Every rank's bytes[n] to world rank root, concatenated in rank order into a
 * malloc'd *all with each rank's count in the malloc'd *counts (both NULL on the
 * other ranks). Collective over world. */
gaaw_status_t gaaw_gather_bytes(gaaw_context_t ctx, const void *bytes, size_t n, int root, void **all,
                                size_t **counts);

/* *all = whether flag is non-zero on every rank of world. Collective over world. */
gaaw_status_t gaaw_all_true(gaaw_context_t ctx, int flag, int *all);

#endif
