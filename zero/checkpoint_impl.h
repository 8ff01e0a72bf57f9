/* Checkpoint internals (DESIGN.md section 7a), shared by the files that own each
 * part:
 *   checkpoint_runs.c   what a rank owns as runs (tensor, global box, flat range)
 *                       over its host staging; copies between overlapping runs
 *   checkpoint_meta.c   meta.json <-> ckpt_meta (Jansson): the only code that knows
 *                       the JSON, and the metadata's own XXH3-64
 *   checkpoint_dir.c    the save directory: temporary directories, fsyncs,
 *                       renames, `latest`, keep, listing, whole reads and writes
 *                       (POSIX only, no MPI)
 *   checkpoint_save.c   gaaw_checkpoint_save, the background writer, the commit,
 *                       the optimizer's checkpoint state (staging, pending save)
 *   checkpoint_entries.c  the caller's additions: key = value entries, sample buffers
 *   checkpoint_load.c   gaaw_checkpoint_load, gaaw_model_load, the fallback
 * Each calls only the files listed above it. Values are stored as little-endian
 * f32, whatever the compute dtype (the fp32 master weights of a bf16 or f16 run). */
#ifndef GAAW_ZERO_CHECKPOINT_IMPL_H
#define GAAW_ZERO_CHECKPOINT_IMPL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "gaaw/checkpoint.h"
#include "parallel/sampler_impl.h"
#include "zero/zero_impl.h"

/* The stored fields of a tensor: the values (fp32 master weights, or the
 * parameters of an f32 model) and the optimizer's moments (SGD: momentum in
 * exp_avg). */
enum { CKPT_VALUES = 0, CKPT_EXP_AVG = 1, CKPT_EXP_AVG_SQ = 2, CKPT_FIELDS = 3 };
extern const char *const gaaw_ckpt_field_names[CKPT_FIELDS];

/* Part of one tensor: the elements [a, b) of a box of the global tensor, counted
 * row-major inside the box. The box is one tensor-parallel slice (a fused q,k,v
 * weight has one box per block) and may reach past the tensor into vocabulary
 * padding, which is never copied. A 1-D tensor of n is (n, 1). */
typedef struct {
  int tensor;              /* index in the model's catalog (owned) or the metadata's tensors (stored) */
  int field;               /* CKPT_VALUES, ... */
  int64_t r0, nr, c0, nc;  /* the box: global rows [r0, r0 + nr), columns [c0, c0 + nc) */
  int64_t a, b;            /* flat range inside the box */
  int64_t at;              /* owned: the staging element holding element a; stored: byte offset in its file */
  int file;                /* stored: index in the metadata's files */
  uint64_t hash;           /* stored: XXH3-64 of its (b - a) f32 */
} ckpt_run;

/* A flat range of the model's parameter table held in host staging at element at. */
typedef struct {
  int64_t lo, len, at;
} ckpt_range;

/* The most elements of one stored run: a load's read buffer is at most that
 * (64 MiB), whatever the tensors' sizes. */
#define CKPT_RUN_MAX_ELEMENTS ((int64_t)1 << 24)
/* CKPT_RUN_MAX_ELEMENTS, or the test-only GAAW_TEST_CHECKPOINT_RUN_ELEMENTS. */
int64_t gaaw_ckpt_run_limit(void);

/* The runs of table ranges (all fields alike: field is CKPT_VALUES). With save
 * set, only those this rank writes (a replicated parameter on tp rank 0, a tied
 * weight on its first stage), cut into runs of at most gaaw_ckpt_run_limit()
 * elements. Tensor indices are the model's catalog's. */
gaaw_status_t gaaw_ckpt_owned_runs(gaaw_model_t m, const ckpt_range *ranges, int nranges, int save, ckpt_run **runs,
                                   int *nruns);
/* Copies the overlap of stored run s (its f32 in src) into owned run w (its
 * staging at dst[w->at]); rows x cols is the tensor's real shape. Returns the
 * elements copied. */
int64_t gaaw_ckpt_copy_overlap(const ckpt_run *s, const float *src, const ckpt_run *w, float *dst, int64_t rows,
                               int64_t cols);
