/* Runtime basics: status list, error reports with traces, version, logger levels. */
#include <mpi.h>

#include "backends/runtime/error.h"
#include "backends/runtime/log.h"
#include "test_util.h"

static gaaw_status_t inner_failure(void)
{
  GAAW_ARG_CHECK(NULL, 2 + 2 == 5, "heads (%d) must be divisible by tp (%d)", 6, 4);
  return GAAW_SUCCESS;
}

static gaaw_status_t outer_call(void)
{
  GAAW_CHECK_CTX(NULL, inner_failure());
  return GAAW_SUCCESS;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);

  /* status names and texts come from one list and never drift */
  expect_true(strcmp(gaaw_status_name(GAAW_SUCCESS), "GAAW_SUCCESS") == 0, "%s", gaaw_status_name(GAAW_SUCCESS));
  expect_true(strcmp(gaaw_status_name(GAAW_ERR_TIMEOUT), "GAAW_ERR_TIMEOUT") == 0, "%s",
              gaaw_status_name(GAAW_ERR_TIMEOUT));
  expect_true(GAAW_ERR_INVALID_ARG == -1 && GAAW_ERR_NO_MEMORY == -2 && GAAW_ERR_UNSUPPORTED == -3 &&
                  GAAW_ERR_TIMEOUT == -6 && GAAW_ERR_NOT_FOUND == -12,
              "status codes were renumbered");
  expect_true(strcmp(gaaw_status_string(12345), "unknown status") == 0, "%s", gaaw_status_string(12345));
  expect_true(strcmp(gaaw_status_name(12345), "GAAW_UNKNOWN_STATUS") == 0, "%s", gaaw_status_name(12345));
