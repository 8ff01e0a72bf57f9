/* Agreement of a group on statuses and arguments (agree.h). Every round is a
 * non-blocking MPI collective on the group's control communicator, waited for
 * under the comm_timeout deadline and watching for abort notices, so no rank can
 * be left waiting for one that never comes. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/agree.h"
#include "backends/comm.h"
#include "backends/runtime/abort.h"
#include "backends/runtime/runtime.h"

/* ---------------------------------------------------------------- hashing */

static uint64_t mix(uint64_t h)
{
  /* splitmix64's finaliser: every input bit reaches every output bit */
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

uint64_t gaaw_digest(const void *data, size_t bytes)
{
  const unsigned char *p = data;
  uint64_t h = mix(bytes + 0x9e3779b97f4a7c15ull);
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    h = mix(h ^ w) + i;
  }
  uint64_t tail = 0;
  if (bytes > i) memcpy(&tail, p + i, bytes - i); /* data may be NULL when bytes is 0 */
  return mix(h ^ tail);
}

static uint64_t field_hash(const gaaw_field *f)
{
  uint64_t h = gaaw_digest(f->name, strlen(f->name)) ^ (uint64_t)f->kind;
  switch (f->kind) {
  case GAAW_FIELD_KIND_FLOAT: /* a float's double is exact: its bits decide */
  case GAAW_FIELD_KIND_REAL: {
    uint64_t bits;
    memcpy(&bits, &f->r, sizeof bits);
    return mix(h ^ bits);
  }
  case GAAW_FIELD_KIND_TEXT: return mix(h ^ gaaw_digest(f->text ? f->text : "", f->text ? strlen(f->text) : 0));
  default: return mix(h ^ (uint64_t)f->i);
  }
}

/* A field's value as a message shows it. */
static void format_value(const gaaw_field *f, char *out, size_t size)
{
  switch (f->kind) {
  case GAAW_FIELD_KIND_INT: snprintf(out, size, "%" PRId64, f->i); return;
  case GAAW_FIELD_KIND_NAMED: snprintf(out, size, "%s", f->text ? f->text : "?"); return;
  case GAAW_FIELD_KIND_TEXT: snprintf(out, size, "'%s'", f->text ? f->text : ""); return;
  case GAAW_FIELD_KIND_DIGEST: snprintf(out, size, "content #%016" PRIx64, (uint64_t)f->i); return;
  case GAAW_FIELD_KIND_REAL:
  case GAAW_FIELD_KIND_FLOAT:
    /* the shortest form that reads back as the same number */
    for (int digits = 6; digits <= 17; digits++) {
      snprintf(out, size, "%.*g", digits, f->r);
      double back = strtod(out, NULL);
      if (f->kind == GAAW_FIELD_KIND_REAL ? back == f->r : (float)back == (float)f->r) return;
    }
    return;
  }
  snprintf(out, size, "?");
}

/* ---------------------------------------------------------------- rounds */

/* One round: a non-blocking collective started by the caller, waited for under
 * the deadline. A round that cannot complete leaves the group out of step. */
static gaaw_status_t finish_round(gaaw_context_t ctx, int mpi_err, MPI_Request *req, const char *what)
{
  gaaw_status_t st = mpi_err == MPI_SUCCESS
                       ? gaaw_mpi_wait(ctx, req, what)
                       : gaaw_mpi_status(ctx, mpi_err, __FILE__, __LINE__, __func__, "an agreement collective");
  if (st != GAAW_SUCCESS) {
    gaaw_context_abort(ctx);
    return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  }
  return GAAW_SUCCESS;
}

/* Some rank failed: every rank learns the lowest failing rank's message. */
static gaaw_status_t report_failure(gaaw_context_t ctx, MPI_Comm mc, gaaw_status_t local, gaaw_status_t worst,
                                    int root, int root_world, const char *what)
{
  enum { MESSAGE_MAX = 1024 };
  char message[MESSAGE_MAX] = "";
  int me;
  MPI_Comm_rank(mc, &me);
  if (me == root) gaaw_error_first_line(ctx, message, sizeof message);
  MPI_Request req;
  GAAW_CHECK(finish_round(ctx, MPI_Ibcast(message, MESSAGE_MAX, MPI_CHAR, root, mc, &req), &req,
                          "the agreement's broadcast of a rank's failure"));
  message[MESSAGE_MAX - 1] = '\0';
  if (local != GAAW_SUCCESS) return gaaw_error_trace(ctx, local, __FILE__, __LINE__, __func__);
  GAAW_FAIL(ctx, worst, "%s: world rank %d failed, so every rank stops: %s", what, root_world, message);
}

