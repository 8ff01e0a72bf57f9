/* gaaw-train's options: the table of options.h, read from a config file, the
 * environment and the command line, then checked. */
#include "examples/train/options.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef enum { TYPE_INT, TYPE_DOUBLE, TYPE_STRING } option_type;

typedef struct {
  const char *name, *def, *meta, *help;
  option_type type;
  size_t offset;
} option_spec;

#define TRAIN_SPEC(name, type, def, meta, help) {#name, def, meta, help, TYPE_##type, offsetof(train_options, name)},
static const option_spec specs[] = {TRAIN_OPTION_LIST(TRAIN_SPEC)};
#undef TRAIN_SPEC
enum { OPTION_COUNT = sizeof specs / sizeof specs[0] };

static void fail(char *err, size_t len, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, len, fmt, ap);
  va_end(ap);
}

/* Names compare ignoring case, with '-' equal to '_'. */
static int name_equals(const char *a, const char *b)
{
  for (; *a && *b; a++, b++) {
    char ca = *a == '-' ? '_' : (char)tolower((unsigned char)*a);
    char cb = *b == '-' ? '_' : (char)tolower((unsigned char)*b);
    if (ca != cb) return 0;
  }
  return *a == *b;
}

static int find_option(const char *name)
{
  for (int i = 0; i < OPTION_COUNT; i++)
    if (name_equals(name, specs[i].name)) return i;
  return -1;
}

static int is_tunable(const char *name)
{
  for (int i = 0; i < gaaw_tunable_count(); i++) {
    const char *tname;
    if (gaaw_tunable_info(i, &tname, NULL, NULL, NULL) == GAAW_SUCCESS && name_equals(name, tname)) return 1;
  }
  return 0;
}

/* The option as the command line spells it: --eval-every. */
static const char *flag_name(const option_spec *s, char *buf, size_t len)
{
  size_t i = 0;
  for (const char *p = s->name; *p && i + 1 < len; p++) buf[i++] = *p == '_' ? '-' : *p;
  buf[i] = '\0';
  return buf;
}

/* Parses value into option i; where names the source for the message. */
static int set_option(train_options *o, int i, const char *value, const char *where, char *err, size_t len)
{
  const option_spec *s = &specs[i];
  char *field = (char *)o + s->offset, *end;
  char flag[64];
  errno = 0;
  switch (s->type) {
  case TYPE_INT: {
    long v = strtol(value, &end, 10);
    if (end == value || *end) {
      fail(err, len, "%s: --%s needs an integer, got '%s'", where, flag_name(s, flag, sizeof flag), value);
      return TRAIN_EXIT_USAGE;
    }
    if (errno || v < INT_MIN || v > INT_MAX) {
      fail(err, len, "%s: --%s %s is out of range (%d..%d)", where, flag_name(s, flag, sizeof flag), value, INT_MIN,
           INT_MAX);
      return TRAIN_EXIT_USAGE;
    }
    *(long *)field = v;
    break;
  }
  case TYPE_DOUBLE: {
    double v = strtod(value, &end);
    if (end == value || *end || errno || !isfinite(v)) { /* inf and nan are never meant */
      fail(err, len, "%s: --%s needs a finite number, got '%s'", where, flag_name(s, flag, sizeof flag), value);
      return TRAIN_EXIT_USAGE;
    }
    *(double *)field = v;
    break;
  }
  case TYPE_STRING:
    if (strlen(value) >= TRAIN_STRING_MAX) {
      fail(err, len, "%s: the value of --%s is longer than %d bytes", where, flag_name(s, flag, sizeof flag),
           TRAIN_STRING_MAX - 1);
      return TRAIN_EXIT_USAGE;
    }
    strcpy(field, value);
    break;
  }
  return TRAIN_EXIT_OK;
}

static void set_defaults(train_options *o)
{
  char err[256];
  for (int i = 0; i < OPTION_COUNT; i++) set_option(o, i, specs[i].def, "default", err, sizeof err);
}

static char *trim(char *s)
{
  while (isspace((unsigned char)*s)) s++;
  char *end = s + strlen(s);
  while (end > s && isspace((unsigned char)end[-1])) *--end = '\0';
  return s;
}

/* A config file: "name = value" lines, blank lines and lines whose first non-blank
 * character is '#'; text, so a NUL byte is an error, and a directory is not a file.
 * Trainer options are set; library options only where the environment did not set
 * them already (the environment outranks the file). */
