/* gaaw_plan_apply: a layout's options on a configuration (gaaw/plan.h). */
#include "plan/plan_impl.h"

gaaw_status_t gaaw_plan_apply(const gaaw_plan_layout_t *layout, gaaw_config_t cfg)
{
  gaaw_context_t ctx = NULL;
  GAAW_ARG_NOT_NULL(ctx, layout);
  GAAW_ARG_NOT_NULL(ctx, cfg);
  const gaaw_plan_layout_t *l = layout;
  GAAW_ARG_CHECK(ctx, l->dp >= 1 && l->pp >= 1 && l->tp >= 1 && l->virtual_stages >= 1 && l->microbatches >= 1,
                 "layout sizes must be >= 1: dp %d, pp %d, tp %d, virtual_stages %d, microbatches %d", l->dp, l->pp,
                 l->tp, l->virtual_stages, l->microbatches);
  GAAW_ARG_CHECK(ctx, l->schedule >= 0 && l->schedule < GAAW_SCHED_KIND_COUNT, "layout schedule %d is not a gaaw_sched_kind_t",
                 l->schedule);
  GAAW_ARG_CHECK(ctx, l->recompute >= 0 && l->recompute <= 2, "layout recompute %d must be 0, 1 or 2", l->recompute);
  GAAW_ARG_CHECK(ctx, l->offload >= 0 && l->offload <= 2, "layout offload %d must be 0, 1 or 2", l->offload);
  GAAW_CHECK(plan_layout_options(l, cfg));
  return GAAW_SUCCESS;
}

_Static_assert((int)GAAW_PLAN_GPIPE == (int)GAAW_SCHED_GPIPE && (int)GAAW_PLAN_1F1B == (int)GAAW_SCHED_1F1B &&
                 (int)GAAW_PLAN_INTERLEAVED == (int)GAAW_SCHED_INTERLEAVED &&
                 (int)GAAW_PLAN_ZB_H1 == (int)GAAW_SCHED_ZB_H1 &&
                 GAAW_PLAN_SCHEDULE_COUNT == GAAW_SCHED_KIND_COUNT,
               "gaaw_plan_schedule_t must follow gaaw_sched_kind_t");

const char *gaaw_plan_schedule_name(int schedule)
{
  return gaaw_sched_kind_name(schedule);
}
