/* A stand-in test for tests/mpi/test_run_test.sh: rank r exits with the status
 * argv[1 + r] (the last one given for ranks beyond it), after MPI_Finalize; the
 * words "abort" (abort() without finalizing) and "hang" (sleep 60 s) stand for a
 * crashed and a hung rank. */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const char *what = argc < 2 ? "0" : argv[1 + rank < argc ? 1 + rank : argc - 1];
  if (strcmp(what, "abort") == 0) abort();
  if (strcmp(what, "hang") == 0) sleep(60);
  MPI_Finalize();
  return atoi(what);
}
