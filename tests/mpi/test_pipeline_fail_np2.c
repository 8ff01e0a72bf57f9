/* Pipeline failures and the other entry points at pp 2, on 2 ranks:
 *  - a stage built with a different width (rank 1 dim 32, rank 0 dim 16) fails on
 *    both ranks at once, naming the field and each rank's value;
 *  - a peer stopped with SIGSTOP inside a step (rank 1, the last stage, at the start
 *    of its first backward) gives rank 0 GAAW_ERR_TIMEOUT within the deadline
 *    (comm_timeout = 1 s), naming the peer, the action and the microbatch; once
 *    continued, rank 1 fails too (the context is aborted);
 *  - gaaw_model_predict, gaaw_model_get_param and gaaw_model_forward (the loss,
 *    nothing kept) at pp 2 give the serial model's numbers on both ranks (1e-6
 *    of the largest value: the same kernels in the same order);
 *  - gaaw_model_backward has nothing to go back through at pp 2 (GAAW_ERR_STATE);
 *  - an MLP (3 linears and the loss) at pp 2, with 1f1b and with zb-h1 (its
 *    backward split: each linear's weight gradient computed by its W actions, one
 *    per microbatch): the loss and every gradient of a forward_backward of 2
 *    microbatches (the first stage passes no outputs, the last no inputs), and
 *    predict, equal the serial model's (1e-6 of each tensor's largest value). */
#include <math.h>
#include <mpi.h>
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include "parallel/model_impl.h"
#include "tests/harness/model_util.h"

enum { B = 2, T = 8 };
static int rank;

static void check_width_mismatch(void)
{
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, "backend=host pp=2");
  gaaw_gpt_config_t g = model_tiny_gpt(T, GAAW_F32);
  g.dim = rank == 1 ? 32 : 16;
  gaaw_model_t model = NULL;
  double t0 = MPI_Wtime();
  expect_status_ctx(ctx, gaaw_model_create_gpt(ctx, &g, &model), GAAW_ERR_INVALID_ARG);
  expect_true(model == NULL && MPI_Wtime() - t0 < 10, "rank %d: a model came back, or failing took %.1f s", rank,
              MPI_Wtime() - t0);
  expect_true(strstr(gaaw_last_error(ctx), "dim: 16 on rank 0, 32 on rank 1") != NULL, "rank %d: %s", rank,
              gaaw_last_error(ctx));
  gaaw_finalize(&ctx);
}

/* predict, get_param and forward at pp 2 against the serial model */
static void check_entry_points(void)
{
  gaaw_context_t serial = test_context(MPI_COMM_SELF, "backend=host");
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, "backend=host pp=2");
  gaaw_gpt_config_t g = model_tiny_gpt(T, GAAW_F32);
  g.layers = 3;
  gaaw_model_t one, two;
  require_ok(serial, gaaw_model_create_gpt(serial, &g, &one));
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g, &two));
  model_randomise(one, 99);
  model_randomise(two, 99);
  int32_t tokens[B * T], targets[B * T];
  model_random_batch(B, T, g.vocab, 3, tokens, targets);
  long n = (long)B * T * g.vocab;
  float *want = malloc(sizeof(float) * (size_t)n), *got = malloc(sizeof(float) * (size_t)n);
  gaaw_batch_t b = {.batch = B, .seq = T, .tokens = tokens};
  require_ok(serial, gaaw_model_predict(one, &b, want));
  gaaw_batch_t mine = b;
  if (rank == 1) mine.tokens = NULL; /* the last stage does not read tokens */
  require_ok(ctx, gaaw_model_predict(two, &mine, got));
  expect_close(got, want, n, 1e-6, "predict's logits at pp 2 (both ranks)");
  long pn, sn;
  float *pparams = model_snapshot(two, 0, &pn), *sparams = model_snapshot(one, 0, &sn);
  expect_true(pn == sn, "%ld parameters at pp 2, %ld serial", pn, sn);
  if (pn == sn) expect_close_model(one, pparams, sparams, 0, "gaaw_model_get_param at pp 2 (both ranks)");
  float wl, gl;
  b.targets = targets;
  require_ok(serial, gaaw_model_forward(one, &b, &wl));
  mine = b;
  if (rank == 0) mine.targets = NULL;
  if (rank == 1) mine.tokens = NULL;
  require_ok(ctx, gaaw_model_forward(two, &mine, &gl));
  expect_true(fabsf(gl - wl) <= 1e-6f * fabsf(wl), "rank %d: forward's loss %.8g at pp 2, serial %.8g", rank, gl, wl);
  expect_status_ctx(ctx, gaaw_model_backward(two), GAAW_ERR_STATE);
  free(pparams);
  free(sparams);
  free(want);
  free(got);
  gaaw_model_destroy(&one);
  gaaw_model_destroy(&two);
  gaaw_finalize(&ctx);
  gaaw_finalize(&serial);
}

