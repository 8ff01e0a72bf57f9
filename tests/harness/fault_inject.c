/* Fault injection for tests: an LD_PRELOAD library that makes a named call fail at its
 * k-th use, so that a status the library ignores on an I/O path shows in a test.
 *
 *   LD_PRELOAD=tests/harness/.libs/libgaaw_fault.so
 *   GAAW_FAULT="CALL:K[+][=ERRNO][@TEXT],..."
 *     CALL   open, openat, write, pwrite, fsync, fdatasync, rename, ftruncate,
 *            posix_fallocate, mmap, io_uring_submit, io_uring_queue_init, or alloc (malloc, calloc,
 *            realloc and aligned_alloc, which then return NULL, and posix_memalign, which
 *            returns the errno)
 *     K      the use that fails, counting from 1 only the uses that match TEXT;
 *            K+ fails that use and every later one
 *     ERRNO  EIO (default; ENOMEM for alloc), ENOSPC, EACCES, EROFS, EDQUOT, ENOMEM,
 *            EINVAL, EOPNOTSUPP or ENOSYS
 *     TEXT   only uses whose path (a file descriptor's, through /proc/self/fd)
 *            contains TEXT are counted; io_uring_submit has no path and ignores it;
 *            alloc needs TEXT, matched against the calling shared object's path
 *            (alloc:3@libgaaw: the third allocation gaaw's library makes, whatever
 *            MPI and the C library allocate meanwhile)
 *   GAAW_FAULT_RANK=R  inject only in the MPI rank R (PMI_RANK, OMPI_COMM_WORLD_RANK)
 *
 * A program may count only the uses inside a window of its own: it finds
 * gaaw_fault_window with dlsym(RTLD_DEFAULT, ...) (absent without the shim) and calls
 * it with 1 to open the window, 0 to close it; from the first call on, uses outside
 * a window neither count nor fail. It returns the uses counted so far, all rules'.
 * It may also replace the rules: gaaw_fault_set(SPEC), SPEC in GAAW_FAULT's syntax,
 * counts from zero again (it returns the number of rules), so that one process can
 * fail each use of a call in turn.
 *
 * Each injected failure is reported on stderr ("gaaw-fault: fsync #1 on PATH: EIO"),
 * so a test can tell an injected failure from a real one. A malformed GAAW_FAULT ends
 * the process with status 99 at its first intercepted call. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

#define MAX_RULES 8

typedef struct {
  char call[32];
  long k;          /* the use (1-based) that fails */
  int and_later;   /* K+: every use from k on */
  int err;
  char text[256];  /* empty: every use counts */
  long uses;       /* matching uses so far */
} fault_rule;

static fault_rule rules[MAX_RULES];
static int n_rules = -1;   /* -1: GAAW_FAULT not read yet */
static int alloc_rules;    /* rules for alloc: only then is an allocation's caller looked up */
static int windowed, window_open; /* gaaw_fault_window: count only inside the window */

static const struct { const char *name; int value; } errno_names[] = {
  {"EIO", EIO}, {"ENOSPC", ENOSPC}, {"EACCES", EACCES}, {"EROFS", EROFS}, {"EDQUOT", EDQUOT}, {"ENOMEM", ENOMEM},
  {"EINVAL", EINVAL}, {"EOPNOTSUPP", EOPNOTSUPP}, {"ENOSYS", ENOSYS},
};

static void die_malformed(const char *spec, const char *why)
{
  fprintf(stderr, "gaaw-fault: GAAW_FAULT=\"%s\": %s\n", spec, why);
  _exit(99);
}

static int this_rank_injects(void)
{
  const char *want = getenv("GAAW_FAULT_RANK");
  if (!want || !*want) return 1;
  const char *rank = getenv("PMI_RANK");
  if (!rank) rank = getenv("OMPI_COMM_WORLD_RANK");
  return rank && strcmp(rank, want) == 0;
}

static void parse_rule(const char *spec, char *item)
{
  fault_rule *r = &rules[n_rules];
  char *at = strchr(item, '@');
  if (at) {
    *at = '\0';
    snprintf(r->text, sizeof r->text, "%s", at + 1);
  }
  char *eq = strchr(item, '=');
  r->err = strncmp(item, "alloc:", 6) == 0 ? ENOMEM : EIO;
  if (eq) {
    *eq = '\0';
    r->err = 0;
    for (size_t i = 0; i < sizeof errno_names / sizeof errno_names[0]; i++)
      if (strcmp(eq + 1, errno_names[i].name) == 0) r->err = errno_names[i].value;
    if (!r->err) die_malformed(spec, "unknown errno name");
  }
  char *colon = strchr(item, ':');
  if (!colon) die_malformed(spec, "want CALL:K");
  *colon = '\0';
  char *end;
  r->k = strtol(colon + 1, &end, 10);
  r->and_later = *end == '+';
  if (end == colon + 1 || r->k < 1 || (*end && strcmp(end, "+") != 0)) die_malformed(spec, "K must be a positive integer");
  snprintf(r->call, sizeof r->call, "%s", item);
  if (strcmp(r->call, "alloc") == 0) {
    /* without TEXT, the C library's own allocations (this report's) would count */
    if (!r->text[0]) die_malformed(spec, "alloc needs @TEXT, the calling library (alloc:K@libgaaw)");
    alloc_rules++;
  }
  n_rules++;
}

