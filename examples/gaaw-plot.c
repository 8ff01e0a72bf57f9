/* gaaw-plot: gaaw-train's metrics files (--metrics, one JSON object per line and
 * step) as plots, one per quantity, drawn by gnuplot as SVG and PNG:
 *
 *   gaaw-plot -o plots run-a.jsonl run-b.jsonl
 *
 * Each plot overlays the files, one series per file (and quantity) titled by the
 * file's base name. A quantity that no file holds is left out; one that only some
 * files hold is drawn for those. Into DIR go, per input file, its columns
 * (series-K.dat, one block per field), per plot its gnuplot script (NAME.gp) and
 * what gnuplot draws from it (NAME.svg, NAME.png); gnuplot runs once, in DIR.
 *
 * gnuplot is $GAAW_GNUPLOT, else the one configure found (--with-gnuplot), else
 * the first on PATH. Exit status: 0 done; 2 bad options, an input file that cannot
 * be read or holds a line that is not a metrics object (FILE:LINE in the message),
 * or a DIR that cannot be created or written; 1 no gnuplot, or gnuplot failed.
 * Reads with Jansson; needs neither MPI nor the gaaw library. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef GAAW_GNUPLOT_PATH /* configure's gnuplot; "" when it found none */
#define GAAW_GNUPLOT_PATH ""
#endif

enum { PLOT_EXIT_OK = 0, PLOT_EXIT_FAILURE = 1, PLOT_EXIT_USAGE = 2 };

/* The fields read from a metrics line: its key, and how a series of it is named
 * beside the file's base name where a plot draws several fields. */
#define PLOT_FIELD_LIST(X)                                  \
  X(LOSS, "loss", "train")                                  \
  X(VAL_LOSS, "val_loss", "validation")                     \
  X(LR, "lr", "")                                           \
  X(GRAD_NORM, "grad_norm", "")                             \
  X(TOKENS, "tokens_per_s", "")                             \
  X(TFLOPS, "tflops", "")                                   \
  X(MFU, "mfu", "")                                         \
  X(PARAMS, "params_bytes", "params")                       \
  X(GRADS, "grads_bytes", "grads")                          \
  X(OPTIMIZER, "optimizer_bytes", "optimizer state")        \
  X(ACTIVATIONS, "activation_peak_bytes", "activation peak")
#define PLOT_FIELD_ENUM(id, key, label) F_##id,
enum { PLOT_FIELD_LIST(PLOT_FIELD_ENUM) NFIELDS };
#define PLOT_FIELD_ROW(id, key, label) {key, label},
static const struct {
  const char *key, *label;
} fields[NFIELDS] = {PLOT_FIELD_LIST(PLOT_FIELD_ROW)};

#define MAX_PLOT_FIELDS 4
/* One plot per row: its file name, title, y axis, y scale and the fields it draws. */
static const struct {
  const char *name, *title, *ylabel;
  double scale; /* values are multiplied by it */
  int nfields;
  int field[MAX_PLOT_FIELDS];
} plots[] = {
  {"loss", "loss", "cross-entropy (nats per token)", 1, 2, {F_LOSS, F_VAL_LOSS}},
  {"lr", "learning rate", "learning rate", 1, 1, {F_LR}},
  {"grad_norm", "gradient norm (before clipping)", "global L2 norm", 1, 1, {F_GRAD_NORM}},
  {"throughput", "throughput", "tokens/s", 1, 1, {F_TOKENS}},
  {"tflops", "achieved TFLOP/s", "TFLOP/s", 1, 1, {F_TFLOPS}},
  {"mfu", "model FLOPs utilization", "MFU (achieved / peak)", 1, 1, {F_MFU}},
  {"memory", "memory of rank 0", "MiB", 1.0 / (1024.0 * 1024.0), 4, {F_PARAMS, F_GRADS, F_OPTIMIZER, F_ACTIVATIONS}},
};
#define NPLOTS (sizeof plots / sizeof plots[0])

typedef struct {
  double *step, *value;
  size_t n, cap;
} series;

typedef struct {
  const char *path, *base;
  series field[NFIELDS];
  int block[NFIELDS]; /* its index in series-K.dat, -1: the file has no such value */
} metrics_file;

