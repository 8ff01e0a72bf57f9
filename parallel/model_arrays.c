/* gaaw_model_check_arrays: the shape check that bindings run before a pass, since
 * a gaaw_batch_t carries pointers but not the extents of the caller's arrays. */
#include "backends/agree.h"
#include "backends/runtime/error.h"
#include "parallel/model_impl.h"

static gaaw_status_t check_local(gaaw_model_t m, int predict, const int64_t inputs[2], const int64_t outputs[2])
{
  gaaw_context_t ctx = m->ctx;
  GAAW_ARG_NOT_NULL(ctx, inputs);
  GAAW_ARG_NOT_NULL(ctx, outputs);
  int64_t in[2], out[2];
  m->kind_ops->array_shapes(m, predict, inputs[0], inputs[1], in, out);
  const char *what_in = m->kind_ops->input_name;
  const char *what_out = predict ? m->kind_ops->output_name : m->kind_ops->target_name;
  GAAW_ARG_CHECK(ctx, inputs[0] == in[0] && inputs[1] == in[1],
                 "%s hold %lld samples of %lld features; the model takes %lld features", what_in,
                 (long long)inputs[0], (long long)inputs[1], (long long)in[1]);
  GAAW_ARG_CHECK(ctx, outputs[0] == out[0] && outputs[1] == out[1],
                 "%s hold %lld samples of %lld features; %lld samples of %lld features expected for %lld inputs",
                 what_out, (long long)outputs[0], (long long)outputs[1], (long long)out[0], (long long)out[1],
                 (long long)inputs[0]);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_check_arrays(gaaw_model_t model, int predict, const int64_t inputs[2],
                                      const int64_t outputs[2])
{
  GAAW_ARG_NOT_NULL(NULL, model);
  gaaw_status_t st = check_local(model, predict, inputs, outputs);
  return gaaw_agree(gaaw_model_work_group(model), st, "the arrays of a pass", NULL, 0);
}