/* Whether the boxes and flat ranges of two runs share an element of the tensor. */
int gaaw_ckpt_runs_meet(const ckpt_run *s, const ckpt_run *w, int64_t rows, int64_t cols);
/* The real (not padding) elements of run w. */
int64_t gaaw_ckpt_real_elements(const ckpt_run *w, int64_t rows, int64_t cols);
/* The geometry of a catalog entry as (rows, cols). */
void gaaw_ckpt_tensor_dims(int ndim, const int64_t shape[2], int64_t *rows, int64_t *cols);

/* ---- metadata (checkpoint_meta.c) */
typedef struct {
  char name[GAAW_PARAM_NAME_MAX];
  int ndim;
  int64_t shape[2];
  int split_axis, fused_blocks;
} ckpt_tensor;

typedef struct {
  char key[64];
  char *value;
} ckpt_entry;

typedef struct {
  int world_rank;
  int64_t bytes;
} ckpt_file;

/* One replica's sample buffer k: its rows (held, width) f32 at offset of file. */
typedef struct {
  int sampler, dp_rank, file;
  int64_t offset, held, pushed, width;
  uint64_t drawn, hash;
} ckpt_sampler_part;

typedef struct {
  int64_t step;
  /* the layout saved with */
  int world, dp, cp, pp, tp, virtual_stages, zero_stage;
  char pp_layout[128], pp_schedule[32], dtype[16], backend[32];
  /* the model: the builder's name and its config fields as text */
  char model_kind[32];
  int nconfig;
  char config_names[GAAW_AGREE_MAX_FIELDS][32], config_values[GAAW_AGREE_MAX_FIELDS][64];
  /* the optimizer ("none" for a model-only save) and its counters */
  char optimizer[16];
  int64_t steps, updates;
  float lr, grad_norm, loss_scale;
  int skipped, good_steps, overflows_since_change;
  /* normalisation statistics: count 0 and n 0 when none */
  double norm_count;
  int norm_n;
  double *norm_mean, *norm_m2;
  ckpt_entry *entries;
  int nentries;
  int nfields;
  ckpt_tensor *tensors;
  int ntensors;
  ckpt_file *files;
  int nfiles;
  ckpt_run *runs;
  int64_t nruns;
  /* sample buffers (gaaw_checkpoint_add_sampler): their configs, saved with dp
   * replicas, and each replica's part */
  int nsamplers, sampler_dp;
  gaaw_sampler_config_t *sampler_cfg;
  ckpt_sampler_part *sampler_parts;
  int nsampler_parts;
} ckpt_meta;

/* The JSON text of m (malloc'd, NUL-terminated, *bytes without the NUL), with its
 * own XXH3-64 in its first key. */
gaaw_status_t gaaw_ckpt_meta_write(gaaw_context_t ctx, const ckpt_meta *m, char **text, size_t *bytes);
/* Parses and checks meta.json's bytes (any input: a named GAAW_ERR_CORRUPT, never a
 * crash); what names the file for messages. */
gaaw_status_t gaaw_ckpt_meta_read(gaaw_context_t ctx, const char *text, size_t bytes, const char *what,
                                  ckpt_meta *m);
void gaaw_ckpt_meta_free(ckpt_meta *m);

/* ---- the directory (checkpoint_dir.c); every failure is GAAW_ERR_IO naming the path */
/* "step-%08lld" of a canonical name (the whole name, digits only), else -1. */
int64_t gaaw_ckpt_step_of(const char *name);
/* mkdir -p. */
gaaw_status_t gaaw_ckpt_mkdirs(gaaw_context_t ctx, const char *dir);
/* A fresh dir/.tmp-step-NNNNNNNN-XXXXXX; its name (not path) into name[size]. */
gaaw_status_t gaaw_ckpt_make_temp(gaaw_context_t ctx, const char *dir, int64_t step, char *name, size_t size);
/* Writes bytes[n] to a new file path and fsyncs it (parts: count pieces). */
gaaw_status_t gaaw_ckpt_write_file(gaaw_context_t ctx, const char *path, const void *const *parts,
                                   const size_t *sizes, int count);
