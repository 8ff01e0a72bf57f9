/* libFuzzer target: gaaw-train's config file reader (examples/train/options.c). The
 * first byte of the input picks the world size (1..8), the rest is the file, which
 * train_options_load reads through --config. Whatever the file, it returns "ok" or
 * "bad options" (2) with a message, never crashes or reads past its buffers. */
#define _GNU_SOURCE /* memfd_create */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "examples/train/options.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(int cond, const char *what, const char *err)
{
  if (cond) return;
  fprintf(stderr, "fuzz_train_config: %s (message '%s')\n", what, err);
  abort();
}

/* One file in memory for every input (memfd: a file on disk, truncated and rewritten
 * each time, makes ext4 wait for writeback), read through its /proc name. */
static int config_fd = -1;
static char config_path[64];

static int open_config_file(void)
{
  config_fd = memfd_create("gaaw-fuzz-config", 0);
  if (config_fd < 0) return -1;
  snprintf(config_path, sizeof config_path, "/proc/self/fd/%d", config_fd);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (config_fd < 0 && open_config_file() != 0) {
    perror("fuzz_train_config: cannot create the config file");
    abort();
  }
  int world = size ? 1 + data[0] % 8 : 1;
  const uint8_t *text = size ? data + 1 : data;
  size_t len = size ? size - 1 : 0;
  if (ftruncate(config_fd, 0) != 0 || pwrite(config_fd, text, len, 0) != (ssize_t)len) {
    perror("fuzz_train_config: cannot write the config file");
    abort();
  }
  char *argv[] = {"gaaw-train", "--config", config_path, NULL};
  gaaw_config_t cfg = NULL;
  if (gaaw_config_create(&cfg) != GAAW_SUCCESS) return 0;
  train_options opts;
  char err[512];
  int help = -1;
  memset(err, 'x', sizeof err);
  /* a node of 16 GiB, so that the memory estimate is fuzzed too */
  train_machine machine = {world, 1, 16.0 * (1 << 30)};
  int rc = train_options_load(&opts, cfg, 3, argv, &machine, &help, err, sizeof err);
  require(memchr(err, '\0', sizeof err) != NULL, "the message is not terminated", "");
  require(rc == TRAIN_EXIT_OK || rc == TRAIN_EXIT_USAGE, "a status other than ok or bad options", err);
  require(rc == TRAIN_EXIT_OK || err[0] != '\0', "bad options without a message", err);
  require(help == 0, "--help was seen in a config file", err);
  gaaw_config_destroy(&cfg);
  return 0;
}
