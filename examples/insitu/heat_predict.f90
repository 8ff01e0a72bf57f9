! heat_predict: the surrogate that heat_surrogate trained in situ and saved, reloaded
! in another job, on any number of ranks and any layout, only to predict.
!
! It builds the same MLP (heat_procs.inc) without an optimizer and loads the newest
! checkpoint of the save directory into it with gaaw_model_load, which reads, on
! each rank, what that rank owns in its own layout (trained with dp 2 or tp 2 on 2
! ranks, predicting on 1 rank or with tp 2). Then, as a restarted simulation would,
! it brings the solver to the timestep the checkpoint came from and compares the
! surrogate with the solver from there on, as heat_surrogate does at the end of its
! training: fresh inputs of the same kind as the training samples, never trained
! on. Both print the same lines, and with the layout of the training the same
! predictions to the bit (--predictions FILE writes them).
!
! Build and run (the same code is in heat_predict.c for C):
!   mpifort -O2 heat_predict.f90 -o heat_predict $(pkg-config --cflags --libs gaaw)
!   mpiexec -n 2 ./heat_surrogate --tp 2 --save-dir ck   # trains and saves
!   mpiexec -n 1 ./heat_predict ck                      # predicts on 1 rank
!   mpiexec -n 2 ./heat_predict --tp 2 ck               # or with tp 2 (any gaaw option)
! A directory with no checkpoint is refused with one message, on every rank.
program heat_predict
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: error_unit
  use mpi
  use gaaw
  implicit none
  character(len=*), parameter :: program_name = "heat_predict"
  include 'heat.inc'

  type(gaaw_config) :: cfg
  type(gaaw_model) :: model
  integer :: ierr, i, st, timestep
  real(c_double) :: time
  ! the field: u(column, local row), both counted from 0, with r halo cells on every side
  real(c_double), allocatable :: u(:, :)
  character(len=:), allocatable :: rest(:) ! command-line arguments gaaw did not take
  character(len=:), allocatable :: dir, predictions
  logical :: failed

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)

  ! gaaw's options from the command line (--tp 2) and GAAW_* variables; then the
  ! save directory and --predictions FILE
  call check(gaaw_config_create(cfg), "gaaw_config_create")
  call check(gaaw_config_parse_args(cfg, rest), "the command line")
  dir = ""
  predictions = ""
  i = 1
  do while (i <= size(rest))
    if (take_option(rest, i, "--predictions", predictions)) cycle
    if (len(dir) == 0 .and. rest(i)(1:1) /= "-") then
      dir = trim(rest(i))
      i = i + 1
      cycle
    end if
    if (rank == 0) print '(3a)', "heat_predict: unknown argument ", trim(rest(i)), &
                             " (usage: heat_predict [--tp N] DIR [--predictions FILE])"
    call MPI_Abort(MPI_COMM_WORLD, 2, ierr)
  end do
  if (len(dir) == 0) then
    if (rank == 0) print '(a)', "heat_predict: no save directory (usage: heat_predict [--tp N] DIR)"
    call MPI_Abort(MPI_COMM_WORLD, 2, ierr)
  end if
  call heat_init(cfg) ! ctx and the layout
  call strip_init(u) ! the solver's strip, at the initial field

  ! the surrogate, its parameters from the checkpoint (no optimizer: nothing to
  ! train). gaaw_model_load is collective and every rank gets the same status, so
  ! a directory with no checkpoint stops every rank here, rank 0 saying why.
  call check(heat_model_create(model), "gaaw_model_create_mlp")
  st = gaaw_model_load(model, dir)
  failed = st == GAAW_ERR_NOT_FOUND
  if (failed .and. rank == 0) write(error_unit, '(4a)') "heat_predict: no checkpoint in ", dir, &
                                                       " (heat_surrogate --save-dir DIR saves one)"
  if (.not. failed) then
    call check(st, "gaaw_model_load")
    failed = .not. read_timestep()
  end if
  if (.not. failed) then
    if (rank == 0) print '(a,i0,2a,i0,a,i0,3a,i0,a,f0.6,a)', "heat_predict: ", nranks, trim(merge(" rank ", " ranks", &
                         nranks == 1)), " (tp ", tp, " x dp ", dp, "), the surrogate of ", dir, ", saved at timestep ", &
                         timestep, " (t = ", time, ")"
    ! the field of that timestep (a simulation restarting from its own output
    ! would read it), then surrogate and solver from there, as heat_surrogate does
    do i = 1, timestep
      call solver_step(u)
    end do
    call run_rollout(model, u, predictions)
  end if

  call check(gaaw_model_destroy(model), "gaaw_model_destroy")
  call MPI_Comm_free(tp_comm, ierr)
  call check(gaaw_finalize(ctx), "gaaw_finalize")
  call check(gaaw_config_destroy(cfg), "gaaw_config_destroy")
  call MPI_Finalize(ierr)
  if (failed) stop 1, quiet=.true.

contains

  include 'heat_procs.inc'

  ! The timestep and time the checkpoint came from, from dir/timestep_file, which
  ! heat_surrogate writes after each save; false when the file is missing or
  ! unreadable. Read on rank 0, which sends the timestep to every rank (the time
  ! it keeps: it alone prints it). Collective over world.
  !
  ! Why a file: the checkpoint holds the timestep too, as an entry, but entries
  ! belong to an optimizer (gaaw_checkpoint_get_entry after gaaw_checkpoint_load),
  ! and a predictor has none: gaaw_model_load loads the parameters alone. The other
  ! way, an optimizer built only to load the checkpoint whole and read the entry,
  ! would load into its moments what prediction never uses, and would have to be of
  ! the trainer's kind (AdamW), or the load is refused. The file is written after
  ! the checkpoint is committed and names its timestep, so the two agree unless a
  ! save is interrupted between them or a load falls back to an older checkpoint
  ! (checkpoint_fallback).
  logical function read_timestep() result(ok)
    integer :: unit, ios, e
    ios = 0
    timestep = 0
    time = 0
    if (rank == 0) then
      open(newunit=unit, file=dir // "/" // timestep_file, status="old", action="read", iostat=ios)
      if (ios == 0) then
        read(unit, *, iostat=ios) timestep, time
        close(unit)
        if (ios == 0 .and. timestep < 0) ios = 1
      end if
      if (ios /= 0) write(error_unit, '(5a)') "heat_predict: ", dir, " holds a checkpoint but ", &
                                              dir // "/" // timestep_file, " cannot be read: not saved by heat_surrogate?"
    end if
    call MPI_Bcast(ios, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, e)
    call MPI_Bcast(timestep, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, e)
    ok = ios == 0
  end function read_timestep
end program heat_predict
