/* libFuzzer target: gaaw-train's command line (examples/train/options.c), its own
 * options and the library's, one argument per line of the input after the first
 * byte, which picks the world size (1..8). Whatever the arguments, train_options_load
 * returns "ok" or "bad options" (2) with a message. Inputs that name a config file
 * are skipped: a path such as /dev/stdin would block (fuzz_train_config reads files). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "examples/train/options.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { MAX_ARGS = 64 };

static void require(int cond, const char *what, const char *err)
{
  if (cond) return;
  fprintf(stderr, "fuzz_train_args: %s (message '%s')\n", what, err);
  abort();
}

/* Whether the argument could name the config option (its name in any case). */
static int mentions_config(const char *arg)
{
  for (const char *p = arg; *p; p++)
    if (strncasecmp(p, "config", 6) == 0) return 1;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (!size) return 0;
  int world = 1 + data[0] % 8;
  char *text = malloc(size);
  if (!text) return 0;
  memcpy(text, data + 1, size - 1);
  text[size - 1] = '\0';
  char *argv[MAX_ARGS + 1];
  int argc = 0;
  argv[argc++] = "gaaw-train";
  for (char *p = text; argc < MAX_ARGS;) {
    argv[argc++] = p;
    char *nl = memchr(p, '\n', (size_t)(text + size - 1 - p));
    if (!nl) break;
    *nl = '\0';
    p = nl + 1;
  }
  argv[argc] = NULL;
  for (int a = 1; a < argc; a++)
    if (mentions_config(argv[a])) {
      free(text);
      return 0;
    }
  gaaw_config_t cfg = NULL;
  if (gaaw_config_create(&cfg) != GAAW_SUCCESS) {
    free(text);
    return 0;
  }
  train_options opts;
  char err[512];
  int help = -1;
  memset(err, 'x', sizeof err);
  /* a node of 16 GiB, so that the memory estimate is fuzzed too */
  train_machine machine = {world, 1, 16.0 * (1 << 30)};
  int rc = train_options_load(&opts, cfg, argc, argv, &machine, &help, err, sizeof err);
  require(memchr(err, '\0', sizeof err) != NULL, "the message is not terminated", "");
  require(rc == TRAIN_EXIT_OK || rc == TRAIN_EXIT_USAGE, "a status other than ok or bad options", err);
  require(rc == TRAIN_EXIT_OK || err[0] != '\0', "bad options without a message", err);
  require(help == 0 || help == 1, "help is neither set nor clear", err);
  gaaw_config_destroy(&cfg);
  free(text);
  return 0;
}
