! The sampler from Fortran on 2 ranks (dp 2): (features, samples) arrays go in and
! come back as the C API stores them; draws of real(c_float) and real(c_double)
! arrays give the same rows from the same seed; an exchange mixes the two ranks;
! a bad count on one rank fails both. The verdict is summed over the ranks.
program fortran_sampler_np2
  use, intrinsic :: iso_c_binding
  use mpi
  use gaaw
  implicit none
  type(gaaw_config) :: cfg
  type(gaaw_context) :: ctx
  type(gaaw_sampler) :: s, s32, s64
  integer :: ierr, rank, failures, total, j
  real(c_float) :: x(3, 6), y(1, 6), dx(3, 40), dy(1, 40)
  real(c_double) :: x64(3, 6), y64(1, 6), ex(3, 40), ey(1, 40)
  integer(c_int64_t) :: held, pushed

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  failures = 0
  call check(gaaw_config_create(cfg) == GAAW_SUCCESS, "config_create")
  call check(gaaw_config_set(cfg, "backend", "host") == GAAW_SUCCESS, "set backend")
  call check(gaaw_init(MPI_COMM_WORLD, cfg, ctx) == GAAW_SUCCESS, "init")

  ! sample j of rank r: x = (r, j, -j), y = 100 r + j
  do j = 1, 6
    x(:, j) = [real(rank, c_float), real(j, c_float), -real(j, c_float)]
    y(1, j) = real(100 * rank + j, c_float)
  end do
  x64 = x
  y64 = y
  call check(gaaw_sampler_create(ctx, s, 3, 1, capacity=4) == GAAW_SUCCESS, "create")
  call check(gaaw_sampler_push(s, x, y) == GAAW_SUCCESS, "push")
  call check(gaaw_sampler_size(s, held, pushed) == GAAW_SUCCESS, "size")
  call check(held == 4 .and. pushed == 6, "newest 4 of 6 held")
  call check(gaaw_sampler_draw(s, dx, dy) == GAAW_SUCCESS, "draw")
  ! the newest 4 are samples 3..6, each a whole column
  call check(all(dx(2, :) >= 3) .and. all(dx(3, :) == -dx(2, :)) .and. all(dy(1, :) == 100 * rank + dx(2, :)), &
             "drawn columns are whole samples among the newest 4")

  ! f32 and f64 arrays: the same seed and pushes draw the same samples
  call check(gaaw_sampler_create(ctx, s32, 3, 1, policy=GAAW_SAMPLER_RESERVOIR, seed=5) == GAAW_SUCCESS, "create 32")
  call check(gaaw_sampler_create(ctx, s64, 3, 1, policy=GAAW_SAMPLER_RESERVOIR, seed=5) == GAAW_SUCCESS, "create 64")
  call check(gaaw_sampler_push(s32, x, y) == GAAW_SUCCESS, "push 32")
  call check(gaaw_sampler_push(s64, x64, y64) == GAAW_SUCCESS, "push 64")
  call check(gaaw_sampler_draw(s32, dx, dy) == GAAW_SUCCESS, "draw 32")
  call check(gaaw_sampler_draw(s64, ex, ey) == GAAW_SUCCESS, "draw 64")
  call check(all(real(dx, c_double) == ex) .and. all(real(dy, c_double) == ey), "f32 and f64 draws agree")

  ! exchange: 2 of the 4 drawn go to each rank
  call check(gaaw_sampler_exchange(s, 4) == GAAW_SUCCESS, "exchange")
  call check(gaaw_sampler_size(s, held, pushed) == GAAW_SUCCESS, "size after exchange")
  call check(held == 4 .and. pushed == 10, "exchange pushed 4")
  call check(gaaw_sampler_draw(s, dx, dy) == GAAW_SUCCESS, "draw after exchange")
  call check(all(dy(1, :) == 100 * dx(1, :) + dx(2, :)), "rows stay whole after exchange")

  ! one rank bad: both fail with the named code
  call check(gaaw_sampler_exchange(s, merge(3, 4, rank == 1)) == GAAW_ERR_INVALID_ARG, "bad exchange on rank 1")
  call check(gaaw_sampler_policy_name(GAAW_SAMPLER_RESERVOIR) == "reservoir", "policy name")

  call check(gaaw_sampler_destroy(s) == GAAW_SUCCESS, "destroy")
  call check(gaaw_sampler_destroy(s32) == GAAW_SUCCESS .and. gaaw_sampler_destroy(s64) == GAAW_SUCCESS, "destroy 2")
  call check(gaaw_finalize(ctx) == GAAW_SUCCESS, "finalize")
  call check(gaaw_config_destroy(cfg) == GAAW_SUCCESS, "config_destroy")
  call MPI_Allreduce(failures, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank == 0 .and. total == 0) print '(a)', "fortran_sampler_np2: all checks passed"
  call MPI_Finalize(ierr)
  if (total /= 0) error stop 1

contains

  subroutine check(cond, what)
    logical, intent(in) :: cond
    character(len=*), intent(in) :: what
    if (.not. cond) then
      failures = failures + 1
      print '(a,i0,4a)', "FAIL rank ", rank, ": ", what, "; last error: ", gaaw_last_error(ctx)
    end if
  end subroutine check
end program fortran_sampler_np2
