/* Running a script of tests/reference on world rank 0 of an MPI test. Collective
 * over MPI_COMM_WORLD. */
#ifndef GAAW_TEST_TORCH_SCRIPT_H
#define GAAW_TEST_TORCH_SCRIPT_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef GAAW_SRCDIR
#define GAAW_SRCDIR "."
#endif

/* Rank 0 runs /usr/bin/python3 tests/reference/SCRIPT ARGS; every rank gets its exit
 * status (77: Python or PyTorch missing), waiting asleep rather than spinning in MPI
 * on PyTorch's cores. */
static inline int torch_script_run(const char *script, const char *args)
{
  int rc = 0, rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    char cmd[2048];
    if (access("/usr/bin/python3", X_OK) != 0) {
      rc = 77;
    } else {
      snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tests/reference/%s %s", GAAW_SRCDIR, script, args);
      int st = system(cmd);
      rc = WIFEXITED(st) ? WEXITSTATUS(st) : 1;
      if (rc != 0 && rc != 77) fprintf(stderr, "FAIL: %s exited with %d\n", cmd, rc);
    }
  }
  MPI_Request done;
  int flag = 0;
  MPI_Ibcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD, &done);
  while (MPI_Test(&done, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && !flag) usleep(2000);
  return rc;
}

#endif
