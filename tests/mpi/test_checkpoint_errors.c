/* Checkpoint failures on 2 ranks (built as test_checkpoint_errors_np2): each is the
 * named status on every rank, and a failed load leaves the model as it was.
 *  - damage: a flipped bit in each rank file and in meta.json, a truncated and a
 *    missing rank file, an edited meta.json (resealed with a valid checksum, a
 *    run's range changed; a run's first row past 2^40; a run at file offset 2^60),
 *    a `latest` naming a missing directory, a `latest` that is not a step name:
 *    GAAW_ERR_CORRUPT naming the file (the run bounds: naming the check); with
 *    checkpoint_fallback each loads the previous checkpoint instead;
 *  - bad calls: a NULL or a different directory on one rank, a save between
 *    backward and step, no checkpoint, another model (dim), another optimizer,
 *    gaaw_model_load with an optimizer, bad entries, a too small entry buffer;
 *  - what works besides: entries come back, gaaw_model_load into a model without an
 *    optimizer, checkpoint_keep, checkpoint_async (the files hold the state of the
 *    call, not of the steps after it), sample buffers (dp 2 and tp 2: the same
 *    draws after a load as in the saved run; another capacity refused) and the
 *    normalisation statistics, bitwise. */
#include <dirent.h>
#include <math.h>
#include <mpi.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "tests/harness/checkpoint_util.h"
#include "tests/harness/model_util.h"

enum { SEQ = 8, BATCH = 2 };
static int world_rank;
static char base[256];

typedef struct {
  gaaw_context_t ctx;
  gaaw_model_t model;
  gaaw_optimizer_t opt;
} run;

static run open_run(const char *options, int dim, gaaw_optimizer_kind_t kind)
{
  run r;
  char list[256];
  snprintf(list, sizeof list, "backend=host comm_timeout=60 %s", options);
  r.ctx = test_context(MPI_COMM_WORLD, list);
  gaaw_gpt_config_t g = model_tiny_gpt(SEQ, GAAW_F32);
  g.dim = dim;
  require_ok(r.ctx, gaaw_model_create_gpt(r.ctx, &g, &r.model));
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  oc.kind = kind;
  oc.zero_stage = 1;
  require_ok(r.ctx, gaaw_optimizer_create(r.model, &oc, &r.opt));
  return r;
}

static void close_run(run *r)
{
  gaaw_optimizer_destroy(&r->opt);
  gaaw_model_destroy(&r->model);
  gaaw_finalize(&r->ctx);
}

static void train(run *r, int steps)
{
  model_train(r->ctx, r->model, r->opt, steps, BATCH, SEQ, 40, 7 + (uint64_t)world_rank, 1, (float[16]){0});
}

/* ---- files, on rank 0 only (the others wait at the barrier) */

static void path_of(char *out, size_t size, const char *dir, int step, const char *file)
{
  snprintf(out, size, "%s/step-%08d/%s", dir, step, file);
}

static void flip_bit(const char *path, long at)
{
  FILE *f = fopen(path, "r+b");
  if (!f) exit(1);
  fseek(f, at, SEEK_SET);
  int c = fgetc(f);
  fseek(f, at, SEEK_SET);
  fputc(c ^ 0x10, f);
  fclose(f);
}

static long file_size(const char *path)
{
  struct stat sb;
  return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

/* meta.json with number `index` of the first row of the list `list` ("\"runs\": [[")
 * replaced by value (NULL: its first digit changed, 1 to 2 and else to 1), resealed
 * with a valid checksum. */
static void edit_meta_list(const char *path, const char *list, int index, const char *value)
{
  char *text;
  size_t n;
  require_ok(NULL, gaaw_ckpt_read_file(NULL, path, &text, &n));
  char *runs = strstr(text, list);
  if (!runs) exit(1);
  char *p = runs + strlen(list);
  for (int i = 0; i < index; i++) p = strchr(p, ',') + 1;
  while (*p == ' ') p++;
  size_t at = (size_t)(p - text), old = strspn(p, "0123456789");
  char *out = malloc(n + 32);
  memcpy(out, text, at);
  size_t len = at;
  if (value) {
    len += (size_t)sprintf(out + len, "%s", value);
  } else {
    out[len++] = *p == '1' ? '2' : '1';
    memcpy(out + len, p + 1, old - 1), len += old - 1;
  }
  memcpy(out + len, p + old, n - at - old), len += n - at - old;
  memset(out + strlen("{\"meta_xxh3\": \""), '0', 16);
  char digits[17];
  snprintf(digits, sizeof digits, "%016llx", (unsigned long long)XXH3_64bits(out, len));
  memcpy(out + strlen("{\"meta_xxh3\": \""), digits, 16);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(out, 1, len, f) != len) exit(1);
  fclose(f);
  free(text), free(out);
}

