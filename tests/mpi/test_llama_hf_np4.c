/* LLaMA-class weights in Hugging Face's layout between gaaw and PyTorch 1.13
 * (tests/reference/llama_hf_reference.py), on 4 ranks, vocabulary 1,001, 4 query
 * heads of 8 over 2 kv heads, dim 24, ffn 64:
 *  - gaaw exports from tp 2 (dp 2), untied and tied (LLaMA-3.2's tied head: no
 *    lm_head.weight in the file, tie_word_embeddings in config.json); PyTorch
 *    loads each file by Hugging Face's names, joining q, k, v and gate, up itself,
 *    and its loss and logits on the batch match gaaw's within 1e-5;
 *  - the tied file imports back into a fresh model bit for bit;
 *  - with export_shard_size=64K the untied export is a sharded set of 3 files
 *    (model-0000K-of-00003.safetensors: the 96 KiB embedding, the 96 KiB head,
 *    the rest) and model.safetensors.index.json
 *    that PyTorch reads through the index with the same loss and logits, and that
 *    gaaw imports back, from the index and from the directory, bit for bit;
 *  - PyTorch writes random weights under those names with a config.json; gaaw
 *    imports them at tp 2 (its logits and loss match PyTorch's) and at pp 2 x tp 2
 *    (its loss does);
 *  - a config.json with LLaMA-3.1's rope_scaling is GAAW_ERR_UNSUPPORTED naming
 *    llama3, and one of another hidden_size GAAW_ERR_INVALID_ARG naming it, on
 *    every rank.
 * Tolerance 1e-5 of the largest |value|: one f32 model against another (RoPE's
 * angles are double in both). Skips (77) when Python or PyTorch is missing. */
#include <mpi.h>
#include <sys/stat.h>

#include "tests/harness/model_util.h"
#include "tests/harness/tensor_file.h"
#include "tests/harness/torch_script.h"

enum { SEQ = 8, B = 2, VOCAB = 1001 };
static int world_rank;
static char dir[64], tokens_path[96], targets_path[96];

static void write_ints(const char *path, const int32_t *v, size_t n)
{
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(v, sizeof *v, n, f) != n) {
    fprintf(stderr, "FATAL: cannot write %s\n", path);
    exit(1);
  }
  fclose(f);
}

static gaaw_model_t llama(gaaw_context_t ctx, int tied)
{
  gaaw_gpt_config_t g = model_tiny_llama(SEQ, 2);
  g.tied_embeddings = tied;
  gaaw_model_t m;
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g, &m));
  return m;
}

/* The reference's mode (read or write) on path; its loss and logits into ref
 * (count in *n). Returns the script's exit status. */
static int reference(const char *mode, const char *path, int tied, tf_tensor **ref, int *n)
{
  char args[1024], out[160];
  snprintf(out, sizeof out, "%s/%s.out", dir, mode);
  snprintf(args, sizeof args, "%s %s %s %s %s %d %d 2 4 2 8 24 64 %d %d %d", mode, path, tokens_path, targets_path,
           out, VOCAB, SEQ, tied, B, SEQ);
  int rc = torch_script_run("llama_hf_reference.py", args);
  *ref = NULL, *n = 0;
  if (rc == 0) *n = tf_read(out, ref);
  return rc;
}

static void expect_reference(const tf_tensor *ref, int n, float loss, const float *logits, const char *what)
{
  char label[160];
  const tf_tensor *l = tf_find(ref, n, "loss"), *z = tf_find(ref, n, "logits");
  expect_true(l && z && z->count == (int64_t)B * SEQ * VOCAB, "%s: the reference has no loss or logits", what);
  if (!l || !z) return;
  snprintf(label, sizeof label, "%s: loss", what);
  expect_close_scaled(&loss, (const float *)l->data, 1, 1e-5, label);
  if (!logits) return;
  snprintf(label, sizeof label, "%s: logits", what);
  expect_close_scaled(logits, (const float *)z->data, (long)z->count, 1e-5, label);
}

/* The parameters of a fresh model that imported path are m's, bit for bit. */
static void expect_imports_back(gaaw_context_t ctx, gaaw_model_t m, int tied, const char *path)
{
  long na, nb;
  float *want = model_snapshot(m, 0, &na);
  gaaw_model_t again = llama(ctx, tied);
  expect_status_ctx(ctx, gaaw_model_import(again, path), GAAW_SUCCESS);
  float *got = model_snapshot(again, 0, &nb);
  expect_true(na == nb && !memcmp(want, got, sizeof(float) * (size_t)na), "%s imported back differs", path);
  free(want);
  free(got);
  gaaw_model_destroy(&again);
}

/* gaaw's export of a randomised model at tp 2, loaded by PyTorch; the tied file
 * imported back. sub: the export's directory under dir ("sharded": cut at 64 KiB
 * by the context's export_shard_size). */
