/* The nvme store's file (zero/nvme_file.h): io_uring or pread/pwrite, O_DIRECT or
 * buffered, one transfer per slot. */
#define _GNU_SOURCE
#include "config.h" /* GAAW_HAVE_LIBURING */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/runtime/context_impl.h"
#include "backends/runtime/log.h"
#include "gaaw/topology.h"
#include "zero/nvme_file.h"

#ifdef GAAW_HAVE_LIBURING
#include <liburing.h>
#endif

/* One read or write in io_uring is cut into submissions of at most this (the
 * kernel moves at most 2^31 - 4096 bytes per call). */
#define MAX_SUBMISSION ((size_t)1 << 30)

typedef struct {
  int busy, write;
  char *buf;
  size_t bytes, done;   /* done: transferred so far */
  uint64_t offset;
  gaaw_status_t status; /* of a transfer that already failed (pread/pwrite, or a completion) */
} nvme_slot;

struct gaaw_nvme_file {
  gaaw_context_t ctx;
  int fd, direct, async;
  char path[4096];
  nvme_slot slot[GAAW_NVME_SLOTS];
#ifdef GAAW_HAVE_LIBURING
  struct io_uring ring;
#endif
};

int gaaw_nvme_direct(const gaaw_nvme_file *f) { return f->direct; }
int gaaw_nvme_async(const gaaw_nvme_file *f) { return f->async; }

static gaaw_status_t io_error(gaaw_nvme_file *f, const nvme_slot *s, int err, const char *what)
{
  return gaaw_error_raise(f->ctx, GAAW_ERR_IO, __FILE__, __LINE__, __func__,
                          "nvme offload: %s of %zu bytes at offset %llu of %s failed: %s",
                          s->write ? "write" : "read", s->bytes - s->done, (unsigned long long)(s->offset + s->done),
                          f->path, err ? strerror(err) : what);
}

/* Advances slot s by a transfer of res bytes (res < 0: -errno). */
static gaaw_status_t account(gaaw_nvme_file *f, nvme_slot *s, long long res)
{
  if (res < 0) return io_error(f, s, (int)-res, NULL);
  if (res == 0) return io_error(f, s, 0, "the file ended early"); /* a read past its end; a write of nothing */
  s->done += (size_t)res;
  return GAAW_SUCCESS;
}

static gaaw_status_t transfer_now(gaaw_nvme_file *f, nvme_slot *s)
{
  while (s->done < s->bytes) {
    size_t n = s->bytes - s->done;
    if (n > MAX_SUBMISSION) n = MAX_SUBMISSION;
    ssize_t r = s->write ? pwrite(f->fd, s->buf + s->done, n, (off_t)(s->offset + s->done))
                         : pread(f->fd, s->buf + s->done, n, (off_t)(s->offset + s->done));
    if (r < 0 && errno == EINTR) continue;
    gaaw_status_t st = account(f, s, r < 0 ? -(long long)errno : (long long)r);
    if (st != GAAW_SUCCESS) return st;
  }
  return GAAW_SUCCESS;
}

#ifdef GAAW_HAVE_LIBURING
/* Queues the rest of slot i's transfer (at most MAX_SUBMISSION of it). */
static gaaw_status_t submit(gaaw_nvme_file *f, int i)
{
  nvme_slot *s = &f->slot[i];
  struct io_uring_sqe *sqe = io_uring_get_sqe(&f->ring);
  if (!sqe) return io_error(f, s, EBUSY, NULL); /* cannot happen: one entry per slot */
  size_t n = s->bytes - s->done;
  if (n > MAX_SUBMISSION) n = MAX_SUBMISSION;
  if (s->write)
    io_uring_prep_write(sqe, f->fd, s->buf + s->done, (unsigned)n, s->offset + s->done);
  else
    io_uring_prep_read(sqe, f->fd, s->buf + s->done, (unsigned)n, s->offset + s->done);
  io_uring_sqe_set_data64(sqe, (uint64_t)i);
  int r = io_uring_submit(&f->ring);
  return r < 0 ? io_error(f, s, -r, NULL) : GAAW_SUCCESS;
}

/* Waits for one completion and accounts it to its slot (resubmitting a short
 * transfer's rest). */
static gaaw_status_t complete_one(gaaw_nvme_file *f)
{
  struct io_uring_cqe *cqe;
  int r;
  while ((r = io_uring_wait_cqe(&f->ring, &cqe)) == -EINTR) {}
  if (r < 0) return gaaw_error_raise(f->ctx, GAAW_ERR_IO, __FILE__, __LINE__, __func__,
                                     "nvme offload: waiting for I/O on %s failed: %s", f->path, strerror(-r));
  int i = (int)io_uring_cqe_get_data64(cqe);
  long long res = cqe->res;
  io_uring_cqe_seen(&f->ring, cqe);
  nvme_slot *s = &f->slot[i];
  gaaw_status_t st = account(f, s, res);
  if (st == GAAW_SUCCESS && s->done < s->bytes) st = submit(f, i);
  if (st != GAAW_SUCCESS || s->done == s->bytes) {
    s->status = st;
    s->busy = 0; /* nothing of it is in flight any more */
  }
  return GAAW_SUCCESS;
}
#endif