#define CHECK_TEXT(name, value, text) \
  expect_true(strcmp(gaaw_status_string(name), text) == 0 && *text, "text of %s", #name);
  GAAW_STATUS_LIST(CHECK_TEXT)
#undef CHECK_TEXT

  /* an error report names the values, the place, and the chain it passed through */
  gaaw_clear_error(NULL);
  expect_true(gaaw_last_status(NULL) == GAAW_SUCCESS && gaaw_last_error(NULL)[0] == '\0', "cleared");
  expect_status(outer_call(), GAAW_ERR_INVALID_ARG);
  const char *report = gaaw_last_error(NULL);
  expect_true(strstr(report, "heads (6) must be divisible by tp (4)") != NULL, "message: %s", report);
  expect_true(strstr(report, "GAAW_ERR_INVALID_ARG") != NULL, "status name: %s", report);
  expect_true(strstr(report, "test_runtime.c") && strstr(report, "inner_failure"), "origin: %s", report);
  expect_true(strstr(report, "from test_runtime.c") && strstr(report, "outer_call"), "trace: %s", report);
  expect_true(gaaw_last_status(NULL) == GAAW_ERR_INVALID_ARG, "last status %d", gaaw_last_status(NULL));

  /* a very long message is cut, not overflowed */
  char big[4000];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  gaaw_error_raise(NULL, GAAW_ERR_IO, __FILE__, __LINE__, __func__, "%s", big);
  for (int i = 0; i < 200; i++) gaaw_error_trace(NULL, GAAW_ERR_IO, __FILE__, __LINE__, __func__);
  expect_true(strlen(gaaw_last_error(NULL)) < GAAW_ERROR_TEXT_MAX, "report length %zu",
              strlen(gaaw_last_error(NULL)));

  /* version: the header the test was built with matches the library */
  expect_true(gaaw_version_number() == GAAW_VERSION_NUMBER, "%d vs %d", gaaw_version_number(), GAAW_VERSION_NUMBER);
  expect_true(strcmp(gaaw_version(), GAAW_VERSION_STRING) == 0, "%s", gaaw_version());

  /* a program built against another header version is refused with GAAW_ERR_VERSION */
  gaaw_context_t ctx = (gaaw_context_t)1;
  expect_status(gaaw_init_version(MPI_COMM_WORLD, NULL, &ctx, GAAW_VERSION_NUMBER + 1), GAAW_ERR_VERSION);
  expect_true(ctx == NULL, "ctx must be NULL after a failed init");
  expect_true(strstr(gaaw_last_error(NULL), "rebuild") != NULL, "%s", gaaw_last_error(NULL));

  /* bad input of the context API */
  expect_status(gaaw_init(MPI_COMM_WORLD, NULL, NULL), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_init(MPI_COMM_NULL, NULL, &ctx), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_finalize(NULL), GAAW_SUCCESS);
  int rank;
  const char *name;
  gaaw_config_t cfg;
  expect_status(gaaw_world_rank(NULL, &rank), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_world_size(NULL, &rank), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_backend_name(NULL, &name), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_context_config(NULL, &cfg), GAAW_ERR_INVALID_ARG);

  /* log levels */
  expect_true(gaaw_log_level_parse("debug") == GAAW_LOG_DEBUG, "debug");
  expect_true(gaaw_log_level_parse("WARN") == GAAW_LOG_WARN, "WARN");
  expect_true(gaaw_log_level_parse("loud") == -1, "loud");
  expect_status(gaaw_log_configure(9, "", 0), GAAW_ERR_INVALID_ARG);

  /* a context on one rank with the host backend */
  require_ok(NULL, gaaw_config_create(&cfg));
  require_ok(NULL, gaaw_config_set(cfg, "backend", "host"));
  require_ok(NULL, gaaw_init(MPI_COMM_WORLD, cfg, &ctx));
  expect_status_ctx(ctx, gaaw_world_rank(ctx, &rank), GAAW_SUCCESS);
  expect_true(rank == 0, "rank %d", rank);
  expect_status_ctx(ctx, gaaw_backend_name(ctx, &name), GAAW_SUCCESS);
  expect_true(strcmp(name, "host") == 0, "backend %s", name);
  expect_status_ctx(ctx, gaaw_world_rank(ctx, NULL), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(ctx), "rank must not be NULL") != NULL, "%s", gaaw_last_error(ctx));
  /* errors on a context stay on it */
  expect_true(gaaw_last_status(ctx) == GAAW_ERR_INVALID_ARG, "ctx status");
  gaaw_clear_error(ctx);
  expect_true(gaaw_last_status(ctx) == GAAW_SUCCESS && gaaw_last_error(ctx)[0] == '\0', "ctx cleared");
  require_ok(ctx, gaaw_finalize(&ctx));
  expect_true(ctx == NULL, "finalize sets the handle to NULL");

  /* options that cannot work fail at init with a message naming them */
  require_ok(NULL, gaaw_config_set(cfg, "backend", "quantum"));
  expect_status(gaaw_init(MPI_COMM_WORLD, cfg, &ctx), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(NULL), "quantum") != NULL, "%s", gaaw_last_error(NULL));
  require_ok(NULL, gaaw_config_set(cfg, "backend", "host"));
  require_ok(NULL, gaaw_config_set(cfg, "log", "chatty"));
  expect_status(gaaw_init(MPI_COMM_WORLD, cfg, &ctx), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(NULL), "chatty") != NULL, "%s", gaaw_last_error(NULL));
  require_ok(NULL, gaaw_config_set(cfg, "log", "warn"));
  require_ok(NULL, gaaw_config_set(cfg, "device", "3"));
  expect_status(gaaw_init(MPI_COMM_WORLD, cfg, &ctx), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(NULL), "device 3") != NULL, "%s", gaaw_last_error(NULL));
  require_ok(NULL, gaaw_config_set(cfg, "device", "-1"));
  require_ok(NULL, gaaw_config_set(cfg, "comm_timeout", "-5"));
  expect_status(gaaw_init(MPI_COMM_WORLD, cfg, &ctx), GAAW_ERR_INVALID_ARG);
  require_ok(NULL, gaaw_config_set(cfg, "comm_timeout", "300"));
  require_ok(NULL, gaaw_config_set(cfg, "tp", "2"));
  expect_status(gaaw_init(MPI_COMM_WORLD, cfg, &ctx), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(NULL), "tp must be in 1..1") != NULL, "%s", gaaw_last_error(NULL));
  expect_true(ctx == NULL, "no context after a failed init");
  gaaw_config_destroy(&cfg);
  expect_true(cfg == NULL, "destroy sets the handle to NULL");

  MPI_Finalize();
  return test_finish("test_runtime");
}
