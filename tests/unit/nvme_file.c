/* The nvme offload's file (zero/nvme_file.c) on its own, one process, in a fresh
 * directory of the working directory (run by test_nvme_file.sh, under
 * tests/harness/fault_inject.c when it is built; its cases need the shim's
 * gaaw_fault_set and are skipped, and said, without it):
 *  - three slots written at once and read back, each byte where it was written,
 *    through io_uring and (under the shim, io_uring refused) pread/pwrite;
 *  - a read past the file's end: GAAW_ERR_IO at the wait, naming the file, the
 *    offset and "ended early"; the slot is idle again afterwards;
 *  - a slot started while it still holds a transfer: GAAW_ERR_INTERNAL;
 *  - a directory path too long for the file's: GAAW_ERR_INVALID_ARG naming the option;
 *  - under the shim: a directory that cannot hold the file (EACCES), a reservation
 *    that fails (ENOSPC) and one the filesystem cannot make (EOPNOTSUPP: ftruncate
 *    instead), O_DIRECT refused (EINVAL: buffered I/O), a failing write (pwrite, or
 *    io_uring's submission): each GAAW_ERR_IO naming the file and the reason, or
 *    the fallback working; the directory is left empty every time. */
#include <mpi.h>

#include "tests/harness/checkpoint_util.h"
#include "tests/harness/fault_util.h"
#include "zero/nvme_file.h"

enum { RECORD = GAAW_NVME_ALIGN, RECORDS = 3 };

static char dir[64];

static unsigned char *aligned(size_t bytes)
{
  void *p = NULL;
  if (posix_memalign(&p, GAAW_NVME_ALIGN, bytes) != 0) {
    fprintf(stderr, "FAIL: cannot allocate %zu bytes\n", bytes);
    exit(1);
  }
  return p;
}

static void fill(unsigned char *b, size_t n, int seed)
{
  for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(seed * 131 + i * 7 + (i >> 8));
}

/* GAAW_ERR_IO whose message names the file's directory and needle. */
static void expect_io(gaaw_context_t ctx, gaaw_status_t st, const char *what, const char *needle)
{
  const char *why = st == GAAW_SUCCESS ? "" : gaaw_last_error(ctx);
  expect_true(st == GAAW_ERR_IO, "%s: %s, not GAAW_ERR_IO: %s", what, gaaw_status_string(st), why);
  expect_true(strstr(why, dir) && strstr(why, needle), "%s: the message does not name %s and '%s': %s", what, dir,
              needle, why);
}

/* The file, through io_uring where it can be (sync 0), or with io_uring refused at
 * its setup (sync 1: needs the shim), as a kernel without it does. */
static gaaw_nvme_file *open_file(gaaw_context_t ctx, fault_set_fn set, int sync)
{
  gaaw_nvme_file *f;
  if (sync) set("io_uring_queue_init:1+=ENOSYS");
  require_ok(ctx, gaaw_nvme_open(ctx, dir, "trip.bin", RECORDS * RECORD, &f));
  if (sync) set("");
  expect_true(!sync || !gaaw_nvme_async(f), "io_uring refused, yet the file says it uses it");
  return f;
}

static void round_trip(gaaw_context_t ctx, fault_set_fn set, int sync)
{
  gaaw_nvme_file *f = open_file(ctx, set, sync);
  unsigned char *out = aligned(RECORDS * RECORD), *in = aligned(RECORDS * RECORD);
  for (int s = 0; s < GAAW_NVME_SLOTS; s++) {
    fill(out + s * RECORD, RECORD, s + 1);
    require_ok(ctx, gaaw_nvme_start(f, s, 1, out + s * RECORD, RECORD, (uint64_t)s * RECORD));
  }
  for (int s = 0; s < GAAW_NVME_SLOTS; s++) require_ok(ctx, gaaw_nvme_wait(f, s));
  memset(in, 0, RECORDS * RECORD);
  for (int s = 0; s < GAAW_NVME_SLOTS; s++) /* in another slot than wrote it */
    require_ok(ctx, gaaw_nvme_start(f, (s + 1) % GAAW_NVME_SLOTS, 0, in + s * RECORD, RECORD, (uint64_t)s * RECORD));
  for (int s = 0; s < GAAW_NVME_SLOTS; s++) require_ok(ctx, gaaw_nvme_wait(f, s));
  expect_true(memcmp(in, out, RECORDS * RECORD) == 0, "the records read back differ from those written");
  /* past the end: the read comes back empty */
  expect_io(ctx, (gaaw_nvme_start(f, 0, 0, in, RECORD, RECORDS * RECORD), gaaw_nvme_wait(f, 0)), "a read past the end",
            "ended early");
  require_ok(ctx, gaaw_nvme_wait(f, 0)); /* reported once */
  require_ok(ctx, gaaw_nvme_start(f, 0, 0, in, RECORD, 0));
  if (gaaw_nvme_async(f)) /* in flight still: starting it again is the caller's bug */
    expect_status_ctx(ctx, gaaw_nvme_start(f, 0, 0, in, RECORD, 0), GAAW_ERR_INTERNAL);
  require_ok(ctx, gaaw_nvme_wait(f, 0));
  gaaw_nvme_close(&f);
  expect_true(f == NULL && test_dir_empty(dir), "the file is not gone after the close");
  free(out);
  free(in);
}

