/* The named devices of gaaw_plan_device_named: NVIDIA's data-sheet figures
 * (doc/plan.md gives the sources), dense bf16 peaks without sparsity. The links
 * between devices belong to the cluster (gaaw_plan_cluster_t), not here.
 * gemm_efficiency is what cuBLAS reaches on large bf16 GEMMs, in published
 * measurements, as a fraction of the peak. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "plan/plan_impl.h"

typedef struct {
  const char *name;
  double peak_tflops, memory_gb, memory_gbps, host_link_gbps, gemm_efficiency;
} named_device;

static const named_device devices[] = {
  /* A100 SXM4 80GB: 312 TFLOP/s bf16, 80 GB HBM2e at 2.0 TB/s, PCIe gen4 x16 */
  {"a100-80g", 312, 80, 2000, 25, 0.80},
  /* H100 SXM5 80GB: 989 TFLOP/s bf16, 80 GB HBM3 at 3.35 TB/s, PCIe gen5 x16 */
  {"h100-80g", 989, 80, 3350, 50, 0.70},
  /* H200 SXM 141GB: the H100's compute, 141 GB HBM3e at 4.8 TB/s */
  {"h200", 989, 141, 4800, 50, 0.72},
};

gaaw_status_t gaaw_plan_device_named(gaaw_context_t ctx, const char *name, gaaw_plan_device_t *device)
{
  GAAW_ARG_NOT_NULL(ctx, name);
  GAAW_ARG_NOT_NULL(ctx, device);
  char known[128] = "";
  for (size_t i = 0; i < sizeof devices / sizeof devices[0]; i++) {
    const named_device *n = &devices[i];
    if (strcasecmp(name, n->name) == 0) {
      memset(device, 0, sizeof *device);
      snprintf(device->name, sizeof device->name, "%s", n->name);
      device->peak_tflops = n->peak_tflops;
      device->memory_bytes = n->memory_gb * PLAN_GB;
      device->memory_gbps = n->memory_gbps;
      device->host_link_gbps = n->host_link_gbps;
      device->gemm_efficiency = n->gemm_efficiency;
      return GAAW_SUCCESS;
    }
    size_t len = strlen(known);
    snprintf(known + len, sizeof known - len, "%s%s", i ? ", " : "", n->name);
  }
  GAAW_FAIL(ctx, GAAW_ERR_INVALID_ARG, "no device named '%s' (known: %s)", name, known);
}
