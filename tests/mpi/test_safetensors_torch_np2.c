/* safetensors between PyTorch and gaaw (tests/reference/safetensors_reference.py):
 *  - PyTorch writes nanoGPT's state_dict of the reference GPT ("transformer."
 *    names, a tied lm_head.weight, the attn.bias masks) as F32 and as BF16; gaaw
 *    imports each under tp 2 and its logits match PyTorch's within 1e-5 (the BF16
 *    file against PyTorch's logits of the bf16-rounded weights);
 *  - gaaw exports a GPT of its own (tp 2); PyTorch loads the file and its logits
 *    match gaaw's;
 *  - Hugging Face's GPT-2 layout (gpt2_names=hf): PyTorch's file as the Hub's
 *    gpt2 holds it (Conv1D weights transposed, no prefix) imports at tp 2 with
 *    PyTorch's logits; read with nanoGPT's names it is the named error; a
 *    config.json that says gelu or another n_embd is refused by name; gaaw's BF16
 *    export in that layout loads into PyTorch (names, dtype, config.json checked
 *    there), and imported back into gaaw gives PyTorch's logits of the file.
 * Skips (77) when /usr/bin/python3 or PyTorch is missing. */
#include <mpi.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/harness/model_util.h"
#include "tests/harness/torch_script.h"

enum { VOCAB = 48, SEQ = 8, LAYERS = 2, HEADS = 2, DIM = 16, B = 2 };

static int world_rank;

static int run_reference(const char *args)
{
  return torch_script_run("safetensors_reference.py", args);
}

/* Raw little-endian f32s from path (rank 0 reads, every rank gets them). */
static void read_floats(const char *path, float *v, long n)
{
  int ok = 1;
  if (world_rank == 0) {
    FILE *f = fopen(path, "rb");
    ok = f && fread(v, sizeof(float), (size_t)n, f) == (size_t)n;
    if (f) fclose(f);
  }
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!ok) {
    fprintf(stderr, "FATAL: cannot read %ld floats from %s\n", n, path);
    exit(1);
  }
  MPI_Bcast(v, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD);
}

static gaaw_model_t gpt(gaaw_context_t ctx, uint64_t seed)
{
  gaaw_gpt_config_t g = model_tiny_gpt(SEQ, GAAW_F32);
  g.vocab = VOCAB, g.layers = LAYERS, g.heads = HEADS, g.dim = DIM, g.seed = seed;
  gaaw_model_t m;
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g, &m));
  return m;
}

