/* gaaw_info_*: the build facts agree with configure's config.h, the backends with
 * the device registry, lookups by index and by name agree, and bad input returns the
 * named codes. Needs no context and no MPI, so it calls neither. */
#include "config.h"

#include "backends/device.h"
#include "tests/harness/test_util.h"

/* What config.h says, written independently of backends/info.c. */
static int configured(gaaw_feature_t f)
{
  switch (f) {
#ifdef GAAW_HAVE_CBLAS
  case GAAW_FEATURE_CBLAS: return 1;
#endif
#ifdef GAAW_HAVE_OPENCL
  case GAAW_FEATURE_OPENCL: return 1;
#endif
#ifdef GAAW_HAVE_CLBLAST
  case GAAW_FEATURE_CLBLAST: return 1;
#endif
#ifdef GAAW_HAVE_CUDA
  case GAAW_FEATURE_CUDA: return 1;
#endif
#ifdef GAAW_HAVE_NCCL
  case GAAW_FEATURE_NCCL: return 1;
#endif
  default: return 0;
  }
}

static void test_features(void)
{
  static const char *const want_names[GAAW_FEATURE_COUNT] = {"cblas", "openmp", "opencl", "clblast",
                                                             "cuda",  "nccl",   "fortran"};
  for (int f = 0; f < GAAW_FEATURE_COUNT; f++) {
    const char *name = NULL;
    int enabled = -1, by_name = -1;
    expect_status(gaaw_info_feature((gaaw_feature_t)f, &name, &enabled), GAAW_SUCCESS);
    expect_true(name && strcmp(name, want_names[f]) == 0, "feature %d is named '%s', expected '%s'", f,
                name ? name : "(null)", want_names[f]);
    expect_true(enabled == 0 || enabled == 1, "feature %d: enabled = %d", f, enabled);
    /* OpenMP and Fortran depend on how the library (not this test) was compiled. */
    if (f != GAAW_FEATURE_OPENMP && f != GAAW_FEATURE_FORTRAN)
      expect_true(enabled == configured((gaaw_feature_t)f), "feature %s: enabled = %d, config.h says %d",
                  want_names[f], enabled, configured((gaaw_feature_t)f));
    expect_status(gaaw_info_feature_by_name(want_names[f], &by_name), GAAW_SUCCESS);
    expect_true(by_name == enabled, "feature %s: by name %d, by index %d", want_names[f], by_name, enabled);
  }
  /* Names are case-insensitive; outputs may be NULL. */
  int upper = -1, lower = -2;
  expect_status(gaaw_info_feature_by_name("CBlas", &upper), GAAW_SUCCESS);
  expect_status(gaaw_info_feature_by_name("cblas", &lower), GAAW_SUCCESS);
  expect_true(upper == lower, "CBlas gives %d, cblas %d", upper, lower);
  expect_status(gaaw_info_feature(GAAW_FEATURE_CUDA, NULL, NULL), GAAW_SUCCESS);
}

static void test_feature_bad_input(void)
{
  int enabled = 7;
  const char *name = "untouched";
  expect_status(gaaw_info_feature((gaaw_feature_t)-1, &name, &enabled), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(NULL), "-1") != NULL, "report does not name -1: %s", gaaw_last_error(NULL));
  expect_status(gaaw_info_feature((gaaw_feature_t)GAAW_FEATURE_COUNT, &name, &enabled), GAAW_ERR_INVALID_ARG);
  expect_true(enabled == 7 && strcmp(name, "untouched") == 0, "outputs written on failure: %d '%s'", enabled, name);
  expect_status(gaaw_info_feature_by_name(NULL, &enabled), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_info_feature_by_name("cblas", NULL), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_info_feature_by_name("no_such_feature", &enabled), GAAW_ERR_NOT_FOUND);
  expect_true(strstr(gaaw_last_error(NULL), "no_such_feature") != NULL, "report does not name the feature: %s",
              gaaw_last_error(NULL));
  expect_status(gaaw_info_feature_by_name("cblasx", &enabled), GAAW_ERR_NOT_FOUND);
  expect_status(gaaw_info_feature_by_name("", &enabled), GAAW_ERR_NOT_FOUND);
}

static void test_backends(void)
{
  int n_registry = -1;
  const gaaw_device_ops *const *all = gaaw_device_backends(&n_registry);
  int n = gaaw_info_backend_count();
  expect_true(n == n_registry && n >= 1, "gaaw_info_backend_count() = %d, registry has %d", n, n_registry);
  int saw_host = 0;
  for (int i = 0; i < n && i < n_registry; i++) {
    const char *name = NULL;
    int devices = -1, reference = -1;
    expect_status(gaaw_info_backend(i, &name, &devices), GAAW_SUCCESS);
    expect_true(name && strcmp(name, all[i]->name) == 0, "backend %d is '%s', registry says '%s'", i,
                name ? name : "(null)", all[i]->name);
    expect_status(all[i]->device_count(&reference), GAAW_SUCCESS);
    expect_true(devices == reference, "backend %s: %d devices, its device_count says %d", all[i]->name, devices,
                reference);
    if (name && strcmp(name, "host") == 0) {
      saw_host = 1;
      expect_true(devices == 1, "the host backend sees %d devices, expected 1", devices);
    }
    expect_status(gaaw_info_backend(i, NULL, NULL), GAAW_SUCCESS);
  }
  expect_true(saw_host, "the host backend (always built) is not listed");
}

static void test_backend_bad_input(void)
{
  int n = gaaw_info_backend_count();
  const char *name = "untouched";
  int devices = 7;
  expect_status(gaaw_info_backend(-1, &name, &devices), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(NULL), "-1") != NULL, "report does not name -1: %s", gaaw_last_error(NULL));
  expect_status(gaaw_info_backend(n, &name, &devices), GAAW_ERR_INVALID_ARG);
  expect_true(devices == 7 && strcmp(name, "untouched") == 0, "outputs written on failure: %d '%s'", devices, name);
}

int main(void)
{
  test_features();
  test_feature_bad_input();
  test_backends();
  test_backend_bad_input();
  return test_finish("test_info");
}