/* The same in the first run, [tensor, field, file, offset, r0, nr, c0, nc, a, b, "hash"]. */
static void edit_meta(const char *path, int index, const char *value)
{
  edit_meta_list(path, "\"runs\": [[", index, value);
}

static void write_text(const char *path, const char *text)
{
  FILE *f = fopen(path, "wb");
  if (!f) exit(1);
  fputs(text, f);
  fclose(f);
}

/* ---- damage: detected and named on every rank, nothing loaded; fallback loads step 2 */

typedef void (*damage_fn)(const char *dir, char *named, size_t size);

static void damage_rank1(const char *dir, char *named, size_t size)
{
  path_of(named, size, dir, 3, "rank-00001.bin");
  flip_bit(named, file_size(named) / 2);
}
static void damage_rank0(const char *dir, char *named, size_t size)
{
  path_of(named, size, dir, 3, "rank-00000.bin");
  flip_bit(named, 5);
}
static void damage_meta_bit(const char *dir, char *named, size_t size)
{
  path_of(named, size, dir, 3, "meta.json");
  flip_bit(named, file_size(named) / 2);
}
static void damage_truncate(const char *dir, char *named, size_t size)
{
  path_of(named, size, dir, 3, "rank-00001.bin");
  if (truncate(named, file_size(named) - 8) != 0) exit(1);
}
static void damage_missing(const char *dir, char *named, size_t size)
{
  path_of(named, size, dir, 3, "rank-00000.bin");
  unlink(named);
}
static void damage_edit(const char *dir, char *named, size_t size)
{
  path_of(named, size, dir, 3, "meta.json");
  edit_meta(named, 9, NULL); /* the run's end, b, moved */
  snprintf(named, size, "step-00000003"); /* the file that no longer matches, or meta.json */
}
/* a run whose first row is past 2^40, the bound of any tensor's rows */
static void damage_run_row(const char *dir, char *named, size_t size)
{
  path_of(named, size, dir, 3, "meta.json");
  edit_meta(named, 4, "1099511627777");
  snprintf(named, size, "has a bad box or range");
}
/* a run at file offset 2^60, the largest offset the box check lets through: the
 * next check finds it past its file */
static void damage_run_offset(const char *dir, char *named, size_t size)
{
  path_of(named, size, dir, 3, "meta.json");
  edit_meta(named, 3, "1152921504606846976");
  snprintf(named, size, "ends past its file");
}
static void damage_latest_missing(const char *dir, char *named, size_t size)
{
  char latest[400];
  snprintf(latest, sizeof latest, "%s/latest", dir);
  write_text(latest, "step-00000009\n");
  snprintf(named, size, "step-00000009");
}
static void damage_latest_garbage(const char *dir, char *named, size_t size)
{
  char latest[400];
  snprintf(latest, sizeof latest, "%s/latest", dir);
  write_text(latest, "../../etc\n");
  snprintf(named, size, "latest");
}

