/* libFuzzer target: gaaw_config_parse on arbitrary text (a "key=value, ..." list).
 * Whatever the text, the parser returns a status (success, an unknown key or a bad
 * value) and leaves every option describable; a failure has a message. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gaaw.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken promise of the API: libFuzzer reports the abort as a crash. */
static void require(int cond, const char *what, const char *input)
{
  if (cond) return;
  fprintf(stderr, "fuzz_config_parse: %s (input '%s')\n", what, input);
  abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = '\0'; /* the parser reads up to the first NUL */
  gaaw_config_t cfg = NULL;
  if (gaaw_config_create(&cfg) != GAAW_SUCCESS) {
    free(text);
    return 0;
  }
  gaaw_status_t st = gaaw_config_parse(cfg, text);
  require(st == GAAW_SUCCESS || st == GAAW_ERR_INVALID_ARG || st == GAAW_ERR_NOT_FOUND,
          "gaaw_config_parse returned a status other than success, invalid argument or not found", text);
  require(st == GAAW_SUCCESS || gaaw_last_error(NULL)[0] != '\0', "a failure without a message", text);
  for (int i = 0; i < gaaw_tunable_count(); i++) {
    const char *name, *value = NULL, *source = NULL;
    require(gaaw_tunable_info(i, &name, NULL, NULL, NULL) == GAAW_SUCCESS, "gaaw_tunable_info failed", text);
    require(gaaw_config_describe(cfg, name, &value, &source) == GAAW_SUCCESS && value && source,
            "an option cannot be described after parsing", text);
    require(strlen(value) < 4096, "a described value is not a terminated string", text);
  }
  gaaw_config_destroy(&cfg);
  free(text);
  return 0;
}