/* Appends " on ranks 0-2,5": the world ranks whose value is number v. */
static void append_ranks(char *out, size_t size, const int *value_of, const int *world_rank, int n, int v)
{
  int count = 0;
  for (int i = 0; i < n; i++) count += value_of[i] == v;
  size_t len = strlen(out);
  snprintf(out + len, size - len, count == 1 ? " on rank " : " on ranks ");
  int first = 1;
  for (int i = 0; i < n; i++) {
    if (value_of[i] != v) continue;
    int j = i;
    while (j + 1 < n && value_of[j + 1] == v && world_rank[j + 1] == world_rank[j] + 1) j++;
    len = strlen(out);
    if (j > i)
      snprintf(out + len, size - len, "%s%d-%d", first ? "" : ",", world_rank[i], world_rank[j]);
    else
      snprintf(out + len, size - len, "%s%d", first ? "" : ",", world_rank[i]);
    first = 0;
    i = j;
  }
}

/* The fields differ somewhere: find the first that does, gather its values. */
static gaaw_status_t report_mismatch(gaaw_context_t ctx, MPI_Comm mc, const char *group, const char *what,
                                     const gaaw_field *fields, int n)
{
  enum { VALUE_MAX = 112, SHOWN = 6 };
  int64_t in[2 * GAAW_AGREE_MAX_FIELDS] = {0}, out[2 * GAAW_AGREE_MAX_FIELDS];
  for (int i = 0; i < n; i++) {
    in[i] = (int64_t)field_hash(&fields[i]);
    in[n + i] = ~in[i]; /* max(~h) = ~min(h) */
  }
  MPI_Request req;
  GAAW_CHECK(finish_round(ctx, MPI_Iallreduce(in, out, 2 * n, MPI_INT64_T, MPI_MAX, mc, &req), &req,
                          "the agreement's search for the differing field"));
  int k = 0;
  while (k < n && out[k] == ~out[n + k]) k++;
  if (k == n) k = 0; /* same fields, different order: report the first */
  typedef struct {
    int world_rank;
    char value[VALUE_MAX];
  } entry;
  int size;
  MPI_Comm_size(mc, &size);
  entry mine = {ctx->rank, ""}, *all = malloc((size_t)size * sizeof *all);
  int *value_of = malloc((size_t)size * sizeof *value_of), *world_rank = malloc((size_t)size * sizeof *world_rank);
  if (!all || !value_of || !world_rank) {
    free(all), free(value_of), free(world_rank);
    GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "%s differs across group %s (field %s), and the values cannot be gathered",
              what, group, fields[k].name);
  }
  format_value(&fields[k], mine.value, sizeof mine.value);
  gaaw_status_t st = finish_round(ctx, MPI_Iallgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine,
                                                      MPI_BYTE, mc, &req), &req, "the agreement's gathering of values");
  if (st == GAAW_SUCCESS) {
    /* distinct values in order of first appearance, each with its ranks */
    int distinct = 0;
    for (int i = 0; i < size; i++) {
      world_rank[i] = all[i].world_rank;
      value_of[i] = -1;
      for (int j = 0; j < i && value_of[i] < 0; j++)
        if (strcmp(all[j].value, all[i].value) == 0) value_of[i] = value_of[j];
      if (value_of[i] < 0) value_of[i] = distinct++;
    }
    char text[GAAW_ERROR_TEXT_MAX / 2] = "";
    for (int v = 0; v < distinct && v < SHOWN; v++) {
      int i = 0;
      while (value_of[i] != v) i++;
      size_t len = strlen(text);
      snprintf(text + len, sizeof text - len, "%s%s", v ? ", " : "", all[i].value);
      append_ranks(text, sizeof text, value_of, world_rank, size, v);
    }
    if (distinct > SHOWN) {
      size_t len = strlen(text);
      snprintf(text + len, sizeof text - len, ", and %d more values", distinct - SHOWN);
    }
    st = gaaw_error_raise(ctx, GAAW_ERR_INVALID_ARG, __FILE__, __LINE__, __func__,
                          "%s must be the same on every rank of group %s: %s: %s", what, group, fields[k].name, text);
  }
  free(all), free(value_of), free(world_rank);
  return st;
}

/* After the round: each slot's largest value at in[0..slots), the bitwise
 * complement of its smallest at in[slots..2 slots). */
static gaaw_status_t read_slots(gaaw_context_t ctx, const char *group, const char *what, const int64_t *out,
                                gaaw_agree_slots *s)
{
  for (int k = 0; k < s->slots; k++) {
    int64_t hi = out[k], lo = ~out[s->slots + k];
    if (hi != lo)
      GAAW_FAIL(ctx, GAAW_ERR_INVALID_ARG, "%s: %s must be the same on every rank of one %s of group %s (it may differ "
                "between %ss): %s %d has ranks with %s %lld and %lld", what, s->name, s->slot_name, group,
                s->slot_name, s->slot_name, k, s->name, (long long)lo, (long long)hi);
    s->values[k] = hi;
  }
  return GAAW_SUCCESS;
}