static void usage(FILE *out)
{
  fprintf(out,
          "usage: gaaw-plot -o DIR FILE...\n"
          "       gaaw-plot --check\n"
          "Draws gaaw-train's metrics files (--metrics FILE: one JSON object per step) as\n"
          "one plot per quantity, each as DIR/NAME.svg and DIR/NAME.png:\n"
          "  loss        training loss and validation loss (loss, val_loss)\n"
          "  lr          learning rate (lr)\n"
          "  grad_norm   gradient norm before clipping (grad_norm)\n"
          "  throughput  tokens/s (tokens_per_s)\n"
          "  tflops, mfu achieved TFLOP/s and MFU (tflops, mfu), where the files hold them\n"
          "  memory      rank 0's parameters, gradients, optimizer state and activation\n"
          "              peak in MiB (params_bytes, grads_bytes, optimizer_bytes,\n"
          "              activation_peak_bytes)\n"
          "Several files are overlaid, one series per file titled by its base name. A\n"
          "quantity no file holds is left out. DIR also gets the data (series-K.dat)\n"
          "and the gnuplot scripts (NAME.gp), to edit and run again.\n"
          "  -o, --output DIR  where the plots go (created if missing)\n"
          "  --check           only find gnuplot: print its path, exit 0; or exit 1\n"
          "  -h, --help        this text\n"
          "gnuplot: $GAAW_GNUPLOT, else %s, else gnuplot on PATH\n"
          "  (Debian: apt-get install gnuplot-nox).\n"
          "Exit status: 0 done, 2 bad options, input or DIR, 1 no gnuplot or gnuplot failed.\n",
          GAAW_GNUPLOT_PATH[0] ? GAAW_GNUPLOT_PATH : "(configure found none)");
}

static int push(series *s, double step, double value)
{
  if (s->n == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 64;
    double *a = realloc(s->step, cap * sizeof *a);
    if (a) s->step = a;
    double *b = a ? realloc(s->value, cap * sizeof *b) : NULL;
    if (!b) return 0;
    s->value = b;
    s->cap = cap;
  }
  s->step[s->n] = step;
  s->value[s->n++] = value;
  return 1;
}

/* One line's object into m; 0 with the reason in err when it is not one. A known
 * field that is null (a non-finite value) is skipped; any other key is ignored. */
static int read_object(metrics_file *m, json_t *obj, char *err, size_t len)
{
  json_t *step = json_object_get(obj, "step");
  if (!json_is_object(obj)) {
    snprintf(err, len, "not a JSON object");
    return 0;
  }
  if (!json_is_number(step)) {
    snprintf(err, len, "no \"step\" number");
    return 0;
  }
  for (int f = 0; f < NFIELDS; f++) {
    json_t *v = json_object_get(obj, fields[f].key);
    if (!v || json_is_null(v)) continue;
    if (!json_is_number(v)) {
      snprintf(err, len, "\"%s\" is not a number", fields[f].key);
      return 0;
    }
    if (!push(&m->field[f], json_number_value(step), json_number_value(v))) {
      snprintf(err, len, "out of memory");
      return 0;
    }
  }
  return 1;
}

/* Reads m->path, every non-blank line an object. */
static int read_metrics(metrics_file *m, char *err, size_t len)
{
  FILE *in = fopen(m->path, "r");
  char *line = NULL, why[256];
  size_t cap = 0, lineno = 0;
  int ok = 1;
  if (!in) {
    snprintf(err, len, "cannot read the metrics file '%s': %s", m->path, strerror(errno));
    return 0;
  }
  while (ok && getline(&line, &cap, in) >= 0) {
    json_error_t je;
    lineno++;
    if (line[strspn(line, " \t\r\n")] == '\0') continue;
    json_t *obj = json_loads(line, JSON_DECODE_ANY, &je);
    if (!obj) {
      snprintf(err, len, "%s:%zu: not JSON: %s (column %d)", m->path, lineno, je.text, je.column);
      ok = 0;
    } else if (!read_object(m, obj, why, sizeof why)) {
      snprintf(err, len, "%s:%zu: not a metrics line: %s", m->path, lineno, why);
      ok = 0;
    }
    json_decref(obj);
  }
  if (ok && ferror(in)) {
    snprintf(err, len, "cannot read the metrics file '%s': %s", m->path, strerror(errno));
    ok = 0;
  }
  free(line);
  fclose(in);
  return ok;
}

