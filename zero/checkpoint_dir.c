/* The save directory on disk: temporary directories, fsyncs, the commit's renames,
 * `latest`, keep, listing, whole reads and writes. POSIX only, no MPI: the
 * background writer calls these too. Every failure is GAAW_ERR_IO naming the path
 * and the call. */
#define _GNU_SOURCE /* renameat2 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/runtime/error.h"
#include "zero/checkpoint_impl.h"

#define IO_FAIL(ctx, what, path) \
  GAAW_FAIL((ctx), GAAW_ERR_IO, "%s %s: %s", (what), (path), strerror(errno))

gaaw_status_t gaaw_ckpt_join(gaaw_context_t ctx, char *out, size_t size, const char *dir, const char *name)
{
  int n = snprintf(out, size, "%s/%s", dir, name);
  GAAW_ARG_CHECK(ctx, n > 0 && (size_t)n < size, "the path %s/%s is longer than %zu bytes", dir, name, size - 1);
  return GAAW_SUCCESS;
}

int64_t gaaw_ckpt_step_of(const char *name)
{
  if (strncmp(name, "step-", 5) != 0) return -1;
  const char *d = name + 5;
  size_t n = strlen(d);
  if (n < 8 || n > 18) return -1;
  int64_t step = 0;
  for (size_t i = 0; i < n; i++) {
    if (d[i] < '0' || d[i] > '9') return -1;
    step = step * 10 + (d[i] - '0');
  }
  /* canonical: as printed by %08lld, so that one step has one name */
  char again[32];
  snprintf(again, sizeof again, "%08lld", (long long)step);
  return strcmp(again, d) == 0 ? step : -1;
}

gaaw_status_t gaaw_ckpt_mkdirs(gaaw_context_t ctx, const char *dir)
{
  char path[4096];
  int n = snprintf(path, sizeof path, "%s", dir);
  GAAW_ARG_CHECK(ctx, n > 0 && (size_t)n < sizeof path, "the checkpoint directory's path is too long");
  for (char *p = path + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(path, 0777) != 0 && errno != EEXIST) IO_FAIL(ctx, "cannot create the directory", path);
    *p = '/';
  }
  if (mkdir(path, 0777) != 0 && errno != EEXIST) IO_FAIL(ctx, "cannot create the directory", path);
  struct stat sb;
  if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
    GAAW_FAIL(ctx, GAAW_ERR_IO, "the checkpoint directory %s is not a directory", path);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_ckpt_make_temp(gaaw_context_t ctx, const char *dir, int64_t step, char *name, size_t size)
{
  char path[4096], tmp[64];
  snprintf(tmp, sizeof tmp, ".tmp-step-%08lld-XXXXXX", (long long)step);
  GAAW_CHECK(gaaw_ckpt_join(ctx, path, sizeof path, dir, tmp));
  if (!mkdtemp(path)) IO_FAIL(ctx, "cannot create the temporary directory", path);
  snprintf(name, size, "%s", strrchr(path, '/') + 1);
  return GAAW_SUCCESS;
}

/* write() of all n bytes, through short writes and EINTR. */
static int write_all(int fd, const char *p, size_t n)
{
  while (n > 0) {
    ssize_t w = write(fd, p, n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w, n -= (size_t)w;
  }
  return 0;
}

gaaw_status_t gaaw_ckpt_write_file(gaaw_context_t ctx, const char *path, const void *const *parts,
                                   const size_t *sizes, int count)
{
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) IO_FAIL(ctx, "cannot create", path);
  for (int i = 0; i < count; i++) {
    if (write_all(fd, parts[i], sizes[i]) != 0) {
      int e = errno;
      close(fd);
      errno = e;
      IO_FAIL(ctx, "cannot write", path);
    }
  }
  if (fsync(fd) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    IO_FAIL(ctx, "cannot fsync", path);
  }
  if (close(fd) != 0) IO_FAIL(ctx, "cannot close", path);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_ckpt_fsync_dir(gaaw_context_t ctx, const char *dir)
{
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) IO_FAIL(ctx, "cannot open the directory", dir);
  int rc = fsync(fd);
  int e = errno;
  close(fd);
  errno = e;
  if (rc != 0) IO_FAIL(ctx, "cannot fsync the directory", dir);
  return GAAW_SUCCESS;
}

/* Removes dir/name and the files inside it (checkpoints hold no subdirectories). */
static gaaw_status_t remove_tree(gaaw_context_t ctx, const char *dir, const char *name)
{
  char path[4096], file[4096];
  GAAW_CHECK(gaaw_ckpt_join(ctx, path, sizeof path, dir, name));
  DIR *d = opendir(path);
  if (!d) IO_FAIL(ctx, "cannot open", path);
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    if (gaaw_ckpt_join(ctx, file, sizeof file, path, e->d_name) == GAAW_SUCCESS) unlink(file);
  }
  closedir(d);
  if (rmdir(path) != 0) IO_FAIL(ctx, "cannot remove", path);
  return GAAW_SUCCESS;
}

