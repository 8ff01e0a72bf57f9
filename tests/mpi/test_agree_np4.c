/* The agreement itself (backends/agree.h), on 4 ranks, each case checked on every
 * rank with the exact message a user reads:
 *  - matching fields of every kind: success;
 *  - one field differing on one rank (the middle one, the last one): that field
 *    named, each value once with its ranks as ranges ("on ranks 0-1,3");
 *  - doubles and floats printed in the shortest form that reads back as the same
 *    number, so values one unit apart are told apart; text quoted; labels; digests;
 *  - only the first differing field is named;
 *  - failing ranks: the worst status on every rank that did not fail, with the lowest
 *    failing rank's message; each failing rank keeps its own error;
 *  - more fields than an agreement holds (or fewer than none): GAAW_ERR_INTERNAL
 *    naming the count, on every rank;
 *  - values per slot, in a group of one rank and over more slots than the stack holds. */
#include <math.h>
#include <mpi.h>
#include <string.h>

#include "backends/agree.h"
#include "backends/runtime/error.h"
#include "gaaw/topology.h"
#include "tests/harness/test_util.h"

static int rank;

/* gaaw_agree_world of fields[0..n) with local, and the message on every rank */
static gaaw_status_t agree(gaaw_context_t ctx, gaaw_status_t local, const gaaw_field *fields, int n)
{
  return gaaw_agree_world(ctx, local, "the test's call", fields, n);
}

static void expect_message(gaaw_context_t ctx, const char *want, const char *what)
{
  const char *msg = gaaw_last_error(ctx);
  expect_true(strstr(msg, want) != NULL, "%s: want \"%s\" in: %s", what, want, msg);
}

static void mismatches(gaaw_context_t ctx)
{
  gaaw_field same[] = {GAAW_FIELD_INT("dim", 32), GAAW_FIELD_REAL("lr", 0.1), GAAW_FIELD_FLOAT("eps", 1e-5f),
                       GAAW_FIELD_NAMED("policy", 1, "reservoir"), GAAW_FIELD_TEXT("name", "gpt"),
                       GAAW_FIELD_DIGEST("tokens", gaaw_digest("abc", 3))};
  expect_status_ctx(ctx, agree(ctx, GAAW_SUCCESS, same, 6), GAAW_SUCCESS);

  gaaw_field f = GAAW_FIELD_INT("dim", rank == 2 ? 64 : 32);
  expect_status_ctx(ctx, agree(ctx, GAAW_SUCCESS, &f, 1), GAAW_ERR_INVALID_ARG);
  expect_message(ctx, "the test's call must be the same on every rank of group world: dim: 32 on ranks 0-1,3, 64 on rank 2",
                 "an int on rank 2");
  expect_true(strstr(gaaw_last_error(ctx), "more values") == NULL, "two values, yet 'more values': %s",
              gaaw_last_error(ctx));
  f = GAAW_FIELD_INT("dim", rank == 3 ? 64 : 32);
  expect_status_ctx(ctx, agree(ctx, GAAW_SUCCESS, &f, 1), GAAW_ERR_INVALID_ARG);
  expect_message(ctx, "32 on ranks 0-2, 64 on rank 3", "an int on the last rank");
  f = GAAW_FIELD_INT("dim", rank % 2 ? 64 : 32);
  expect_status_ctx(ctx, agree(ctx, GAAW_SUCCESS, &f, 1), GAAW_ERR_INVALID_ARG);
  expect_message(ctx, "32 on ranks 0,2, 64 on ranks 1,3", "alternating ints");

  f = GAAW_FIELD_REAL("lr", rank == 3 ? nextafter(0.1, 1.0) : 0.1);
  expect_status_ctx(ctx, agree(ctx, GAAW_SUCCESS, &f, 1), GAAW_ERR_INVALID_ARG);
  expect_message(ctx, "group world: lr: 0.1 on ranks 0-2, 0.10000000000000002 on rank 3",
                 "doubles one unit apart");
  f = GAAW_FIELD_FLOAT("eps", rank == 0 ? nextafterf(0.1f, 1.0f) : 0.1f);
  expect_status_ctx(ctx, agree(ctx, GAAW_SUCCESS, &f, 1), GAAW_ERR_INVALID_ARG);
  expect_message(ctx, "group world: eps: 0.10000001 on rank 0, 0.1 on ranks 1-3",
                 "floats one unit apart");
  f = GAAW_FIELD_TEXT("name", rank == 1 ? "llama" : "gpt");
  expect_status_ctx(ctx, agree(ctx, GAAW_SUCCESS, &f, 1), GAAW_ERR_INVALID_ARG);
  expect_message(ctx, "'gpt' on ranks 0,2-3, 'llama' on rank 1", "text");
  f = GAAW_FIELD_TEXT("path", rank == 1 ? NULL : ""); /* NULL text is the empty text */
  expect_status_ctx(ctx, agree(ctx, GAAW_SUCCESS, &f, 1), GAAW_SUCCESS);
  f = GAAW_FIELD_TEXT("path", rank == 1 ? NULL : "x");
  expect_status_ctx(ctx, agree(ctx, GAAW_SUCCESS, &f, 1), GAAW_ERR_INVALID_ARG);
  expect_message(ctx, "path: 'x' on ranks 0,2-3, '' on rank 1", "NULL text");
  f = GAAW_FIELD_NAMED("policy", rank == 1, rank == 1 ? "reservoir" : "newest");
  expect_status_ctx(ctx, agree(ctx, GAAW_SUCCESS, &f, 1), GAAW_ERR_INVALID_ARG);
  expect_message(ctx, "group world: policy: newest on ranks 0,2-3, reservoir on rank 1",
                 "labels");
  f = GAAW_FIELD_DIGEST("tokens", rank == 1 ? 0x1234abcdull : 0xffull);
  expect_status_ctx(ctx, agree(ctx, GAAW_SUCCESS, &f, 1), GAAW_ERR_INVALID_ARG);
  expect_message(ctx, "content #00000000000000ff on ranks 0,2-3, content #000000001234abcd on rank 1", "digests");

  /* fields 1 and 2 differ: only the first is named */
  gaaw_field two[] = {GAAW_FIELD_INT("layers", 2), GAAW_FIELD_INT("heads", 4 + (rank == 1)),
                      GAAW_FIELD_INT("seq", 8 + rank)};
  expect_status_ctx(ctx, agree(ctx, GAAW_SUCCESS, two, 3), GAAW_ERR_INVALID_ARG);
  expect_message(ctx, "group world: heads: ", "the first differing field");
  expect_true(strstr(gaaw_last_error(ctx), "seq") == NULL, "a second field named: %s", gaaw_last_error(ctx));
  expect_status_ctx(ctx, agree(ctx, GAAW_SUCCESS, same, 6), GAAW_SUCCESS);
}

