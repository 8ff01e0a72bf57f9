/* A file of the nvme offload (offload_optimizer=nvme: the optimizer state;
 * offload_params=nvme: the stage 3 parameter shard): one per rank and kind under
 * nvme_path, read and written asynchronously through a few slots,
 * each slot one transfer in flight at a time. io_uring where the build has
 * liburing and the kernel allows it, else pread/pwrite done at start (the caller's
 * code is the same). O_DIRECT where the filesystem takes it, else buffered I/O,
 * said once in the log. The file is unlinked as soon as it is created: its space
 * goes back when it is closed or the process dies, however it dies. Every
 * failure is GAAW_ERR_IO naming the file, the offset and the system's reason. */
#ifndef GAAW_ZERO_NVME_FILE_H
#define GAAW_ZERO_NVME_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "gaaw/context.h"

/* Buffers, offsets and lengths of transfers are multiples of this (O_DIRECT). */
#define GAAW_NVME_ALIGN 4096
#define GAAW_NVME_SLOTS 3

typedef struct gaaw_nvme_file gaaw_nvme_file;

/* Creates a file of bytes (a multiple of GAAW_NVME_ALIGN) in dir, named after name,
 * with its space reserved now (a full or size-limited filesystem fails here, not
 * in the middle of a step). Not collective. */
gaaw_status_t gaaw_nvme_open(gaaw_context_t ctx, const char *dir, const char *name, size_t bytes,
                             gaaw_nvme_file **out);
/* gaaw_nvme_open in option nvme_path's directory, the file named after kind
 * ("optimizer", "params"), the world rank, the process and a counter of the
 * process's files: DIR/gaaw-KIND-rankNNNNN-pidP-K.bin. Not collective. */
gaaw_status_t gaaw_nvme_create(gaaw_context_t ctx, const char *kind, size_t bytes, gaaw_nvme_file **out);
/* Starts reading (write = 0) or writing bytes at file offset into or from buf
 * through slot, which must be idle (gaaw_nvme_wait). buf stays the caller's and
 * untouched until the wait. Not collective. */
gaaw_status_t gaaw_nvme_start(gaaw_nvme_file *f, int slot, int write, void *buf, size_t bytes, uint64_t offset);
/* Waits until slot's transfer is complete; its error, if any. An idle slot
 * returns at once. Not collective. */
gaaw_status_t gaaw_nvme_wait(gaaw_nvme_file *f, int slot);
/* Waits for every transfer, then closes the file and frees f; NULL is a no-op. */
void gaaw_nvme_close(gaaw_nvme_file **f);
/* Whether the file is read with O_DIRECT and through io_uring (logs, tests). */
int gaaw_nvme_direct(const gaaw_nvme_file *f);
int gaaw_nvme_async(const gaaw_nvme_file *f);
/* Buffers of transfers: gaaw_host_alloc's (4096-aligned, pinned on CUDA). */
#endif
