/* The choice between NCCL and MPI for a group (backends/comm.h), on faked node
 * layouts: with L ranks on a node and G GPUs, gaaw_init binds local rank r to GPU
 * r % G (backends/runtime/context.c), so L > G puts two ranks on one GPU, which
 * NCCL does not support: such a group falls back to MPI. Ranks that each see a
 * different GPU as device 0 (CUDA_VISIBLE_DEVICES per rank) are told apart by the
 * GPU's UUID and keep NCCL. */
#include <string.h>

#include "backends/comm.h"
#include "tests/harness/test_util.h"

enum { MAX_LOCAL = 16 };

/* The identities of L local ranks bound by r % G: each GPU's "UUID" is its index. */
static void bind_layout(int L, int G, unsigned char ids[][GAAW_DEVICE_ID_BYTES])
{
  for (int r = 0; r < L; r++) {
    memset(ids[r], 0, GAAW_DEVICE_ID_BYTES);
    ids[r][0] = (unsigned char)(r % G);
    ids[r][15] = 0xA5; /* the rest of a UUID */
  }
}

int main(void)
{
  unsigned char ids[MAX_LOCAL][GAAW_DEVICE_ID_BYTES];
  for (int G = 1; G <= 8; G++)
    for (int L = 1; L <= MAX_LOCAL; L++) {
      bind_layout(L, G, ids);
      int a = -1, b = -1;
      int shared = gaaw_comm_devices_shared(L, ids, GAAW_DEVICE_ID_BYTES, &a, &b);
      expect_true(shared == (L > G), "%d ranks on %d GPUs: shared %d", L, G, shared);
      if (shared)
        expect_true(a == 0 && b == G, "%d ranks on %d GPUs: first pair %d, %d (expected 0, %d)", L, G, a, b, G);
      gaaw_nccl_choice c = gaaw_comm_nccl_choice(1, shared);
      expect_true(c == (L > G ? GAAW_NCCL_SHARED_DEVICE : GAAW_NCCL_USE), "%d ranks on %d GPUs: choice %d", L, G,
                  (int)c);
    }

  /* four ranks, each seeing its own GPU as device 0: different UUIDs, NCCL */
  for (int r = 0; r < 4; r++) {
    memset(ids[r], 0, GAAW_DEVICE_ID_BYTES);
    ids[r][7] = (unsigned char)(0x10 + r);
  }
  expect_true(!gaaw_comm_devices_shared(4, ids, GAAW_DEVICE_ID_BYTES, NULL, NULL),
              "distinct UUIDs reported as shared");
  /* two ranks forced onto one GPU (device=0 on a node with 8): shared */
  bind_layout(2, 1, ids);
  expect_true(gaaw_comm_devices_shared(2, ids, GAAW_DEVICE_ID_BYTES, NULL, NULL), "device=0 on both not shared");

  /* a member that does not want NCCL (host, OpenCL, nccl=no) decides for MPI, shared or not */
  expect_true(gaaw_comm_nccl_choice(0, 0) == GAAW_NCCL_NOT_WANTED, "not wanted, not shared");
  expect_true(gaaw_comm_nccl_choice(0, 1) == GAAW_NCCL_NOT_WANTED, "not wanted, shared");
  /* one rank alone never shares */
  expect_true(!gaaw_comm_devices_shared(1, ids, GAAW_DEVICE_ID_BYTES, NULL, NULL), "one rank shared");
  expect_true(!gaaw_comm_devices_shared(0, ids, GAAW_DEVICE_ID_BYTES, NULL, NULL), "no rank shared");
  return test_finish("test_nccl_choice");
}
