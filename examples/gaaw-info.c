/* gaaw-info: what this gaaw installation contains and every option it takes.
 * Prints the version, the optional dependencies it was built with, the device
 * backends compiled in with the devices each finds on this node, and each tunable
 * with its type, default, environment variable, current value and help.
 * With --schedule, prints a pipeline schedule instead: its per-rank timeline, its
 * bubble and each rank's peak activations in flight. With --markdown, prints the
 * options page doc/options.md instead (defaults only, whatever the environment).
 * Runs without mpiexec and without MPI: nothing it calls needs a context. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gaaw.h"

static void usage(FILE *out, const char *prog)
{
  fprintf(out,
          "usage: %s [--help] [--version] [--markdown]\n"
          "       %s --schedule NAME --pp P --microbatches M [--virtual-stages V]\n"
          "Prints the gaaw version, the build's optional parts, the device backends and\n"
          "their devices on this node, and every option (tunable) with its type, default,\n"
          "environment variable and current value.\n"
          "  --help     this text\n"
          "  --version  the version only\n"
          "  --markdown instead, the options page doc/options.md as Markdown: every option\n"
          "             with its environment variable, type, default and meaning (the\n"
          "             defaults, not the environment's values)\n"
          "  --schedule NAME  instead, the pipeline schedule NAME (gpipe, 1f1b, interleaved,\n"
          "             zb-h1) of P stages over M microbatches (V model chunks per stage,\n"
          "             default 1; interleaved needs V >= 2 and M a multiple of P), as the\n"
          "             verifier checks it: one row per rank, one column per time unit\n"
          "             (F = B = W = 1, fused BW = 2), its bubble and each rank's peak\n"
          "             activations in flight\n",
          prog, prog);
}

static const char *type_name(gaaw_tunable_type_t type)
{
  switch (type) {
  case GAAW_TUNABLE_INT: return "int";
  case GAAW_TUNABLE_DOUBLE: return "double";
  case GAAW_TUNABLE_STRING: return "string";
  case GAAW_TUNABLE_BOOL: return "bool";
  }
  return "?";
}

/* GAAW_ followed by the name in capitals, as config.h documents. */
static void env_name(const char *name, char *out, size_t len)
{
  size_t i = (size_t)snprintf(out, len, "GAAW_");
  for (; *name && i + 1 < len; name++, i++) out[i] = (char)toupper((unsigned char)*name);
  out[i] = '\0';
}

/* Tunable i as the listings show it: name, type, default ("" written as two quotes),
 * help, and its environment variable. 0 when the table has no entry i. */
typedef struct {
  const char *name, *type, *def, *help;
  char env[64];
} tunable_row;

static int tunable_row_at(int i, tunable_row *row)
{
  gaaw_tunable_type_t type;
  if (gaaw_tunable_info(i, &row->name, &type, &row->def, &row->help) != GAAW_SUCCESS) return 0;
  row->type = type_name(type);
  if (!*row->def) row->def = "\"\"";
  env_name(row->name, row->env, sizeof row->env);
  return 1;
}

static void print_build(void)
{
  printf("Build:\n");
  for (int f = 0; f < GAAW_FEATURE_COUNT; f++) {
    const char *name;
    int enabled;
    if (gaaw_info_feature((gaaw_feature_t)f, &name, &enabled) == GAAW_SUCCESS)
      printf("  %-10s %s\n", name, enabled ? "yes" : "no");
  }
}

/* One line per device: name, memory, compute units, 16-bit arithmetic. */
static void print_devices(int backend, int devices)
{
  for (int d = 0; d < devices; d++) {
    gaaw_device_info_t info;
    if (gaaw_info_device(backend, d, &info) != GAAW_SUCCESS) {
      printf("    [%d] (no description: %s)\n", d, gaaw_last_error(NULL));
      continue;
    }
    printf("    [%d] %s | %.1f GiB | %d compute units | fp16 %s | bf16 %s\n", d, info.name,
           (double)info.memory_bytes / (1024.0 * 1024.0 * 1024.0), info.compute_units, info.fp16 ? "yes" : "no",
           info.bf16 ? "yes" : "no");
  }
}

static void print_backends(void)
{
  printf("\nDevice backends (auto-selection order):\n");
  for (int i = 0; i < gaaw_info_backend_count(); i++) {
    const char *name = "?";
    int devices = 0;
    gaaw_status_t st = gaaw_info_backend(i, &name, &devices);
    if (st == GAAW_SUCCESS) {
      printf("  %-10s %d device%s\n", name, devices, devices == 1 ? "" : "s");
      print_devices(i, devices);
    } else
      printf("  %-10s unavailable: %s\n", name, gaaw_last_error(NULL));
  }
}