static void failures(gaaw_context_t ctx)
{
  gaaw_field f = GAAW_FIELD_INT("dim", 32);
  gaaw_status_t local = rank == 1 ? gaaw_error_raise(ctx, GAAW_ERR_IO, __FILE__, __LINE__, __func__, "disk full")
                                  : GAAW_SUCCESS;
  expect_status_ctx(ctx, agree(ctx, local, rank == 1 ? NULL : &f, rank == 1 ? 0 : 1), GAAW_ERR_IO);
  if (rank != 1) expect_message(ctx, "the test's call: world rank 1 failed, so every rank stops: ", "rank 1 fails");
  expect_message(ctx, "disk full", "rank 1's message");

  /* ranks 2 and 3 fail: the others get the worst status, with rank 2's message */
  local = rank == 2   ? gaaw_error_raise(ctx, GAAW_ERR_INVALID_ARG, __FILE__, __LINE__, __func__, "bad seq")
          : rank == 3 ? gaaw_error_raise(ctx, GAAW_ERR_CORRUPT, __FILE__, __LINE__, __func__, "bad file")
                      : GAAW_SUCCESS;
  gaaw_status_t want = rank == 2 ? GAAW_ERR_INVALID_ARG : GAAW_ERR_CORRUPT;
  expect_status_ctx(ctx, agree(ctx, local, &f, 1), want);
  if (rank < 2) {
    expect_message(ctx, "world rank 2 failed, so every rank stops", "ranks 2 and 3 fail");
    expect_message(ctx, "bad seq", "the lowest failing rank's message");
  }
  expect_status_ctx(ctx, agree(ctx, GAAW_SUCCESS, &f, 1), GAAW_SUCCESS);
}

/* Values agreed per slot (gaaw_agree_slotted): a group of one rank learns its own
 * value without communicating; more slots than the stack's 64 take the heap and
 * report as the stack does (slot 4 of 100 has no rank: its values are named). */
static void slots(gaaw_context_t ctx)
{
  gaaw_comm_t alone, world;
  require_ok(ctx, gaaw_topology_comm(ctx, GAAW_GROUP_TP, &alone)); /* tp 1: each rank alone */
  require_ok(ctx, gaaw_topology_comm(ctx, GAAW_GROUP_WORLD, &world));
  int64_t values[100] = {0};
  gaaw_agree_slots s = {.name = "batch", .slot_name = "dp rank", .slot = 0, .slots = 1, .value = 7 + rank,
                        .values = values};
  expect_status_ctx(ctx, gaaw_agree_slotted(alone, GAAW_SUCCESS, "the test's call", NULL, 0, &s), GAAW_SUCCESS);
  expect_true(values[0] == 7 + rank, "one rank's slot: %lld, want %d", (long long)values[0], 7 + rank);
  s.slot = rank, s.slots = 4;
  expect_status_ctx(ctx, gaaw_agree_slotted(world, GAAW_SUCCESS, "the test's call", NULL, 0, &s), GAAW_SUCCESS);
  for (int k = 0; k < 4; k++) expect_true(values[k] == 7 + k, "slot %d: %lld, want %d", k, (long long)values[k], 7 + k);
  s.slots = 100;
  expect_status_ctx(ctx, gaaw_agree_slotted(world, GAAW_SUCCESS, "the test's call", NULL, 0, &s), GAAW_ERR_INVALID_ARG);
  expect_message(ctx, "dp rank 4 has ranks with batch", "100 slots, 4 ranks");
}

static void too_many(gaaw_context_t ctx)
{
  gaaw_field many[GAAW_AGREE_MAX_FIELDS + 1];
  for (int i = 0; i <= GAAW_AGREE_MAX_FIELDS; i++) many[i] = GAAW_FIELD_INT("k", i);
  expect_status_ctx(ctx, agree(ctx, GAAW_SUCCESS, many, GAAW_AGREE_MAX_FIELDS), GAAW_SUCCESS);
  expect_status_ctx(ctx, agree(ctx, GAAW_SUCCESS, many, GAAW_AGREE_MAX_FIELDS + 1), GAAW_ERR_INTERNAL);
  expect_message(ctx, "the test's call: 65 fields to agree on, more than 64", "65 fields");
  expect_status_ctx(ctx, agree(ctx, GAAW_SUCCESS, many, -1), GAAW_ERR_INTERNAL);
  expect_message(ctx, "-1 fields to agree on", "-1 fields");
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, "backend=host comm_timeout=30");
  mismatches(ctx);
  failures(ctx);
  too_many(ctx);
  slots(ctx);
  gaaw_finalize(&ctx);
  return test_finish_mpi("test_agree_np4");
}
