/* Buffers, views and the caching allocator: reuse, accounting by category, peaks,
 * release of the cache, and bad input. */
#include <mpi.h>
#include <string.h>

#include "test_util.h"

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  gaaw_config_t cfg;
  gaaw_context_t ctx;
  require_ok(NULL, gaaw_config_create(&cfg));
  require_ok(NULL, gaaw_config_set(cfg, "backend", "host"));
  require_ok(NULL, gaaw_init(MPI_COMM_WORLD, cfg, &ctx));

  /* data written comes back; accounting follows allocations */
  gaaw_buffer_t a = NULL, b = NULL;
  require_ok(ctx, gaaw_buffer_alloc(ctx, 1000, GAAW_MEM_PARAMS, &a));
  float src[250], dst[250];
  for (int i = 0; i < 250; i++) src[i] = (float)i * 0.5f;
  expect_status_ctx(ctx, gaaw_buffer_write(ctx, a, 0, src, sizeof src), GAAW_SUCCESS);
  expect_status_ctx(ctx, gaaw_buffer_read(ctx, a, 0, dst, sizeof dst), GAAW_SUCCESS);
  expect_close(dst, src, 250, 0, "buffer round trip");
  expect_status_ctx(ctx, gaaw_buffer_read(ctx, a, 400, dst, 8), GAAW_SUCCESS);
  expect_true(dst[0] == src[100] && dst[1] == src[101], "read at an offset: %g %g", dst[0], dst[1]);
  size_t cur, peak, cached, bytes;
  expect_status_ctx(ctx, gaaw_buffer_size(a, &bytes), GAAW_SUCCESS);
  expect_true(bytes == 1000, "size %zu", bytes);
  gaaw_memory_usage(ctx, GAAW_MEM_PARAMS, &cur, &peak);
  expect_true(cur == 1000 && peak == 1000, "params current %zu peak %zu", cur, peak);
  require_ok(ctx, gaaw_buffer_alloc(ctx, 3 << 20, GAAW_MEM_ACTIVATIONS, &b));
  gaaw_memory_usage(ctx, GAAW_MEM_ACTIVATIONS, &cur, &peak);
  expect_true(cur == (3u << 20) && peak == (3u << 20), "activations current %zu peak %zu", cur, peak);

  /* a freed block is cached and handed out again for a request of its size class */
  void *first, *second;
  require_ok(ctx, gaaw_buffer_host_ptr(b, &first));
  require_ok(ctx, gaaw_buffer_free(ctx, &b));
  expect_true(b == NULL, "free sets the handle to NULL");
  gaaw_memory_usage(ctx, GAAW_MEM_ACTIVATIONS, &cur, &peak);
  expect_true(cur == 0 && peak == (3u << 20), "after free: current %zu peak %zu", cur, peak);
  gaaw_memory_cached(ctx, &cached);
  expect_true(cached >= (3u << 20), "cached %zu", cached);
  require_ok(ctx, gaaw_buffer_alloc(ctx, (3 << 20) - 1000, GAAW_MEM_WORKSPACE, &b));
  require_ok(ctx, gaaw_buffer_host_ptr(b, &second));
  expect_true(first == second, "a cached block of the same class was not reused");
  gaaw_memory_usage(ctx, GAAW_MEM_WORKSPACE, &cur, NULL);
  expect_true(cur == (3u << 20) - 1000, "workspace current %zu", cur);
  gaaw_memory_cached(ctx, &cached);
  expect_true(cached == 0, "cache after reuse holds %zu bytes", cached);
  gaaw_buffer_free(ctx, &b);
  expect_status_ctx(ctx, gaaw_memory_release_cached(ctx), GAAW_SUCCESS);
  gaaw_memory_cached(ctx, &cached);
  expect_true(cached == 0, "cache after release holds %zu bytes", cached);
  expect_status_ctx(ctx, gaaw_memory_reset_peak(ctx), GAAW_SUCCESS);
  gaaw_memory_usage(ctx, GAAW_MEM_ACTIVATIONS, &cur, &peak);
  expect_true(peak == 0, "peak after reset %zu", peak);

  /* views and tensors */
  gaaw_tensor_t t;
  int64_t shape[2] = {10, 25};
  expect_status_ctx(ctx, gaaw_tensor_view(a, 0, GAAW_F32, 2, shape, &t), GAAW_SUCCESS);
  expect_true(gaaw_tensor_numel(&t) == 250 && t.ndim == 2 && t.shape[1] == 25, "view");
  int64_t too_big[2] = {10, 26};
  expect_status_ctx(ctx, gaaw_tensor_view(a, 0, GAAW_F32, 2, too_big, &t), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(ctx), "overruns the 1000-byte buffer") != NULL, "%s", gaaw_last_error(ctx));
  expect_status_ctx(ctx, gaaw_tensor_view(a, 2, GAAW_F32, 1, shape, &t), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_tensor_view(a, 0, (gaaw_dtype_t)7, 1, shape, &t), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_tensor_view(a, 0, GAAW_F32, 0, shape, &t), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_tensor_view(a, 0, GAAW_F32, 5, shape, &t), GAAW_ERR_INVALID_ARG);
  int64_t negative[1] = {-1};
  expect_status_ctx(ctx, gaaw_tensor_view(a, 0, GAAW_F32, 1, negative, &t), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_tensor_view(NULL, 0, GAAW_F32, 1, shape, &t), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_tensor_view(a, 0, GAAW_F32, 1, NULL, &t), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_tensor_view(a, 0, GAAW_F32, 1, shape, NULL), GAAW_ERR_INVALID_ARG);
  int64_t huge[2] = {INT64_MAX / 2, 4};
  expect_status_ctx(ctx, gaaw_tensor_view(a, 0, GAAW_F32, 2, huge, &t), GAAW_ERR_INVALID_ARG);
  gaaw_tensor_t u;
  int64_t shape3[3] = {2, 3, 4};
  expect_status_ctx(ctx, gaaw_tensor_alloc(ctx, GAAW_BF16, 3, shape3, GAAW_MEM_GRADS, &u), GAAW_SUCCESS);
  expect_true(gaaw_tensor_numel(&u) == 24, "numel %lld", (long long)gaaw_tensor_numel(&u));
  gaaw_memory_usage(ctx, GAAW_MEM_GRADS, &cur, NULL);
  expect_true(cur == 48, "24 bf16 elements are 48 bytes, accounted %zu", cur);
  gaaw_buffer_free(ctx, &u.buf);
  expect_status_ctx(ctx, gaaw_tensor_alloc(ctx, GAAW_F32, 1, negative, GAAW_MEM_GRADS, &u), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_tensor_alloc(NULL, GAAW_F32, 1, shape, GAAW_MEM_GRADS, &u), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_tensor_alloc(ctx, GAAW_F32, 1, shape, (gaaw_mem_category_t)9, &u),
                    GAAW_ERR_INVALID_ARG);
  expect_true(gaaw_tensor_numel(NULL) == 0, "numel of NULL");

  /* dtype and category names */
  expect_true(gaaw_dtype_size(GAAW_BF16) == 2 && gaaw_dtype_size(GAAW_I32) == 4 && gaaw_dtype_size(9) == 0, "sizes");
  expect_true(strcmp(gaaw_dtype_name(GAAW_F16), "f16") == 0 && strcmp(gaaw_dtype_name(9), "invalid") == 0, "names");
  expect_true(strcmp(gaaw_mem_category_name(GAAW_MEM_OPTIMIZER), "optimizer") == 0, "category name");
  expect_true(strcmp(gaaw_mem_category_name((gaaw_mem_category_t)42), "invalid") == 0, "bad category name");

  /* bad input of the buffer API */
  gaaw_buffer_t c = NULL;
  expect_status_ctx(ctx, gaaw_buffer_alloc(ctx, 0, GAAW_MEM_PARAMS, &c), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(ctx), "bytes must be > 0") != NULL, "%s", gaaw_last_error(ctx));
  expect_status_ctx(ctx, gaaw_buffer_alloc(ctx, 8, (gaaw_mem_category_t)-1, &c), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_buffer_alloc(ctx, 8, GAAW_MEM_PARAMS, NULL), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_buffer_alloc(NULL, 8, GAAW_MEM_PARAMS, &c), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_buffer_alloc(ctx, (size_t)1 << 62, GAAW_MEM_PARAMS, &c), GAAW_ERR_NO_MEMORY);
  expect_true(c == NULL, "no buffer after a failed allocation");
  expect_status_ctx(ctx, gaaw_buffer_write(ctx, a, 996, src, 8), GAAW_ERR_INVALID_ARG);
  expect_true(strstr(gaaw_last_error(ctx), "overruns the 1000-byte buffer") != NULL, "%s", gaaw_last_error(ctx));
  expect_status_ctx(ctx, gaaw_buffer_read(ctx, a, 1001, dst, 0), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_buffer_write(ctx, a, 0, NULL, 8), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_buffer_read(ctx, NULL, 0, dst, 8), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_buffer_read(NULL, a, 0, dst, 8), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_buffer_write(ctx, a, 0, src, 0), GAAW_SUCCESS);
  expect_status(gaaw_buffer_size(NULL, &bytes), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_buffer_size(a, NULL), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_buffer_host_ptr(NULL, &first), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_buffer_host_ptr(a, NULL), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_buffer_free(ctx, NULL), GAAW_SUCCESS);
  expect_status(gaaw_buffer_free(NULL, &a), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_memory_usage(ctx, (gaaw_mem_category_t)6, &cur, &peak), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_memory_usage(NULL, GAAW_MEM_PARAMS, &cur, &peak), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_memory_cached(NULL, &cached), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(ctx, gaaw_memory_cached(ctx, NULL), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_memory_release_cached(NULL), GAAW_ERR_INVALID_ARG);
  expect_status(gaaw_memory_reset_peak(NULL), GAAW_ERR_INVALID_ARG);

  /* a buffer of one context cannot be used through another */
  gaaw_context_t other;
  require_ok(NULL, gaaw_init(MPI_COMM_WORLD, cfg, &other));
  expect_status_ctx(other, gaaw_buffer_write(other, a, 0, src, 4), GAAW_ERR_INVALID_ARG);
  expect_status_ctx(other, gaaw_buffer_free(other, &a), GAAW_ERR_INVALID_ARG);
  gaaw_finalize(&other);

  /* with allocator_cache off, freed memory goes straight back */
  gaaw_buffer_free(ctx, &a);
  gaaw_finalize(&ctx);
  require_ok(NULL, gaaw_config_set(cfg, "allocator_cache", "no"));
  require_ok(NULL, gaaw_init(MPI_COMM_WORLD, cfg, &ctx));
  require_ok(ctx, gaaw_buffer_alloc(ctx, 4096, GAAW_MEM_PARAMS, &a));
  gaaw_buffer_free(ctx, &a);
  gaaw_memory_cached(ctx, &cached);
  expect_true(cached == 0, "cache disabled but %zu bytes cached", cached);
  gaaw_finalize(&ctx);

  /* device_memory_limit: what the allocator holds (in use and cached) stays under
   * it; the cache is given back before a request is refused; a refusal names the
   * request's category and what each category holds */
  require_ok(NULL, gaaw_config_set(cfg, "allocator_cache", "yes"));
  require_ok(NULL, gaaw_config_set(cfg, "device_memory_limit", "1M"));
  require_ok(NULL, gaaw_init(MPI_COMM_WORLD, cfg, &ctx));
  gaaw_buffer_t big = NULL, small = NULL;
  require_ok(ctx, gaaw_buffer_alloc(ctx, 600 << 10, GAAW_MEM_PARAMS, &a));
  expect_status_ctx(ctx, gaaw_buffer_alloc(ctx, 600 << 10, GAAW_MEM_GRADS, &big), GAAW_ERR_NO_MEMORY);
  expect_true(big == NULL && strstr(gaaw_last_error(ctx), "of grads do not fit") &&
                strstr(gaaw_last_error(ctx), "params 614400"),
              "device_memory_limit's refusal: %s", gaaw_last_error(ctx));
  require_ok(ctx, gaaw_buffer_alloc(ctx, 300 << 10, GAAW_MEM_GRADS, &small));
  gaaw_buffer_free(ctx, &a); /* cached: 600 KiB held but free */
  require_ok(ctx, gaaw_buffer_alloc(ctx, 650 << 10, GAAW_MEM_ACTIVATIONS, &big)); /* after giving the cache back */
  gaaw_memory_cached(ctx, &cached);
  expect_true(cached == 0, "the cache was not given back for a request under the limit (%zu cached)", cached);
  gaaw_buffer_free(ctx, &big), gaaw_buffer_free(ctx, &small);
  gaaw_finalize(&ctx);
  static const char *const bad_limits[] = {"12Q", "-5", "1.5G", "G", "99999999999999999999"};
  for (size_t k = 0; k < sizeof bad_limits / sizeof bad_limits[0]; k++) {
    require_ok(NULL, gaaw_config_set(cfg, "device_memory_limit", bad_limits[k]));
    expect_status(gaaw_init(MPI_COMM_WORLD, cfg, &ctx), GAAW_ERR_INVALID_ARG);
    expect_true(strstr(gaaw_last_error(NULL), "option device_memory_limit must be a byte count") != NULL,
                "device_memory_limit=%s: %s", bad_limits[k], gaaw_last_error(NULL));
  }

  gaaw_config_destroy(&cfg);
  MPI_Finalize();
  return test_finish("test_memory");
}