/* Renames the committed dir/name to a temporary name (into aside[64]), so that a
 * removal cut short never leaves a step directory with files missing: the next
 * commit's clean-up removes what is left. */
static gaaw_status_t set_aside(gaaw_context_t ctx, const char *dir, const char *name, char *aside)
{
  char from[4096], to[4096];
  snprintf(aside, 64, ".tmp-old-%.40s", name);
  GAAW_CHECK(gaaw_ckpt_join(ctx, from, sizeof from, dir, name));
  GAAW_CHECK(gaaw_ckpt_join(ctx, to, sizeof to, dir, aside));
  if (rename(from, to) != 0) IO_FAIL(ctx, "cannot rename aside", from);
  return GAAW_SUCCESS;
}

static gaaw_status_t remove_checkpoint(gaaw_context_t ctx, const char *dir, const char *name)
{
  char aside[64];
  GAAW_CHECK(set_aside(ctx, dir, name, aside));
  return remove_tree(ctx, dir, aside);
}

/* renameat2's exchange, or EINVAL where the filesystem has none (NFS, Lustre; and
 * under GAAW_TEST_CHECKPOINT_NO_EXCHANGE, for the test of the other path). */
static int exchange(const char *a, const char *b)
{
  if (getenv("GAAW_TEST_CHECKPOINT_NO_EXCHANGE")) return errno = EINVAL, -1;
  return renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE);
}

gaaw_status_t gaaw_ckpt_commit_rename(gaaw_context_t ctx, const char *dir, const char *from, const char *to)
{
  char src[4096], dst[4096], aside[64];
  GAAW_CHECK(gaaw_ckpt_join(ctx, src, sizeof src, dir, from));
  GAAW_CHECK(gaaw_ckpt_join(ctx, dst, sizeof dst, dir, to));
  if (rename(src, dst) == 0) return GAAW_SUCCESS;
  if (errno != ENOTEMPTY && errno != EEXIST) IO_FAIL(ctx, "cannot rename to", dst);
  /* the same step saved again: swap the two at once, so that a committed
   * checkpoint of that step exists at every instant, then drop the old one */
  if (exchange(src, dst) == 0) {
    GAAW_CHECK(gaaw_ckpt_fsync_dir(ctx, dir));
    return remove_tree(ctx, dir, from);
  }
  if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP) IO_FAIL(ctx, "cannot exchange with", dst);
  /* no atomic exchange here: the old one goes aside first, and for a moment
   * there is no such step (a load meanwhile takes another with checkpoint_fallback) */
  GAAW_CHECK(set_aside(ctx, dir, to, aside));
  if (rename(src, dst) != 0) IO_FAIL(ctx, "cannot rename to", dst);
  GAAW_CHECK(gaaw_ckpt_fsync_dir(ctx, dir));
  return remove_tree(ctx, dir, aside);
}

gaaw_status_t gaaw_ckpt_write_latest(gaaw_context_t ctx, const char *dir, const char *name)
{
  char tmp[4096], latest[4096], text[64];
  GAAW_CHECK(gaaw_ckpt_join(ctx, tmp, sizeof tmp, dir, ".latest.tmp"));
  GAAW_CHECK(gaaw_ckpt_join(ctx, latest, sizeof latest, dir, "latest"));
  unlink(tmp); /* left by a save that was killed here */
  int n = snprintf(text, sizeof text, "%s\n", name);
  const void *parts[1] = {text};
  size_t sizes[1] = {(size_t)n};
  GAAW_CHECK(gaaw_ckpt_write_file(ctx, tmp, parts, sizes, 1));
  gaaw_ckpt_test_kill("before_latest");
  if (rename(tmp, latest) != 0) IO_FAIL(ctx, "cannot rename to", latest);
  return gaaw_ckpt_fsync_dir(ctx, dir);
}

gaaw_status_t gaaw_ckpt_read_latest(gaaw_context_t ctx, const char *dir, char *name, size_t size)
{
  char path[4096];
  GAAW_CHECK(gaaw_ckpt_join(ctx, path, sizeof path, dir, "latest"));
  FILE *f = fopen(path, "rb");
  if (!f && errno == ENOENT) GAAW_FAIL(ctx, GAAW_ERR_NOT_FOUND, "%s does not exist", path);
  if (!f) IO_FAIL(ctx, "cannot open", path);
  char text[64] = "";
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = '\0';
  if (n > 0 && text[n - 1] == '\n') text[n - 1] = '\0';
  if (gaaw_ckpt_step_of(text) < 0)
    GAAW_FAIL(ctx, GAAW_ERR_CORRUPT, "%s does not name a checkpoint (step-NNNNNNNN): '%.40s'", path, text);
  snprintf(name, size, "%s", text);
  return GAAW_SUCCESS;
}