static int read_config_file(train_options *o, gaaw_config_t cfg, const char *path, char *err, size_t len)
{
  FILE *f = fopen(path, "r");
  if (!f) {
    fail(err, len, "cannot read the config file '%s': %s", path, strerror(errno));
    return TRAIN_EXIT_USAGE;
  }
  struct stat info;
  if (fstat(fileno(f), &info) == 0 && S_ISDIR(info.st_mode)) {
    fail(err, len, "the config file '%s' is a directory", path);
    fclose(f);
    return TRAIN_EXIT_USAGE;
  }
  char *line = NULL, where[TRAIN_STRING_MAX + 32];
  size_t cap = 0;
  ssize_t n;
  int lineno = 0, rc = TRAIN_EXIT_OK;
  errno = 0;
  while (rc == TRAIN_EXIT_OK && (n = getline(&line, &cap, f)) >= 0) {
    lineno++;
    snprintf(where, sizeof where, "%s:%d", path, lineno);
    if (memchr(line, '\0', (size_t)n)) {
      fail(err, len, "%s: holds a NUL byte (a config file is text)", where);
      rc = TRAIN_EXIT_USAGE;
      break;
    }
    if ((size_t)n > TRAIN_STRING_MAX + 128) {
      fail(err, len, "%s: line too long", where);
      rc = TRAIN_EXIT_USAGE;
      break;
    }
    char *s = trim(line);
    if (!*s || *s == '#') continue;
    char *eq = strchr(s, '=');
    if (!eq) {
      fail(err, len, "%s: '%s' is not of the form name = value", where, s);
      rc = TRAIN_EXIT_USAGE;
      break;
    }
    *eq = '\0';
    char *key = trim(s), *value = trim(eq + 1);
    int i = find_option(key);
    if (i >= 0 && name_equals(key, "config")) {
      fail(err, len, "%s: a config file cannot name another config file", where);
      rc = TRAIN_EXIT_USAGE;
    } else if (i >= 0) {
      rc = set_option(o, i, value, where, err, len);
    } else if (is_tunable(key)) {
      const char *source = "default";
      gaaw_config_describe(cfg, key, NULL, &source);
      if (strcmp(source, "env") != 0 && gaaw_config_set(cfg, key, value) != GAAW_SUCCESS) {
        fail(err, len, "%s: %s", where, gaaw_last_error(NULL));
        rc = TRAIN_EXIT_USAGE;
      }
    } else {
      fail(err, len, "%s: unknown option '%s'", where, key);
      rc = TRAIN_EXIT_USAGE;
    }
  }
  if (rc == TRAIN_EXIT_OK && ferror(f)) {
    fail(err, len, "cannot read the config file '%s': %s", path, strerror(errno ? errno : EIO));
    rc = TRAIN_EXIT_USAGE;
  }
  free(line);
  fclose(f);
  return rc;
}

/* GAAW_<NAME> for each trainer option (GAAW_CONFIG names the config file). */
static int read_environment(train_options *o, char *err, size_t len)
{
  for (int i = 0; i < OPTION_COUNT; i++) {
    char env[64] = "GAAW_";
    size_t n = strlen(env);
    for (const char *p = specs[i].name; *p && n + 1 < sizeof env; p++) env[n++] = (char)toupper((unsigned char)*p);
    env[n] = '\0';
    const char *value = getenv(env);
    if (value && set_option(o, i, value, env, err, len) != TRAIN_EXIT_OK) return TRAIN_EXIT_USAGE;
  }
  return TRAIN_EXIT_OK;
}

/* One trainer option from the command line, as --name=value or --name value. */
typedef struct {
  int index;
  const char *value;
} cli_setting;

/* The trainer's part of the command line (the library's options already taken
 * out): each --name value into settings, in order. */
static int parse_cli(int argc, char **argv, cli_setting *settings, int *count, int *help, char *err, size_t len)
{
  *count = 0;
  for (int a = 1; a < argc; a++) {
    const char *arg = argv[a];
    if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
      *help = 1;
      continue;
    }
    if (!strcmp(arg, "--no-progress")) { /* the shorthand of --progress no */
      settings[(*count)++] = (cli_setting){find_option("progress"), "no"};
      continue;
    }
    if (strncmp(arg, "--", 2) != 0 || !arg[2]) {
      fail(err, len, "unexpected argument '%s' (options are --name value)", arg);
      return TRAIN_EXIT_USAGE;
    }
    char name[64];
    const char *eq = strchr(arg, '=');
    size_t n = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
    if (n >= sizeof name) n = sizeof name - 1;
    memcpy(name, arg + 2, n);
    name[n] = '\0';
    int i = find_option(name);
    if (i < 0) {
      fail(err, len, "unknown option '%s'", arg);
      return TRAIN_EXIT_USAGE;
    }
    const char *value = eq ? eq + 1 : NULL;
    if (!value) {
      if (a + 1 >= argc) {
        fail(err, len, "option --%s needs a value", name);
        return TRAIN_EXIT_USAGE;
      }
      value = argv[++a];
    }
    settings[(*count)++] = (cli_setting){i, value};
  }
  return TRAIN_EXIT_OK;
}

static int one_of(const char *value, const char *const *choices)
{
  for (; *choices; choices++)
    if (!strcmp(value, *choices)) return 1;
  return 0;
}

#define CHECK(cond, ...)                   \
  do {                                     \
    if (!(cond)) {                         \
      fail(err, len, __VA_ARGS__);         \
      return TRAIN_EXIT_USAGE;             \
    }                                      \
  } while (0)

/* The GPT's parameters on one tp rank of a pipeline stage with `blocks` blocks:
 * per block the column- and row-parallel weights and split biases (12 C^2 + 7 C
 * over tp) and the replicated norms and output biases (6 C); the first stage adds
 * the token embedding's share of the padded vocabulary and the position
 * embedding, the last the final norm (2 C) and the tied LM head's copy of the
 * token embedding (one copy when both are one stage). */
