/* Aborting a context and telling the other ranks (abort.h). The notices travel as
 * small point-to-point messages on ctx->control, which MPI delivers eagerly, so
 * sending them never waits for a peer that is stuck or gone. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/runtime/abort.h"
#include "backends/runtime/runtime.h"

/* Tags 0..32767 belong to gaaw_comm_send/recv; control carries only notices. */
enum { ABORT_TAG = 1 };

void gaaw_context_abort(gaaw_context_t ctx)
{
  if (!ctx || ctx->aborted) return;
  ctx->aborted = 1;
  gaaw_error_first_line(ctx, ctx->abort_reason, sizeof ctx->abort_reason);
  if (!ctx->abort_reason[0]) snprintf(ctx->abort_reason, sizeof ctx->abort_reason, "an unreported failure");
  if (ctx->control == MPI_COMM_NULL || ctx->size < 2) return;
  ctx->abort_notice = malloc(GAAW_ABORT_REASON_MAX);
  ctx->abort_sends = malloc((size_t)ctx->size * sizeof *ctx->abort_sends);
  if (!ctx->abort_notice || !ctx->abort_sends) return; /* the peers learn at their own timeout */
  snprintf(ctx->abort_notice, GAAW_ABORT_REASON_MAX, "%s", ctx->abort_reason);
  for (int r = 0; r < ctx->size; r++) {
    ctx->abort_sends[r] = MPI_REQUEST_NULL;
    if (r != ctx->rank)
      MPI_Isend(ctx->abort_notice, GAAW_ABORT_REASON_MAX, MPI_CHAR, r, ABORT_TAG, ctx->control, &ctx->abort_sends[r]);
  }
  /* Push them out now: this rank may make no MPI call for a while, and some
   * transports only move a message inside one. Bounded: never waits for a peer. */
  double start = MPI_Wtime();
  for (int r = 0; r < ctx->size; r++)
    for (int done = 0; !done && MPI_Wtime() - start < 0.05;) MPI_Test(&ctx->abort_sends[r], &done, MPI_STATUS_IGNORE);
}

/* Takes an abort notice from another rank, if one has arrived. */
static void receive_notice(gaaw_context_t ctx)
{
  if (ctx->control == MPI_COMM_NULL) return;
  int arrived = 0;
  MPI_Status status;
  /* a probe also makes progress: a notice that is on its way may be seen only by
   * the next one (UCX), so ask a few times */
  for (int tries = 0; tries < 3 && !arrived; tries++)
    if (MPI_Iprobe(MPI_ANY_SOURCE, ABORT_TAG, ctx->control, &arrived, &status) != MPI_SUCCESS) return;
  if (!arrived) return;
  char notice[GAAW_ABORT_REASON_MAX];
  if (MPI_Recv(notice, sizeof notice, MPI_CHAR, status.MPI_SOURCE, ABORT_TAG, ctx->control, MPI_STATUS_IGNORE) !=
      MPI_SUCCESS)
    snprintf(notice, sizeof notice, "(its notice could not be read)");
  notice[sizeof notice - 1] = '\0';
  ctx->aborted = 1; /* no notice back: the sender is aborted already */
  snprintf(ctx->abort_reason, sizeof ctx->abort_reason, "on world rank %d: %.*s", status.MPI_SOURCE,
           (int)sizeof ctx->abort_reason - 32, notice);
}

gaaw_status_t gaaw_context_check_live(gaaw_context_t ctx)
{
  if (!ctx->aborted) receive_notice(ctx);
  if (!ctx->aborted) return GAAW_SUCCESS;
  GAAW_FAIL(ctx, GAAW_ERR_COMM, "no further communication is possible: the job was aborted after a failure (%s)",
            ctx->abort_reason);
}

void gaaw_context_abort_release(gaaw_context_t ctx)
{
  if (!ctx->abort_sends) return;
  int pending = 0;
  for (int r = 0; r < ctx->size; r++) {
    int done = 1;
    if (ctx->abort_sends[r] != MPI_REQUEST_NULL) MPI_Test(&ctx->abort_sends[r], &done, MPI_STATUS_IGNORE);
    if (!done) {
      MPI_Request_free(&ctx->abort_sends[r]); /* MPI completes it later, from our buffer */
      pending = 1;
    }
  }
  free(ctx->abort_sends);
  ctx->abort_sends = NULL;
  if (!pending) free(ctx->abort_notice); /* else left to the sends still reading it */
  ctx->abort_notice = NULL;
}