/* Rank 0 writes text as path. */
static void write_text(const char *path, const char *text)
{
  if (world_rank == 0) {
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
      fprintf(stderr, "FATAL: cannot write %s\n", path);
      exit(1);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

/* The cases of Hugging Face's GPT-2 layout (see the top). */
static void gpt2_hf_layout(const char *dir, const char *tokens_path, const char *cfg, const gaaw_batch_t *batch,
                           float *got, float *want, long nlogits)
{
  char path[160], out[160], args[512];
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, "backend=host tp=2 comm_timeout=60");
  gaaw_model_t m = gpt(ctx, 1);
  snprintf(path, sizeof path, "%s/hf_gpt2", dir);
  expect_status_ctx(ctx, gaaw_model_import(m, path), GAAW_ERR_INVALID_ARG); /* nanoGPT's names: transposed */
  gaaw_model_destroy(&m);
  gaaw_finalize(&ctx);

  ctx = test_context(MPI_COMM_WORLD, "backend=host tp=2 comm_timeout=60 gpt2_names=hf export_dtype=bf16");
  m = gpt(ctx, 1);
  expect_status_ctx(ctx, gaaw_model_import(m, path), GAAW_SUCCESS);
  require_ok(ctx, gaaw_model_predict(m, batch, got));
  snprintf(out, sizeof out, "%s/torch_f32.logits", dir);
  read_floats(out, want, nlogits);
  expect_close(got, want, nlogits, 1e-5, "logits of PyTorch's file in Hugging Face's GPT-2 layout, imported at tp 2");
  gaaw_model_destroy(&m);

  /* config.json: what gaaw does not compute, and a size that is not the model's */
  const char *bad[] = {"{\"model_type\": \"gpt2\", \"activation_function\": \"gelu\"}",
                       "{\"model_type\": \"gpt2\", \"n_embd\": 32}"};
  gaaw_status_t bad_status[] = {GAAW_ERR_UNSUPPORTED, GAAW_ERR_INVALID_ARG};
  char config[192];
  snprintf(config, sizeof config, "%s/config.json", path);
  for (int k = 0; k < 2; k++) {
    write_text(config, bad[k]);
    m = gpt(ctx, 1);
    expect_status_ctx(ctx, gaaw_model_import(m, path), bad_status[k]);
    gaaw_model_destroy(&m);
  }

  /* gaaw's BF16 export in that layout: PyTorch's logits of it, and gaaw's */
  snprintf(path, sizeof path, "%s/gaaw_hf", dir);
  if (world_rank == 0) mkdir(path, 0755);
  snprintf(path, sizeof path, "%s/gaaw_hf/model.safetensors", dir);
  snprintf(out, sizeof out, "%s/gaaw_hf/logits", dir);
  m = gpt(ctx, 5);
  model_randomise(m, 9);
  expect_status_ctx(ctx, gaaw_model_export(m, path), GAAW_SUCCESS);
  gaaw_model_destroy(&m);
  snprintf(args, sizeof args, "read-hf %s %s %s %s", path, tokens_path, out, cfg);
  int rc = torch_script_run("safetensors_reference.py", args);
  expect_true(rc == 0, "PyTorch failed loading gaaw's BF16 export in Hugging Face's GPT-2 layout (exit %d)", rc);
  m = gpt(ctx, 1);
  expect_status_ctx(ctx, gaaw_model_import(m, path), GAAW_SUCCESS);
  require_ok(ctx, gaaw_model_predict(m, batch, got));
  if (rc == 0) {
    read_floats(out, want, nlogits);
    expect_close(got, want, nlogits, 1e-5, "logits of gaaw's BF16 Hugging Face GPT-2 export, in gaaw and PyTorch");
  }
  gaaw_model_destroy(&m);
  gaaw_finalize(&ctx);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  char dir[64], tokens_path[96], args[512], path[128], out[128];
  /* rank 0's pid names the files, the same name on every rank */
  int pid = (int)getpid();
  MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
  snprintf(dir, sizeof dir, "test_safetensors_torch.%d", pid);
  snprintf(tokens_path, sizeof tokens_path, "%s/tokens", dir);
  int32_t tokens[B * SEQ], targets[B * SEQ];
  model_random_batch(B, SEQ, VOCAB, 3, tokens, targets);
  if (world_rank == 0) {
    mkdir(dir, 0755);
    FILE *f = fopen(tokens_path, "wb");
    if (!f || fwrite(tokens, sizeof tokens, 1, f) != 1) {
      fprintf(stderr, "FATAL: cannot write %s\n", tokens_path);
      exit(1);
    }
    fclose(f);
  }
  const char *cfg = "48 8 2 2 16 2 8";
  snprintf(args, sizeof args, "write %s %s %s", dir, tokens_path, cfg);
  int rc = run_reference(args);
  if (rc == 77) {
    if (world_rank == 0) fprintf(stderr, "PyTorch (python3-torch) is missing: skipped\n");
    MPI_Finalize();
    return TEST_SKIP;
  }
  expect_true(rc == 0, "the PyTorch side failed writing its files (exit %d)", rc);

  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, "backend=host tp=2 comm_timeout=60");
  long nlogits = (long)B * SEQ * VOCAB;
  float *got = malloc(sizeof(float) * (size_t)nlogits), *want = malloc(sizeof(float) * (size_t)nlogits);
  gaaw_batch_t batch = {.batch = B, .seq = SEQ, .tokens = tokens};
  const char *dtypes[] = {"f32", "bf16"};
  for (int d = 0; rc == 0 && d < 2; d++) {
    gaaw_model_t m = gpt(ctx, 1);
    snprintf(path, sizeof path, "%s/torch_%s.safetensors", dir, dtypes[d]);
    expect_status_ctx(ctx, gaaw_model_import(m, path), GAAW_SUCCESS);
    require_ok(ctx, gaaw_model_predict(m, &batch, got));
    snprintf(out, sizeof out, "%s/torch_%s.logits", dir, dtypes[d]);
    read_floats(out, want, nlogits);
    char what[96];
    snprintf(what, sizeof what, "logits of PyTorch's %s file imported at tp 2, rank %d", dtypes[d], world_rank);
    expect_close(got, want, nlogits, 1e-5, what);
    gaaw_model_destroy(&m);
  }

  /* gaaw's export, loaded by PyTorch */
  gaaw_model_t m = gpt(ctx, 5);
  model_randomise(m, 9);
  snprintf(path, sizeof path, "%s/gaaw.safetensors", dir);
  snprintf(out, sizeof out, "%s/gaaw.logits", dir);
  expect_status_ctx(ctx, gaaw_model_export(m, path), GAAW_SUCCESS);
  require_ok(ctx, gaaw_model_predict(m, &batch, got));
  snprintf(args, sizeof args, "read %s %s %s %s", path, tokens_path, out, cfg);
  rc = run_reference(args);
  expect_true(rc == 0, "PyTorch failed loading gaaw's export (exit %d)", rc);
  if (rc == 0) {
    read_floats(out, want, nlogits);
    expect_close(got, want, nlogits, 1e-5, "logits of gaaw's export (tp 2) in PyTorch");
  }
  gaaw_model_destroy(&m);
  gaaw_finalize(&ctx);
  gpt2_hf_layout(dir, tokens_path, cfg, &batch, got, want, nlogits);

  if (world_rank == 0) {
    const char *files[] = {"tokens", "torch_f32.safetensors", "torch_f32.logits", "torch_bf16.safetensors",
                           "torch_bf16.logits", "gaaw.safetensors", "gaaw.logits", "hf_gpt2/model.safetensors",
                           "hf_gpt2/config.json", "hf_gpt2", "gaaw_hf/model.safetensors", "gaaw_hf/config.json",
                           "gaaw_hf/logits", "gaaw_hf"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
      snprintf(path, sizeof path, "%s/%s", dir, files[i]);
      remove(path);
    }
    rmdir(dir);
  }
  free(got);
  free(want);
  return test_finish_mpi("test_safetensors_torch_np2");
}
