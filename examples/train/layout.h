/* gaaw-train --layout auto: the job's layout chosen by the planner (gaaw/plan.h)
 * before the training context exists. */
#ifndef GAAW_TRAIN_LAYOUT_H
#define GAAW_TRAIN_LAYOUT_H

#include <stddef.h>

#include "examples/train/options.h"
#include "gaaw.h"

/* With o->layout "auto": calibrates this machine on a probe context of the whole
 * world (tp 1, pp 1), plans the job's GPT for the global batch the options give
 * (--batch x --accum x microbatches x dp), and applies the fastest layout that
 * fits: the layout's library options on cfg (gaaw_plan_apply), --zero, --batch (the
 * rows per microbatch) and --accum 1 on o. chosen receives the line rank 0 prints.
 * The offload searched is --offload-optimizer's, or none when it is not given.
 * With o->layout "" nothing changes. Returns TRAIN_EXIT_OK, TRAIN_EXIT_USAGE when
 * no layout fits (err lists the rejected families), or TRAIN_EXIT_FAILURE. Collective
 * over MPI_COMM_WORLD; every rank chooses the same layout (the calibration's figures
 * are the same bits everywhere). */
int train_layout_auto(gaaw_config_t cfg, train_options *o, char *chosen, size_t chosen_len, char *err, size_t len);

#endif
