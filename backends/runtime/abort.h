/* The aborted state of a context (DESIGN.md section 5). After a collective fails
 * (a timeout, a peer that left, a backend error), the ranks are out of step: any
 * later collective could pair with a different call on a peer. So the failing rank
 * marks its context aborted and sends every other rank of world a notice naming the
 * failure; each rank's next collective, or its wait inside one, sees the notice and
 * fails with GAAW_ERR_COMM naming the original failure. gaaw_finalize still works. */
#ifndef GAAW_RUNTIME_ABORT_H
#define GAAW_RUNTIME_ABORT_H

#include "backends/runtime/context_impl.h"

/* Marks ctx aborted with the failure that its error report holds now, and notifies
 * every other rank of world (once; later calls keep the first reason). Not
 * collective: it never waits for a peer. */
void gaaw_context_abort(gaaw_context_t ctx);

/* GAAW_ERR_COMM, naming the original failure, when ctx is aborted or an abort
 * notice from another rank has arrived (which aborts ctx too); GAAW_SUCCESS
 * otherwise. Not collective: it only looks for a notice that is already there. */
gaaw_status_t gaaw_context_check_live(gaaw_context_t ctx);

/* At gaaw_finalize: releases what the notices used. Not collective. */
void gaaw_context_abort_release(gaaw_context_t ctx);

#endif