static void damage_case(const char *label, damage_fn damage, int k)
{
  char dir[300], named[400] = "";
  snprintf(dir, sizeof dir, "%s/damage%d", base, k);
  run r = open_run("", 16, GAAW_ADAMW);
  train(&r, 2);
  require_ok(r.ctx, gaaw_checkpoint_save(r.opt, dir));
  long n;
  float *at2 = model_snapshot(r.model, 0, &n);
  train(&r, 1);
  require_ok(r.ctx, gaaw_checkpoint_save(r.opt, dir));
  float *at3 = model_snapshot(r.model, 0, &n);
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank == 0) damage(dir, named, sizeof named);
  MPI_Bcast(named, sizeof named, MPI_CHAR, 0, MPI_COMM_WORLD);
  /* a model that trained on: a failed load must leave it so */
  train(&r, 1);
  float *before = model_snapshot(r.model, 0, &n);
  gaaw_status_t st = gaaw_checkpoint_load(r.opt, dir);
  expect_true(st == GAAW_ERR_CORRUPT, "%s: load returned %s, not GAAW_ERR_CORRUPT", label, gaaw_status_name(st));
  expect_true(strstr(gaaw_last_error(r.ctx), named) != NULL, "%s: the message does not name %s: %s", label, named,
              gaaw_last_error(r.ctx));
  float *after = model_snapshot(r.model, 0, &n);
  expect_true(memcmp(before, after, sizeof(float) * (size_t)n) == 0, "%s: a failed load changed the model", label);
  close_run(&r);
  /* with fallback the previous checkpoint loads (or the newest, for a bad latest) */
  r = open_run("checkpoint_fallback=yes", 16, GAAW_ADAMW);
  expect_status_ctx(r.ctx, gaaw_checkpoint_load(r.opt, dir), GAAW_SUCCESS);
  float *loaded = model_snapshot(r.model, 0, &n);
  const float *want = damage == damage_latest_missing || damage == damage_latest_garbage ? at3 : at2;
  expect_true(memcmp(loaded, want, sizeof(float) * (size_t)n) == 0, "%s: the fallback did not load the %s checkpoint",
              label, want == at3 ? "newest intact" : "previous");
  close_run(&r);
  free(at2), free(at3), free(before), free(after), free(loaded);
}

/* ---- bad calls */