/* Opens a file under the rules of spec; want: GAAW_SUCCESS or GAAW_ERR_IO with needle. */
static gaaw_nvme_file *open_under(gaaw_context_t ctx, fault_set_fn set, const char *spec, gaaw_status_t want,
                                  const char *needle)
{
  gaaw_nvme_file *f = NULL;
  set(spec);
  gaaw_status_t st = gaaw_nvme_open(ctx, dir, "fault.bin", RECORDS * RECORD, &f);
  set("");
  if (want == GAAW_SUCCESS) require_ok(ctx, st);
  else expect_io(ctx, st, spec, needle);
  expect_true(want == GAAW_SUCCESS || (f == NULL && test_dir_empty(dir)), "%s: a file is left behind", spec);
  return f;
}

static void faults(gaaw_context_t ctx, fault_set_fn set)
{
  char spec[160];
  snprintf(spec, sizeof spec, "open:1+=EACCES@%s", dir);
  open_under(ctx, set, spec, GAAW_ERR_IO, "Permission denied");
  snprintf(spec, sizeof spec, "posix_fallocate:1=ENOSPC@%s", dir);
  open_under(ctx, set, spec, GAAW_ERR_IO, "No space left");
  snprintf(spec, sizeof spec, "posix_fallocate:1=EOPNOTSUPP@%s", dir);
  gaaw_nvme_file *f = open_under(ctx, set, spec, GAAW_SUCCESS, "");
  gaaw_nvme_close(&f);
  snprintf(spec, sizeof spec, "open:1=EINVAL@%s", dir);
  f = open_under(ctx, set, spec, GAAW_SUCCESS, "");
  expect_true(!gaaw_nvme_direct(f), "O_DIRECT refused: the file still says it is read directly");
  gaaw_nvme_close(&f);
  unsigned char *b = aligned(RECORD);
  fill(b, RECORD, 9);
  /* a failing write: at its submission (io_uring) or its pwrite (reported by the wait) */
  for (int sync = 0; sync < 2; sync++) {
    f = open_file(ctx, set, sync);
    snprintf(spec, sizeof spec, gaaw_nvme_async(f) ? "io_uring_submit:1" : "pwrite:1@%s", dir);
    set(spec);
    gaaw_status_t st = gaaw_nvme_start(f, 1, 1, b, RECORD, RECORD);
    if (st == GAAW_SUCCESS) st = gaaw_nvme_wait(f, 1);
    set("");
    expect_io(ctx, st, spec, "write of 4096 bytes at offset 4096");
    require_ok(ctx, gaaw_nvme_wait(f, 1)); /* idle again: the next transfer goes through */
    require_ok(ctx, gaaw_nvme_start(f, 1, 1, b, RECORD, RECORD));
    require_ok(ctx, gaaw_nvme_wait(f, 1));
    gaaw_nvme_close(&f);
    expect_true(test_dir_empty(dir), "%s: the file is not gone after the close", spec);
  }
  free(b);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  test_deadline(10, "the nvme file's transfers"); /* it takes under a second: a hang fails fast */
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, "backend=host");
  ckpt_test_dir(dir, sizeof dir, "test_nvme_file.");
  if (!dir[0]) {
    fprintf(stderr, "FAIL: cannot make a directory here\n");
    return 1;
  }
  fault_set_fn set = fault_shim_set();
  /* a directory whose path leaves no room for the file's name */
  char long_dir[5000];
  memset(long_dir, 'd', sizeof long_dir - 1);
  long_dir[sizeof long_dir - 1] = '\0';
  gaaw_nvme_file *f = NULL;
  expect_status_ctx(ctx, gaaw_nvme_open(ctx, long_dir, "x.bin", RECORD, &f), GAAW_ERR_INVALID_ARG);
  expect_true(f == NULL && strstr(gaaw_last_error(ctx), "option nvme_path is too long: 4999 characters leave no room for the file's "
                                                      "name (4095 in all at most)") != NULL,
              "a path too long: %s", gaaw_last_error(ctx));
  round_trip(ctx, set, 0);
  if (set) {
    round_trip(ctx, set, 1);
    faults(ctx, set);
  } else {
    printf("test_nvme_file: not under the fault shim: its cases skipped\n");
  }
  ckpt_test_dir_remove(dir);
  gaaw_finalize(&ctx);
  return test_finish_mpi("test_nvme_file");
}
