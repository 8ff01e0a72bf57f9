/* gaaw-train --plot: finding gaaw-plot and running it on the metrics file. */
#include "examples/train/plot.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef GAAW_TRAIN_PLOT /* the installed gaaw-plot */
#define GAAW_TRAIN_PLOT ""
#endif

int train_plot_prepare(const char *dir, char *err, size_t len)
{
  if (mkdir(dir, 0777) == 0 || errno == EEXIST) return 1;
  snprintf(err, len, "--plot: cannot create the directory '%s': %s", dir, strerror(errno));
  return 0;
}

/* dir/gaaw-plot into path when it is there; 0 when not. */
static int try_dir(const char *dir, char *path, size_t size)
{
  return snprintf(path, size, "%s/gaaw-plot", dir) < (int)size && access(path, X_OK) == 0;
}

/* The gaaw-plot in the directory of this program, or in the one above it when
 * this is libtool's uninstalled binary in .libs/; "" when there is none. */
static void find_beside(char *path, size_t size)
{
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  char *slash;
  path[0] = '\0';
  if (n <= 0) return;
  self[n] = '\0';
  if (!(slash = strrchr(self, '/'))) return;
  *slash = '\0';
  if (try_dir(self, path, size)) return;
  size_t len = strlen(self);
  if (len >= 6 && !strcmp(self + len - 6, "/.libs")) {
    self[len - 6] = '\0';
    if (try_dir(self, path, size)) return;
  }
  path[0] = '\0';
}

/* The gaaw-plot to run: beside this program, else the installed one, else the
 * name, for PATH. */
static const char *find_plot(char *beside, size_t size)
{
  find_beside(beside, size);
  if (beside[0]) return beside;
  if (GAAW_TRAIN_PLOT[0] && access(GAAW_TRAIN_PLOT, X_OK) == 0) return GAAW_TRAIN_PLOT;
  return "gaaw-plot";
}

/* Runs prog with the arguments after it (NULL-terminated, at most 3) and waits:
 * its exit status, or -1 with err set when it could not be started or waited for. */
static int spawn(const char *prog, const char *a1, const char *a2, const char *a3, char *err, size_t len)
{
  int status;
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    snprintf(err, len, "--plot: cannot start gaaw-plot: %s", strerror(errno));
    return -1;
  }
  if (pid == 0) {
    execlp(prog, "gaaw-plot", a1, a2, a3, (char *)NULL);
    fprintf(stderr, "gaaw-train: --plot: cannot run %s: %s\n", prog, strerror(errno));
    _exit(127);
  }
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) {
      snprintf(err, len, "--plot: waiting for gaaw-plot failed: %s", strerror(errno));
      return -1;
    }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int train_plot_check(char *err, size_t len)
{
  char beside[PATH_MAX];
  const char *prog = find_plot(beside, sizeof beside);
  int code = spawn(prog, "--check", NULL, NULL, err, len);
  if (code == 0) return 1;
  if (code > 0) snprintf(err, len, "--plot: %s cannot draw the plots (its message above)", prog);
  return 0;
}

int train_plot_run(const char *dir, const char *metrics, char *err, size_t len)
{
  char beside[PATH_MAX];
  const char *prog = find_plot(beside, sizeof beside);
  int code = spawn(prog, "-o", dir, metrics, err, len);
  if (code == 0) return 1;
  if (code > 0)
    snprintf(err, len, "--plot: %s -o %s %s failed (its message above); the metrics are in %s", prog, dir, metrics,
             metrics);
  return 0;
}