static void bad_calls(void)
{
  char dir[300], other[300];
  snprintf(dir, sizeof dir, "%s/calls", base);
  run r = open_run("", 16, GAAW_ADAMW);
  expect_status_ctx(r.ctx, gaaw_checkpoint_load(r.opt, dir), GAAW_ERR_NOT_FOUND);
  expect_status_ctx(r.ctx, gaaw_checkpoint_save(r.opt, world_rank == 1 ? NULL : dir), GAAW_ERR_INVALID_ARG);
  snprintf(other, sizeof other, "%s/calls-rank%d", base, world_rank);
  expect_status_ctx(r.ctx, gaaw_checkpoint_save(r.opt, world_rank == 1 ? other : dir), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(r.ctx), "dir") != NULL, "a different dir is not named: %s", gaaw_last_error(r.ctx));
  expect_status_ctx(r.ctx, gaaw_checkpoint_set_entry(r.opt, "bad key", "1"), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(r.ctx, gaaw_checkpoint_set_entry(r.opt, "ok", "\xff\xfe"), GAAW_ERR_INVALID_ARG);
  /* an overlong '/' and a UTF-16 surrogate: lead and continuation bytes, still not UTF-8 */
  expect_status_ctx(r.ctx, gaaw_checkpoint_set_entry(r.opt, "ok", "\xc0\xaf"), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(r.ctx, gaaw_checkpoint_set_entry(r.opt, "ok", "\xed\xa0\x80"), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(r.ctx, gaaw_checkpoint_set_entry(r.opt, "ok", "caf\xc3\xa9"), GAAW_SUCCESS);
  expect_status_ctx(r.ctx, gaaw_checkpoint_set_entry(r.opt, "time", "0.125"), GAAW_SUCCESS);
  expect_status_ctx(r.ctx, gaaw_checkpoint_set_entry(r.opt, "timestep", "41"), GAAW_SUCCESS);
  expect_status_ctx(r.ctx, gaaw_checkpoint_set_entry(r.opt, "timestep", "42"), GAAW_SUCCESS);
  /* a save between backward and step */
  int32_t tokens[BATCH * SEQ], targets[BATCH * SEQ];
  model_random_batch(BATCH, SEQ, 40, 3, tokens, targets);
  gaaw_batch_t b = {.batch = BATCH, .seq = SEQ, .tokens = tokens, .targets = targets};
  float loss;
  require_ok(r.ctx, gaaw_model_forward_backward(r.model, &b, &loss));
  expect_status_ctx(r.ctx, gaaw_checkpoint_save(r.opt, dir), GAAW_ERR_STATE);
  require_ok(r.ctx, gaaw_optimizer_step(r.opt));
  require_ok(r.ctx, gaaw_checkpoint_save(r.opt, dir));
  long n;
  float *saved = model_snapshot(r.model, 0, &n);
  close_run(&r);
  /* entries come back; a buffer too small is refused */
  r = open_run("", 16, GAAW_ADAMW);
  char value[8];
  expect_status_ctx(r.ctx, gaaw_checkpoint_get_entry(r.opt, "timestep", value, sizeof value), GAAW_ERR_NOT_FOUND);
  expect_status_ctx(r.ctx, gaaw_checkpoint_load(r.opt, dir), GAAW_SUCCESS);
  expect_status_ctx(r.ctx, gaaw_checkpoint_get_entry(r.opt, "timestep", value, sizeof value), GAAW_SUCCESS);
  expect_true(!strcmp(value, "42"), "entry timestep is '%s', not 42", value);
  expect_status_ctx(r.ctx, gaaw_checkpoint_get_entry(r.opt, "time", value, 3), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(r.ctx, gaaw_model_load(r.model, dir), GAAW_ERR_STATE);
  close_run(&r);
  /* another model, another optimizer */
  r = open_run("", 32, GAAW_ADAMW);
  expect_status_ctx(r.ctx, gaaw_checkpoint_load(r.opt, dir), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(r.ctx), "dim is 16 there, 32 here") != NULL, "another dim: %s",
              gaaw_last_error(r.ctx));
  close_run(&r);
  r = open_run("", 16, GAAW_SGD);
  expect_status_ctx(r.ctx, gaaw_checkpoint_load(r.opt, dir), GAAW_ERR_INVALID_ARG);
  close_run(&r);
  /* a model without an optimizer, for inference, on a different tp */
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, "backend=host tp=2");
  gaaw_gpt_config_t g = model_tiny_gpt(SEQ, GAAW_F32);
  gaaw_model_t model;
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g, &model));
  expect_status_ctx(ctx, gaaw_model_load(model, dir), GAAW_SUCCESS);
  float *loaded = model_snapshot(model, 0, &n);
  expect_true(memcmp(loaded, saved, sizeof(float) * (size_t)n) == 0, "gaaw_model_load at tp 2: other parameters");
  free(loaded), free(saved);
  gaaw_model_destroy(&model);
  gaaw_finalize(&ctx);
}

/* Every name in dir but . and .. (temporary ones included). */
static int count_entries(const char *dir)
{
  DIR *d = opendir(dir);
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));) n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
  if (d) closedir(d);
  return n;
}

/* ---- keep and async */

static int count_steps(const char *dir)
{
  int64_t *steps;
  int n = 0;
  if (gaaw_ckpt_list_steps(NULL, dir, &steps, &n) == GAAW_SUCCESS) free(steps);
  return n;
}

