/* gaaw-train --plot DIR: runs gaaw-plot on the run's metrics file at the end. */
#ifndef GAAW_TRAIN_PLOT_H
#define GAAW_TRAIN_PLOT_H

#include <stddef.h>

/* Creates DIR (its parent was checked with the options). 0 with the reason in err. */
int train_plot_prepare(const char *dir, char *err, size_t len);
/* Runs `gaaw-plot --check`: whether it finds gnuplot (its message, if not, on
 * stderr). 0 with the reason in err when not, or when there is no gaaw-plot. */
int train_plot_check(char *err, size_t len);
/* Runs `gaaw-plot -o dir metrics` and waits for it: the gaaw-plot beside this
 * gaaw-train, else the installed one, else the first on PATH. Its output and
 * messages go to this process's. 0 with the reason in err when it failed. */
int train_plot_run(const char *dir, const char *metrics, char *err, size_t len);

#endif
