/* Where the shard's optimizer state lives, behind an ops table (option
 * offload_optimizer): the f32 master weights and the moments of each bucket's
 * piece, and how a piece's update runs there. The step, the checkpoints and the
 * optimizer's creation go through it and never ask which store it is.
 *   device  the backend's buffers; the update is the backend's kernel (default)
 *   host    host memory; the reduced gradient piece comes to host, CPU Adam
 *           (zero/cpu_update.h) updates it, the new compute-dtype piece goes back
 *   nvme    a file per rank under nvme_path (zero/nvme_file.h), pieces read ahead
 *           and written behind through host slots; the update as the host's */
#ifndef GAAW_ZERO_STORE_H
#define GAAW_ZERO_STORE_H

#include "zero/cpu_update.h"

/* What a store's state takes for a planned optimizer (its shard_numel, buckets,
 * cfg, dtype; no memory): device bytes (category optimizer, one entry per buffer
 * in the order it allocates them), host and nvme bytes, and the device workspace
 * one piece's update allocates at the step (the memory estimate). */
#define ZERO_STORE_MAX_BUFFERS 4
typedef struct {
  int64_t device[ZERO_STORE_MAX_BUFFERS];
  int ndevice;
  int64_t host, nvme, update_workspace;
} zero_store_bytes;

typedef struct zero_store_ops {
  const char *name; /* the option's value */
  /* Allocates the state of the whole shard: moments zero, master weights from the
   * shard's parameters (after gaaw_zero_attach). */
  gaaw_status_t (*create)(gaaw_optimizer_t opt);
  /* Bucket b's piece: the reduced gradient in, the master weights and moments
   * updated, the updated weights out into its parameter piece. */
  gaaw_status_t (*update)(gaaw_optimizer_t opt, int b, const gaaw_cpu_update_args *args);
  /* After the step's updates (also after a failed one): waits for what the updates
   * left in flight. NULL: nothing is. */
  gaaw_status_t (*finish)(gaaw_optimizer_t opt);
  /* Bucket b's piece to and from host arrays of piece elements (checkpoints):
   * values are the f32 weights (the master, or the f32 parameters); m2 is NULL
   * for SGD. write also sets the parameter piece, rounded as a step rounds. */
  gaaw_status_t (*read)(gaaw_optimizer_t opt, int b, float *values, float *m1, float *m2);
  gaaw_status_t (*write)(gaaw_optimizer_t opt, int b, const float *values, const float *m1, const float *m2);
  /* Frees the state (destroy; also after a failed create). */
  void (*destroy)(gaaw_optimizer_t opt);
  /* 1 when an update can fail on one rank alone (a file's I/O): the step then
   * agrees on the updates' outcome before the all-gather, so that no rank waits
   * in it for one that failed. */
  int local_failures;
  /* What create would allocate and update use, without allocating. */
  void (*bytes)(gaaw_optimizer_t opt, zero_store_bytes *out);
} zero_store_ops;

extern const zero_store_ops gaaw_zero_store_device;
extern const zero_store_ops gaaw_zero_store_host;
extern const zero_store_ops gaaw_zero_store_nvme;

/* The store an offload_optimizer value names, or NULL. */
const zero_store_ops *gaaw_zero_store_find(const char *name);

/* The CPU stores' (host, nvme) piece of bucket b: its f32 state and host staging
 * for the compute-dtype gradient in and weights out (the largest piece each). */
typedef struct {
  float *w, *m1, *m2; /* (piece) master weights and moments; m2 NULL for SGD */
  void *grad, *out;
  gaaw_cpu_simd simd;
} zero_cpu_piece;

/* zero/store_cpu.c: the largest bucket piece (at least 1); bucket b's update on the
 * CPU (the reduced gradient piece to host, CPU Adam, the new piece back); the
 * parameter piece to f32 and back (rounded as a step rounds). */
int64_t gaaw_zero_largest_piece(gaaw_optimizer_t opt);
gaaw_status_t gaaw_zero_cpu_update_piece(gaaw_optimizer_t opt, int b, const gaaw_cpu_update_args *args,
                                         const zero_cpu_piece *piece);
gaaw_status_t gaaw_zero_param_piece_to_f32(gaaw_optimizer_t opt, int b, void *staging, float *w);
gaaw_status_t gaaw_zero_param_piece_from_f32(gaaw_optimizer_t opt, int b, const float *w, void *staging);

#endif
