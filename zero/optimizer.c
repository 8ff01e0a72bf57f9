/* TEMPORARY: the optimizer entry points, so that programs link while the ZeRO
 * implementation is written; every call reports GAAW_ERR_UNSUPPORTED. */
#include "backends/runtime/context_impl.h"
#include "gaaw/optimizer.h"

void gaaw_optimizer_config_default(gaaw_optimizer_config_t *c)
{
  if (!c) return;
  *c = (gaaw_optimizer_config_t){.kind = GAAW_ADAMW, .lr = 3e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                                 .weight_decay = 0.1f, .momentum = 0.9f, .accumulation = 1,
                                 .initial_loss_scale = 65536.0f, .loss_scale_window = 1000, .hysteresis = 2};
}

gaaw_status_t gaaw_optimizer_create(gaaw_model_t model, const gaaw_optimizer_config_t *cfg, gaaw_optimizer_t *opt)
{
  GAAW_FAIL(NULL, GAAW_ERR_UNSUPPORTED, "the optimizer is not written yet");
}

gaaw_status_t gaaw_optimizer_destroy(gaaw_optimizer_t *opt)
{
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_optimizer_step(gaaw_optimizer_t opt)
{
  GAAW_FAIL(NULL, GAAW_ERR_UNSUPPORTED, "the optimizer is not written yet");
}

gaaw_status_t gaaw_optimizer_stats(gaaw_optimizer_t opt, gaaw_step_stats_t *stats)
{
  GAAW_FAIL(NULL, GAAW_ERR_UNSUPPORTED, "the optimizer is not written yet");
}

gaaw_status_t gaaw_optimizer_memory(gaaw_optimizer_t opt, size_t *params, size_t *grads, size_t *state)
{
  GAAW_FAIL(NULL, GAAW_ERR_UNSUPPORTED, "the optimizer is not written yet");
}