static double stage_params(const train_options *o, int tp, double blocks, int first, int last)
{
  double C = (double)o->dim, rows = (double)((o->vocab + tp - 1) / tp);
  double p = blocks * ((12 * C * C + 7 * C) / tp + 6 * C);
  if (first) p += rows * C + (double)o->seq * C;
  if (last) p += 2 * C + (first ? 0 : rows * C);
  return p;
}

/* One stage's share: parameters, gradients and optimizer state as ZeRO shards
 * them over dp, and `in_flight` microbatches' activations. */
static void stage_memory(const train_options *o, int tp, int dp, double blocks, int first, int last, double in_flight,
                         train_memory *mem)
{
  double P = stage_params(o, tp, blocks, first, last);
  double bytes = !strcmp(o->dtype, "f32") ? 4 : 2;
  double state = (!strcmp(o->optimizer, "sgd") ? 4 : 8) + (bytes == 4 ? 0 : 4); /* moments (+ f32 master) */
  mem->params = P * bytes / (o->zero >= 3 ? dp : 1);
  mem->grads = P * bytes / (o->zero >= 2 ? dp : 1);
  mem->optimizer = P * state / (o->zero >= 1 ? dp : 1);
  /* what one microbatch keeps for backward, N = batch x seq tokens: per block the
   * block input, both norms' outputs and the residual (4 C), this rank's q, k, v,
   * attention output and MLP hidden before and after the activation (12 C / tp),
   * and the attention probabilities (heads / tp x seq x seq per sequence); on the
   * last stage the final norm and this rank's logits */
  double N = (double)o->batch * (double)o->seq, C = (double)o->dim, T = (double)o->seq;
  double block = N * (4 * C + 12 * C / tp) + (double)o->batch * ((double)o->heads / tp) * T * T;
  double head = last ? N * (C + (double)((o->vocab + tp - 1) / tp)) : 0;
  mem->activations = in_flight * (blocks * block + head) * bytes;
}

static double memory_total(const train_memory *m)
{
  return m->params + m->grads + m->optimizer + m->activations;
}

void train_memory_estimate(const train_options *o, int tp, int pp, int dp, int microbatches, const char *schedule,
                           train_memory *mem)
{
  if (pp <= 1) {
    stage_memory(o, tp, dp, (double)o->layers, 1, 1, 1, mem);
    return;
  }
  /* the busier of the end stages: the first holds the embedding and, in 1F1B-like
   * schedules, min(pp, m) microbatches in flight (GPipe: all m); the last the head
   * and one (GPipe: m); each at least layers / pp blocks */
  double blocks = floor((double)o->layers / pp), m = microbatches;
  int gpipe = schedule && !strcmp(schedule, "gpipe");
  train_memory first, last;
  stage_memory(o, tp, dp, blocks, 1, 0, gpipe ? m : (pp < m ? pp : m), &first);
  stage_memory(o, tp, dp, blocks, 0, 1, gpipe ? m : 1, &last);
  *mem = memory_total(&first) >= memory_total(&last) ? first : last;
}

/* bytes as "1.5 GiB" */
static const char *format_bytes(double bytes, char *buf, size_t len)
{
  static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024 && u < 6) {
    bytes /= 1024;
    u++;
  }
  snprintf(buf, len, u ? "%.4g %s" : "%.0f %s", bytes, units[u]);
  return buf;
}

/* The model and batch fit this node's memory: every rank on it holds as much
 * (train_memory_estimate), against the physical memory. */
static int check_memory(const train_options *o, gaaw_config_t cfg, const train_machine *mc, int tp, int pp, int cp,
                        int dp, char *err, size_t len)
{
  train_memory m;
  int64_t microbatches = 1;
  char schedule[32] = "";
  gaaw_config_get_int(cfg, "microbatches", &microbatches);
  gaaw_config_get_string(cfg, "pp_schedule", schedule, sizeof schedule);
  /* at cp > 1 a rank holds seq / cp tokens of each sequence, and the state is cut
   * over dp x cp */
  train_options here = *o;
  here.seq = o->seq / cp;
  train_memory_estimate(&here, tp, pp, dp * cp, (int)microbatches, schedule, &m);
  double rank = memory_total(&m), node = rank * mc->node_ranks;
  if (mc->node_memory <= 0 || node <= mc->node_memory) return TRAIN_EXIT_OK;
  char total[32], p[32], g[32], s[32], a[32], nb[32], have[32];
  fail(err, len,
       "the model and batch do not fit this node's memory: each rank needs at least %s (parameters %s + "
       "gradients %s + optimizer state %s + activations %s, at tp %d, pp %d, dp %d, ZeRO %ld, %s, %s); with %d rank%s on "
       "this node that is %s, but it has %s of physical memory; make --dim, --layers, --batch or --seq smaller, or "
       "use more ranks, a higher --zero or a longer pipeline (--pp)",
       format_bytes(rank, total, sizeof total), format_bytes(m.params, p, sizeof p),
       format_bytes(m.grads, g, sizeof g), format_bytes(m.optimizer, s, sizeof s),
       format_bytes(m.activations, a, sizeof a), tp, pp, dp, o->zero, o->dtype, o->optimizer, mc->node_ranks,
       mc->node_ranks == 1 ? "" : "s", format_bytes(node, nb, sizeof nb),
       format_bytes(mc->node_memory, have, sizeof have));
  return TRAIN_EXIT_USAGE;
}