/* cfg may be NULL (the environment did not parse): defaults only. */
static void print_tunables(gaaw_config_t cfg)
{
  printf("\nOptions (gaaw_config_set, \"key=value\" lists, --key=value, or the environment):\n");
  tunable_row t;
  for (int i = 0; i < gaaw_tunable_count(); i++) {
    if (!tunable_row_at(i, &t)) continue;
    printf("  %-16s %-6s default %-10s env %s", t.name, t.type, t.def, t.env);
    const char *value, *source;
    if (cfg && gaaw_config_describe(cfg, t.name, &value, &source) == GAAW_SUCCESS && strcmp(source, "default") != 0)
      printf("  (now %s, from %s)", *value ? value : "\"\"", source);
    printf("\n      %s\n", t.help);
  }
}

/* text as one Markdown table cell: '|' escaped (also inside code spans, as GitHub
 * reads tables), a line break as a space. */
static void md_cell(const char *text)
{
  for (; *text; text++) {
    if (*text == '|') fputs("\\|", stdout);
    else if (*text == '\n') putchar(' ');
    else putchar(*text);
  }
}

/* The page doc/options.md: how options are set, then the tunables table. The
 * defaults only, so that the page does not depend on the environment. */
static void print_markdown(void)
{
  printf("# Runtime options\n\n"
         "<!-- Generated by `gaaw-info --markdown`: do not edit. -->\n\n"
         "This page is generated. `gaaw-info --markdown` prints it from the table of options\n"
         "compiled into the library (`backends/runtime/tunables.h`, read through\n"
         "`gaaw_tunable_info`). To change it, change that table, then run `make update-doc` in a\n"
         "build directory, which rewrites `doc/options.md` in the source tree; `make check`\n"
         "fails while the committed page differs from what the built `gaaw-info` prints\n"
         "(`tests/unit/test_doc_options.sh`). `gaaw-info` without arguments prints the same\n"
         "list with the values the environment sets now.\n\n");
  printf("## Setting an option\n\n"
         "Every option can be set in four ways, lowest precedence first: its default, a\n"
         "`GAAW_<NAME>` environment variable (read when the config is created), and then\n"
         "explicitly through the config object (`gaaw_config_set(cfg, \"tp\", \"2\")`, the typed\n"
         "setters, `gaaw_config_parse(cfg, \"tp=2,pp=1\")`) or the command line\n"
         "(`gaaw_config_parse_args` takes `--tp 2` and `--tp=2` out of `argv`). Keys ignore case,\n"
         "and `-` equals `_`. A bool takes yes/no, true/false, on/off or 1/0.\n\n"
         "Setting checks only a value's type (`gaaw_config_set_int` takes any number option,\n"
         "integer or real); `gaaw_config_check(cfg)` checks every value's range or choice\n"
         "without MPI, a context or a device (a known `log` level, a `backend` built into this\n"
         "gaaw, `threads` in 0..4096, `tp`/`pp` >= 1, a valid `rank_order`, ...), so a program\n"
         "can refuse bad options before it reads its input; `gaaw_init` checks the rest (the\n"
         "layout against the world size, the device index against the devices found, the\n"
         "schedule and `pp_layout` against pp, microbatches and virtual_stages) and that the\n"
         "options every rank must share have the same value on every rank (its comment in\n"
         "`gaaw/context.h` lists them; a difference names the option and each rank's value).\n\n");
  printf("## Options\n\n"
         "| option | environment variable | type | default | meaning |\n"
         "|---|---|---|---|---|\n");
  tunable_row t;
  for (int i = 0; i < gaaw_tunable_count(); i++) {
    if (!tunable_row_at(i, &t)) continue;
    printf("| `");
    md_cell(t.name);
    printf("` | `%s` | %s | `", t.env, t.type);
    md_cell(t.def);
    printf("` | ");
    md_cell(t.help);
    printf(" |\n");
  }
}

/* The value of option name at argv[*i]: "--name=value" or "--name value" (then *i
 * moves past it). NULL when argv[*i] is not that option. */
static const char *option_value(int argc, char **argv, int *i, const char *name, int *missing)
{
  size_t n = strlen(name);
  if (strncmp(argv[*i], name, n) != 0) return NULL;
  if (argv[*i][n] == '=') return argv[*i] + n + 1;
  if (argv[*i][n] != '\0') return NULL;
  if (*i + 1 >= argc) {
    *missing = 1;
    return NULL;
  }
  return argv[++*i];
}

