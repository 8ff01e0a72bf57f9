! The sampler from Fortran on 2 ranks (dp 2): (features, samples) arrays go in and
! come back as the C API stores them; draws of real(c_float) and real(c_double)
! arrays give the same rows from the same seed; an exchange mixes the two ranks;
! a bad count on one rank fails both. The verdict is summed over the ranks.
program fortran_sampler_np2
  use, intrinsic :: iso_c_binding
  use mpi
  use gaaw
  use gaaw_test_util
  implicit none
  type(gaaw_config) :: cfg
  type(gaaw_context) :: ctx
  type(gaaw_sampler) :: s, s32, s64
  integer :: ierr, rank, j
  real(c_float) :: x(3, 6), y(1, 6), dx(3, 40), dy(1, 40)
  real(c_double) :: x64(3, 6), y64(1, 6), ex(3, 40), ey(1, 40)
  integer(c_int64_t) :: held, pushed

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call check_status("config_create", gaaw_config_create(cfg), GAAW_SUCCESS, ctx)
  call check_status("set backend", gaaw_config_set(cfg, "backend", "host"), GAAW_SUCCESS, ctx)
  call check_status("init", gaaw_init(MPI_COMM_WORLD, cfg, ctx), GAAW_SUCCESS, ctx)

  ! sample j of rank r: x = (r, j, -j), y = 100 r + j
  do j = 1, 6
    x(:, j) = [real(rank, c_float), real(j, c_float), -real(j, c_float)]
    y(1, j) = real(100 * rank + j, c_float)
  end do
  x64 = x
  y64 = y
  call check_status("create", gaaw_sampler_create(ctx, s, 3, 1, capacity=4), GAAW_SUCCESS, ctx)
  call check_status("push", gaaw_sampler_push(s, x, y), GAAW_SUCCESS, ctx)
  call check_status("size", gaaw_sampler_size(s, held, pushed), GAAW_SUCCESS, ctx)
  call check_true("newest 4 of 6 held", held == 4 .and. pushed == 6)
  call check_status("draw", gaaw_sampler_draw(s, dx, dy), GAAW_SUCCESS, ctx)
  ! the newest 4 are samples 3..6, each a whole column
  call check_true("drawn columns are whole samples among the newest 4", all(dx(2, &
      :) >= 3) .and. all(dx(3, :) == -dx(2, :)) .and. all(dy(1, :) == 100 * rank + dx(2, :)))

  ! f32 and f64 arrays: the same seed and pushes draw the same samples
  call check_status("create 32", gaaw_sampler_create(ctx, s32, 3, 1, policy=GAAW_SAMPLER_RESERVOIR, &
      seed=5), GAAW_SUCCESS, ctx)
  call check_status("create 64", gaaw_sampler_create(ctx, s64, 3, 1, policy=GAAW_SAMPLER_RESERVOIR, &
      seed=5), GAAW_SUCCESS, ctx)
  call check_status("push 32", gaaw_sampler_push(s32, x, y), GAAW_SUCCESS, ctx)
  call check_status("push 64", gaaw_sampler_push(s64, x64, y64), GAAW_SUCCESS, ctx)
  call check_status("draw 32", gaaw_sampler_draw(s32, dx, dy), GAAW_SUCCESS, ctx)
  call check_status("draw 64", gaaw_sampler_draw(s64, ex, ey), GAAW_SUCCESS, ctx)
  call check_true("f32 and f64 draws agree", all(real(dx, c_double) == ex) .and. all(real(dy, &
      c_double) == ey))

  ! exchange: 2 of the 4 drawn go to each rank
  call check_status("exchange", gaaw_sampler_exchange(s, 4), GAAW_SUCCESS, ctx)
  call check_status("size after exchange", gaaw_sampler_size(s, held, pushed), GAAW_SUCCESS, ctx)
  call check_true("exchange pushed 4", held == 4 .and. pushed == 10)
  call check_status("draw after exchange", gaaw_sampler_draw(s, dx, dy), GAAW_SUCCESS, ctx)
  call check_true("rows stay whole after exchange", all(dy(1, :) == 100 * dx(1, :) + dx(2, :)))

  ! one rank bad: both fail with the named code
  call check_status("bad exchange on rank 1", gaaw_sampler_exchange(s, merge(3, 4, rank == 1)), &
      GAAW_ERR_INVALID_ARG, ctx)
  call check_true("policy name", gaaw_sampler_policy_name(GAAW_SAMPLER_RESERVOIR) == "reservoir")

  call check_status("destroy", gaaw_sampler_destroy(s), GAAW_SUCCESS, ctx)
  call check_true("destroy 2", &
      gaaw_sampler_destroy(s32) == GAAW_SUCCESS .and. gaaw_sampler_destroy(s64) == GAAW_SUCCESS)
  call check_status("finalize", gaaw_finalize(ctx), GAAW_SUCCESS, ctx)
  call check_status("config_destroy", gaaw_config_destroy(cfg), GAAW_SUCCESS, ctx)
  call test_finish("fortran_sampler_np2")

end program fortran_sampler_np2