/* path names a directory (what access() allows as mode), or does not exist
 * when missing_ok. */
static int is_directory(const char *path, int mode, int missing_ok)
{
  struct stat info;
  if (stat(path, &info) != 0) return missing_ok && errno == ENOENT;
  return S_ISDIR(info.st_mode) && access(path, mode) == 0;
}

/* The directory part of path in buf: "." for a bare name, trailing slashes
 * ignored ("ck/" is in "."). */
static const char *directory_of(const char *path, char *buf, size_t len)
{
  size_t n = strlen(path);
  while (n > 1 && path[n - 1] == '/') n--;
  while (n > 0 && path[n - 1] != '/') n--; /* n: just after the last slash, or 0 */
  while (n > 1 && path[n - 1] == '/') n--;
  if (n == 0) snprintf(buf, len, ".");
  else snprintf(buf, len, "%.*s", (int)n, path);
  return buf;
}

/* A directory that the run creates if missing (--save-dir, --plot): writable, or
 * missing in a writable directory. 0 with the reason in err. */
static int check_output_dir(const char *flag, const char *path, char *err, size_t len)
{
  char dir[TRAIN_STRING_MAX];
  if (!is_directory(path, W_OK | X_OK, 1)) {
    fail(err, len, "%s '%s' is not a writable directory", flag, path);
    return 0;
  }
  if (access(path, F_OK) != 0 && !is_directory(directory_of(path, dir, sizeof dir), W_OK | X_OK, 0)) {
    fail(err, len, "%s '%s' cannot be created: '%s' is not a writable directory", flag, path, dir);
    return 0;
  }
  return 1;
}

/* --save-dir, --save-every, --keep, --resume, --import, --export and --plot: their values
 * and what they name on disk, so that a typo fails before training rather than at
 * the first save or at the end; --keep and --resume auto set the library's
 * checkpoint_keep and checkpoint_fallback in cfg. */
/* Flags that are library options under another name: set in cfg when given, and
 * checked there (gaaw_config_check), so that a bad value fails before training. */
static int pass_library_flags(const train_options *o, gaaw_config_t cfg, char *err, size_t len)
{
  const struct {
    const char *flag, *value, *option;
  } pass[] = {{"--offload-optimizer", o->offload_optimizer, "offload_optimizer"},
              {"--cpu-simd", o->cpu_simd, "cpu_simd"},
              {"--offload-params", o->offload_params, "offload_params"},
              {"--nvme-path", o->nvme_path, "nvme_path"},
              {"--device-memory-limit", o->device_memory_limit, "device_memory_limit"}};
  for (size_t i = 0; i < sizeof pass / sizeof pass[0]; i++)
    if (pass[i].value[0])
      CHECK(gaaw_config_set(cfg, pass[i].option, pass[i].value) == GAAW_SUCCESS && gaaw_config_check(cfg) == GAAW_SUCCESS,
            "%s %s: %s", pass[i].flag, pass[i].value, gaaw_last_error(NULL));
  /* the directory as the command line, the environment or the file left it */
  char nvme[TRAIN_STRING_MAX] = "";
  struct stat st;
  gaaw_config_get_string(cfg, "nvme_path", nvme, sizeof nvme);
  errno = 0;
  if (nvme[0])
    CHECK(stat(nvme, &st) == 0 && S_ISDIR(st.st_mode) && access(nvme, W_OK | X_OK) == 0,
          "--nvme-path %s: not a directory this process can write in (%s)", nvme,
          errno ? strerror(errno) : "not a directory");
  return TRAIN_EXIT_OK;
}

static int check_checkpoint_flags(const train_options *o, gaaw_config_t cfg, char *err, size_t len)
{
  char dir[TRAIN_STRING_MAX];
  CHECK(o->save_every >= 1, "--save-every must be >= 1, got %ld", o->save_every);
  if (o->keep[0]) {
    char *end;
    errno = 0;
    long k = strtol(o->keep, &end, 10);
    CHECK(end != o->keep && !*end && !errno && k >= 0 && k <= INT_MAX,
          "--keep must be an integer >= 0 (0 = keep every checkpoint), got '%s'", o->keep);
    CHECK(gaaw_config_set(cfg, "checkpoint_keep", o->keep) == GAAW_SUCCESS, "--keep %s: %s", o->keep,
          gaaw_last_error(NULL));
  }
  if (o->save_dir[0] && !check_output_dir("--save-dir", o->save_dir, err, len)) return TRAIN_EXIT_USAGE;
  CHECK(!(o->resume[0] && strcmp(o->resume, "auto") != 0 && o->import[0]),
        "--resume DIR and --import exclude each other (a checkpoint holds the weights already; with "
        "--resume auto, --import is the start when --save-dir holds no checkpoint)");
  if (!strcmp(o->resume, "auto")) {
    CHECK(o->save_dir[0], "--resume auto needs --save-dir (the directory to resume from)");
    CHECK(gaaw_config_set(cfg, "checkpoint_fallback", "yes") == GAAW_SUCCESS, "--resume auto: %s",
          gaaw_last_error(NULL));
  } else if (o->resume[0]) {
    CHECK(is_directory(o->resume, R_OK | X_OK, 0),
          "--resume '%s' is neither auto nor a readable directory (a save directory or a step-* checkpoint)",
          o->resume);
  }
  if (o->import[0]) CHECK(access(o->import, R_OK) == 0, "cannot read the --import file '%s': %s", o->import, strerror(errno));
  if (o->export[0])
    CHECK(is_directory(directory_of(o->export, dir, sizeof dir), W_OK | X_OK, 0),
          "the directory of the --export file '%s' is not a writable directory", o->export);
  if (o->plot[0]) {
    if (!check_output_dir("--plot", o->plot, err, len)) return TRAIN_EXIT_USAGE;
    CHECK(o->metrics[0] || strlen(o->plot) + sizeof "/metrics.jsonl" <= TRAIN_STRING_MAX,
          "--plot: the directory name is too long for DIR/metrics.jsonl");
  }
  return TRAIN_EXIT_OK;
}

