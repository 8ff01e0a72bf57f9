! The Fortran training loop of DESIGN.md section 12 learns y = sin(x) on 2 ranks
! (dp 2, fortran_train_np2) and on 4 (tp 2 x dp 2, fortran_train_np4):
!  - the loop as users write it, real(c_float) arrays (features, samples) passed
!    as they are, reaches an RMS error below 0.05 on a test grid it never saw
!    (MLP 1-64-64-1; at tp 2 1-64-64-64-1, since tensor parallelism pairs a
!    column-parallel linear with a row-parallel one and a lone last
!    column-parallel linear would split the single output);
!  - the same loop through the C API (c_twin_train.c, in this program) gives
!    bit-identical predictions and loss;
!  - the same loop on real(c_double) arrays gives bit-identical results too (its
!    data is the f32 data widened, and the module narrows it back exactly);
!  - wrong arrays return the gaaw status on every rank, never a crash or a hang:
!    inputs with the wrong feature count on rank 0 only, targets with the wrong
!    sample count on the last rank only, ranks with different batch sizes, a
!    prediction array of the wrong shape, too many MLP layers; and the next good
!    step still works.
program fortran_train
  use, intrinsic :: iso_c_binding
  use mpi
  use gaaw
  use gaaw_test_util
  implicit none
  integer, parameter :: nin = 1, nout = 1, nbatch = 64, ntest = 101, steps = 300
  ! GAAW_ACT_TANH once gaaw/model.h has it
  integer, parameter :: activation = GAAW_ACT_GELU
  real(c_float), parameter :: learning_rate = 1e-2
  real(c_double), parameter :: pi = acos(-1.0_c_double)
  interface
    function c_twin_train(tp, nsizes, sizes, activation, nbatch, x, y, steps, lr, ntest, xtest, yhat, loss) &
        bind(C, name="c_twin_train")
      import :: c_int, c_float
      integer(c_int), value :: tp, nsizes, activation, nbatch, steps, ntest
      integer(c_int), intent(in) :: sizes(*)
      real(c_float), value :: lr
      real(c_float), intent(in) :: x(*), y(*), xtest(*)
      real(c_float), intent(out) :: yhat(*), loss
      integer(c_int) :: c_twin_train
    end function c_twin_train
  end interface
  type(gaaw_config) :: cfg
  integer :: ierr, world, tp, dp, dp_rank, j
  integer, allocatable :: sizes(:)
  real(c_double) :: xd(nin, nbatch), yd(nout, nbatch), xtestd(nin, ntest), yhatd(nout, ntest), lossd
  real(c_float) :: x(nin, nbatch), y(nout, nbatch), xtest(nin, ntest), yhat(nout, ntest), loss
  real(c_float) :: yhat_c(nout, ntest), loss_c
  real :: rms

  call MPI_Init(ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, world, ierr)
  tp = merge(2, 1, world == 4)
  dp = world / tp
  dp_rank = world_rank() / tp ! the default rank order: tp varies fastest
  if (tp == 1) then
    sizes = [nin, 64, 64, nout]
  else
    sizes = [nin, 64, 64, 64, nout]
  end if
  call check_status("config_create", gaaw_config_create(cfg), GAAW_SUCCESS)
  call check_status("set backend", gaaw_config_set(cfg, "backend", "host"), GAAW_SUCCESS)
  call check_status("set tp", gaaw_config_set_int(cfg, "tp", tp), GAAW_SUCCESS)

  ! this dp rank's samples interleave with the others' over [-pi, pi]; the test grid
  ! lies between them
  do j = 1, nbatch
    xd(1, j) = -pi + 2 * pi * ((j - 1) * dp + dp_rank + 0.5_c_double) / (nbatch * dp)
  end do
  do j = 1, ntest
    xtestd(1, j) = -3 + 6 * (j - 1) / real(ntest - 1, c_double)
  end do
  xd = real(real(xd, c_float), c_double)      ! exactly representable in f32
  xtestd = real(real(xtestd, c_float), c_double)
  yd = real(real(sin(xd), c_float), c_double)
  x = real(xd, c_float)
  y = real(yd, c_float)
  xtest = real(xtestd, c_float)

  call train(f64=.false.)
  rms = real(sqrt(sum((real(yhat, c_double) - sin(xtestd))**2) / ntest))
  if (world_rank() == 0) print '(a,i0,a,i0,a,es10.3,a,es10.3)', "f32 loop, tp ", tp, " x dp ", dp, &
                                ": last loss ", loss, ", RMS error on the test grid ", rms
  call check_true("RMS error below 0.05", rms < 0.05)

  call check_status("C twin", c_twin_train(int(tp, c_int), size(sizes), int(sizes, c_int), &
                                           int(activation, c_int), nbatch, x, y, steps, &
                                           learning_rate, ntest, xtest, yhat_c, loss_c), GAAW_SUCCESS)
  call check_same("predictions, Fortran against the C API", reshape(yhat, [ntest * nout]), &
                  reshape(yhat_c, [ntest * nout]))
  call check_same("last loss, Fortran against the C API", [loss], [loss_c])

  call train(f64=.true.)
  call check_same("predictions, f64 arrays against f32", reshape(real(yhatd, c_float), [ntest * nout]), &
                  reshape(yhat, [ntest * nout]))
  call check_same("last loss, f64 arrays against f32", [real(lossd, c_float)], [loss])
  if (world_rank() == 0) print '(a)', "C API and f64 loops: bit-identical to the f32 loop"

  call bad_arrays()
  call check_status("config_destroy", gaaw_config_destroy(cfg), GAAW_SUCCESS)
  deallocate(sizes) ! else LeakSanitizer reports it
  call test_finish("fortran_train")

