/* The context's insides, shared by the library's modules (never by users). */
#ifndef GAAW_RUNTIME_CONTEXT_IMPL_H
#define GAAW_RUNTIME_CONTEXT_IMPL_H

#include <mpi.h>

#include "backends/device.h"
#include "backends/runtime/allocator.h"
#include "backends/runtime/error.h"
#include "gaaw/topology.h"

#define GAAW_ABORT_REASON_MAX 512

typedef struct {
  int dp, pp, cp, tp;
  int dp_rank, pp_rank, cp_rank, tp_rank;
  int ep, ep_rank, edp_rank; /* expert parallelism, folded onto a stage's tp x cp x dp ranks: the
                                stage index (tp fastest) is ep_rank + ep x edp_rank */
  int order[4]; /* gaaw_grid_axis values (runtime/config_impl.h), fastest-varying first */
  gaaw_comm_t comms[GAAW_GROUP_COUNT];
} gaaw_topology;

struct gaaw_context_s {
  gaaw_error_record error;
  gaaw_config_t config;
  MPI_Comm world;           /* our duplicate of the comm given to gaaw_init */
  int rank, size;           /* in world */
  int local_rank, local_size; /* on this node */
  const gaaw_device_ops *device;
  void *device_state;       /* owned by the device backend */
  int device_index;
  gaaw_allocator allocator;
  gaaw_topology topo;
  double comm_timeout;      /* seconds, 0 = none */
  double compute_slowdown;  /* >= 1: the host backend's GEMMs take this many times as long */
  MPI_Comm control;         /* a duplicate of world for agreements and abort notices (runtime/abort.c) */
  int aborted;              /* after a failed collective here or on another rank: no more communication */
  char abort_reason[GAAW_ABORT_REASON_MAX]; /* the original failure, for every later error */
  char *abort_notice;       /* what this rank sent its peers, kept until their sends complete */
  MPI_Request *abort_sends; /* one per other rank of world */
  struct gaaw_trace_s *trace; /* the timeline (runtime/trace.h); NULL: off */
};

/* Reads an option of the context's config that must exist (a bug otherwise). */
int64_t gaaw_ctx_int(gaaw_context_t ctx, const char *key);
double gaaw_ctx_double(gaaw_context_t ctx, const char *key);
const char *gaaw_ctx_string(gaaw_context_t ctx, const char *key);
int gaaw_ctx_bool(gaaw_context_t ctx, const char *key);

#endif
