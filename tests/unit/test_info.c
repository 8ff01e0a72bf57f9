/* gaaw_info_*: the build facts agree with configure's config.h, the backends with
 * the device registry, lookups by index and by name agree, the host device agrees
 * with /proc (read here independently), and bad input returns the named codes.
 * Needs no context and no MPI, so it calls neither. */
#include "config.h"

#include <stdio.h>

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

/* The value of the first line of a /proc file that starts with key, as text
 * after the colon (malloc'd; NULL when absent). */
static char *proc_value(const char *file, const char *key)
{
  FILE *f = fopen(file, "r");
  if (!f) return NULL;
  char line[8192], *out = NULL;
  while (!out && fgets(line, sizeof line, f))
    if (strncmp(line, key, strlen(key)) == 0 && strchr(line, ':')) {
      char *v = strchr(line, ':') + 1;
      v += strspn(v, " \t");
      v[strcspn(v, "\n")] = '\0';
      out = strdup(v);
    }
  fclose(f);
  return out;
}

/* How many lines of /proc/cpuinfo start with "processor". */
static int proc_processors(void)
{
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return -1;
  char line[8192];
  int n = 0;
  while (fgets(line, sizeof line, f)) n += strncmp(line, "processor", 9) == 0;
  fclose(f);
  return n;
}

static void check_host_device(const gaaw_device_info_t *d)
{
  char *model = proc_value("/proc/cpuinfo", "model name"), *mem = proc_value("/proc/meminfo", "MemTotal");
  char *flags = proc_value("/proc/cpuinfo", "flags");
  if (model) expect_true(strcmp(d->name, model) == 0, "host device is named '%s', /proc/cpuinfo says '%s'", d->name, model);
  if (mem) {
    double kib = atof(mem), got = (double)d->memory_bytes / 1024;
    expect_true(fabs(got - kib) <= 1024, "host memory %.0f KiB, /proc/meminfo MemTotal %.0f KiB", got, kib);
  }
  int cpus = proc_processors();
  if (cpus > 0) expect_true(d->compute_units == cpus, "host compute units %d, /proc/cpuinfo lists %d", d->compute_units, cpus);
  if (flags) {
    int fp16 = strstr(flags, " avx512_fp16") != NULL, bf16 = strstr(flags, " avx512_bf16") || strstr(flags, " amx_bf16");
    expect_true(d->fp16 == fp16 && d->bf16 == bf16, "host fp16 %d bf16 %d, /proc/cpuinfo flags say %d %d", d->fp16,
                d->bf16, fp16, bf16);
  }
  free(model);
  free(mem);
  free(flags);
}

/* Every device of every backend describes itself, the same way twice. */
static void test_devices(void)
{
  int n = gaaw_info_backend_count(), host_seen = 0;
  for (int b = 0; b < n; b++) {
    const char *name;
    int devices = 0;
    if (gaaw_info_backend(b, &name, &devices) != GAAW_SUCCESS) continue;
    for (int i = 0; i < devices; i++) {
      gaaw_device_info_t d, again;
      memset(&again, 0x5a, sizeof again);
      expect_status(gaaw_info_device(b, i, &d), GAAW_SUCCESS);
      expect_status(gaaw_info_device(b, i, &again), GAAW_SUCCESS);
      expect_true(memcmp(&d, &again, sizeof d) == 0, "%s device %d: two calls differ", name, i);
      expect_true(d.name[0] != '\0' && memchr(d.name, '\0', sizeof d.name) != NULL, "%s device %d: empty name", name, i);
      expect_true(d.memory_bytes > 0 && d.compute_units >= 1, "%s device %d: %llu bytes, %d compute units", name, i,
                  (unsigned long long)d.memory_bytes, d.compute_units);
      expect_true((d.fp16 == 0 || d.fp16 == 1) && (d.bf16 == 0 || d.bf16 == 1), "%s device %d: fp16 %d bf16 %d", name,
                  i, d.fp16, d.bf16);
      if (strcmp(name, "host") == 0) check_host_device(&d), host_seen = 1;
    }
  }
  expect_true(host_seen, "the host device was not described");
}

static void test_device_bad_input(void)
{
  int n = gaaw_info_backend_count(), host = -1;
  for (int b = 0; b < n; b++) {
    const char *name;
    if (gaaw_info_backend(b, &name, NULL) == GAAW_SUCCESS && strcmp(name, "host") == 0) host = b;
  }
  gaaw_device_info_t d;
  memset(&d, 0x5a, sizeof d);
  unsigned char untouched[sizeof d];
  memcpy(untouched, &d, sizeof d);
  const int E = GAAW_ERR_INVALID_ARG;
  expect_status(gaaw_info_device(-1, 0, &d), E);
  expect_true(strstr(gaaw_last_error(NULL), "-1") != NULL, "report does not name backend -1: %s", gaaw_last_error(NULL));
  expect_status(gaaw_info_device(n, 0, &d), E);
  expect_status(gaaw_info_device(host, -1, &d), E);
  expect_true(strstr(gaaw_last_error(NULL), "-1") != NULL, "report does not name device -1: %s", gaaw_last_error(NULL));
  expect_status(gaaw_info_device(host, 1, &d), E); /* the host backend has one device */
  expect_true(strstr(gaaw_last_error(NULL), "host") != NULL, "report does not name the backend: %s", gaaw_last_error(NULL));
  expect_status(gaaw_info_device(host, 0, NULL), E);
  expect_true(memcmp(&d, untouched, sizeof d) == 0, "info written on failure");
  /* a backend with no device here (CUDA without a GPU): any index is out of range */
  for (int b = 0; b < n; b++) {
    int devices = -1;
    if (gaaw_info_backend(b, NULL, &devices) == GAAW_SUCCESS && devices == 0)
      expect_status(gaaw_info_device(b, 0, &d), E);
  }
}

int main(void)
{
  test_features();
  test_feature_bad_input();
  test_backends();
  test_backend_bad_input();
  test_devices();
  test_device_bad_input();
  return test_finish("test_info");
}