gaaw_status_t gaaw_nvme_start(gaaw_nvme_file *f, int slot, int write, void *buf, size_t bytes, uint64_t offset)
{
  gaaw_context_t ctx = f->ctx;
  nvme_slot *s = &f->slot[slot];
  if (s->busy || s->status != GAAW_SUCCESS)
    GAAW_FAIL(ctx, GAAW_ERR_INTERNAL, "nvme slot %d started while busy", slot);
  *s = (nvme_slot){1, write, buf, bytes, 0, offset, GAAW_SUCCESS};
#ifdef GAAW_HAVE_LIBURING
  if (f->async) {
    gaaw_status_t st = submit(f, slot);
    if (st != GAAW_SUCCESS) s->busy = 0;
    return st;
  }
#endif
  s->status = transfer_now(f, s); /* reported by the wait, as an asynchronous failure is */
  s->busy = 0;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_nvme_wait(gaaw_nvme_file *f, int slot)
{
  nvme_slot *s = &f->slot[slot];
#ifdef GAAW_HAVE_LIBURING
  while (s->busy) {
    gaaw_status_t st = complete_one(f);
    if (st != GAAW_SUCCESS) return st;
  }
#endif
  gaaw_status_t st = s->status;
  s->status = GAAW_SUCCESS; /* reported once; the slot is idle again */
  return st;
}

/* O_DIRECT first; a filesystem that refuses it (EINVAL) gets buffered I/O. */
static int create_file(gaaw_nvme_file *f)
{
  int flags = O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC;
  f->fd = open(f->path, flags | O_DIRECT, 0600);
  f->direct = f->fd >= 0;
  if (f->fd < 0 && errno == EINVAL) f->fd = open(f->path, flags, 0600);
  return f->fd >= 0 ? 0 : errno;
}

static void say_once(const gaaw_nvme_file *f)
{
  static int said;
  if (said) return;
  said = 1;
  if (!f->direct)
    gaaw_log(GAAW_LOG_WARN, "nvme offload: the filesystem of %s does not take O_DIRECT; buffered I/O "
             "(the page cache holds the state too)", f->path);
  if (!f->async)
    gaaw_log(GAAW_LOG_WARN, "nvme offload: %s; pread/pwrite instead (no overlap of reads, updates and writes)",
#ifdef GAAW_HAVE_LIBURING
             "io_uring is not available on this system"
#else
             "this gaaw is built without liburing"
#endif
    );
}

gaaw_status_t gaaw_nvme_open(gaaw_context_t ctx, const char *dir, const char *name, size_t bytes, gaaw_nvme_file **out)
{
  *out = NULL;
  gaaw_nvme_file *f = calloc(1, sizeof *f);
  if (!f) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate the nvme store's file");
  f->ctx = ctx;
  f->fd = -1;
  if ((size_t)snprintf(f->path, sizeof f->path, "%s/%s", dir, name) >= sizeof f->path) {
    free(f);
    GAAW_FAIL(ctx, GAAW_ERR_INVALID_ARG, "option nvme_path is too long: %zu characters leave no room for the "
              "file's name (%zu in all at most)", strlen(dir), sizeof f->path - 1);
  }
  int err = create_file(f);
  if (err) {
    gaaw_status_t st = gaaw_error_raise(ctx, GAAW_ERR_IO, __FILE__, __LINE__, __func__,
                                        "nvme offload: cannot create %s (option nvme_path=%s): %s", f->path,
                                        dir, strerror(err));
    free(f);
    return st;
  }
  unlink(f->path); /* the space is the open file's: given back at close or at the process's end */
  /* reserve the space now: ENOSPC or EFBIG here, before any state is in the file */
  err = bytes ? posix_fallocate(f->fd, 0, (off_t)bytes) : 0;
  if (err == EOPNOTSUPP || err == EINVAL) err = ftruncate(f->fd, (off_t)bytes) == 0 ? 0 : errno;
  if (err) {
    gaaw_status_t st = gaaw_error_raise(ctx, GAAW_ERR_IO, __FILE__, __LINE__, __func__,
                                        "nvme offload: cannot reserve %zu bytes (offset 0) for %s: %s", bytes,
                                        f->path, strerror(err));
    close(f->fd);
    free(f);
    return st;
  }
#ifdef GAAW_HAVE_LIBURING
  f->async = io_uring_queue_init(2 * GAAW_NVME_SLOTS, &f->ring, 0) == 0;
#endif
  say_once(f);
  *out = f;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_nvme_create(gaaw_context_t ctx, const char *kind, size_t bytes, gaaw_nvme_file **out)
{
  static int created; /* files of this process so far: each its own name */
  int rank = 0, size = 1;
  GAAW_CHECK(gaaw_topology_group_rank(ctx, GAAW_GROUP_WORLD, &rank, &size));
  char name[96];
  snprintf(name, sizeof name, "gaaw-%s-rank%05d-pid%ld-%d.bin", kind, rank, (long)getpid(), created++);
  GAAW_CHECK(gaaw_nvme_open(ctx, gaaw_ctx_string(ctx, "nvme_path"), name, bytes, out));
  return GAAW_SUCCESS;
}

void gaaw_nvme_close(gaaw_nvme_file **fp)
{
  gaaw_nvme_file *f = fp ? *fp : NULL;
  if (!f) return;
  for (int i = 0; i < GAAW_NVME_SLOTS; i++) gaaw_nvme_wait(f, i); /* buffers must outlive their transfers */
#ifdef GAAW_HAVE_LIBURING
  if (f->async) io_uring_queue_exit(&f->ring);
#endif
  close(f->fd);
  free(f);
  *fp = NULL;
}
