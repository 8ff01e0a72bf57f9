/* All of a model's parameters as one flat vector (gaaw_model_get_params and
 * gaaw_model_set_params): each parameter in its global layout, in registry order,
 * one after the other. Built on the per-parameter calls, so every layout gives the
 * same vector. */
#include "backends/agree.h"
#include "parallel/model_impl.h"

/* The registry, in order: visit(m, name, offset into the vector) for each. */
static gaaw_status_t each_param(gaaw_model_t m, gaaw_status_t (*visit)(gaaw_model_t, const char *, int64_t, void *),
                                void *user)
{
  gaaw_context_t ctx = m->ctx;
  int count;
  int64_t offset = 0;
  GAAW_CHECK(gaaw_model_param_count(m, &count));
  for (int k = 0; k < count; k++) {
    const char *name;
    int ndim;
    int64_t shape[2];
    GAAW_CHECK(gaaw_model_param_info(m, k, &name, &ndim, shape));
    GAAW_CHECK(visit(m, name, offset, user));
    offset += ndim == 2 ? shape[0] * shape[1] : shape[0];
  }
  return GAAW_SUCCESS;
}

static gaaw_status_t read_one(gaaw_model_t m, const char *name, int64_t offset, void *values)
{
  return gaaw_model_get_param(m, name, (float *)values + offset);
}

static gaaw_status_t write_one(gaaw_model_t m, const char *name, int64_t offset, void *values)
{
  return gaaw_model_set_param(m, name, (const float *)values + offset);
}

gaaw_status_t gaaw_model_get_params(gaaw_model_t m, float *values)
{
  if (!m) return GAAW_ERR_INVALID_ARG;
  gaaw_context_t ctx = m->ctx;
  gaaw_status_t local = values ? GAAW_SUCCESS
                               : gaaw_error_raise(ctx, GAAW_ERR_INVALID_ARG, __FILE__, __LINE__, __func__,
                                                  "values must not be NULL");
  GAAW_CHECK(gaaw_agree(gaaw_model_work_group(m), local, "reading all parameters", NULL, 0));
  GAAW_CHECK(each_param(m, read_one, values));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_set_params(gaaw_model_t m, const float *values)
{
  if (!m) return GAAW_ERR_INVALID_ARG;
  gaaw_context_t ctx = m->ctx;
  GAAW_ARG_NOT_NULL(ctx, values);
  GAAW_CHECK(each_param(m, write_one, (void *)values));
  return GAAW_SUCCESS;
}
