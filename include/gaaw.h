/* gaaw: tensor, pipeline and ZeRO data parallelism for C and Fortran codes.
 * The umbrella header; link with -lgaaw (pkg-config --cflags --libs gaaw). */
#ifndef GAAW_H
#define GAAW_H

#include "gaaw/version.h"
#include "gaaw/status.h"
#include "gaaw/config.h"
#include "gaaw/context.h"
#include "gaaw/tensor.h"
#include "gaaw/kernels.h"
#include "gaaw/comm.h"
#include "gaaw/topology.h"
#include "gaaw/model.h"
#include "gaaw/optimizer.h"
#include "gaaw/estimate.h"
#include "gaaw/info.h"
#include "gaaw/schedule.h"
#include "gaaw/sampler.h"
#include "gaaw/checkpoint.h"
#include "gaaw/plan.h"
#include "gaaw/data.h"

#endif
