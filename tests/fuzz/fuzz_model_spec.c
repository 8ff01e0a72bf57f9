/* libFuzzer target: gaaw_mlp_config_parse on arbitrary text (a model spec string,
 * "mlp sizes=6,64,1 activation=gelu ..."). Whatever the text, the parser returns
 * success or GAAW_ERR_INVALID_ARG; a failure has a message naming a word (or the
 * empty or size-less spec) and leaves the config unchanged; a success gives a
 * config within the documented ranges. */
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
  fprintf(stderr, "fuzz_model_spec: %s (input '%s')\n", what, input);
  abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = '\0'; /* the parser reads up to the first NUL */
  gaaw_mlp_config_t c, before;
  memset(&c, 0x5a, sizeof c);
  before = c;
  gaaw_status_t st = gaaw_mlp_config_parse(NULL, text, &c);
  require(st == GAAW_SUCCESS || st == GAAW_ERR_INVALID_ARG, "a status other than success or invalid argument", text);
  if (st != GAAW_SUCCESS) {
    const char *msg = gaaw_last_error(NULL);
    require(msg[0] != '\0', "a failure without a message", text);
    require(strstr(msg, "model spec") != NULL, "a failure that does not say it is the model spec's", text);
    require(memcmp(&c, &before, sizeof c) == 0, "a failed parse changed the config", text);
  } else {
    require(c.nsizes >= 2 && c.nsizes <= GAAW_MLP_MAX_LAYERS + 1, "nsizes out of range", text);
    for (int i = 0; i < c.nsizes; i++) require(c.sizes[i] >= 1, "a size below 1", text);
    require((int)c.activation >= 0 && (int)c.activation < GAAW_ACT_COUNT, "an invalid activation", text);
    require((int)c.loss >= 0 && (int)c.loss < GAAW_LOSS_COUNT, "an invalid loss", text);
    require(c.huber_delta > 0.0f, "huber_delta not > 0", text);
    require(c.dtype == GAAW_F32 || c.dtype == GAAW_BF16 || c.dtype == GAAW_F16, "an invalid dtype", text);
  }
  free(text);
  return 0;
}