/* DIR and its missing parents, then whether a file can be made in it. */
static int make_dir(const char *dir, char *err, size_t len)
{
  char path[4096];
  struct stat st;
  if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) {
    snprintf(err, len, "the output directory name is too long");
    return 0;
  }
  for (char *p = path + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(path, 0777) != 0 && errno != EEXIST) break; /* reported below */
    *p = '/';
  }
  if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
    snprintf(err, len, "cannot create the output directory '%s': %s", dir, strerror(errno));
    return 0;
  }
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    snprintf(err, len, "the output directory '%s' is not a directory", dir);
    return 0;
  }
  if (access(dir, W_OK | X_OK) != 0) {
    snprintf(err, len, "cannot write into the output directory '%s': %s", dir, strerror(errno));
    return 0;
  }
  return 1;
}

/* The gnuplot to run, into path; 0 with what to do in err when there is none. */
static int find_gnuplot(char *path, size_t size, char *err, size_t len)
{
  const char *env = getenv("GAAW_GNUPLOT");
  if (env && env[0]) {
    if (access(env, X_OK) == 0 && snprintf(path, size, "%s", env) < (int)size) return 1;
    snprintf(err, len, "GAAW_GNUPLOT='%s' is not an executable gnuplot (Debian: apt-get install gnuplot-nox)", env);
    return 0;
  }
  if (GAAW_GNUPLOT_PATH[0] && access(GAAW_GNUPLOT_PATH, X_OK) == 0) {
    snprintf(path, size, "%s", GAAW_GNUPLOT_PATH);
    return 1;
  }
  const char *dirs = getenv("PATH");
  while (dirs && *dirs) {
    size_t n = strcspn(dirs, ":");
    if (n > 0 && snprintf(path, size, "%.*s/gnuplot", (int)n, dirs) < (int)size && access(path, X_OK) == 0)
      return 1;
    dirs += n + (dirs[n] == ':');
  }
  snprintf(err, len,
           "gnuplot is needed to draw the plots and was not found (%s%s, nor on PATH): install it (Debian: "
           "apt-get install gnuplot-nox), or set GAAW_GNUPLOT to its path",
           GAAW_GNUPLOT_PATH[0] ? "not at " : "configure found none", GAAW_GNUPLOT_PATH);
  return 0;
}

/* path = dir/name, or 0 with err set. */
static int join(char *path, size_t size, const char *dir, const char *name, char *err, size_t len)
{
  if (snprintf(path, size, "%s/%s", dir, name) < (int)size) return 1;
  snprintf(err, len, "the path '%s/%s' is too long", dir, name);
  return 0;
}

/* series-K.dat: one block per field the file holds (blocks apart by two blank
 * lines, gnuplot's `index`), "step value" lines. */
static int write_data(metrics_file *m, int k, const char *dir, char *err, size_t len)
{
  char name[64], path[4096];
  snprintf(name, sizeof name, "series-%d.dat", k);
  if (!join(path, sizeof path, dir, name, err, len)) return 0;
  FILE *f = fopen(path, "w");
  if (!f) {
    snprintf(err, len, "cannot write '%s': %s", path, strerror(errno));
    return 0;
  }
  fprintf(f, "# %s: step and value, one block per field\n", m->path);
  int blocks = 0;
  for (int i = 0; i < NFIELDS; i++) {
    series *s = &m->field[i];
    m->block[i] = -1;
    if (s->n == 0) continue;
    fprintf(f, "%s# %s\n", blocks ? "\n\n" : "", fields[i].key);
    for (size_t j = 0; j < s->n; j++) fprintf(f, "%.17g %.17g\n", s->step[j], s->value[j]);
    m->block[i] = blocks++;
  }
  if (fclose(f) != 0) {
    snprintf(err, len, "cannot write '%s': %s", path, strerror(errno));
    return 0;
  }
  return 1;
}

/* s as a gnuplot single-quoted string: a quote is written twice. */
static void gp_string(FILE *f, const char *s)
{
  fputc('\'', f);
  for (; *s; s++) {
    if (*s == '\'') fputc('\'', f);
    fputc(*s, f);
  }
  fputc('\'', f);
}