static void check_mlp(const char *schedule)
{
  enum { N = 3, IN = 4, OUT = 3 };
  char options[96];
  snprintf(options, sizeof options, "backend=host pp=2 pp_schedule=%s", schedule);
  int split = strcmp(schedule, "zb-h1") == 0;
  gaaw_context_t serial = test_context(MPI_COMM_SELF, "backend=host");
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, options);
  gaaw_mlp_config_t c = {.nsizes = 4, .sizes = {IN, 16, 16, OUT}, .activation = GAAW_ACT_GELU, .seed = 5};
  gaaw_model_t one, two;
  require_ok(serial, gaaw_model_create_mlp(serial, &c, &one));
  require_ok(ctx, gaaw_model_create_mlp(ctx, &c, &two));
  float x[2 * N * IN], y[2 * N * OUT];
  uint64_t state = 17;
  for (int i = 0; i < 2 * N * IN; i++) x[i] = (float)model_normal(&state);
  for (int i = 0; i < 2 * N * OUT; i++) y[i] = (float)model_normal(&state);
  float wl = 0, gl, l;
  for (int k = 0; k < 2; k++) { /* the serial run: one call per microbatch */
    gaaw_batch_t b = {.batch = N, .inputs = x + k * N * IN, .outputs = y + k * N * OUT};
    require_ok(serial, gaaw_model_forward_backward(one, &b, &l));
    wl += l / 2;
  }
  gaaw_batch_t b = {.batch = N, .microbatches = 2, .inputs = rank == 0 ? x : NULL, .outputs = rank == 1 ? y : NULL};
  require_ok(ctx, gaaw_model_forward_backward(two, &b, &gl));
  expect_true(fabsf(gl - wl) <= 1e-6f * fabsf(wl), "rank %d, %s: the MLP's loss %.8g at pp 2, serial %.8g", rank,
              schedule, gl, wl);
  for (int i = 0; i < two->nlayers; i++) {
    const gaaw_layer *lr = &two->layers[i];
    int64_t want = split && lr->ops == &gaaw_linear_ops && gaaw_model_owns_layer(two, i) ? 2 : 0;
    expect_true(lr->deferred_grads_run == want, "rank %d, %s: layer %d (%s): W computed %lld weight gradients, "
                "expected %lld", rank, schedule, i, lr->ops->kind, (long long)lr->deferred_grads_run, (long long)want);
  }
  long gn, sn;
  float *got = model_snapshot(two, 1, &gn), *want = model_snapshot(one, 1, &sn);
  expect_true(gn == sn, "%ld gradients at pp 2, %ld serial", gn, sn);
  if (gn == sn) expect_close_model(one, got, want, 1e-6, "the MLP's gradients at pp 2 (both ranks)");
  float py[N * OUT], sy[N * OUT];
  gaaw_batch_t p = {.batch = N, .inputs = x};
  require_ok(serial, gaaw_model_predict(one, &p, sy));
  if (rank == 1) p.inputs = NULL;
  require_ok(ctx, gaaw_model_predict(two, &p, py));
  expect_close(py, sy, N * OUT, 1e-6, "the MLP's predictions at pp 2 (both ranks)");
  free(got);
  free(want);
  gaaw_model_destroy(&one);
  gaaw_model_destroy(&two);
  gaaw_finalize(&ctx);
  gaaw_finalize(&serial);
}