/* Everything that can be checked from the options and the machine alone, so every
 * rank reaches the same verdict (the memory is per node: the lowest failing rank
 * reports). Sizes are multiplied in 64 bits or as doubles, never in int. */
static int validate(const train_options *o, gaaw_config_t cfg, const train_machine *mc, char *err, size_t len)
{
  static const char *const dtypes[] = {"f32", "bf16", "f16", NULL};
  static const char *const optimizers[] = {"adamw", "sgd", NULL};
  static const char *const progress[] = {"auto", "yes", "no", NULL};
  int world = mc->world;
  CHECK(one_of(o->dtype, dtypes), "--dtype must be f32, bf16 or f16, got '%s'", o->dtype);
  CHECK(one_of(o->optimizer, optimizers), "--optimizer must be adamw or sgd, got '%s'", o->optimizer);
  CHECK(one_of(o->progress, progress), "--progress must be auto, yes or no, got '%s'", o->progress);
  CHECK(o->zero >= 0 && o->zero <= 3, "--zero must be 0, 1, 2 or 3, got %ld", o->zero);
  CHECK(o->layers >= 1, "--layers must be >= 1, got %ld", o->layers);
  CHECK(o->heads >= 1, "--heads must be >= 1, got %ld", o->heads);
  CHECK(o->dim >= 1 && (o->head_dim || o->dim % o->heads == 0),
        "--dim (%ld) must be a positive multiple of --heads (%ld), or --head-dim given", o->dim, o->heads);
  static const char *const formats[] = {"auto", "megatron", "llmc", "bytes", NULL};
  CHECK(one_of(o->data_format, formats), "--data-format must be auto, megatron, llmc or bytes, got '%s'",
        o->data_format);
  CHECK(!o->data[0] || !o->data_path[0], "give --data or --data-path, not both");
  static const char *const archs[] = {"gpt2", "llama", NULL};
  CHECK(one_of(o->arch, archs), "--arch must be gpt2 or llama, got '%s'", o->arch);
  CHECK(o->kv_heads >= 0 && o->kv_heads <= o->heads && (o->kv_heads == 0 || o->heads % o->kv_heads == 0),
        "--kv-heads (%ld) must divide --heads (%ld); 0 = --heads", o->kv_heads, o->heads);
  CHECK(o->head_dim >= 0 && o->head_dim <= INT_MAX, "--head-dim must be >= 0 (0 = --dim / --heads), got %ld",
        o->head_dim);
  CHECK(o->ffn >= 0 && o->ffn <= INT_MAX, "--ffn must be >= 0 (0 = the architecture's default), got %ld", o->ffn);
  CHECK(o->rope_theta > 1 && o->rope_theta < HUGE_VAL, "--rope-theta must be > 1, got %g", o->rope_theta);
  CHECK(o->norm_eps > 0 && o->norm_eps <= 1, "--norm-eps must be in (0, 1], got %g", o->norm_eps);
  CHECK(o->experts >= 0 && o->experts <= INT_MAX, "--experts must be >= 0 (0 = dense), got %ld", o->experts);
  CHECK(!o->experts || (o->top_k >= 1 && o->top_k <= o->experts), "--top-k (%ld) must be in 1..--experts (%ld)",
        o->top_k, o->experts);
  CHECK(o->moe_every >= 1 && o->moe_every <= INT_MAX, "--moe-every must be >= 1, got %ld", o->moe_every);
  CHECK(o->moe_ffn >= 0 && o->moe_ffn <= INT_MAX / 2, "--moe-ffn must be in 0..%d (0 = --ffn's), got %ld", INT_MAX / 2,
        o->moe_ffn);
  static const char *const scores[] = {"softmax", "sigmoid", NULL};
  CHECK(one_of(o->router_score, scores), "--router-score must be softmax or sigmoid, got '%s'", o->router_score);
  CHECK(o->aux_loss >= 0 && o->aux_loss < HUGE_VAL && o->z_loss >= 0 && o->z_loss < HUGE_VAL,
        "--aux-loss and --z-loss must be finite and >= 0, got %g and %g", o->aux_loss, o->z_loss);
  CHECK(o->capacity_factor >= 0 && o->capacity_factor < HUGE_VAL,
        "--capacity-factor must be finite and >= 0 (0 = dropless), got %g", o->capacity_factor);
  CHECK(o->shared_ffn >= 0 && o->shared_ffn <= INT_MAX / 2, "--shared-ffn must be in 0..%d (0 = none), got %ld",
        INT_MAX / 2, o->shared_ffn);
  CHECK(o->shared_gate == 0 || o->shared_gate == 1, "--shared-gate must be 0 or 1, got %ld", o->shared_gate);
  static const char *const policies[] = {"probs", "position", NULL};
  CHECK(one_of(o->drop_policy, policies), "--drop-policy must be probs or position, got '%s'", o->drop_policy);
  CHECK(o->seq >= 1, "--seq must be >= 1, got %ld", o->seq);
  CHECK(o->vocab >= 1, "--vocab must be >= 1, got %ld", o->vocab);
  CHECK(o->batch >= 1, "--batch must be >= 1, got %ld", o->batch);
  CHECK(o->accum >= 1, "--accum must be >= 1, got %ld", o->accum);
  CHECK(o->steps >= 0, "--steps must be >= 0, got %ld", o->steps);
  CHECK(o->steps >= 1 || o->resume[0] || o->import[0],
        "--steps 0 needs --resume or --import (it evaluates the loaded model once)");
  /* the optimizer takes these as float */
  const struct { const char *flag; double value; } reals[] = {
    {"--lr", o->lr}, {"--min-lr", o->min_lr}, {"--weight-decay", o->weight_decay}, {"--clip", o->clip}};
  for (size_t k = 0; k < sizeof reals / sizeof reals[0]; k++)
    CHECK(fabs(reals[k].value) <= FLT_MAX, "%s %g is beyond the range of a float (the optimizer's type)",
          reals[k].flag, reals[k].value);
  CHECK((float)o->lr > 0, "--lr must be > 0, got %g", o->lr);
  CHECK(o->min_lr >= 0 && o->min_lr <= o->lr, "--min-lr must be in 0..lr (%g), got %g", o->lr, o->min_lr);
  CHECK(o->warmup >= 0, "--warmup must be >= 0, got %ld", o->warmup);
  CHECK(o->weight_decay >= 0, "--weight-decay must be >= 0, got %g", o->weight_decay);
  CHECK(o->clip >= 0, "--clip must be >= 0 (0 = off), got %g", o->clip);
  CHECK(o->seed >= 0, "--seed must be >= 0, got %ld", o->seed);
  CHECK(o->eval_every >= 0, "--eval-every must be >= 0, got %ld", o->eval_every);
  CHECK(!o->layout[0] || !strcmp(o->layout, "auto"), "--layout must be auto or empty, got '%s'", o->layout);
  CHECK(o->eval_batches >= 1, "--eval-batches must be >= 1, got %ld", o->eval_batches);
  CHECK(o->sample >= 0, "--sample must be >= 0, got %ld", o->sample);
  CHECK(o->temperature >= 0, "--temperature must be >= 0 (0 = greedy), got %g", o->temperature);
  if (o->sample > 0) { /* the prompt is only used to sample */
    CHECK(o->prompt[0], "--prompt must not be empty when --sample is %ld", o->sample);
    for (const unsigned char *p = (const unsigned char *)o->prompt; *p; p++)
      CHECK(*p < o->vocab, "--prompt holds byte %d, outside --vocab %ld", *p, o->vocab);
  }

  if (check_checkpoint_flags(o, cfg, err, len) != TRAIN_EXIT_OK) return TRAIN_EXIT_USAGE;
  if (pass_library_flags(o, cfg, err, len) != TRAIN_EXIT_OK) return TRAIN_EXIT_USAGE;

  /* the library's options, each on its own (no device or MPI needed) */
  CHECK(gaaw_config_check(cfg) == GAAW_SUCCESS, "%s", gaaw_last_error(NULL));

  /* the layout: world = dp x pp x cp x tp */
  int64_t tp = 1, pp = 1, dp = 0, cp = 1;
  gaaw_config_get_int(cfg, "cp", &cp);
  gaaw_config_get_int(cfg, "tp", &tp);
  gaaw_config_get_int(cfg, "pp", &pp);
  gaaw_config_get_int(cfg, "dp", &dp);
  CHECK(tp >= 1 && world % tp == 0, "--tp %lld does not divide the world size %d", (long long)tp, world);
  CHECK(cp >= 1 && world % (tp * cp) == 0, "--cp %lld x --tp %lld does not divide the world size %d", (long long)cp,
        (long long)tp, world);
  CHECK(pp >= 1 && world % (tp * cp * pp) == 0, "--pp %lld x --cp %lld x --tp %lld does not divide the world size %d",
        (long long)pp, (long long)cp, (long long)tp, world);
  CHECK(dp == 0 || dp * pp * cp * tp == world, "--dp %lld x --pp %lld x --cp %lld x --tp %lld is not the world size %d",
        (long long)dp, (long long)pp, (long long)cp, (long long)tp, world);
  if (dp == 0) dp = world / (tp * cp * pp);
  int64_t ep = 1;
  gaaw_config_get_int(cfg, "ep", &ep);
  CHECK((tp * cp * dp) % ep == 0, "--ep %lld must divide a pipeline stage's --tp x --cp x dp = %lld ranks",
        (long long)ep, (long long)(tp * cp * dp));
  CHECK(ep == 1 || (o->experts > 0 && o->experts % ep == 0),
        "--ep %lld splits the experts over its ranks: --experts (%ld) must be a positive multiple of it", (long long)ep,
        o->experts);
  CHECK(cp == 1 || o->seq % (2 * cp) == 0, "--seq %ld must divide by 2 x --cp = %lld (each cp rank holds 2 pieces of a "
        "sequence)", o->seq, (long long)(2 * cp));
  CHECK(cp == 1 || o->sample == 0, "--sample needs --cp 1: gaaw_model_predict does not gather split sequences yet");
  CHECK(cp == 1 || !o->layout[0], "--layout auto searches dp x pp x tp only (not cp yet): give it --cp 1");
  CHECK(o->heads % tp == 0, "--heads (%ld) must be divisible by --tp (%lld)", o->heads, (long long)tp);
  char cp_kind[8] = "";
  gaaw_config_get_string(cfg, "cp_kind", cp_kind, sizeof cp_kind);
  CHECK(cp == 1 || strcmp(cp_kind, "a2a") != 0 || (o->heads / tp) % cp == 0,
        "--cp-kind a2a splits a rank's heads over cp: --heads %ld / --tp %lld = %lld do not divide by --cp %lld",
        o->heads, (long long)tp, (long long)(o->heads / tp), (long long)cp);
  gaaw_gpt_config_t g;
  train_gpt_config(o, &g);
  int64_t ffn = g.ffn ? g.ffn : 4 * (int64_t)o->dim, tokens = (int64_t)o->batch * o->seq;
  int64_t kv = o->kv_heads ? o->kv_heads : o->heads;
  CHECK(ffn % tp == 0, "the MLP width (--ffn, or the architecture's from --dim: %lld) must be divisible by --tp (%lld)",
        (long long)ffn, (long long)tp);
  CHECK(kv % tp == 0 || tp % kv == 0, "--kv-heads (%lld) and --tp (%lld): one must divide the other", (long long)kv,
        (long long)tp);
  CHECK(!strcmp(o->arch, "gpt2") || (o->head_dim ? o->head_dim : o->dim / o->heads) % 2 == 0,
        "--arch llama needs an even head width (--head-dim, or --dim / --heads = %ld)", o->dim / o->heads);
  int64_t rows = (o->vocab + tp - 1) / tp; /* vocabulary rows per tp rank, padded */
  CHECK(o->vocab > (tp - 1) * rows, "--vocab %ld is too small to split over --tp %lld", o->vocab, (long long)tp);

  /* what fits: the memory first (it explains a huge size best), then the sizes
   * gaaw keeps as int (the MLP width, the tokens of a microbatch) */
  if (check_memory(o, cfg, mc, (int)tp, (int)pp, (int)cp, (int)dp, err, len) != TRAIN_EXIT_OK) return TRAIN_EXIT_USAGE;
  CHECK(ffn <= INT_MAX, "the MLP width 4 x --dim = %lld is more than gaaw supports (%d)", (long long)ffn, INT_MAX);
  CHECK(tokens <= INT_MAX, "--batch x --seq = %lld tokens per microbatch is more than gaaw supports (%d)",
        (long long)tokens, INT_MAX);
  int64_t microbatches = 1;
  gaaw_config_get_int(cfg, "microbatches", &microbatches);
  double global = (double)dp * (double)o->accum * (double)microbatches * (double)o->batch; /* rows per step */
  CHECK(global * (double)o->eval_batches <= (double)INT64_MAX / 2,
        "--eval-batches %ld x the global batch (%.0f rows) is more windows than gaaw-train can number", o->eval_batches,
        global);
  return TRAIN_EXIT_OK;
}