/* The rules of spec (GAAW_FAULT's syntax) in place of any before, counted from zero. */
static void set_rules(const char *spec)
{
  memset(rules, 0, sizeof rules);
  n_rules = alloc_rules = 0;
  if (!spec || !*spec || !this_rank_injects()) return;
  char copy[2048];
  snprintf(copy, sizeof copy, "%s", spec);
  char *save = NULL;
  for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
    if (n_rules == MAX_RULES) die_malformed(spec, "more than 8 rules");
    parse_rule(spec, item);
  }
}

static void read_rules(void)
{
  if (n_rules < 0) set_rules(getenv("GAAW_FAULT"));
}

int gaaw_fault_set(const char *spec)
{
  set_rules(spec);
  return n_rules;
}

static void fd_path(int fd, char *out, size_t len)
{
  char link[64];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, out, len - 1);
  out[n > 0 ? n : 0] = '\0';
}

/* 0 when this use goes through; else the errno to fail it with. path2: a second path
 * (rename's target) that may match TEXT too. */
static int injected(const char *call, const char *path, const char *path2)
{
  read_rules();
  if (windowed && !__atomic_load_n(&window_open, __ATOMIC_SEQ_CST)) return 0;
  for (int i = 0; i < n_rules; i++) {
    fault_rule *r = &rules[i];
    if (strcmp(r->call, call) != 0) continue;
    if (r->text[0] && !(path && strstr(path, r->text)) && !(path2 && strstr(path2, r->text))) continue;
    long use = __atomic_add_fetch(&r->uses, 1, __ATOMIC_SEQ_CST);
    if (use == r->k || (r->and_later && use > r->k)) {
      fprintf(stderr, "gaaw-fault: %s #%ld on %s: %s\n", call, use, path ? path : "-", strerror(r->err));
      return r->err;
    }
  }
  return 0;
}

static int injected_fd(const char *call, int fd)
{
  read_rules();
  if (n_rules == 0) return 0;
  char path[4096];
  fd_path(fd, path, sizeof path);
  return injected(call, path, NULL);
}

long gaaw_fault_window(int open)
{
  read_rules();
  windowed = 1;
  __atomic_store_n(&window_open, open, __ATOMIC_SEQ_CST);
  long uses = 0;
  for (int i = 0; i < n_rules; i++) uses += __atomic_load_n(&rules[i].uses, __ATOMIC_SEQ_CST);
  return uses;
}

