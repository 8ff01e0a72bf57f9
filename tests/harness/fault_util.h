/* The fault shim's controls (tests/harness/fault_inject.c), looked up at run time: a
 * test program runs with the shim preloaded or without it, and without it both are
 * NULL. gaaw_fault_set(SPEC) replaces the rules and counts from zero again;
 * gaaw_fault_window(1 / 0) opens and closes the window outside which nothing counts,
 * returning the uses counted so far. */
#ifndef GAAW_TEST_FAULT_UTIL_H
#define GAAW_TEST_FAULT_UTIL_H

#include <dlfcn.h>

typedef int (*fault_set_fn)(const char *spec);
typedef long (*fault_window_fn)(int open);

static inline fault_set_fn fault_shim_set(void)
{
  return (fault_set_fn)dlsym(RTLD_DEFAULT, "gaaw_fault_set");
}

static inline fault_window_fn fault_shim_window(void)
{
  return (fault_window_fn)dlsym(RTLD_DEFAULT, "gaaw_fault_window");
}

#endif
