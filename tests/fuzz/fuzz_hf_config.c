/* libFuzzer target: the check of a Hugging Face config.json against a GPT
 * (gaaw_hf_config_check_text in zero/hf_layout.c), for both layouts: the first
 * byte picks LLaMA (even) or GPT-2 (odd), the rest is the file. Whatever the bytes,
 * the answer is success or one of GAAW_ERR_CORRUPT (not JSON), GAAW_ERR_INVALID_ARG
 * (a field that is not the model's) and GAAW_ERR_UNSUPPORTED (what gaaw does not
 * compute), GAAW_ERR_NO_MEMORY aside, and a failure names the file. The config
 * gaaw itself writes for the model passes (tests/mpi/test_llama_hf_np4.c,
 * test_safetensors_torch_np2.c). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gaaw.h"
#include "zero/hf_layout.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(int cond, const char *what)
{
  if (cond) return;
  fprintf(stderr, "fuzz_hf_config: %s\n", what);
  abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size == 0) return 0;
  /* a GPT with its sizes resolved, as a model holds them */
  gaaw_gpt_config_t g = {.vocab = 1001, .max_seq = 64, .layers = 2, .heads = 4, .dim = 64, .ffn = 192,
                         .kv_heads = 2, .head_dim = 24, .rope_theta = 10000, .norm_eps = 1e-5f};
  gaaw_hf_kind kind = data[0] % 2 ? GAAW_HF_GPT2 : GAAW_HF_LLAMA;
  char *text = malloc(size - 1 ? size - 1 : 1); /* exactly the file's bytes */
  if (!text) return 0;
  memcpy(text, data + 1, size - 1);
  gaaw_status_t st = gaaw_hf_config_check_text(NULL, &g, kind, "fuzz/config.json", text, size - 1);
  require(st == GAAW_SUCCESS || st == GAAW_ERR_CORRUPT || st == GAAW_ERR_INVALID_ARG || st == GAAW_ERR_UNSUPPORTED ||
            st == GAAW_ERR_NO_MEMORY,
          "an unexpected status");
  if (st != GAAW_SUCCESS)
    require(strstr(gaaw_last_error(NULL), "fuzz/config.json") != NULL, "a failure that does not name the file");
  free(text);
  return 0;
}
