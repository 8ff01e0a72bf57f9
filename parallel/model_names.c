/* Names of the model's enumerations (norms, activations, losses), for messages. */
#include "parallel/model_impl.h"

const char *gaaw_norm_name(gaaw_norm_t norm)
{
  switch (norm) {
  case GAAW_NORM_LAYERNORM: return "layernorm";
  case GAAW_NORM_RMSNORM: return "rmsnorm";
  }
  return "invalid";
}

const char *gaaw_activation_name(gaaw_activation_t activation)
{
  switch (activation) {
  case GAAW_ACT_GELU: return "gelu";
  case GAAW_ACT_SWIGLU: return "swiglu";
  case GAAW_ACT_NONE: return "none";
  case GAAW_ACT_RELU: return "relu";
  case GAAW_ACT_TANH: return "tanh";
  case GAAW_ACT_SILU: return "silu";
  }
  return "invalid";
}

const char *gaaw_loss_name(gaaw_loss_t loss)
{
  switch (loss) {
  case GAAW_LOSS_MSE: return "mse";
  case GAAW_LOSS_L1: return "l1";
  case GAAW_LOSS_HUBER: return "huber";
  }
  return "invalid";
}
