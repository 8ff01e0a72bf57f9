/* The stream-aware caching allocator (backends/runtime/allocator.h) on a fake
 * backend whose communication stream the test drives: work "queued" on it gets a
 * position, and an event recorded there happens once the stream has completed up
 * to the event's position. The claims:
 *   - a block only the compute stream used is handed out again at once;
 *   - a block the communication stream used is not handed out again (a fresh one
 *     is allocated instead) until the stream has passed the event recorded at the
 *     free, i.e. until the work queued before the free is done; then it is;
 *   - with the cache off such a block is given back to the backend only then;
 *   - releasing the cache keeps blocks still waiting, and release_pending frees them;
 *   - accounting drops at the free, whether or not the block waits. */
#include <mpi.h>

#include "backends/runtime/context_impl.h"
#include "tests/harness/test_util.h"

/* ---------------------------------------------------------------- the fake backend */

static gaaw_device_ops fake;
static const gaaw_device_ops *real;
static long queued, completed; /* positions on the fake communication stream */
static int allocs, frees, events_live, records;

typedef struct {
  int stream;
  long position;
} fake_event;

static gaaw_status_t fake_alloc(gaaw_context_t ctx, size_t bytes, void **handle)
{
  allocs++;
  return real->mem_alloc(ctx, bytes, handle);
}

static void fake_free(gaaw_context_t ctx, void *handle)
{
  frees++;
  real->mem_free(ctx, handle);
}

static gaaw_status_t fake_record(gaaw_context_t ctx, int stream, void **event)
{
  (void)ctx;
  fake_event *e = malloc(sizeof *e);
  e->stream = stream;
  e->position = queued;
  *event = e;
  events_live++;
  records++;
  return GAAW_SUCCESS;
}

static gaaw_status_t fake_query(gaaw_context_t ctx, void *event, int *done)
{
  (void)ctx;
  fake_event *e = event;
  *done = e->stream == GAAW_STREAM_COMM && completed >= e->position;
  return GAAW_SUCCESS;
}

static void fake_destroy(gaaw_context_t ctx, void *event)
{
  (void)ctx;
  free(event);
  events_live--;
}

/* A collective queued on the communication stream that reads and writes buf. */
static void queue_comm_work(gaaw_buffer_t buf)
{
  queued++;
  gaaw_buffer_use_on_stream(buf, GAAW_STREAM_COMM);
}

static gaaw_buffer_t alloc(gaaw_context_t ctx, size_t bytes)
{
  gaaw_buffer_t b = NULL;
  require_ok(ctx, gaaw_buffer_alloc(ctx, bytes, GAAW_MEM_COMMUNICATION, &b));
  return b;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  gaaw_context_t ctx = test_context(MPI_COMM_WORLD, "backend=host allocator_cache=1");
  real = ctx->device;
  fake = *real;
  fake.mem_alloc = fake_alloc;
  fake.mem_free = fake_free;
  fake.event_record = fake_record;
  fake.event_query = fake_query;
  fake.event_destroy = fake_destroy;
  ctx->device = &fake;

  /* compute stream only: the same block at once, no event */
  gaaw_buffer_t a = alloc(ctx, 1000);
  void *ha = a->handle;
  require_ok(ctx, gaaw_buffer_free(ctx, &a));
  gaaw_buffer_t b = alloc(ctx, 1000);
  expect_true(b->handle == ha, "a block only the compute stream used was not reused at once");
  expect_true(records == 0, "%d events recorded for compute-only blocks", records);

  /* the communication stream used it: reuse waits for the event of the free */
  queue_comm_work(b);
  queue_comm_work(b);
  long at_free = queued;
  int allocs_before = allocs;
  size_t cur = 0;
  require_ok(ctx, gaaw_buffer_free(ctx, &b));
  gaaw_memory_usage(ctx, GAAW_MEM_COMMUNICATION, &cur, NULL);
  expect_true(cur == 0, "communication bytes %zu after the free of a waiting block", cur);
  expect_true(records == 1 && events_live == 1, "%d events recorded (%d live), expected 1", records, events_live);
  gaaw_buffer_t c = alloc(ctx, 1000);
  expect_true(c->handle != ha, "a block was reused before the communication stream passed its free");
  expect_true(allocs == allocs_before + 1, "no fresh allocation while the block waited");
  completed = at_free - 1; /* one collective still running */
  gaaw_buffer_t d = alloc(ctx, 1000);
  expect_true(d->handle != ha, "a block was reused while work queued before its free still ran");
  completed = at_free; /* the stream has passed the free */
  gaaw_buffer_t e = alloc(ctx, 1000);
  expect_true(e->handle == ha, "the block was not reused after the stream passed its event");
  expect_true(events_live == 0, "%d events left after the block was reused", events_live);
  /* work queued after the free does not hold it back: the event is the free's */
  require_ok(ctx, gaaw_buffer_free(ctx, &e));
  require_ok(ctx, gaaw_buffer_free(ctx, &c));
  require_ok(ctx, gaaw_buffer_free(ctx, &d));

  /* reuse resets the streams: a block that waited once is compute-only again */
  gaaw_buffer_t f = alloc(ctx, 1000);
  int rec_before = records;
  require_ok(ctx, gaaw_buffer_free(ctx, &f));
  expect_true(records == rec_before, "a reused block kept its old stream marks");

  /* release of the cache keeps waiting blocks; release_pending frees them */
  gaaw_buffer_t g = alloc(ctx, 5000);
  queue_comm_work(g);
  require_ok(ctx, gaaw_buffer_free(ctx, &g));
  size_t cached = 1;
  require_ok(ctx, gaaw_memory_release_cached(ctx));
  gaaw_memory_cached(ctx, &cached);
  expect_true(cached == 0, "%zu bytes cached after the release", cached);
  expect_true(ctx->allocator.pending != NULL && events_live == 1, "the release dropped a waiting block");
  int frees_before = frees;
  gaaw_allocator_release_pending(ctx);
  expect_true(frees == frees_before + 1 && events_live == 0 && ctx->allocator.pending == NULL,
              "release_pending: %d frees, %d live events", frees - frees_before, events_live);

  /* cache off: a waiting block goes back to the backend only after its event */
  ctx->allocator.cache_enabled = 0;
  gaaw_buffer_t h = alloc(ctx, 3000);
  queue_comm_work(h);
  frees_before = frees;
  require_ok(ctx, gaaw_buffer_free(ctx, &h));
  gaaw_buffer_t i = alloc(ctx, 64);
  expect_true(frees == frees_before, "a waiting block was given back before its event (cache off)");
  completed = queued;
  gaaw_buffer_t j = alloc(ctx, 64);
  expect_true(frees == frees_before + 1, "the block was not given back after its event (cache off): %d frees",
              frees - frees_before);
  require_ok(ctx, gaaw_buffer_free(ctx, &i));
  require_ok(ctx, gaaw_buffer_free(ctx, &j));

  /* a backend without events (host, OpenCL) never waits */
  ctx->allocator.cache_enabled = 1;
  fake.event_record = NULL;
  gaaw_buffer_t k = alloc(ctx, 1000);
  void *hk = k->handle;
  queue_comm_work(k);
  require_ok(ctx, gaaw_buffer_free(ctx, &k));
  gaaw_buffer_t l = alloc(ctx, 1000);
  expect_true(l->handle == hk, "a backend without events made a block wait");
  require_ok(ctx, gaaw_buffer_free(ctx, &l));

  ctx->device = real;
  require_ok(ctx, gaaw_finalize(&ctx));
  MPI_Finalize();
  return test_finish("test_allocator_streams");
}
