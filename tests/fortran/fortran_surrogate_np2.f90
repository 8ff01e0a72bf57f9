! Surrogate models from Fortran on 2 ranks (dp 2 passes, no optimizer, so each rank
! computes its own gradients): a model from layer specs equals the same MLP named
! by a spec string (same parameter names and seed: the same loss, bit for bit); the
! caller's loss through forward_outputs and backward_from, with dL/dy of the MSE,
! gives the gradients of the library's MSE within 1e-6; a bad spec word and a
! model of another shape on one rank fail with the named code on both ranks.
program fortran_surrogate_np2
  use, intrinsic :: iso_c_binding
  use mpi
  use gaaw
  use gaaw_test_util
  implicit none
  integer, parameter :: nin = 2, hidden = 8, nb = 16
  type(gaaw_config) :: cfg
  type(gaaw_context) :: ctx
  type(gaaw_model) :: from_specs, from_text, bad
  type(gaaw_mlp_config_t) :: parsed
  type(gaaw_layer_spec_t) :: specs(4)
  integer :: ierr, rank, j
  real(c_float) :: x(nin, nb), t(1, nb), y(1, nb), dy(1, nb), loss1, loss2
  real(c_float) :: g_lib(hidden * nin), g_own(hidden * nin)
  real(c_double) :: idle, busy, count, mean(nin + 1), std(nin + 1)

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call check_status("config_create", gaaw_config_create(cfg), GAAW_SUCCESS, ctx)
  call check_status("backend", gaaw_config_set(cfg, "backend", "host"), GAAW_SUCCESS, ctx)
  call check_status("init", gaaw_init(MPI_COMM_WORLD, cfg, ctx), GAAW_SUCCESS, ctx)
  do j = 1, nb
    x(:, j) = [0.1 * j, -0.05 * j]
    t(1, j) = sin(x(1, j)) + x(2, j)
  end do

  specs = [gaaw_layer_spec_t(GAAW_SPEC_LINEAR, hidden), gaaw_layer_spec_t(GAAW_SPEC_ACTIVATION, &
           activation=GAAW_ACT_TANH), gaaw_layer_spec_t(GAAW_SPEC_LINEAR, 1), &
           gaaw_layer_spec_t(GAAW_SPEC_LOSS, loss=GAAW_LOSS_MSE)]
  call check_status("create from specs", gaaw_model_create(ctx, nin, specs, from_specs, seed=7), &
      GAAW_SUCCESS, ctx)
  call check_true("create from a spec string", gaaw_model_create_from_spec(ctx, &
      "mlp sizes=2,8,1 activation=tanh loss=mse seed=7", from_text) == GAAW_SUCCESS)
  call check_status("forward_backward specs", gaaw_model_forward_backward(from_specs, x, t, loss1), &
      GAAW_SUCCESS, ctx)
  call check_status("forward_backward text", gaaw_model_forward_backward(from_text, x, t, loss2), &
      GAAW_SUCCESS, ctx)
  call check_true("specs and spec string give the same loss", loss1 == loss2 .and. loss1 > 0)
  call check_status("library gradient", gaaw_model_get_grad(from_specs, "fc.0.weight", g_lib), &
      GAAW_SUCCESS, ctx)

  ! the caller's loss: L = mean (y - t)^2, dL/dy = 2 (y - t) / nb
  call check_status("zero_grad", gaaw_model_zero_grad(from_specs), GAAW_SUCCESS, ctx)
  call check_status("forward_outputs", gaaw_model_forward_outputs(from_specs, x, y), GAAW_SUCCESS, ctx)
  dy = 2 * (y - t) / nb
  call check_true("the outputs give the library's loss", abs(sum((y - t)**2) / nb - loss1) <= 1e-6 * loss1)
  call check_status("backward_from", gaaw_model_backward_from(from_specs, dy), GAAW_SUCCESS, ctx)
  call check_status("own gradient", gaaw_model_get_grad(from_specs, "fc.0.weight", g_own), GAAW_SUCCESS, ctx)
  call check_true("backward_from gives the MSE's gradients", &
      maxval(abs(g_own - g_lib)) <= 1e-6 * max(1e-30, maxval(abs(g_lib))) + 1e-7)
  call check_status("pipeline_times", gaaw_model_pipeline_times(from_specs, idle, busy), GAAW_SUCCESS, ctx)

  ! normalisation: both ranks add the same nb samples, so the count is 2 nb and the
  ! means are the samples' means
  call check_status("normalization_update", gaaw_model_normalization_update(from_text, x, t), GAAW_SUCCESS, ctx)
  call check_status("normalization_stats", gaaw_model_normalization_stats(from_text, count, mean, std), &
      GAAW_SUCCESS, ctx)
  call check_true("normalisation count", count == 2 * nb)
  call check_true("normalisation means", abs(mean(1) - sum(real(x(1, :), c_double)) / nb) < 1d-6 .and. &
      abs(mean(3) - sum(real(t(1, :), c_double)) / nb) < 1d-6)
  call check_true("normalisation std", abs(std(2) - sqrt(sum((x(2, :) - mean(2))**2) / nb)) < 1d-6)

  ! errors: a bad word, and one rank building another model
  call check_true("a misspelt key is refused", gaaw_mlp_config_parse(ctx, &
      "mlp sizes=2,8,1 activaton=tanh", parsed) == GAAW_ERR_INVALID_ARG)
  call check_true("the message names the bad word", index(gaaw_last_error(ctx), "activaton") > 0)
  call check_true("different models on the two ranks fail both", gaaw_model_create_from_spec(ctx, &
      merge("mlp sizes=2,8,1", "mlp sizes=2,4,1", rank == 0), bad) == GAAW_ERR_INVALID_ARG)

  call check_true("destroy", &
      gaaw_model_destroy(from_specs) == GAAW_SUCCESS .and. gaaw_model_destroy(from_text) == GAAW_SUCCESS)
  call check_status("finalize", gaaw_finalize(ctx), GAAW_SUCCESS, ctx)
  call check_status("config_destroy", gaaw_config_destroy(cfg), GAAW_SUCCESS, ctx)
  call test_finish("fortran_surrogate_np2")

end program fortran_surrogate_np2