static void keep_and_async(void)
{
  char dir[300];
  snprintf(dir, sizeof dir, "%s/keep", base);
  run r = open_run("checkpoint_keep=2", 16, GAAW_ADAMW);
  for (int i = 0; i < 4; i++) {
    train(&r, 1);
    require_ok(r.ctx, gaaw_checkpoint_save(r.opt, dir));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  expect_true(count_steps(dir) == 2, "checkpoint_keep=2 left %d checkpoints", count_steps(dir));
  close_run(&r);

  snprintf(dir, sizeof dir, "%s/async", base);
  r = open_run("checkpoint_async=yes", 16, GAAW_ADAMW);
  train(&r, 2);
  long n;
  float *at_call = model_snapshot(r.model, 0, &n);
  require_ok(r.ctx, gaaw_checkpoint_save(r.opt, dir));
  train(&r, 2); /* the first of these steps commits the save */
  require_ok(r.ctx, gaaw_checkpoint_save(r.opt, dir));
  require_ok(r.ctx, gaaw_checkpoint_wait(r.opt));
  float *at_end = model_snapshot(r.model, 0, &n);
  close_run(&r);
  char step2[400];
  snprintf(step2, sizeof step2, "%s/step-00000002", dir);
  r = open_run("", 16, GAAW_ADAMW);
  expect_status_ctx(r.ctx, gaaw_checkpoint_load(r.opt, step2), GAAW_SUCCESS);
  float *loaded = model_snapshot(r.model, 0, &n);
  expect_true(memcmp(loaded, at_call, sizeof(float) * (size_t)n) == 0,
              "checkpoint_async: step 2's files do not hold the state of the call");
  free(loaded);
  expect_status_ctx(r.ctx, gaaw_checkpoint_load(r.opt, dir), GAAW_SUCCESS);
  loaded = model_snapshot(r.model, 0, &n);
  expect_true(memcmp(loaded, at_end, sizeof(float) * (size_t)n) == 0, "checkpoint_async: latest is not step 4");
  free(loaded), free(at_call), free(at_end);
  close_run(&r);
}

/* ---- sample buffers */

typedef struct {
  run r;
  gaaw_sampler_t samples;
} sampled;

static sampled open_sampled(const char *options, int64_t capacity)
{
  sampled s;
  char list[256];
  snprintf(list, sizeof list, "backend=host comm_timeout=60 %s", options);
  s.r.ctx = test_context(MPI_COMM_WORLD, list);
  gaaw_mlp_config_t mc = {.nsizes = 3, .sizes = {3, 8, 2}, .activation = GAAW_ACT_GELU, .seed = 5};
  require_ok(s.r.ctx, gaaw_model_create_mlp(s.r.ctx, &mc, &s.r.model));
  gaaw_optimizer_config_t oc;
  gaaw_optimizer_config_default(&oc);
  require_ok(s.r.ctx, gaaw_optimizer_create(s.r.model, &oc, &s.r.opt));
  gaaw_sampler_config_t sc;
  gaaw_sampler_config_default(&sc);
  sc.inputs = 3, sc.outputs = 2, sc.capacity = capacity, sc.policy = GAAW_SAMPLER_RESERVOIR;
  require_ok(s.r.ctx, gaaw_sampler_create(s.r.ctx, &sc, &s.samples));
  require_ok(s.r.ctx, gaaw_checkpoint_add_sampler(s.r.opt, s.samples));
  return s;
}

static void close_sampled(sampled *s)
{
  gaaw_sampler_destroy(&s->samples);
  close_run(&s->r);
}

/* After a load, a reservoir buffer holds what it held and draws what the saved
 * run drew next, bit for bit (dp 2: a buffer per replica; tp 2: one buffer on
 * both ranks, written once); another capacity is refused, naming it. */
static void sample_buffers(const char *options, const char *label)
{
  char dir[300];
  snprintf(dir, sizeof dir, "%s/samples-%s", base, label);
  enum { PUSH = 40, DRAW = 6 };
  float x[PUSH * 3], y[PUSH * 2], want_x[3][DRAW * 3], want_y[3][DRAW * 2], got_x[DRAW * 3], got_y[DRAW * 2];
  for (int i = 0; i < PUSH * 3; i++) x[i] = (float)(i * 7 % 31) + 100.0f * (float)world_rank;
  for (int i = 0; i < PUSH * 2; i++) y[i] = (float)(i % 13);
  sampled s = open_sampled(options, 50);
  for (int t = 0; t < 3; t++) require_ok(s.r.ctx, gaaw_sampler_push(s.samples, PUSH, x, y));
  require_ok(s.r.ctx, gaaw_sampler_draw(s.samples, DRAW, got_x, got_y));
  /* the statistics' batch is the replica's: the same on both ranks of a tp group */
  float sx[PUSH * 3];
  for (int i = 0; i < PUSH * 3; i++) sx[i] = (float)(i * 7 % 31);
  gaaw_batch_t stats_batch = {.batch = PUSH, .inputs = sx, .outputs = y};
  require_ok(s.r.ctx, gaaw_model_normalization_update(s.r.model, &stats_batch));
  double count, count2, mean[5], mean2[5], sd[5], sd2[5];
  require_ok(s.r.ctx, gaaw_model_normalization_stats(s.r.model, &count, mean, sd));
  require_ok(s.r.ctx, gaaw_checkpoint_save(s.r.opt, dir));
  int64_t held, pushed, held2, pushed2;
  require_ok(s.r.ctx, gaaw_sampler_size(s.samples, &held, &pushed));
  for (int t = 0; t < 3; t++) require_ok(s.r.ctx, gaaw_sampler_draw(s.samples, DRAW, want_x[t], want_y[t]));
  close_sampled(&s);
  s = open_sampled(options, 50);
  /* the load replaces what the buffer held (else a buffer reusing the freed one's
   * memory could pass for a loaded one) */
  for (int i = 0; i < PUSH * 3; i++) x[i] = -1.0f - x[i];
  require_ok(s.r.ctx, gaaw_sampler_push(s.samples, PUSH, x, y));
  expect_status_ctx(s.r.ctx, gaaw_checkpoint_load(s.r.opt, dir), GAAW_SUCCESS);
  require_ok(s.r.ctx, gaaw_sampler_size(s.samples, &held2, &pushed2));
  require_ok(s.r.ctx, gaaw_model_normalization_stats(s.r.model, &count2, mean2, sd2));
  expect_true(count2 == count && !memcmp(mean, mean2, sizeof mean) && !memcmp(sd, sd2, sizeof sd),
              "%s: the normalisation statistics after the load differ (count %g, saved %g)", label, count2, count);
  expect_true(held2 == held && pushed2 == pushed, "%s: the loaded buffer holds %lld of %lld pushed, not %lld of %lld",
              label, (long long)held2, (long long)pushed2, (long long)held, (long long)pushed);
  for (int t = 0; t < 3; t++) {
    require_ok(s.r.ctx, gaaw_sampler_draw(s.samples, DRAW, got_x, got_y));
    expect_true(!memcmp(got_x, want_x[t], sizeof got_x) && !memcmp(got_y, want_y[t], sizeof got_y),
                "%s: draw %d after the load differs from the saved run's", label, t);
  }
  close_sampled(&s);
  s = open_sampled(options, 60);
  expect_status_ctx(s.r.ctx, gaaw_checkpoint_load(s.r.opt, dir), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(s.r.ctx), "capacity 50 there, 60 here") != NULL, "%s: another capacity: %s",
              label, gaaw_last_error(s.r.ctx));
  close_sampled(&s);
  if (strcmp(label, "dp2") != 0) return;
  /* meta.json's sample buffers [sampler, dp rank, ...] both of dp rank 1: dp rank 0's
   * is missing, named there, and every rank fails */
  char meta[400];
  path_of(meta, sizeof meta, dir, 0, "meta.json");
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank == 0) edit_meta_list(meta, "\"parts\": [[", 1, "1");
  MPI_Barrier(MPI_COMM_WORLD);
  s = open_sampled(options, 50);
  expect_status_ctx(s.r.ctx, gaaw_checkpoint_load(s.r.opt, dir), GAAW_ERR_CORRUPT);
  expect_true(world_rank != 0 || strstr(gaaw_last_error(s.r.ctx), "meta.json has no sample buffer 0 of dp rank 0"),
              "%s: a missing sample buffer: %s", label, gaaw_last_error(s.r.ctx));
  close_sampled(&s);
}

