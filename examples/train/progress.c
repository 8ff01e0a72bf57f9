/* gaaw-train's progress line on stderr. */
#include "examples/train/progress.h"

#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void progress_start(train_progress *p, const char *mode, int rank, int64_t start, int64_t steps)
{
  memset(p, 0, sizeof *p);
  p->on = rank == 0 && (!strcmp(mode, "yes") || (!strcmp(mode, "auto") && isatty(STDERR_FILENO)));
  p->start = start;
  p->steps = steps;
  p->began = MPI_Wtime();
}

void progress_clear(train_progress *p)
{
  if (!p->shown) return;
  fputs("\r\033[K", stderr); /* back to the row's start, erase to its end */
  fflush(stderr);
  p->shown = 0;
}

/* seconds as "M:SS", or "H:MM:SS" from an hour */
static const char *clock_text(double seconds, char *buf, size_t len)
{
  long s = seconds > 0 ? (long)(seconds + 0.5) : 0;
  if (s >= 3600) snprintf(buf, len, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  else snprintf(buf, len, "%ld:%02ld", s / 60, s % 60);
  return buf;
}

void progress_draw(train_progress *p, int64_t step, float loss, double tokens_per_s)
{
  if (!p->on) return;
  char elapsed[32], eta[32];
  double spent = MPI_Wtime() - p->began, done = (double)(step - p->start), left = (double)(p->steps - step);
  double percent = p->steps > 0 ? 100.0 * (double)step / (double)p->steps : 100.0;
  fprintf(stderr, "\rstep %lld/%lld %5.1f%% | elapsed %s | ETA %s | loss %.4f | %.0f tok/s\033[K", (long long)step,
          (long long)p->steps, percent, clock_text(spent, elapsed, sizeof elapsed),
          clock_text(done > 0 ? spent / done * left : 0, eta, sizeof eta), loss, tokens_per_s);
  fflush(stderr);
  p->shown = 1;
}
