/* The running model and optimizer in a checkpoint's terms: the shard as table
 * ranges over the staging, the stored fields, the layout and model description. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/runtime/error.h"
#include "zero/checkpoint_impl.h"

gaaw_status_t gaaw_ckpt_shard_ranges(gaaw_optimizer_t opt, ckpt_range **ranges, int *n)
{
  gaaw_context_t ctx = opt->ctx;
  *ranges = calloc((size_t)(opt->nbuckets ? opt->nbuckets : 1), sizeof **ranges);
  if (!*ranges) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot allocate %d ranges", opt->nbuckets);
  for (int b = 0; b < opt->nbuckets; b++) {
    const zero_bucket *k = &opt->buckets[b];
    (*ranges)[b] = (ckpt_range){gaaw_zero_piece_lo(opt, k), k->piece, k->shard_at};
  }
  *n = opt->nbuckets;
  return GAAW_SUCCESS;
}

int gaaw_ckpt_nfields(gaaw_optimizer_t opt)
{
  return opt->cfg.kind == GAAW_ADAMW ? 3 : 2;
}

/* A config field as the text both sides of a comparison print. */
static void field_text(const gaaw_field *f, char *out, size_t size)
{
  switch (f->kind) {
  case GAAW_FIELD_KIND_NAMED:
  case GAAW_FIELD_KIND_TEXT: snprintf(out, size, "%s", f->text ? f->text : ""); break;
  case GAAW_FIELD_KIND_REAL:
  case GAAW_FIELD_KIND_FLOAT: snprintf(out, size, "%.9g", f->r); break;
  case GAAW_FIELD_KIND_DIGEST: snprintf(out, size, "%016llx", (unsigned long long)f->i); break;
  default: snprintf(out, size, "%lld", (long long)f->i); break;
  }
}

void gaaw_ckpt_describe(gaaw_model_t m, ckpt_meta *meta)
{
  gaaw_context_t ctx = m->ctx;
  const char *backend = "?";
  gaaw_backend_name(ctx, &backend);
  meta->world = ctx->size;
  meta->dp = m->dp_size, meta->cp = m->cp_size, meta->pp = m->pp_size, meta->tp = m->tp_size;
  meta->virtual_stages = m->chunks;
  snprintf(meta->pp_layout, sizeof meta->pp_layout, "%s", gaaw_ctx_string(ctx, "pp_layout"));
  snprintf(meta->pp_schedule, sizeof meta->pp_schedule, "%s", gaaw_ctx_string(ctx, "pp_schedule"));
  snprintf(meta->dtype, sizeof meta->dtype, "%s", gaaw_dtype_name(m->dtype));
  snprintf(meta->backend, sizeof meta->backend, "%s", backend);
  snprintf(meta->model_kind, sizeof meta->model_kind, "%s", m->builder_name ? m->builder_name : "?");
  meta->nconfig = 0;
  for (int i = 0; i < m->nconfig && i < GAAW_AGREE_MAX_FIELDS; i++) {
    snprintf(meta->config_names[i], sizeof meta->config_names[i], "%s", m->config[i].name);
    field_text(&m->config[i], meta->config_values[i], sizeof meta->config_values[i]);
    meta->nconfig++;
  }
}
