/* gaaw info: what this build of the library contains, for listings such as
 * gaaw-info: the device backends compiled in (how many devices each sees on this
 * node, and what each device is) and the optional dependencies it was built with.
 * None of these needs a context or MPI; none is collective. */
#ifndef GAAW_INFO_H
#define GAAW_INFO_H

#include <stdint.h>

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

/* One device as its backend describes it, without opening it. */
typedef struct {
  char name[128];        /* the device's name (host: the CPU model) */
  uint64_t memory_bytes; /* its global memory (host: physical memory) */
  int compute_units;     /* SMs, OpenCL compute units, or CPU cores online */
  int fp16, bf16;        /* 1 when the device has arithmetic in f16 / bf16 (host: AVX-512 FP16 / BF16;
                            OpenCL: cl_khr_fp16 / a bfloat16 extension; CUDA: compute capability
                            5.3 / 8.0). gaaw's host kernels take 16-bit tensors either way, in f32;
                            its OpenCL kernels need fp16 for f16 tensors. */
} gaaw_device_info_t;

/* Device device_index (0 .. device_count - 1 of gaaw_info_backend) of backend
 * backend_index. GAAW_ERR_INVALID_ARG for an index out of range or a NULL info;
 * GAAW_ERR_UNSUPPORTED when the backend cannot describe its devices. */
gaaw_status_t gaaw_info_device(int backend_index, int device_index, gaaw_device_info_t *info);

#ifdef __cplusplus
}
#endif
#endif
