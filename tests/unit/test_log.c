/* The logger: level filtering, GAAW_LOG_FILE, the rank in each line, and failures
 * logged at debug level with their report. */
#include <mpi.h>
#include <unistd.h>

#include "backends/runtime/log.h"
#include "test_util.h"

static long file_size(const char *path)
{
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fclose(f);
  return n;
}

static int file_contains(const char *path, const char *needle)
{
  char text[8192] = "";
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(text, 1, sizeof text - 1, f);
  text[n] = '\0';
  fclose(f);
  return strstr(text, needle) != NULL;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  char path[64];
  snprintf(path, sizeof path, "test_log.%d.txt", (int)getpid());
  remove(path);

  gaaw_config_t cfg;
  gaaw_context_t ctx;
  require_ok(NULL, gaaw_config_create(&cfg));
  require_ok(NULL, gaaw_config_parse(cfg, "backend=host log=info"));
  require_ok(NULL, gaaw_config_set(cfg, "log_file", path));
  require_ok(NULL, gaaw_init(MPI_COMM_WORLD, cfg, &ctx));
  expect_true(file_contains(path, "rank 0 info] device backend host"), "init is logged at info level with the rank");
  expect_true(!file_contains(path, "debug]"), "debug lines were written at level info");

  /* below the level: nothing written */
  long before = file_size(path);
  gaaw_log(GAAW_LOG_DEBUG, "hidden %d", 42);
  expect_true(file_size(path) == before, "a debug line was written at level info");
  expect_true(!gaaw_log_enabled(GAAW_LOG_DEBUG) && gaaw_log_enabled(GAAW_LOG_WARN), "enabled levels");
  gaaw_log(GAAW_LOG_WARN, "visible %d", 43);
  expect_true(file_contains(path, "rank 0 warn] visible 43"), "a warning was not written");
  gaaw_finalize(&ctx);

  /* at debug level a failure is logged with its message */
  require_ok(NULL, gaaw_config_set(cfg, "log", "debug"));
  require_ok(NULL, gaaw_init(MPI_COMM_WORLD, cfg, &ctx));
  expect_status_ctx(ctx, gaaw_buffer_alloc(ctx, 0, GAAW_MEM_PARAMS, NULL), GAAW_ERR_INVALID_ARG);
  expect_true(file_contains(path, "debug] GAAW_ERR_INVALID_ARG"), "the failure was not logged at debug level");
  gaaw_finalize(&ctx);

  /* none: silent */
  require_ok(NULL, gaaw_config_set(cfg, "log", "none"));
  require_ok(NULL, gaaw_init(MPI_COMM_WORLD, cfg, &ctx));
  before = file_size(path);
  gaaw_log(GAAW_LOG_ERROR, "silenced");
  expect_true(file_size(path) == before, "level none still wrote");
  gaaw_finalize(&ctx);

  /* an unwritable log file falls back to stderr instead of failing */
  require_ok(NULL, gaaw_config_parse(cfg, "log=warn log_file=/nonexistent-dir/x.log"));
  expect_status(gaaw_init(MPI_COMM_WORLD, cfg, &ctx), GAAW_SUCCESS);
  gaaw_finalize(&ctx);
  gaaw_log_configure(GAAW_LOG_WARN, "", -1);

  gaaw_config_destroy(&cfg);
  remove(path);
  MPI_Finalize();
  return test_finish("test_log");
}