gaaw_status_t gaaw_ckpt_fsync_dir(gaaw_context_t ctx, const char *dir);
/* Renames dir/from to dir/to, replacing a committed to (the same step saved again). */
gaaw_status_t gaaw_ckpt_commit_rename(gaaw_context_t ctx, const char *dir, const char *from, const char *to);
/* Points dir/latest at name (temp file, fsync, rename, fsync of dir). */
gaaw_status_t gaaw_ckpt_write_latest(gaaw_context_t ctx, const char *dir, const char *name);
/* Reads dir/latest into name[size]: GAAW_ERR_NOT_FOUND when there is none,
 * GAAW_ERR_CORRUPT when it is not a canonical step name. */
gaaw_status_t gaaw_ckpt_read_latest(gaaw_context_t ctx, const char *dir, char *name, size_t size);
/* The steps of dir's committed step-* directories, newest first (malloc'd). */
gaaw_status_t gaaw_ckpt_list_steps(gaaw_context_t ctx, const char *dir, int64_t **steps, int *n);
/* Removes all but the newest keep committed checkpoints (keep 0: none) and never
 * the one of step `committed`; and every .tmp-step-* left by a failed save. */
gaaw_status_t gaaw_ckpt_prune(gaaw_context_t ctx, const char *dir, int keep, int64_t committed);
/* The whole file into a malloc'd buffer (*data, *bytes). */
gaaw_status_t gaaw_ckpt_read_file(gaaw_context_t ctx, const char *path, char **data, size_t *bytes);
/* pread of exactly n bytes at offset from fd (GAAW_ERR_CORRUPT when the file ends first). */
gaaw_status_t gaaw_ckpt_pread(gaaw_context_t ctx, int fd, void *buf, size_t n, int64_t offset, const char *path);
/* Test-only: SIGKILLs this process when GAAW_TEST_CHECKPOINT_KILL names point:
 * before_rename (everything written, nothing committed), after_rename (the step
 * directory committed, `latest` not yet written), before_latest (the new `latest`
 * written to its temporary file, not yet renamed). */
void gaaw_ckpt_test_kill(const char *point);

/* ---- state kept by the optimizer between saves (checkpoint_save.c) */
typedef struct gaaw_ckpt_pending gaaw_ckpt_pending;
struct gaaw_ckpt_state {
  float *staging[CKPT_FIELDS]; /* host copies of the shard, reused from save to save */
  int64_t staging_numel;
  ckpt_entry *entries;         /* the caller's */
  int nentries;
  gaaw_sampler_t *samplers;    /* the caller's sample buffers, saved and loaded with the state */
  int nsamplers;
  gaaw_ckpt_pending *pending;  /* an asynchronous save written but not committed */
};
/* Commits a pending save (a no-op without one). Collective over world. */
gaaw_status_t gaaw_ckpt_commit_pending(gaaw_optimizer_t opt);
/* The optimizer's checkpoint state, created on first use (and its hooks set). */
gaaw_status_t gaaw_ckpt_state_ensure(gaaw_optimizer_t opt);
/* The optimizer's host staging of its shard (allocated on first use, then kept):
 * one array of shard_numel floats per field; a load fills it too. */
gaaw_status_t gaaw_ckpt_staging(gaaw_optimizer_t opt, float ***staging);
/* The two fields (count, configs) on which every rank's sample buffers must agree. */
int gaaw_ckpt_sampler_fields(gaaw_optimizer_t opt, gaaw_field *f);
/* The loaded entries replace the caller's (taken over from meta). */
gaaw_status_t gaaw_ckpt_take_entries(gaaw_optimizer_t opt, ckpt_meta *meta);
/* Frees the state; a pending save is joined and dropped. Not collective. */
void gaaw_ckpt_state_free(gaaw_optimizer_t opt);

/* ---- shared by save and load */
/* This rank's shard of the optimizer as table ranges over the staging (the
 * buckets' pieces, at their shard offsets). */
gaaw_status_t gaaw_ckpt_shard_ranges(gaaw_optimizer_t opt, ckpt_range **ranges, int *n);
/* The fields the optimizer keeps: values and exp_avg (SGD), or exp_avg_sq too. */
int gaaw_ckpt_nfields(gaaw_optimizer_t opt);
/* The layout and model parts of the metadata from the running model. */
void gaaw_ckpt_describe(gaaw_model_t m, ckpt_meta *meta);
/* dir/name into out[size] (GAAW_ERR_INVALID_ARG when too long). */
gaaw_status_t gaaw_ckpt_join(gaaw_context_t ctx, char *out, size_t size, const char *dir, const char *name);

#endif