static gaaw_status_t agree_over(gaaw_context_t ctx, MPI_Comm mc, const char *group, gaaw_status_t local,
                                const char *what, const gaaw_field *fields, int n, gaaw_agree_slots *slots)
{
  if (n < 0 || n > GAAW_AGREE_MAX_FIELDS)
    local = gaaw_error_raise(ctx, GAAW_ERR_INTERNAL, __FILE__, __LINE__, __func__, "%s: %d fields to agree on, "
                             "more than %d", what, n, GAAW_AGREE_MAX_FIELDS);
  int size = 1;
  if (mc != MPI_COMM_NULL) MPI_Comm_size(mc, &size);
  if (size == 1) {
    if (slots && local == GAAW_SUCCESS)
      for (int k = 0; k < slots->slots; k++) slots->values[k] = slots->value;
    return local;
  }
  /* an aborted rank still takes part (its peers may not know yet), as a failure */
  if (local == GAAW_SUCCESS && gaaw_context_check_live(ctx) != GAAW_SUCCESS) local = GAAW_ERR_COMM;
  if (local != GAAW_SUCCESS) n = 0;
  uint64_t hash = 0x6761617761677265ull; /* "gaawagre" */
  for (int i = 0; i < n; i++) hash = mix(hash ^ field_hash(&fields[i])) + (uint64_t)i;
  int me;
  MPI_Comm_rank(mc, &me);
  /* max(-status) is the worst status (errors are negative); max(-rank) the
   * lowest failing rank; max(h) == ~max(~h) when every hash is the same */
  int failed = local != GAAW_SUCCESS;
  /* with slots, 2 x slots more: this rank's value at its slot, and its complement
   * (max(~v) = ~min(v)), INT64_MIN elsewhere (and everywhere on a failing rank) */
  enum { HEAD = 5, STACK_SLOTS = 64 };
  int extra = slots ? 2 * slots->slots : 0;
  int64_t in_stack[HEAD + 2 * STACK_SLOTS], out_stack[HEAD + 2 * STACK_SLOTS];
  int64_t *in = in_stack, *out = out_stack;
  if (extra > 2 * STACK_SLOTS) {
    in = malloc((size_t)(HEAD + extra) * sizeof *in);
    out = malloc((size_t)(HEAD + extra) * sizeof *out);
    if (!in || !out) {
      free(in), free(out);
      gaaw_status_t st = gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__,
                                          "%s: cannot allocate the agreement of %d slots", what, slots->slots);
      gaaw_context_abort(ctx); /* the peers' round cannot complete: they learn why at once */
      return st;
    }
  }
  in[0] = -(int64_t)local;
  in[1] = failed ? -(int64_t)me : INT64_MIN;
  in[2] = failed ? -(int64_t)ctx->rank : INT64_MIN;
  in[3] = (int64_t)hash;
  in[4] = ~(int64_t)hash;
  for (int k = 0; k < extra / 2; k++) {
    int mine = !failed && k == slots->slot;
    in[HEAD + k] = mine ? slots->value : INT64_MIN;
    in[HEAD + extra / 2 + k] = mine ? ~slots->value : INT64_MIN;
  }
  MPI_Request req;
  gaaw_status_t st = finish_round(ctx, MPI_Iallreduce(in, out, HEAD + extra, MPI_INT64_T, MPI_MAX, mc, &req), &req,
                                  what);
  if (st == GAAW_SUCCESS) {
    if (out[0] != 0)
      st = report_failure(ctx, mc, local, (gaaw_status_t)-out[0], (int)-out[1], (int)-out[2], what);
    else if (out[3] != ~out[4])
      st = report_mismatch(ctx, mc, group, what, fields, n);
    else if (slots)
      st = read_slots(ctx, group, what, out + HEAD, slots);
  }
  if (in != in_stack) free(in), free(out);
  return st;
}

gaaw_status_t gaaw_agree_slotted(gaaw_comm_t group, gaaw_status_t local, const char *what, const gaaw_field *fields,
                                 int n, gaaw_agree_slots *s)
{
  if (!group) return local;
  gaaw_context_t ctx = group->ctx;
  if (local == GAAW_SUCCESS && group->aborted)
    local = gaaw_error_raise(ctx, GAAW_ERR_COMM, __FILE__, __LINE__, __func__,
                             "communicator %s was aborted after an earlier failure (%s)", group->name,
                             ctx->aborted ? ctx->abort_reason : "see the log");
  gaaw_status_t st = agree_over(ctx, group->control, group->name, local, what, fields, n, s);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_agree(gaaw_comm_t group, gaaw_status_t local, const char *what, const gaaw_field *fields, int n)
{
  return gaaw_agree_slotted(group, local, what, fields, n, NULL);
}

gaaw_status_t gaaw_agree_world(gaaw_context_t ctx, gaaw_status_t local, const char *what, const gaaw_field *fields,
                               int n)
{
  gaaw_status_t st = agree_over(ctx, ctx->control, "world", local, what, fields, n, NULL);
  if (st != GAAW_SUCCESS) return gaaw_error_trace(ctx, st, __FILE__, __LINE__, __func__);
  return GAAW_SUCCESS;
}