/* rank 1 stops itself where its first backward pass begins */
static gaaw_status_t stop_at_backward(gaaw_model_t m, gaaw_phase phase, int microbatch, int chunk, void *user)
{
  (void)m, (void)chunk, (void)user;
  if (phase == GAAW_PHASE_BACKWARD && microbatch == 0) raise(SIGSTOP);
  return GAAW_SUCCESS;
}

static void check_stopped_peer(void)
{
  int pids[2], me = (int)getpid();
  MPI_Allgather(&me, 1, MPI_INT, pids, 1, MPI_INT, MPI_COMM_WORLD);
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, "backend=host pp=2 comm_timeout=1 microbatches=2");
  gaaw_gpt_config_t g = model_tiny_gpt(T, GAAW_F32);
  gaaw_model_t model;
  require_ok(ctx, gaaw_model_create_gpt(ctx, &g, &model));
  gaaw_model_hooks hooks = {0};
  hooks.user = &hooks;
  if (rank == 1) hooks.begin_pass = stop_at_backward;
  gaaw_model_set_hooks(model, &hooks);
  int32_t tokens[2 * B * T], targets[2 * B * T];
  model_random_batch(2 * B, T, g.vocab, 5, tokens, targets);
  gaaw_batch_t b = {.batch = B, .seq = T, .tokens = tokens, .targets = targets};
  float loss;
  double t0 = MPI_Wtime();
  gaaw_status_t st = gaaw_model_forward_backward(model, &b, &loss);
  if (rank == 0) {
    double elapsed = MPI_Wtime() - t0;
    kill((pid_t)pids[1], SIGCONT);
    expect_true(st == GAAW_ERR_TIMEOUT, "rank 0: a stopped peer gave %s, expected GAAW_ERR_TIMEOUT (%s)",
                gaaw_status_name(st), gaaw_last_error(ctx));
    expect_true(elapsed >= 0.9 && elapsed < 10, "rank 0 failed after %.2f s; comm_timeout is 1 s", elapsed);
    const char *e = gaaw_last_error(ctx);
    /* which message is left waiting depends on the MPI (MPICH sends small messages
     * eagerly and rank 0 waits for a gradient; under Open MPI's rendezvous a send
     * is left waiting): the error names this stage, a message action with peer 1
     * and its microbatch, "pipeline rank 0, SEND_ACT mb 1 chunk 0 to rank 1
     * (microbatch 1)" */
    int names_action = strstr(e, "pipeline rank 0, ") && strstr(e, " rank 1 (microbatch ") &&
                       (strstr(e, "RECV_GRAD mb 0 chunk 0 from rank 1") || strstr(e, "SEND_ACT mb ") ||
                        strstr(e, "RECV_GRAD mb "));
    expect_true(names_action, "rank 0: the error does not name the peer, the action and the microbatch: %s", e);
    printf("rank 0 after %.2f s: %.*s\n", elapsed, (int)strcspn(e, "\n"), e);
  } else {
    expect_true(st != GAAW_SUCCESS, "rank 1: the step went on after its peer had given up");
  }
  gaaw_model_set_hooks(model, NULL);
  gaaw_model_destroy(&model);
  gaaw_finalize(&ctx);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  check_width_mismatch();
  check_entry_points();
  check_mlp("1f1b");
  check_mlp("zb-h1");
  check_stopped_peer();
  return test_finish_mpi("test_pipeline_fail_np2");
}
