/* libFuzzer target: gaaw_config_parse_args on a command line made from the input,
 * one argument per line. Whatever the arguments, the parser returns a status, and on
 * success argv[0] and the arguments it did not take stay, in order, followed by
 * NULLs up to the old argc. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gaaw.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { MAX_ARGS = 64 };

static void require(int cond, const char *what)
{
  if (cond) return;
  fprintf(stderr, "fuzz_config_args: %s\n", what);
  abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  /* "prog" then the lines of the input; a NUL ends an argument early */
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  char *argv[MAX_ARGS + 1], *orig[MAX_ARGS + 1];
  int argc = 0;
  argv[argc++] = "prog";
  for (char *p = text; argc < MAX_ARGS;) {
    argv[argc++] = p;
    char *nl = memchr(p, '\n', (size_t)(text + size - p));
    if (!nl) break;
    *nl = '\0';
    p = nl + 1;
  }
  argv[argc] = NULL;
  memcpy(orig, argv, sizeof argv);

  gaaw_config_t cfg = NULL;
  if (gaaw_config_create(&cfg) != GAAW_SUCCESS) {
    free(text);
    return 0;
  }
  int n = argc;
  gaaw_status_t st = gaaw_config_parse_args(cfg, &n, argv);
  require(st == GAAW_SUCCESS || st == GAAW_ERR_INVALID_ARG || st == GAAW_ERR_NOT_FOUND,
          "gaaw_config_parse_args returned a status other than success, invalid argument or not found");
  if (st == GAAW_SUCCESS) {
    require(n >= 1 && n <= argc, "argc after parsing is out of range");
    require(argv[0] == orig[0], "argv[0] was touched");
    /* what is left is a subsequence of the original arguments */
    int k = 1;
    for (int a = 1; a < n; a++) {
      while (k < argc && orig[k] != argv[a]) k++;
      require(k < argc, "a remaining argument is not one of the original ones, in order");
      k++;
    }
    for (int a = n; a < argc; a++) require(argv[a] == NULL, "argv past the new argc is not NULL");
  }
  gaaw_config_destroy(&cfg);
  free(text);
  return 0;
}
