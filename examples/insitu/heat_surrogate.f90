! heat_surrogate: in-situ training of a surrogate model next to a simulation.
!
! A 2D heat-equation solver (explicit finite differences, u = 0 on the boundary) is
! split over the MPI ranks in strips of rows, each rank exchanging halo rows with
! its neighbours. While it runs, every rank turns its own fields into training
! samples for an MLP: the neighbourhood of a point at time t (inputs) and how much
! the point changes over the next K solver steps (target). gaaw trains the model
! with data parallelism over the solver ranks (each rank's gradients come from its
! own subdomain) and, with --tp 2, with tensor parallelism: then the two ranks of a
! tp group share one copy of the model, so they gather their samples and pass the
! same batch. Finally both the solver and the surrogate advance the same field,
! the surrogate K steps per prediction, and the program prints the surrogate's
! error against the solver.
!
! Samples are Fortran arrays x(inputs, samples) and y(1, samples), passed to gaaw
! as they are (no copies, no transposes).
!
! Build and run (the same code is in heat_surrogate.c for C):
!   mpifort -O2 heat_surrogate.f90 -o heat_surrogate $(pkg-config --cflags --libs gaaw)
!   mpiexec -n 2 ./heat_surrogate            # dp 2
!   mpiexec -n 2 ./heat_surrogate --tp 2     # tp 2 (any gaaw option: --key value)
! The grid's rows (ny) must divide by the number of ranks.
program heat_surrogate
  use, intrinsic :: iso_c_binding
  use mpi
  use gaaw
  implicit none
  ! the problem
  integer, parameter :: nx = 64, ny = 64             ! grid columns and rows (rows split over ranks)
  real(c_double), parameter :: alpha = 0.2_c_double  ! diffusion number kappa dt / h^2 (stable up to 0.25)
  integer, parameter :: k = 2                        ! solver steps per surrogate step
  integer, parameter :: r = k                        ! neighbourhood radius: k steps reach k cells
  integer, parameter :: nin = (2 * r + 1)**2         ! inputs per sample: the (2r+1)^2 patch
  ! training and the comparison
  integer, parameter :: snapshots = 25               ! samples are taken every k solver steps
  integer, parameter :: steps_per_snapshot = 4       ! optimizer steps per snapshot
  integer, parameter :: batch = 256                  ! samples per rank per optimizer step
  integer, parameter :: rollout = 20                 ! surrogate steps compared with the solver
  ! samples are differences to the centre value, scaled to order 1
  real(c_float), parameter :: in_scale = 10.0
  real(c_float), parameter :: out_scale = real(10 / (k * alpha), c_float)

  type(gaaw_config) :: cfg
  type(gaaw_context) :: ctx
  type(gaaw_model) :: model
  type(gaaw_optimizer) :: opt
  integer :: ierr, rank, nranks, dp, pp, tp, dp_rank, pp_rank, tp_rank, tp_comm
  integer :: rows, first_row, up, down, points, snap, step, b, p, i, j, s
  integer(c_int64_t) :: pick
  ! the fields: u(column, local row), both counted from 0, with r halo cells on
  ! every side (-r..-1 and nx..nx+r-1, rows..rows+r-1)
  real(c_double), allocatable :: u(:, :), before(:, :), sur(:, :), start(:, :)
  ! samples (inputs, samples) and their tp-group copies; predictions
  real(c_float), allocatable :: x(:, :), y(:, :), gx(:, :), gy(:, :), px(:, :), gpx(:, :), pred(:, :)
  real(c_float) :: loss
  real(c_double) :: err, change, norm
  character(len=:), allocatable :: rest(:) ! command-line arguments gaaw did not take

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)

  ! gaaw's options from the command line (--tp 2) and GAAW_* variables
  call check(gaaw_config_create(cfg), "gaaw_config_create")
  call check(gaaw_config_parse_args(cfg, rest), "the command line")
  if (size(rest) > 0) then ! what is left is not a gaaw option
    if (rank == 0) print '(3a)', "heat_surrogate: unknown argument ", trim(rest(1)), &
                             " (usage: heat_surrogate [--tp N])"
    call MPI_Abort(MPI_COMM_WORLD, 2, ierr)
  end if
  call check(gaaw_init(MPI_COMM_WORLD, cfg, ctx), "gaaw_init")
  call check(gaaw_topology_sizes(ctx, dp, pp, tp), "gaaw_topology_sizes")
  call check(gaaw_topology_coords(ctx, dp_rank, pp_rank, tp_rank), "gaaw_topology_coords")
  call MPI_Comm_split(MPI_COMM_WORLD, dp_rank, tp_rank, tp_comm, ierr) ! this rank's tp group
  if (mod(ny, nranks) /= 0) then
    if (rank == 0) print '(a,i0,a,i0,a)', "heat_surrogate: ", ny, " rows do not divide over ", nranks, " ranks"
    call MPI_Abort(MPI_COMM_WORLD, 2, ierr)
  end if
  if (rank == 0) print '(a,i0,a,i0,a,i0,a,i0,a,i0,a,i0,a)', "heat_surrogate: ", nranks, " ranks (tp ", tp, &
                       " x dp ", dp, "), grid ", nx, " x ", ny, ", ", k, " solver steps per surrogate step"

  ! the solver's strip
  rows = ny / nranks
  first_row = rank * rows
  up = MPI_PROC_NULL
  down = MPI_PROC_NULL
  if (rank > 0) up = rank - 1
  if (rank < nranks - 1) down = rank + 1
  allocate(u(-r:nx - 1 + r, -r:rows - 1 + r), source=0.0_c_double)
  allocate(before, start, sur, mold=u)
  call initial_field(u)

  ! the surrogate: nin -> 64 -> 64 -> 64 -> 1 (an even number of linears, so that
  ! tp pairs each column-parallel linear with a row-parallel one), AdamW
  ! with GELU, as the C version (GAAW_ACT_TANH and the others work too)
  call check(gaaw_model_create_mlp(ctx, [nin, 64, 64, 64, 1], model, activation=GAAW_ACT_GELU, seed=1), &
             "gaaw_model_create_mlp")
  call check(gaaw_optimizer_create(model, opt, zero_stage=1, lr=2e-3, weight_decay=0.0), "gaaw_optimizer_create")

  points = nx * rows
  allocate(x(nin, batch), y(1, batch), gx(nin, tp * batch), gy(1, tp * batch))
  pick = 12345 + 977 * rank ! which points go into a batch

  ! 1. the solver runs; every k steps its fields train the surrogate
  do snap = 1, snapshots
    call exchange_halo(u)
    before = u
    do s = 1, k
      call solver_step(u)
    end do
    do step = 1, steps_per_snapshot
      do b = 1, batch
        pick = modulo(pick * 1664525_c_int64_t + 1013904223_c_int64_t, 2_c_int64_t**32)
        p = int(modulo(pick / 256, int(points, c_int64_t)))
        i = mod(p, nx)
        j = p / nx
        call patch(before, i, j, x(:, b))
        y(1, b) = out_scale * real(u(i, j) - before(i, j), c_float)
      end do
      if (tp == 1) then
        call check(gaaw_model_forward_backward(model, x, y, loss), "gaaw_model_forward_backward")
      else
        call group_batch(x, gx)
        call group_batch(y, gy)
        call check(gaaw_model_forward_backward(model, gx, gy, loss), "gaaw_model_forward_backward")
      end if
      call check(gaaw_optimizer_step(opt), "gaaw_optimizer_step")
    end do
    if (rank == 0 .and. mod(snap, 5) == 0) print '(a,i3,a,es10.3)', "snapshot ", snap, ": training loss ", loss
  end do

  ! 2. from the same field, the solver and the surrogate advance rollout * k steps
  sur = u
  start = u
  allocate(px(nin, points), gpx(nin, tp * points), pred(1, tp * points))
  do step = 1, rollout
    do s = 1, k
      call solver_step(u)
    end do
    call exchange_halo(sur)
    do p = 0, points - 1
      call patch(sur, mod(p, nx), p / nx, px(:, p + 1))
    end do
    if (tp == 1) then
      call check(gaaw_model_predict(model, px, pred), "gaaw_model_predict")
    else
      call group_batch(px, gpx)
      call check(gaaw_model_predict(model, gpx, pred), "gaaw_model_predict")
    end if
    do p = 0, points - 1 ! this rank's points come tp_rank * points into the group's batch
      i = mod(p, nx)
      j = p / nx
      sur(i, j) = sur(i, j) + pred(1, tp_rank * points + p + 1) / out_scale
    end do
  end do
  err = sqrt(world_sum(sur(0:nx - 1, 0:rows - 1) - u(0:nx - 1, 0:rows - 1)))
  change = sqrt(world_sum(u(0:nx - 1, 0:rows - 1) - start(0:nx - 1, 0:rows - 1)))
  norm = sqrt(world_sum(u(0:nx - 1, 0:rows - 1)))
  if (rank == 0) then
    print '(a,i0,a,i0,a,es10.3,a,es10.3)', "after ", rollout, " surrogate steps (", rollout * k, &
          " solver steps): |u_surrogate - u_solver| = ", err, ", |u_solver| = ", norm
    print '(a,f7.4)', "surrogate error relative to the solver's change: ", err / change
  end if

  call check(gaaw_optimizer_destroy(opt), "gaaw_optimizer_destroy")
  call check(gaaw_model_destroy(model), "gaaw_model_destroy")
  call MPI_Comm_free(tp_comm, ierr)
  call check(gaaw_finalize(ctx), "gaaw_finalize")
  call check(gaaw_config_destroy(cfg), "gaaw_config_destroy")
  call MPI_Finalize(ierr)