static int check_export(gaaw_context_t ctx, const int32_t *tokens, const int32_t *targets, int tied,
                        const char *sub)
{
  char path[160], what[96], read_path[192];
  snprintf(path, sizeof path, "%s/%s", dir, sub);
  if (world_rank == 0) mkdir(path, 0755);
  snprintf(path, sizeof path, "%s/%s/model.safetensors", dir, sub);
  int sharded = !strcmp(sub, "sharded");
  snprintf(read_path, sizeof read_path, sharded ? "%s/%s/model.safetensors.index.json" : "%s", sharded ? dir : path,
           sub);
  gaaw_model_t m = llama(ctx, tied);
  model_randomise(m, 11 + (uint64_t)tied);
  gaaw_batch_t batch = {.batch = B, .seq = SEQ, .tokens = tokens, .targets = targets};
  float loss, *logits = malloc(sizeof(float) * B * SEQ * VOCAB);
  require_ok(ctx, gaaw_model_forward(m, &batch, &loss));
  require_ok(ctx, gaaw_model_get_logits(m, logits));
  expect_status_ctx(ctx, gaaw_model_export(m, path), GAAW_SUCCESS);
  tf_tensor *ref;
  int n, rc = reference("read", read_path, tied, &ref, &n);
  snprintf(what, sizeof what, "gaaw's %s export (tp 2) in PyTorch", sub);
  expect_true(rc == 0 || rc == 77, "%s: the reference failed (exit %d)", what, rc);
  if (rc == 0) expect_reference(ref, n, loss, logits, what);
  if (ref) tf_free(ref, n);
  if (sharded) {
    struct stat s;
    char first[192], single[192];
    snprintf(first, sizeof first, "%s/%s/model-00001-of-00003.safetensors", dir, sub);
    snprintf(single, sizeof single, "%s/%s/model.safetensors", dir, sub);
    expect_true(stat(first, &s) == 0 && stat(single, &s) != 0,
                "export_shard_size=64K: %s is not there, or model.safetensors is", first);
    expect_imports_back(ctx, m, tied, read_path);
    snprintf(path, sizeof path, "%s/%s", dir, sub); /* the directory */
    expect_imports_back(ctx, m, tied, path);
  }
  if (tied) expect_imports_back(ctx, m, tied, path);
  free(logits);
  gaaw_model_destroy(&m);
  return rc;
}

/* PyTorch's file imported at tp 2 and at pp 2 x tp 2; then bad config.json files. */
static void check_import(const int32_t *tokens, const int32_t *targets)
{
  char path[160], config[160];
  snprintf(path, sizeof path, "%s/torch", dir);
  if (world_rank == 0) mkdir(path, 0755);
  snprintf(path, sizeof path, "%s/torch/model.safetensors", dir);
  snprintf(config, sizeof config, "%s/torch/config.json", dir);
  tf_tensor *ref;
  int n, rc = reference("write", path, 0, &ref, &n);
  expect_true(rc == 0, "the reference failed writing its file (exit %d)", rc);
  if (rc != 0) return;
  const char *layouts[] = {"tp=2", "tp=2 pp=2 microbatches=1"};
  gaaw_batch_t batch = {.batch = B, .seq = SEQ, .tokens = tokens, .targets = targets};
  float *logits = malloc(sizeof(float) * B * SEQ * VOCAB);
  for (int k = 0; k < 2; k++) {
    char options[128], what[96];
    snprintf(options, sizeof options, "backend=host comm_timeout=60 %s", layouts[k]);
    gaaw_context_t ctx = test_context(MPI_COMM_WORLD, options);
    gaaw_model_t m = llama(ctx, 0);
    expect_status_ctx(ctx, gaaw_model_import(m, path), GAAW_SUCCESS);
    float loss;
    require_ok(ctx, gaaw_model_forward(m, &batch, &loss));
    if (k == 0) require_ok(ctx, gaaw_model_get_logits(m, logits));
    snprintf(what, sizeof what, "PyTorch's file imported at %s", layouts[k]);
    expect_reference(ref, n, loss, k == 0 ? logits : NULL, what);
    if (k == 1) { /* last: config.json that the model is not */
      const char *bad[2][2] = {{"{\"model_type\": \"llama\", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0}}",
                                "llama3"},
                               {"{\"model_type\": \"llama\", \"hidden_size\": 32}", "\"hidden_size\" is 32"}};
      for (int b = 0; b < 2; b++) {
        if (world_rank == 0) {
          FILE *f = fopen(config, "w");
          fputs(bad[b][0], f);
          fclose(f);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        gaaw_status_t st = gaaw_model_import(m, path);
        expect_true(st == (b ? GAAW_ERR_INVALID_ARG : GAAW_ERR_UNSUPPORTED) &&
                      strstr(gaaw_last_error(ctx), bad[b][1]) != NULL,
                    "rank %d: config.json %s: status %d, '%s'", world_rank, bad[b][0], (int)st, gaaw_last_error(ctx));
      }
    }
    gaaw_model_destroy(&m);
    gaaw_finalize(&ctx);
  }
  free(logits);
  tf_free(ref, n);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  int pid = (int)getpid(); /* rank 0's names the files */
  MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
  snprintf(dir, sizeof dir, "test_llama_hf.%d", pid);
  snprintf(tokens_path, sizeof tokens_path, "%s/tokens", dir);
  snprintf(targets_path, sizeof targets_path, "%s/targets", dir);
  int32_t tokens[B * SEQ], targets[B * SEQ];
  model_random_batch(B, SEQ, VOCAB, 21, tokens, targets);
  if (world_rank == 0) {
    mkdir(dir, 0755);
    write_ints(tokens_path, tokens, B * SEQ);
    write_ints(targets_path, targets, B * SEQ);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, "backend=host tp=2 comm_timeout=60");
  int rc = check_export(ctx, tokens, targets, 0, "untied");
  if (rc != 77) check_export(ctx, tokens, targets, 1, "tied");
  gaaw_finalize(&ctx);
  ctx = test_context(MPI_COMM_WORLD, "backend=host tp=2 comm_timeout=60 export_shard_size=64K");
  if (rc != 77) check_export(ctx, tokens, targets, 0, "sharded");
  gaaw_finalize(&ctx);
  if (rc != 77) check_import(tokens, targets);
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank == 0 && !test_failures) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", dir);
  }
  if (rc == 77) {
    if (world_rank == 0) fprintf(stderr, "PyTorch (python3-torch) is missing: skipped\n");
    MPI_Finalize();
    return TEST_SKIP;
  }
  return test_finish_mpi("test_llama_hf");
}
