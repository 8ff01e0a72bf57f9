/* Helpers of the tests in tests/cuda. */
#ifndef GAAW_TESTS_CUDA_UTIL_H
#define GAAW_TESTS_CUDA_UTIL_H

#include <mpi.h>

#include "backends/device.h"

/* Whether, on every rank of world, the CUDA backend sees at least `per_node`
 * GPUs, where per_node is the number of ranks on that rank's node when
 * one_each is set (a GPU per rank) and 1 otherwise. Collective over world. */
static inline int cuda_test_gpus_everywhere(int one_each)
{
  MPI_Comm node;
  int rank, local_size, devices = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  MPI_Comm_size(node, &local_size);
  MPI_Comm_free(&node);
  const gaaw_device_ops *cuda = gaaw_device_backend("cuda");
  if (cuda) cuda->device_count(&devices);
  int enough = devices >= (one_each ? local_size : 1), all = 0;
  MPI_Allreduce(&enough, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all;
}

#endif