contains

  ! Stops the program with gaaw's report when st is not GAAW_SUCCESS. Every rank
  ! gets the same status from gaaw's collective calls, so all stop together.
  subroutine check(st, what)
    integer, intent(in) :: st
    character(len=*), intent(in) :: what
    integer :: e
    if (st == GAAW_SUCCESS) return
    print '(4a)', "heat_surrogate: ", what, " failed: ", gaaw_last_error(ctx)
    call MPI_Abort(MPI_COMM_WORLD, 1, e)
  end subroutine check

  ! Two Gaussian bumps.
  subroutine initial_field(f)
    real(c_double), intent(inout) :: f(-r:, -r:)
    real(c_double) :: a, c, row
    integer :: ii, jj
    f = 0
    do jj = 0, rows - 1
      row = first_row + jj
      do ii = 0, nx - 1
        a = ((ii - 20)**2 + (row - 24)**2) / (2 * 6.0_c_double**2)
        c = ((ii - 44)**2 + (row - 40)**2) / (2 * 4.0_c_double**2)
        f(ii, jj) = exp(-a) + 0.5_c_double * exp(-c)
      end do
    end do
  end subroutine initial_field

  ! Fills the r halo rows from the neighbours (left as zero at the boundary).
  subroutine exchange_halo(f)
    real(c_double), intent(inout) :: f(-r:, -r:)
    integer :: n, e
    n = r * (nx + 2 * r)
    call MPI_Sendrecv(f(-r, 0), n, MPI_DOUBLE_PRECISION, up, 0, f(-r, rows), n, MPI_DOUBLE_PRECISION, &
                      down, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE, e)
    call MPI_Sendrecv(f(-r, rows - r), n, MPI_DOUBLE_PRECISION, down, 1, f(-r, -r), n, &
                      MPI_DOUBLE_PRECISION, up, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE, e)
  end subroutine exchange_halo

  ! One explicit step of du/dt = kappa laplacian(u).
  subroutine solver_step(f)
    real(c_double), intent(inout) :: f(-r:, -r:)
    real(c_double) :: old(-r:nx - 1 + r, -r:rows - 1 + r)
    integer :: ii, jj
    call exchange_halo(f)
    old = f
    do jj = 0, rows - 1
      do ii = 0, nx - 1
        f(ii, jj) = old(ii, jj) + alpha * (old(ii - 1, jj) + old(ii + 1, jj) + old(ii, jj - 1) + old(ii, jj + 1) &
                                           - 4 * old(ii, jj))
      end do
    end do
  end subroutine solver_step

  ! The model's inputs for point (ii, jj) of field f (halo filled).
  subroutine patch(f, ii, jj, xs)
    real(c_double), intent(in) :: f(-r:, -r:)
    integer, intent(in) :: ii, jj
    real(c_float), intent(out) :: xs(:)
    integer :: di, dj, n
    n = 0
    do dj = -r, r
      do di = -r, r
        n = n + 1
        xs(n) = in_scale * real(f(ii + di, jj + dj) - f(ii, jj), c_float)
      end do
    end do
  end subroutine patch

  ! With tp > 1 the ranks of a tp group hold one model between them and must pass
  ! the same batch: every member's samples, in member order.
  subroutine group_batch(mine, all)
    real(c_float), intent(in) :: mine(:, :)
    real(c_float), intent(out) :: all(:, :)
    integer :: e
    call MPI_Allgather(mine, size(mine), MPI_REAL, all, size(mine), MPI_REAL, tp_comm, e)
  end subroutine group_batch

  ! The sum over every rank of the squares of d.
  real(c_double) function world_sum(d) result(total)
    real(c_double), intent(in) :: d(:, :)
    real(c_double) :: local
    integer :: e
    local = sum(d**2)
    call MPI_Allreduce(local, total, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, e)
  end function world_sum
end program heat_surrogate