int train_options_load(train_options *o, gaaw_config_t cfg, int argc, char **argv, const train_machine *machine,
                       int *help, char *err, size_t len)
{
  int rc = TRAIN_EXIT_OK, n = 0;
  *help = 0;
  err[0] = '\0';
  set_defaults(o);
  /* Library options are taken out of two copies of argv: from the first at once,
   * to find the trainer's options (and --config) in what is left; from the second
   * into cfg after the config file, so that the command line outranks the file. */
  char **args = calloc((size_t)argc + 1, sizeof *args), **args2 = calloc((size_t)argc + 1, sizeof *args2);
  cli_setting *settings = calloc((size_t)argc + 1, sizeof *settings);
  gaaw_config_t scratch = NULL;
  if (!args || !args2 || !settings) {
    fail(err, len, "out of memory");
    rc = TRAIN_EXIT_FAILURE;
    goto done;
  }
  memcpy(args, argv, (size_t)argc * sizeof *args);
  memcpy(args2, argv, (size_t)argc * sizeof *args2);
  int argc1 = argc, argc2 = argc;
  if (gaaw_config_create(&scratch) != GAAW_SUCCESS || gaaw_config_parse_args(scratch, &argc1, args) != GAAW_SUCCESS) {
    fail(err, len, "%s", gaaw_last_error(NULL));
    rc = TRAIN_EXIT_USAGE;
    goto done;
  }
  rc = parse_cli(argc1, args, settings, &n, help, err, len);
  if (rc != TRAIN_EXIT_OK || *help) goto done;

  const char *config = getenv("GAAW_CONFIG");
  for (int k = 0; k < n; k++)
    if (name_equals(specs[settings[k].index].name, "config")) config = settings[k].value;
  if (config && *config) rc = read_config_file(o, cfg, config, err, len);
  if (rc == TRAIN_EXIT_OK) rc = read_environment(o, err, len);
  if (rc == TRAIN_EXIT_OK && gaaw_config_parse_args(cfg, &argc2, args2) != GAAW_SUCCESS) {
    fail(err, len, "%s", gaaw_last_error(NULL));
    rc = TRAIN_EXIT_USAGE;
  }
  for (int k = 0; k < n && rc == TRAIN_EXIT_OK; k++)
    rc = set_option(o, settings[k].index, settings[k].value, "command line", err, len);
  if (rc == TRAIN_EXIT_OK) rc = validate(o, cfg, machine, err, len);
done:
  gaaw_config_destroy(&scratch);
  free(args);
  free(args2);
  free(settings);
  return rc;
}

