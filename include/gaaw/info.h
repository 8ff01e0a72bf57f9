/* gaaw info: what this build of the library contains, for listings such as
 * gaaw-info: the device backends compiled in (and how many devices each sees on
 * this node) and the optional dependencies it was built with. None of these needs
 * a context or MPI; none is collective. */
#ifndef GAAW_INFO_H
#define GAAW_INFO_H

#include "gaaw/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Optional parts of a build: X(name, value, text). Append only. */
#define GAAW_FEATURE_LIST(X)                                        \
  X(GAAW_FEATURE_CBLAS, 0, "cblas")     /* CBLAS GEMM on the host */ \
  X(GAAW_FEATURE_OPENMP, 1, "openmp")   /* OpenMP host kernels */    \
  X(GAAW_FEATURE_OPENCL, 2, "opencl")   /* OpenCL found */           \
  X(GAAW_FEATURE_CLBLAST, 3, "clblast") /* CLBlast found */          \
  X(GAAW_FEATURE_CUDA, 4, "cuda")       /* CUDA toolkit found */     \
  X(GAAW_FEATURE_NCCL, 5, "nccl")       /* NCCL found */             \
  X(GAAW_FEATURE_FORTRAN, 6, "fortran") /* Fortran module gaaw */
#define GAAW_FEATURE_ENUM_ENTRY(name, value, text) name = value,
typedef enum { GAAW_FEATURE_LIST(GAAW_FEATURE_ENUM_ENTRY) } gaaw_feature_t;
#undef GAAW_FEATURE_ENUM_ENTRY
#define GAAW_FEATURE_COUNT 7

/* Whether this build has feature (1) or not (0); its name ("cblas", ...) when name
 * is not NULL. A feature outside the list is GAAW_ERR_INVALID_ARG. */
gaaw_status_t gaaw_info_feature(gaaw_feature_t feature, const char **name, int *enabled);
/* The same by name (case-insensitive); an unknown name is GAAW_ERR_NOT_FOUND. */
gaaw_status_t gaaw_info_feature_by_name(const char *name, int *enabled);

/* The device backends compiled in, in auto-selection order (cuda > opencl > host). */
int gaaw_info_backend_count(void);
/* Backend index (0..count-1): its name and the number of devices it finds on this
 * node (0: it cannot run here). Either output may be NULL. When the backend fails
 * to count its devices, *device_count is 0 and its failure is returned, with the
 * report in gaaw_last_error(NULL). */
gaaw_status_t gaaw_info_backend(int index, const char **name, int *device_count);

#ifdef __cplusplus
}
#endif
#endif