static int newest_first(const void *a, const void *b)
{
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? 1 : x > y ? -1 : 0;
}

gaaw_status_t gaaw_ckpt_list_steps(gaaw_context_t ctx, const char *dir, int64_t **steps, int *n)
{
  *steps = NULL, *n = 0;
  DIR *d = opendir(dir);
  if (!d && errno == ENOENT) return GAAW_SUCCESS;
  if (!d) IO_FAIL(ctx, "cannot list", dir);
  int cap = 0;
  struct dirent *e;
  gaaw_status_t st = GAAW_SUCCESS;
  while ((e = readdir(d))) {
    int64_t s = gaaw_ckpt_step_of(e->d_name);
    if (s < 0) continue;
    char path[4096];
    struct stat sb;
    /* a directory, not a symbolic link to one */
    if (gaaw_ckpt_join(ctx, path, sizeof path, dir, e->d_name) != GAAW_SUCCESS || lstat(path, &sb) != 0 ||
        !S_ISDIR(sb.st_mode))
      continue;
    if (*n == cap) {
      int64_t *grown = realloc(*steps, sizeof *grown * (size_t)(cap = cap ? 2 * cap : 16));
      if (!grown) {
        st = gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__, "cannot list %s", dir);
        break;
      }
      *steps = grown;
    }
    (*steps)[(*n)++] = s;
  }
  closedir(d);
  if (st != GAAW_SUCCESS) {
    free(*steps);
    *steps = NULL, *n = 0;
    return st;
  }
  if (*n) qsort(*steps, (size_t)*n, sizeof **steps, newest_first);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_ckpt_prune(gaaw_context_t ctx, const char *dir, int keep, int64_t committed)
{
  DIR *d = opendir(dir);
  if (!d) IO_FAIL(ctx, "cannot list", dir);
  struct dirent *e;
  char stale[64][64];
  int nstale = 0;
  while ((e = readdir(d)) && nstale < 64)
    if (!strncmp(e->d_name, ".tmp-", 5) && strlen(e->d_name) < sizeof stale[0])
      snprintf(stale[nstale++], sizeof stale[0], "%s", e->d_name);
  closedir(d);
  for (int i = 0; i < nstale; i++) GAAW_CHECK(remove_tree(ctx, dir, stale[i]));
  if (keep <= 0) return GAAW_SUCCESS;
  int64_t *steps;
  int n;
  GAAW_CHECK(gaaw_ckpt_list_steps(ctx, dir, &steps, &n));
  gaaw_status_t st = GAAW_SUCCESS;
  for (int i = keep; i < n && st == GAAW_SUCCESS; i++) {
    if (steps[i] == committed) continue;
    char name[32];
    snprintf(name, sizeof name, "step-%08lld", (long long)steps[i]);
    st = remove_checkpoint(ctx, dir, name);
  }
  free(steps);
  return st;
}

gaaw_status_t gaaw_ckpt_read_file(gaaw_context_t ctx, const char *path, char **data, size_t *bytes)
{
  *data = NULL, *bytes = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) GAAW_FAIL(ctx, GAAW_ERR_CORRUPT, "%s is missing", path);
  if (fd < 0) IO_FAIL(ctx, "cannot open", path);
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    close(fd);
    IO_FAIL(ctx, "cannot stat", path);
  }
  char *buf = malloc((size_t)sb.st_size + 1);
  if (!buf) {
    close(fd);
    GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate %lld bytes for %s", (long long)sb.st_size, path);
  }
  gaaw_status_t st = gaaw_ckpt_pread(ctx, fd, buf, (size_t)sb.st_size, 0, path);
  close(fd);
  if (st != GAAW_SUCCESS) {
    free(buf);
    return st;
  }
  buf[sb.st_size] = '\0';
  *data = buf, *bytes = (size_t)sb.st_size;
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_ckpt_pread(gaaw_context_t ctx, int fd, void *buf, size_t n, int64_t offset, const char *path)
{
  char *p = buf;
  size_t done = 0;
  while (done < n) {
    size_t want = n - done > ((size_t)1 << 30) ? ((size_t)1 << 30) : n - done;
    ssize_t r = pread(fd, p + done, want, (off_t)(offset + (int64_t)done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) IO_FAIL(ctx, "cannot read", path);
    if (r == 0)
      GAAW_FAIL(ctx, GAAW_ERR_CORRUPT, "%s is truncated: it ends at byte %lld, reading %zu bytes at %lld", path,
                (long long)(offset + (int64_t)done), n, (long long)offset);
    done += (size_t)r;
  }
  return GAAW_SUCCESS;
}

void gaaw_ckpt_test_kill(const char *point)
{
  const char *want = getenv("GAAW_TEST_CHECKPOINT_KILL");
  if (want && !strcmp(want, point)) raise(SIGKILL);
}