/* The plot command of plot p over the files: one series per file and field. */
static void write_plot_command(FILE *f, size_t p, const metrics_file *m, int nfiles)
{
  const char *sep = "plot ";
  for (int k = 0; k < nfiles; k++) {
    for (int i = 0; i < plots[p].nfields; i++) {
      int field = plots[p].field[i];
      char title[1024];
      if (m[k].block[field] < 0) continue;
      if (plots[p].nfields > 1) snprintf(title, sizeof title, "%s %s", m[k].base, fields[field].label);
      else snprintf(title, sizeof title, "%s", m[k].base);
      fprintf(f, "%s'series-%d.dat' index %d using 1:($2*%.17g) with %s title ", sep, k + 1, m[k].block[field],
              plots[p].scale, field == F_VAL_LOSS ? "linespoints pointtype 7 pointsize 0.6" : "lines");
      gp_string(f, title);
      sep = ", \\\n     ";
    }
  }
  fprintf(f, "\n");
}

/* NAME.gp: the SVG, then the PNG (pngcairo where this gnuplot has it, else png). */
static int write_script(size_t p, const metrics_file *m, int nfiles, const char *dir, char *err, size_t len)
{
  char name[64], path[4096];
  snprintf(name, sizeof name, "%s.gp", plots[p].name);
  if (!join(path, sizeof path, dir, name, err, len)) return 0;
  FILE *f = fopen(path, "w");
  if (!f) {
    snprintf(err, len, "cannot write '%s': %s", path, strerror(errno));
    return 0;
  }
  fprintf(f, "# written by gaaw-plot; run it in this directory: gnuplot %s\nreset\n", name);
  fprintf(f, "set title '%s'\nset xlabel 'step'\nset ylabel '%s'\n", plots[p].title, plots[p].ylabel);
  fprintf(f, "set key outside below\nset grid\nset datafile missing 'NaN'\n");
  fprintf(f, "set terminal svg size 800,500 dynamic noenhanced font 'sans,12'\nset output '%s.svg'\n",
          plots[p].name);
  write_plot_command(f, p, m, nfiles);
  fprintf(f, "set output\n");
  fprintf(f, "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
             "  set terminal pngcairo size 800,500 noenhanced font 'sans,10'\n"
             "} else {\n"
             "  set terminal png size 800,500 noenhanced\n"
             "}\n");
  fprintf(f, "set output '%s.png'\nreplot\nset output\n", plots[p].name);
  if (fclose(f) != 0) {
    snprintf(err, len, "cannot write '%s': %s", path, strerror(errno));
    return 0;
  }
  return 1;
}

/* Whether any file holds a field that plot p draws. */
static int plot_has_data(size_t p, const metrics_file *m, int nfiles)
{
  for (int k = 0; k < nfiles; k++)
    for (int i = 0; i < plots[p].nfields; i++)
      if (m[k].block[plots[p].field[i]] >= 0) return 1;
  return 0;
}

/* Runs gnuplot in dir on the scripts named in argv[1..] (argv[0] = gnuplot). */
static int run_gnuplot(char **argv, const char *dir, char *err, size_t len)
{
  int status;
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    snprintf(err, len, "cannot start gnuplot: %s", strerror(errno));
    return 0;
  }
  if (pid == 0) {
    if (chdir(dir) != 0) _exit(126);
    execv(argv[0], argv);
    _exit(127);
  }
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) {
      snprintf(err, len, "waiting for gnuplot failed: %s", strerror(errno));
      return 0;
    }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 1;
  if (WIFEXITED(status))
    snprintf(err, len, "gnuplot (%s) failed with status %d on the scripts in '%s'", argv[0], WEXITSTATUS(status),
             dir);
  else snprintf(err, len, "gnuplot (%s) was killed by signal %d", argv[0], WTERMSIG(status));
  return 0;
}