#define REAL(ret, name, ...) \
  static ret (*real_##name)(__VA_ARGS__); \
  if (!real_##name) *(void **)&real_##name = dlsym(RTLD_NEXT, #name)

/* open's and openat's mode argument, passed only when the call may create a file */
#define CREATION_MODE(flags, mode)            \
  do {                                        \
    if ((flags) & (O_CREAT | O_TMPFILE)) {    \
      va_list ap;                             \
      va_start(ap, flags);                    \
      (mode) = va_arg(ap, mode_t);            \
      va_end(ap);                             \
    }                                         \
  } while (0)

int open(const char *path, int flags, ...)
{
  REAL(int, open, const char *, int, ...);
  mode_t mode = 0;
  CREATION_MODE(flags, mode);
  int e = injected("open", path, NULL);
  if (e) return errno = e, -1;
  return real_open(path, flags, mode);
}

int open64(const char *path, int flags, ...) __attribute__((alias("open")));

int openat(int dirfd, const char *path, int flags, ...)
{
  REAL(int, openat, int, const char *, int, ...);
  mode_t mode = 0;
  CREATION_MODE(flags, mode);
  int e = injected("openat", path, NULL);
  if (e) return errno = e, -1;
  return real_openat(dirfd, path, flags, mode);
}

ssize_t write(int fd, const void *buf, size_t n)
{
  REAL(ssize_t, write, int, const void *, size_t);
  int e = fd > 2 ? injected_fd("write", fd) : 0;
  if (e) return errno = e, -1;
  return real_write(fd, buf, n);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t offset)
{
  REAL(ssize_t, pwrite, int, const void *, size_t, off_t);
  int e = injected_fd("pwrite", fd);
  if (e) return errno = e, -1;
  return real_pwrite(fd, buf, n, offset);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t offset) __attribute__((alias("pwrite")));

int fsync(int fd)
{
  REAL(int, fsync, int);
  int e = injected_fd("fsync", fd);
  if (e) return errno = e, -1;
  return real_fsync(fd);
}

int fdatasync(int fd)
{
  REAL(int, fdatasync, int);
  int e = injected_fd("fdatasync", fd);
  if (e) return errno = e, -1;
  return real_fdatasync(fd);
}

int rename(const char *from, const char *to)
{
  REAL(int, rename, const char *, const char *);
  int e = injected("rename", from, to);
  if (e) return errno = e, -1;
  return real_rename(from, to);
}

int ftruncate(int fd, off_t length)
{
  REAL(int, ftruncate, int, off_t);
  int e = injected_fd("ftruncate", fd);
  if (e) return errno = e, -1;
  return real_ftruncate(fd, length);
}

int ftruncate64(int fd, off_t length) __attribute__((alias("ftruncate")));

int posix_fallocate(int fd, off_t offset, off_t len)
{
  REAL(int, posix_fallocate, int, off_t, off_t);
  int e = injected_fd("posix_fallocate", fd);
  if (e) return e;   /* it returns the error, errno untouched */
  return real_posix_fallocate(fd, offset, len);
}

int posix_fallocate64(int fd, off_t offset, off_t len) __attribute__((alias("posix_fallocate")));

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t offset)
{
  REAL(void *, mmap, void *, size_t, int, int, int, off_t);
  int e = fd >= 0 ? injected_fd("mmap", fd) : 0;
  if (e) return errno = e, MAP_FAILED;
  return real_mmap(addr, len, prot, flags, fd, offset);
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t offset) __attribute__((alias("mmap")));

/* liburing's submission: it returns -errno on failure */
int io_uring_submit(void *ring)
{
  REAL(int, io_uring_submit, void *);
  int e = injected("io_uring_submit", NULL, NULL);
  if (e) return -e;
  if (!real_io_uring_submit) return -ENOSYS;
  return real_io_uring_submit(ring);
}

/* liburing's ring setup, -errno on failure (ENOSYS: a kernel without io_uring, or
 * one that forbids it, as some containers do) */
int io_uring_queue_init(unsigned entries, void *ring, unsigned flags)
{
  REAL(int, io_uring_queue_init, unsigned, void *, unsigned);
  int e = injected("io_uring_queue_init", NULL, NULL);
  if (e) return -e;
  if (!real_io_uring_queue_init) return -ENOSYS;
  return real_io_uring_queue_init(entries, ring, flags);
}

/* ---------------------------------------------------------------- allocations */

/* glibc's allocator under its internal names: the shim's malloc cannot reach the real
 * one through dlsym, which may itself allocate */
void *__libc_malloc(size_t n);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t n);
void *__libc_memalign(size_t align, size_t n);

/* nonzero when this allocation, made from the code at caller, is to fail */
static int alloc_injected(const void *caller)
{
  read_rules();
  if (!alloc_rules) return 0;
  Dl_info info;
  if (!dladdr(caller, &info) || !info.dli_fname) return 0;
  return injected("alloc", info.dli_fname, NULL);
}

#define FAIL_ALLOCATION()                                                  \
  do {                                                                     \
    int e_ = alloc_injected(__builtin_return_address(0));                  \
    if (e_) return errno = e_, NULL;                                       \
  } while (0)

void *malloc(size_t n)
{
  FAIL_ALLOCATION();
  return __libc_malloc(n);
}

void *calloc(size_t n, size_t size)
{
  FAIL_ALLOCATION();
  return __libc_calloc(n, size);
}

void *realloc(void *p, size_t n)
{
  FAIL_ALLOCATION();
  return __libc_realloc(p, n);
}

void *aligned_alloc(size_t align, size_t n)
{
  FAIL_ALLOCATION();
  return __libc_memalign(align, n);
}

/* gaaw_host_alloc's (page-aligned host buffers); it returns the error, not errno */
int posix_memalign(void **p, size_t align, size_t n)
{
  int e = alloc_injected(__builtin_return_address(0));
  if (e) return e;
  if (align < sizeof(void *) || (align & (align - 1)) != 0) return EINVAL;
  void *q = __libc_memalign(align, n);
  if (!q) return ENOMEM;
  *p = q;
  return 0;
}
