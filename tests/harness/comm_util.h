/* A communicator of the topology with its rank and size, for the comm tests. */
#ifndef GAAW_TEST_COMM_UTIL_H
#define GAAW_TEST_COMM_UTIL_H

#include "tests/harness/test_util.h"

typedef struct {
  gaaw_context_t ctx;
  gaaw_comm_t comm;
  const char *name;
  int rank, size;
} group;

static inline group open_group(gaaw_context_t ctx, gaaw_group_t g)
{
  group gr = {ctx, NULL, gaaw_group_name(g), 0, 0};
  require_ok(ctx, gaaw_topology_comm(ctx, g, &gr.comm));
  require_ok(ctx, gaaw_comm_rank(gr.comm, &gr.rank));
  require_ok(ctx, gaaw_comm_size(gr.comm, &gr.size));
  return gr;
}

#endif