/* Writes the data and scripts, runs gnuplot, lists what it drew. */
static int draw(metrics_file *m, int nfiles, const char *dir, char *err, size_t len)
{
  char gnuplot[4096], *argv[NPLOTS + 2], names[NPLOTS][64];
  int n = 0;
  if (!find_gnuplot(gnuplot, sizeof gnuplot, err, len)) return PLOT_EXIT_FAILURE;
  if (!make_dir(dir, err, len)) return PLOT_EXIT_USAGE;
  for (int k = 0; k < nfiles; k++)
    if (!write_data(&m[k], k + 1, dir, err, len)) return PLOT_EXIT_USAGE;
  argv[n++] = gnuplot;
  for (size_t p = 0; p < NPLOTS; p++) {
    if (!plot_has_data(p, m, nfiles)) continue;
    if (!write_script(p, m, nfiles, dir, err, len)) return PLOT_EXIT_USAGE;
    snprintf(names[p], sizeof names[p], "%s.gp", plots[p].name);
    argv[n++] = names[p];
  }
  argv[n] = NULL;
  if (n == 1) {
    snprintf(err, len, "nothing to plot: the files hold none of the plotted fields (--help lists them)");
    return PLOT_EXIT_USAGE;
  }
  if (!run_gnuplot(argv, dir, err, len)) return PLOT_EXIT_FAILURE;
  for (size_t p = 0; p < NPLOTS; p++)
    if (plot_has_data(p, m, nfiles)) printf("gaaw-plot: %s/%s.svg %s/%s.png\n", dir, plots[p].name, dir, plots[p].name);
  return PLOT_EXIT_OK;
}

/* -o DIR and the files; PLOT_EXIT_OK, or a status for main to return (help: -1).
 * With --check (*check set) nothing else is needed. */
static int parse_args(int argc, char **argv, const char **dir, int *first, int *check)
{
  int i = 1;
  *dir = NULL;
  *check = 0;
  for (; i < argc && argv[i][0] == '-' && argv[i][1]; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--")) {
      i++;
      break;
    } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return -1;
    } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
      if (++i == argc) {
        fprintf(stderr, "gaaw-plot: option %s needs a directory\n", a);
        return PLOT_EXIT_USAGE;
      }
      *dir = argv[i];
    } else if (!strncmp(a, "--output=", 9)) {
      *dir = a + 9;
    } else if (!strcmp(a, "--check")) {
      *check = 1;
    } else {
      fprintf(stderr, "gaaw-plot: unknown option '%s'\n", a);
      usage(stderr);
      return PLOT_EXIT_USAGE;
    }
  }
  *first = i;
  if (*check) return PLOT_EXIT_OK;
  if (!*dir || !(*dir)[0] || i == argc) {
    fprintf(stderr, "gaaw-plot: %s\n", !*dir || !(*dir)[0] ? "no output directory (-o DIR)" : "no metrics file");
    usage(stderr);
    return PLOT_EXIT_USAGE;
  }
  return PLOT_EXIT_OK;
}

int main(int argc, char **argv)
{
  const char *dir;
  char err[8192] = "", gnuplot[4096];
  int first, check, code = parse_args(argc, argv, &dir, &first, &check);
  if (code) return code < 0 ? PLOT_EXIT_OK : code;
  if (check) { /* gaaw-train --plot asks before training */
    if (!find_gnuplot(gnuplot, sizeof gnuplot, err, sizeof err)) {
      fprintf(stderr, "gaaw-plot: %s\n", err);
      return PLOT_EXIT_FAILURE;
    }
    printf("gaaw-plot: gnuplot is %s\n", gnuplot);
    return PLOT_EXIT_OK;
  }
  int nfiles = argc - first;
  metrics_file *m = calloc((size_t)nfiles, sizeof *m);
  if (!m) {
    fprintf(stderr, "gaaw-plot: out of memory\n");
    return PLOT_EXIT_FAILURE;
  }
  for (int k = 0; k < nfiles && code == PLOT_EXIT_OK; k++) {
    const char *slash = strrchr(argv[first + k], '/');
    m[k].path = argv[first + k];
    m[k].base = slash ? slash + 1 : m[k].path;
    if (!read_metrics(&m[k], err, sizeof err)) code = PLOT_EXIT_USAGE;
  }
  if (code == PLOT_EXIT_OK) code = draw(m, nfiles, dir, err, sizeof err);
  if (code) fprintf(stderr, "gaaw-plot: %s\n", err);
  for (int k = 0; k < nfiles; k++)
    for (int i = 0; i < NFIELDS; i++) {
      free(m[k].field[i].step);
      free(m[k].field[i].value);
    }
  free(m);
  return code;
}
