/* installed_version: built against an installed gaaw (make check's DESTDIR copy, or
 * make installcheck's), with pkg-config and with CMake. Starts gaaw on one rank and
 * checks that the library it runs with is the one whose headers it was compiled
 * with and that it has a backend. Exit status 0 when so, 1 otherwise. */
#include <stdio.h>
#include <string.h>

#include <gaaw.h>

#define CHECK(call)                                                                                \
  do {                                                                                             \
    gaaw_status_t st_ = (call);                                                                    \
    if (st_ != GAAW_SUCCESS) {                                                                     \
      fprintf(stderr, "%s: %s\n%s\n", #call, gaaw_status_name(st_), gaaw_last_error(NULL));        \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  gaaw_config_t cfg;
  gaaw_context_t ctx;
  int size = 0;
  CHECK(gaaw_config_create(&cfg));
  CHECK(gaaw_config_set(cfg, "backend", "host"));
  CHECK(gaaw_init(MPI_COMM_WORLD, cfg, &ctx));
  CHECK(gaaw_world_size(ctx, &size));
  if (size != 1 || strcmp(gaaw_version(), GAAW_VERSION_STRING) != 0 ||
      gaaw_info_backend_count() < 1) {
    fprintf(stderr, "size %d, version %s (headers %s), %d backends\n", size, gaaw_version(),
            GAAW_VERSION_STRING, gaaw_info_backend_count());
    return 1;
  }
  CHECK(gaaw_finalize(&ctx));
  CHECK(gaaw_config_destroy(&cfg));
  MPI_Finalize();
  printf("installed C: gaaw %s works\n", gaaw_version());
  return 0;
}