/* A run whose gradients overflowed still saves a checkpoint that loads (JSON has
 * no infinity: meta.json stores "inf" and "nan"), and the non-finite norm comes
 * back as it was. (The normalisation statistics refuse non-finite inputs.) */
static void non_finite(void)
{
  char dir[300];
  snprintf(dir, sizeof dir, "%s/non-finite", base);
  float x[4 * 3] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3}, y[4 * 2] = {3e38f, -3e38f, 3e38f, 1, 2, 3, 4, 5};
  gaaw_batch_t batch = {.batch = 4, .inputs = x, .outputs = y};
  sampled s = open_sampled("", 50);
  float loss;
  require_ok(s.r.ctx, gaaw_model_forward_backward(s.r.model, &batch, &loss));
  require_ok(s.r.ctx, gaaw_optimizer_step(s.r.opt));
  gaaw_step_stats_t saved, loaded;
  require_ok(s.r.ctx, gaaw_optimizer_stats(s.r.opt, &saved));
  double count, mean[5], sd[5]; /* 3 inputs and 2 outputs */
  require_ok(s.r.ctx, gaaw_model_normalization_stats(s.r.model, &count, mean, sd));
  expect_true(saved.skipped && !isfinite(saved.grad_norm), "non-finite: the setup did not overflow (grad_norm %g)",
              saved.grad_norm);
  expect_status_ctx(s.r.ctx, gaaw_checkpoint_save(s.r.opt, dir), GAAW_SUCCESS);
  /* the same step again where the filesystem has no atomic exchange (NFS): the
   * old one is set aside, and nothing temporary is left */
  setenv("GAAW_TEST_CHECKPOINT_NO_EXCHANGE", "1", 1);
  expect_status_ctx(s.r.ctx, gaaw_checkpoint_save(s.r.opt, dir), GAAW_SUCCESS);
  unsetenv("GAAW_TEST_CHECKPOINT_NO_EXCHANGE");
  MPI_Barrier(MPI_COMM_WORLD);
  expect_true(count_entries(dir) == 2, "non-finite: %d entries after saving step 1 twice, not step-00000001 and latest",
              count_entries(dir));
  close_sampled(&s);
  s = open_sampled("", 50);
  expect_status_ctx(s.r.ctx, gaaw_checkpoint_load(s.r.opt, dir), GAAW_SUCCESS);
  require_ok(s.r.ctx, gaaw_optimizer_stats(s.r.opt, &loaded));
  double count2, mean2[5], sd2[5];
  require_ok(s.r.ctx, gaaw_model_normalization_stats(s.r.model, &count2, mean2, sd2));
  expect_true(isinf(loaded.grad_norm) == isinf(saved.grad_norm) && isnan(loaded.grad_norm) == isnan(saved.grad_norm),
              "non-finite: grad_norm %g after the load, %g saved", loaded.grad_norm, saved.grad_norm);
  for (int i = 0; i < 5; i++)
    expect_true(count2 == count && (mean2[i] == mean[i] || (isnan(mean2[i]) && isnan(mean[i]))) &&
                  (sd2[i] == sd[i] || (isnan(sd2[i]) && isnan(sd[i]))),
                "non-finite: statistic %d is mean %g sd %g after the load, %g %g saved", i, mean2[i], sd2[i], mean[i],
                sd[i]);
  close_sampled(&s);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  ckpt_test_dir(base, sizeof base, "ckpt-errors-");
  static const struct {
    const char *label;
    damage_fn damage;
  } cases[] = {
    {"a flipped bit in rank-00001.bin", damage_rank1},   {"a flipped bit in rank-00000.bin", damage_rank0},
    {"a flipped bit in meta.json", damage_meta_bit},     {"a truncated rank-00001.bin", damage_truncate},
    {"a missing rank-00000.bin", damage_missing},        {"an edited meta.json", damage_edit},
    {"latest naming a missing step", damage_latest_missing}, {"latest not a step name", damage_latest_garbage},
    {"a run's first row past 2^40", damage_run_row},      {"a run at file offset 2^60", damage_run_offset},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) damage_case(cases[k].label, cases[k].damage, (int)k);
  bad_calls();
  keep_and_async();
  sample_buffers("", "dp2");
  sample_buffers("tp=2", "tp2");
  non_finite();
  ckpt_test_dir_remove(base);
  return test_finish_mpi("test_checkpoint_errors");
}
