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
! With --save-dir DIR the program keeps its surrogate: a checkpoint in DIR every
! --save-every N solver timesteps (at the end of the first snapshot that reaches
! each multiple of N) and always at the last timestep of training, each with the
! simulation's timestep and time as entries (gaaw_checkpoint_set_entry), which a
! restart with gaaw_checkpoint_load gets back. heat_predict reloads it and only
! predicts. --predictions FILE writes the first predictions after training (one
! line per grid point) for comparison with heat_predict's.
!
! Samples are Fortran arrays x(inputs, samples) and y(1, samples), passed to gaaw
! as they are (no copies, no transposes).
!
! Build and run (the same code is in heat_surrogate.c for C; heat.inc and
! heat_procs.inc, which it includes, hold the solver and the model, shared with
! heat_predict.f90):
!   mpifort -O2 heat_surrogate.f90 -o heat_surrogate $(pkg-config --cflags --libs gaaw)
!   mpiexec -n 2 ./heat_surrogate            # dp 2
!   mpiexec -n 2 ./heat_surrogate --tp 2     # tp 2 (any gaaw option: --key value)
!   mpiexec -n 2 ./heat_surrogate --save-dir ck --save-every 20
! The grid's rows (ny) must divide by the number of ranks.
program heat_surrogate
  use, intrinsic :: iso_c_binding
  use mpi
  use gaaw
  implicit none
  character(len=*), parameter :: program_name = "heat_surrogate"
  include 'heat.inc'

  interface
    ! C's rename(2), to replace the timestep file whole
    integer(c_int) function c_rename(from, to) bind(C, name="rename")
      import :: c_int, c_char
      character(kind=c_char), dimension(*), intent(in) :: from, to
    end function c_rename
  end interface

  type(gaaw_config) :: cfg
  type(gaaw_model) :: model
  type(gaaw_optimizer) :: opt
  integer :: ierr, snap, step, b, p, i, j, s, save_every, timestep
  integer(c_int64_t) :: pick
  ! the fields: u(column, local row), both counted from 0, with r halo cells on
  ! every side (-r..-1 and nx..nx+r-1, rows..rows+r-1)
  real(c_double), allocatable :: u(:, :), before(:, :)
  ! samples (inputs, samples) and their tp-group copies
  real(c_float), allocatable :: x(:, :), y(:, :), gx(:, :), gy(:, :)
  real(c_float) :: loss
  character(len=:), allocatable :: rest(:) ! command-line arguments gaaw did not take
  character(len=:), allocatable :: save_dir, predictions, every
  logical :: crossed

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)

  ! gaaw's options from the command line (--tp 2) and GAAW_* variables; what is
  ! left: this program's own options
  call check(gaaw_config_create(cfg), "gaaw_config_create")
  call check(gaaw_config_parse_args(cfg, rest), "the command line")
  save_dir = ""
  predictions = ""
  every = ""
  i = 1
  do while (i <= size(rest))
    if (take_option(rest, i, "--save-dir", save_dir)) cycle
    if (take_option(rest, i, "--save-every", every)) cycle
    if (take_option(rest, i, "--predictions", predictions)) cycle
    if (rank == 0) print '(3a)', "heat_surrogate: unknown argument ", trim(rest(i)), &
                             " (usage: heat_surrogate [--tp N] [--save-dir DIR [--save-every N]] [--predictions FILE])"
    call MPI_Abort(MPI_COMM_WORLD, 2, ierr)
  end do
  save_every = 0 ! the last timestep only
  if (len(every) > 0) then
    read(every, *, iostat=ierr) save_every
    if (ierr /= 0 .or. verify(every, "0123456789") /= 0 .or. save_every < 1 .or. len(save_dir) == 0) then
      if (rank == 0) print '(a)', "heat_surrogate: --save-every takes a number >= 1 and needs --save-dir"
      call MPI_Abort(MPI_COMM_WORLD, 2, ierr)
    end if
  end if
  call heat_init(cfg) ! ctx and the layout
  call strip_init(u) ! the solver's strip, at the initial field
  if (rank == 0) print '(a,i0,a,i0,a,i0,a,i0,a,i0,a,i0,a)', "heat_surrogate: ", nranks, " ranks (tp ", tp, &
                       " x dp ", dp, "), grid ", nx, " x ", ny, ", ", k, " solver steps per surrogate step"
  allocate(before, mold=u)

  ! the surrogate (heat_procs.inc), AdamW
  call check(heat_model_create(model), "gaaw_model_create_mlp")
  call check(gaaw_optimizer_create(model, opt, zero_stage=1, lr=2e-3, weight_decay=0.0), "gaaw_optimizer_create")

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
    timestep = snap * k ! the solver's steps so far
    crossed = .false.
    if (save_every > 0) crossed = timestep / save_every /= (timestep - k) / save_every
    if (len(save_dir) > 0 .and. (crossed .or. snap == snapshots)) call save(timestep)
  end do

  ! 2. from the same field, the solver and the surrogate advance rollout * k steps
  call run_rollout(model, u, predictions)

  call check(gaaw_optimizer_destroy(opt), "gaaw_optimizer_destroy")
  call check(gaaw_model_destroy(model), "gaaw_model_destroy")
  call MPI_Comm_free(tp_comm, ierr)
  call check(gaaw_finalize(ctx), "gaaw_finalize")
  call check(gaaw_config_destroy(cfg), "gaaw_config_destroy")
  call MPI_Finalize(ierr)

contains

  include 'heat_procs.inc'

  ! Saves the surrogate in save_dir (save_dir/step-NNNNNNNN, NNNNNNNN the
  ! optimizer's step count) with the simulation's timestep and time as entries,
  ! then writes them to save_dir/timestep_file too, where heat_predict reads them
  ! (heat_predict.f90 says why). The time is timestep * dt, in units of h^2 / kappa
  ! (so dt = alpha). The wait commits an asynchronous save (checkpoint_async) at
  ! once, so that the file never names a checkpoint that is not there; the file is
  ! replaced whole (a temporary file renamed). Collective over world.
  subroutine save(ts)
    integer, intent(in) :: ts
    character(len=32) :: step_text, time_text
    character(len=:), allocatable :: path
    integer :: unit, ios, e
    write(step_text, '(i0)') ts
    write(time_text, '(f0.6)') ts * alpha
    call check(gaaw_checkpoint_set_entry(opt, "timestep", trim(step_text)), "gaaw_checkpoint_set_entry")
    call check(gaaw_checkpoint_set_entry(opt, "time", trim(time_text)), "gaaw_checkpoint_set_entry")
    call check(gaaw_checkpoint_save(opt, save_dir), "gaaw_checkpoint_save")
    call check(gaaw_checkpoint_wait(opt), "gaaw_checkpoint_wait")
    ios = 0
    if (rank == 0) then
      path = save_dir // "/" // timestep_file
      open(newunit=unit, file=path // ".tmp", status="replace", action="write", iostat=ios)
      if (ios == 0) write(unit, '(3a)', iostat=ios) trim(step_text), " ", trim(time_text)
      if (ios == 0) close(unit, iostat=ios)
      if (ios == 0) ios = c_rename(path // ".tmp" // c_null_char, path // c_null_char)
      if (ios /= 0) then
        print '(2a)', "heat_surrogate: cannot write ", path
      else
        print '(a,i3,2a)', "timestep ", ts, ": surrogate saved in ", save_dir
      end if
    end if
    call MPI_Bcast(ios, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, e)
    if (ios /= 0) call MPI_Abort(MPI_COMM_WORLD, 1, e)
  end subroutine save
end program heat_surrogate
