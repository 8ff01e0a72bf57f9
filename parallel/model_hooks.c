/* The model's side of the data-parallel hooks (gaaw_model_hooks): installing
 * them, calling them, and the group whose ranks share a pass while they are
 * installed. */
#include <string.h>

#include "backends/runtime/abort.h"
#include "parallel/model_impl.h"

void gaaw_model_set_hooks(gaaw_model_t m, const gaaw_model_hooks *hooks)
{
  if (hooks)
    m->hooks = *hooks;
  else
    memset(&m->hooks, 0, sizeof m->hooks);
}

gaaw_comm_t gaaw_model_work_group(gaaw_model_t m)
{
  return m->hooks.user || m->pp_size > 1 || m->cp_size > 1 ? m->world : m->tp;
}

/* A pass failed after its agreement: the other ranks may be inside a collective
 * this rank will not join, so the context is aborted and they are told at once. */
gaaw_status_t gaaw_model_fail_together(gaaw_model_t m, gaaw_status_t st)
{
  if (gaaw_model_work_group(m)->size > 1) gaaw_context_abort(m->ctx);
  return st;
}

gaaw_status_t gaaw_model_before_layer(gaaw_model_t m, int layer, gaaw_phase phase)
{
  if (!m->hooks.before_layer) return GAAW_SUCCESS;
  GAAW_CHECK_CTX(m->ctx, m->hooks.before_layer(m, layer, phase, m->hooks.user));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_check_pass(gaaw_model_t m, gaaw_phase phase, int passes)
{
  if (phase != GAAW_PHASE_FORWARD && m->cp_size > 1 && !m->hooks.user)
    GAAW_FAIL(m->ctx, GAAW_ERR_UNSUPPORTED, "at cp = %d a backward needs an optimizer (gaaw_optimizer_create): it sums "
              "the gradients of the ranks that share a sequence", m->cp_size);
  if (!m->hooks.check_pass) return GAAW_SUCCESS;
  GAAW_CHECK_CTX(m->ctx, m->hooks.check_pass(m, phase, passes, m->hooks.user));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_after_layer(gaaw_model_t m, int layer, gaaw_phase phase)
{
  if (!m->hooks.after_layer) return GAAW_SUCCESS;
  GAAW_CHECK_CTX(m->ctx, m->hooks.after_layer(m, layer, phase, m->hooks.user));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_begin_pass(gaaw_model_t m, gaaw_phase phase, int microbatch, int chunk)
{
  if (phase != GAAW_PHASE_FORWARD) GAAW_CHECK_CTX(m->ctx, gaaw_params_ensure_grads(m->ctx, &m->params));
  if (!m->hooks.begin_pass) return GAAW_SUCCESS;
  GAAW_CHECK_CTX(m->ctx, m->hooks.begin_pass(m, phase, microbatch, chunk, m->hooks.user));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_model_end_pass(gaaw_model_t m, gaaw_phase phase, int microbatch, int chunk)
{
  if (!m->hooks.end_pass) return GAAW_SUCCESS;
  GAAW_CHECK_CTX(m->ctx, m->hooks.end_pass(m, phase, microbatch, chunk, m->hooks.user));
  return GAAW_SUCCESS;
}

/* The data-parallel engine's hook before gradients are read or zeroed. */
gaaw_status_t gaaw_model_grads_access(gaaw_model_t m, int reset)
{
  GAAW_CHECK_CTX(m->ctx, gaaw_params_ensure_grads(m->ctx, &m->params));
  if (!m->hooks.grads_access) return GAAW_SUCCESS;
  GAAW_CHECK_CTX(m->ctx, m->hooks.grads_access(m, reset, m->hooks.user));
  return GAAW_SUCCESS;
}
