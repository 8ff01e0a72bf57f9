/* gaaw-info: what this gaaw installation contains and every option it takes.
 * Prints the version, the optional dependencies it was built with, the device
 * backends compiled in with the devices each finds on this node, and each tunable
 * with its type, default, environment variable, current value and help.
 * Runs without mpiexec and without MPI: nothing it calls needs a context. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "gaaw.h"

static void usage(FILE *out, const char *prog)
{
  fprintf(out,
          "usage: %s [--help] [--version]\n"
          "Prints the gaaw version, the build's optional parts, the device backends and\n"
          "their devices on this node, and every option (tunable) with its type, default,\n"
          "environment variable and current value.\n"
          "  --help     this text\n"
          "  --version  the version only\n",
          prog);
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
  for (int i = 0; i < gaaw_tunable_count(); i++) {
    const char *name, *def, *help;
    gaaw_tunable_type_t type;
    char env[64];
    if (gaaw_tunable_info(i, &name, &type, &def, &help) != GAAW_SUCCESS) continue;
    env_name(name, env, sizeof env);
    printf("  %-16s %-6s default %-10s env %s", name, type_name(type), *def ? def : "\"\"", env);
    const char *value, *source;
    if (cfg && gaaw_config_describe(cfg, name, &value, &source) == GAAW_SUCCESS && strcmp(source, "default") != 0)
      printf("  (now %s, from %s)", *value ? value : "\"\"", source);
    printf("\n      %s\n", help);
  }
}

int main(int argc, char **argv)
{
  const char *prog = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout, prog);
      return 0;
    }
    if (strcmp(argv[i], "--version") == 0) {
      printf("%s\n", gaaw_version());
      return 0;
    }
    fprintf(stderr, "%s: unknown option '%s'\n", prog, argv[i]);
    usage(stderr, prog);
    return 2;
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