static int parse_count(const char *prog, const char *name, const char *text, int *value)
{
  char *end = NULL;
  errno = 0;
  long x = strtol(text, &end, 10);
  if (!*text || *end || errno || x < 1 || x > INT_MAX) {
    fprintf(stderr, "%s: %s wants a whole number >= 1, got '%s'\n", prog, name, text);
    return 2;
  }
  *value = (int)x;
  return 0;
}

/* The schedule's timeline, bubble and peaks; 2 when the library refuses it. */
static int print_schedule(const char *prog, const char *name, int pp, int m, int v)
{
  gaaw_schedule_summary_t sum;
  size_t need = 0;
  if (gaaw_schedule_summary(name, pp, m, v, &sum) != GAAW_SUCCESS ||
      gaaw_schedule_timeline(name, pp, m, v, NULL, 0, &need) != GAAW_SUCCESS) {
    fprintf(stderr, "%s: %s\n", prog, gaaw_last_error(NULL));
    return 2;
  }
  char *text = malloc(need);
  int *peak = malloc((size_t)pp * sizeof *peak);
  int rc = 0;
  if (!text || !peak) {
    fprintf(stderr, "%s: out of memory for a timeline of %zu bytes\n", prog, need);
    rc = 1;
  } else if (gaaw_schedule_timeline(name, pp, m, v, text, need, NULL) != GAAW_SUCCESS ||
             gaaw_schedule_peak_in_flight(name, pp, m, v, peak, pp) != GAAW_SUCCESS) {
    fprintf(stderr, "%s: %s\n", prog, gaaw_last_error(NULL));
    rc = 1;
  } else {
    fputs(text, stdout);
    printf("\nbubble          %.4f = idle %g / (pp %d x makespan %g); unit costs F = B = W = 1, fused BW = 2\n",
           sum.bubble, sum.idle, pp, sum.makespan);
    printf("peak in flight ");
    for (int r = 0; r < pp; r++) printf(" %d", peak[r]);
    printf(" (rank 0 first, max %d; microbatches whose forward ran and whose weight gradient has not%s)\n",
           sum.peak_in_flight, v > 1 ? ", in chunk units" : "");
    printf("actions         %lld over all ranks, sends and receives included\n", (long long)sum.actions);
  }
  free(text);
  free(peak);
  return rc;
}

int main(int argc, char **argv)
{
  const char *prog = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
  const char *schedule = NULL;
  int pp = 0, m = 0, v = 1, markdown = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout, prog);
      return 0;
    }
    if (strcmp(argv[i], "--version") == 0) {
      printf("%s\n", gaaw_version());
      return 0;
    }
    if (strcmp(argv[i], "--markdown") == 0) {
      markdown = 1;
      continue;
    }
    int missing = 0, rc = 0;
    const char *val;
    if ((val = option_value(argc, argv, &i, "--schedule", &missing)))
      schedule = val;
    else if ((val = option_value(argc, argv, &i, "--pp", &missing)))
      rc = parse_count(prog, "--pp", val, &pp);
    else if ((val = option_value(argc, argv, &i, "--microbatches", &missing)))
      rc = parse_count(prog, "--microbatches", val, &m);
    else if ((val = option_value(argc, argv, &i, "--virtual-stages", &missing)))
      rc = parse_count(prog, "--virtual-stages", val, &v);
    else {
      fprintf(stderr, "%s: %s '%s'\n", prog, missing ? "no value after" : "unknown option", argv[i]);
      usage(stderr, prog);
      return 2;
    }
    if (rc) return rc;
  }
  if (markdown && (schedule || pp || m || v != 1)) {
    fprintf(stderr, "%s: --markdown and --schedule go separately\n", prog);
    usage(stderr, prog);
    return 2;
  }
  if (markdown) {
    print_markdown();
    return 0;
  }
  if (schedule || pp || m || v != 1) {
    if (!schedule || !pp || !m) {
      fprintf(stderr, "%s: --schedule, --pp and --microbatches go together (--virtual-stages is optional)\n", prog);
      usage(stderr, prog);
      return 2;
    }
    return print_schedule(prog, schedule, pp, m, v);
  }

  printf("gaaw %s (headers %s)\n\n", gaaw_version(), GAAW_VERSION_STRING);
  print_build();
  print_backends();

  /* A config shows which options the environment changes. */
  gaaw_config_t cfg = NULL;
  if (gaaw_config_create(&cfg) != GAAW_SUCCESS)
    fprintf(stderr, "gaaw-info: the GAAW_* environment does not parse; showing defaults only:\n%s\n",
            gaaw_last_error(NULL));
  print_tunables(cfg);
  gaaw_config_destroy(&cfg);
  return 0;
}