/* "--name META  help [default] (GAAW_NAME)" */
static void print_option(FILE *out, const option_spec *s)
{
  char flag[64], arg[96], env[64];
  size_t n = (size_t)snprintf(env, sizeof env, "GAAW_");
  for (const char *p = s->name; *p && n + 1 < sizeof env; p++) env[n++] = (char)toupper((unsigned char)*p);
  env[n] = '\0';
  snprintf(arg, sizeof arg, "--%s %s", flag_name(s, flag, sizeof flag), s->meta);
  fprintf(out, "  %-26s %s [%s] (%s)\n", arg, s->help, s->def, env);
}

void train_options_usage(FILE *out, const char *prog)
{
  fprintf(out,
          "usage: mpiexec -n N %s [--tp N] [--data FILE] [--steps N] [OPTION VALUE]...\n"
          "Trains a GPT on bytes of text with tensor (--tp), pipeline (--pp, --microbatches,\n"
          "--pp-schedule, --virtual-stages) and data parallelism\n"
          "(dp = world / (tp x pp)) with ZeRO stage --zero; rank 0 logs every step.\n"
          "Options as --name VALUE or --name=VALUE; also 'name = value' lines in --config FILE and\n"
          "GAAW_<NAME> environment variables. Precedence: default < config file < environment <\n"
          "command line. Exit status: 0 done, 1 failure while running, 2 bad options, data or\n"
          "layout, or a model and batch too big for the node's memory (checked before training).\n\n"
          "Trainer options (default in brackets):\n",
          prog);
  for (int i = 0; i < OPTION_COUNT; i++) print_option(out, &specs[i]);
  fprintf(out, "  %-26s the same as --progress no\n", "--no-progress");
  fprintf(out, "  %-26s this text\n", "--help");
  fprintf(out, "\nLibrary options (gaaw_config; gaaw-info explains them):\n");
  for (int i = 0; i < gaaw_tunable_count(); i++) {
    option_spec s = {.meta = "VALUE"};
    if (gaaw_tunable_info(i, &s.name, NULL, &s.def, &s.help) != GAAW_SUCCESS) continue;
    print_option(out, &s);
  }
}