contains

  ! The loop as a user writes it (the snippet of DESIGN.md section 12), on the
  ! real(c_float) arrays, or with f64 on the real(c_double) ones.
  subroutine train(f64)
    logical, intent(in) :: f64
    type(gaaw_context) :: ctx
    type(gaaw_model) :: model
    type(gaaw_optimizer) :: opt
    integer :: st, step
    st = gaaw_init(MPI_COMM_WORLD, cfg, ctx)
    call check_status("gaaw_init", st, GAAW_SUCCESS)
    st = gaaw_model_create_mlp(ctx, sizes, model, activation=activation)
    call check_status("create_mlp", st, GAAW_SUCCESS, ctx)
    st = gaaw_optimizer_create(model, opt, zero_stage=1, lr=learning_rate)
    call check_status("optimizer_create", st, GAAW_SUCCESS, ctx)
    do step = 1, steps
      if (f64) then
        st = gaaw_model_forward_backward(model, xd, yd, lossd)
      else
        st = gaaw_model_forward_backward(model, x, y, loss)
      end if
      if (st == GAAW_SUCCESS) st = gaaw_optimizer_step(opt)
      if (st /= GAAW_SUCCESS) exit
    end do
    call check_status("training", st, GAAW_SUCCESS, ctx)
    if (f64) then
      st = gaaw_model_predict(model, xtestd, yhatd)
    else
      st = gaaw_model_predict(model, xtest, yhat)
    end if
    call check_status("predict", st, GAAW_SUCCESS, ctx)
    call check_status("optimizer_destroy", gaaw_optimizer_destroy(opt), GAAW_SUCCESS)
    call check_status("model_destroy", gaaw_model_destroy(model), GAAW_SUCCESS)
    call check_status("finalize", gaaw_finalize(ctx), GAAW_SUCCESS)
  end subroutine train

  ! Wrong arrays on one rank, or differing between ranks: the same named error on
  ! every rank (the optimizer makes the passes collective over world).
  subroutine bad_arrays()
    type(gaaw_context) :: ctx
    type(gaaw_model) :: model, deep
    type(gaaw_optimizer) :: opt
    real(c_float) :: x2(2, nbatch), short_y(nout, nbatch - 1), yhat2(nout + 1, ntest)
    integer :: st, last
    last = world - 1
    x2 = 0
    short_y = 0
    call check_status("gaaw_init", gaaw_init(MPI_COMM_WORLD, cfg, ctx), GAAW_SUCCESS)
    st = gaaw_model_create_mlp(ctx, sizes, model, activation=activation)
    call check_status("create_mlp", st, GAAW_SUCCESS, ctx)
    call check_status("optimizer_create", gaaw_optimizer_create(model, opt, zero_stage=1), GAAW_SUCCESS, ctx)

    call check_failure("inputs of 2 features on rank 0", step_with_bad_rank(model, 0, x2, y), &
                       GAAW_ERR_INVALID_ARG, ctx, "inputs hold 64 samples of 2 features; the model takes 1")
    call check_failure("63 targets for 64 inputs on the last rank", step_with_bad_rank(model, last, x, short_y), &
                       GAAW_ERR_INVALID_ARG, ctx, "outputs hold 63 samples")
    ! rows that differ inside a tp group are refused; over dp alone they are agreed
    ! (uneven rows, doc/uneven.md), and the step completes
    st = step_with_bad_rank(model, 0, x(:, 1:nbatch / 2), y(:, 1:nbatch / 2))
    if (tp > 1) then
      call check_failure("batch 32 on rank 0, 64 on its tp peer", st, GAAW_ERR_INVALID_ARG, ctx, "batch")
    else
      call check_status("batch 32 on rank 0, 64 elsewhere (uneven rows over dp)", st, GAAW_SUCCESS, ctx)
      call check_status("its optimizer step", gaaw_optimizer_step(opt), GAAW_SUCCESS, ctx)
    end if

    call check_status("predict into (2, ntest)", gaaw_model_predict(model, xtest, yhat2), GAAW_ERR_INVALID_ARG, ctx)

    ! nothing was left half-done: a good step runs
    call check_status("a good step after the failures", gaaw_model_forward_backward(model, x, y, loss), &
                      GAAW_SUCCESS, ctx)
    call check_status("optimizer_step", gaaw_optimizer_step(opt), GAAW_SUCCESS, ctx)
    call check_true("its loss is finite", abs(loss) <= huge(loss))

    st = gaaw_model_create_mlp(ctx, [(8, j = 1, GAAW_MLP_MAX_LAYERS + 2)], deep)
    call check_status("an MLP of GAAW_MLP_MAX_LAYERS + 1 layers", st, GAAW_ERR_INVALID_ARG, ctx)
    call check_true("no model after the failed create", .not. c_associated(deep%ptr))

    call check_status("optimizer_destroy", gaaw_optimizer_destroy(opt), GAAW_SUCCESS)
    call check_status("model_destroy", gaaw_model_destroy(model), GAAW_SUCCESS)
    call check_status("finalize", gaaw_finalize(ctx), GAAW_SUCCESS)
  end subroutine bad_arrays

  ! A forward and backward pass on (x, y), except on world rank bad: (bad_x, bad_y).
  integer function step_with_bad_rank(model, bad, bad_x, bad_y) result(st)
    type(gaaw_model), intent(in) :: model
    integer, intent(in) :: bad
    real(c_float), intent(in) :: bad_x(:, :), bad_y(:, :)
    if (world_rank() == bad) then
      st = gaaw_model_forward_backward(model, bad_x, bad_y, loss)
    else
      st = gaaw_model_forward_backward(model, x, y, loss)
    end if
  end function step_with_bad_rank
end program fortran_train