static gaaw_dtype_t dtype_of(const char *name)
{
  return !strcmp(name, "bf16") ? GAAW_BF16 : !strcmp(name, "f16") ? GAAW_F16 : GAAW_F32;
}

void train_gpt_config(const train_options *o, gaaw_gpt_config_t *g)
{
  gaaw_gpt_config_default(g);
  g->vocab = (int)o->vocab;
  g->max_seq = (int)o->seq;
  g->layers = (int)o->layers;
  g->heads = (int)o->heads;
  g->dim = (int)o->dim;
  g->ffn = (int)o->ffn; /* 0: the architecture's default */
  if (!strcmp(o->arch, "llama")) gaaw_gpt_config_llama(g);
  g->kv_heads = (int)o->kv_heads;
  g->head_dim = (int)o->head_dim;
  g->rope_theta = o->rope_theta;
  g->norm_eps = (float)o->norm_eps;
  g->experts = (int)o->experts;
  g->top_k = (int)o->top_k;
  g->moe_every = (int)o->moe_every;
  g->moe_ffn = (int)o->moe_ffn;
  g->router_score = !strcmp(o->router_score, "sigmoid") ? GAAW_ROUTER_SIGMOID : GAAW_ROUTER_SOFTMAX;
  g->aux_loss_coef = (float)o->aux_loss;
  g->z_loss_coef = (float)o->z_loss;
  g->capacity_factor = (float)o->capacity_factor;
  g->drop_policy = !strcmp(o->drop_policy, "position") ? GAAW_DROP_POSITION : GAAW_DROP_PROBS;
  g->shared_ffn = (int)o->shared_ffn;
  g->shared_gate = (int)o->shared_gate;
  g->seed = (uint64_t)o->seed;
  g->dtype = dtype_of(o->dtype);
}
