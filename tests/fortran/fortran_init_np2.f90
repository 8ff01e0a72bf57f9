! The Fortran module on 2 ranks: options set by key and by list, gaaw_init with
! MPI_COMM_WORLD and tp=2, the topology it builds (and cp=2's), the text functions,
! and bad input (unknown key, malformed value, tp=3 on a world of 2) returning the named
! codes on both ranks. Failures are counted on every rank and summed, so both
! ranks stop with the same verdict.
program fortran_init_np2
  use, intrinsic :: iso_c_binding
  use mpi
  use gaaw
  implicit none
  type(gaaw_config) :: cfg, cfg3, never_created
  type(gaaw_context) :: ctx, ctx3
  integer :: ierr, mpi_rank, mpi_size, failures, total, t, r
  integer :: n, dp, pp, tp, dp_rank, pp_rank, tp_rank, grank, gsize
  integer(c_int64_t) :: big
  type(gaaw_schedule_summary_t) :: summary
  integer :: peak(4)
  real(c_double) :: x
  logical :: flag
  character(len=16) :: text
  character(len=:), allocatable :: s

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, mpi_rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, mpi_size, ierr)
  failures = 0

  ! ---- options: by key, by typed setters, by list
  call check_status("config_create", gaaw_config_create(cfg), GAAW_SUCCESS)
  call check_status("set backend", gaaw_config_set(cfg, "backend", "host"), GAAW_SUCCESS)
  call check_status("set tp", gaaw_config_set(cfg, "tp", "2"), GAAW_SUCCESS)
  call check_status("get tp", gaaw_config_get_int(cfg, "tp", n), GAAW_SUCCESS)
  call check_int("tp after set", n, 2)
  call check_status("set_int tp", gaaw_config_set_int(cfg, "tp", 1), GAAW_SUCCESS)
  call check_status("get tp", gaaw_config_get_int(cfg, "tp", n), GAAW_SUCCESS)
  call check_int("tp after set_int", n, 1)
  call check_status("parse", gaaw_config_parse(cfg, "tp=2, pp=1"), GAAW_SUCCESS)
  call check_status("get tp (int64)", gaaw_config_get_int(cfg, "tp", big), GAAW_SUCCESS)
  call check_int("tp after parse", int(big), 2)
  call check_status("set_double", gaaw_config_set_double(cfg, "comm_timeout", 30.5_c_double), GAAW_SUCCESS)
  call check_status("get_double", gaaw_config_get_double(cfg, "comm_timeout", x), GAAW_SUCCESS)
  call check_true("comm_timeout is 30.5", x == 30.5_c_double)
  call check_status("set_bool", gaaw_config_set_bool(cfg, "allocator_cache", .false.), GAAW_SUCCESS)
  call check_status("get_bool", gaaw_config_get_bool(cfg, "allocator_cache", flag), GAAW_SUCCESS)
  call check_true("allocator_cache is false", .not. flag)
  call check_status("get_string", gaaw_config_get_string(cfg, "backend", text), GAAW_SUCCESS)
  call check_true("backend reads back as host", text == "host")
  call check_status("set_int on a real option", gaaw_config_set_int(cfg, "comm_timeout", 40), GAAW_SUCCESS)
  call check_status("get_double", gaaw_config_get_double(cfg, "comm_timeout", x), GAAW_SUCCESS)
  call check_true("comm_timeout is 40", x == 40.0_c_double)
  call check_status("config_check", gaaw_config_check(cfg), GAAW_SUCCESS)
  call check_status("set threads -3", gaaw_config_set(cfg, "threads", "-3"), GAAW_SUCCESS)
  call check_status("config_check threads -3", gaaw_config_check(cfg), GAAW_ERR_INVALID_ARG)
  s = gaaw_last_error()
  call check_true("report names threads: "//s, index(s, "option threads") > 0)
  call check_status("set threads 0", gaaw_config_set(cfg, "threads", "0"), GAAW_SUCCESS)

  ! ---- bad options: the named codes, the report names the key, tp unchanged
  call check_status("unknown key", gaaw_config_set(cfg, "no_such_option", "1"), GAAW_ERR_NOT_FOUND)
  s = gaaw_last_error()
  call check_true("report names the key: "//s, index(s, "no_such_option") > 0)
  call check_status("tp=abc", gaaw_config_set(cfg, "tp", "abc"), GAAW_ERR_INVALID_ARG)
  call check_status("parse tp=abc", gaaw_config_parse(cfg, "tp=abc"), GAAW_ERR_INVALID_ARG)
  call check_status("get tp", gaaw_config_get_int(cfg, "tp", n), GAAW_SUCCESS)
  call check_int("tp after bad sets", n, 2)
  call check_status("get_string too short", gaaw_config_get_string(cfg, "rank_order", text(1:3)), &
                    GAAW_ERR_INVALID_ARG)
  call check_status("set on a config never created", gaaw_config_set(never_created, "tp", "2"), &
                    GAAW_ERR_INVALID_ARG)

  ! ---- init with tp=2 and the topology it builds
  call check_status("gaaw_init", gaaw_init(MPI_COMM_WORLD, cfg, ctx), GAAW_SUCCESS)
  if (.not. c_associated(ctx%ptr)) then
    print '(a,i0,a,a)', "FAIL rank ", mpi_rank, ": gaaw_init gave no context: ", gaaw_last_error()
    failures = failures + 1
  else
    call check_status("world_size", gaaw_world_size(ctx, n), GAAW_SUCCESS)
    call check_int("world size", n, 2)
    call check_status("world_rank", gaaw_world_rank(ctx, n), GAAW_SUCCESS)
    call check_int("world rank", n, mpi_rank)
    call check_status("backend_name", gaaw_backend_name(ctx, s), GAAW_SUCCESS)
    call check_true("backend is host: "//s, s == "host")
    call check_status("topology_sizes", gaaw_topology_sizes(ctx, dp, pp, tp), GAAW_SUCCESS)
    call check_int("dp", dp, 1)
    call check_int("pp", pp, 1)
    call check_int("tp", tp, 2)
    call check_status("topology_coords", gaaw_topology_coords(ctx, dp_rank, pp_rank, tp_rank), GAAW_SUCCESS)
    call check_int("dp_rank", dp_rank, 0)
    call check_int("pp_rank", pp_rank, 0)
    call check_int("tp_rank", tp_rank, mpi_rank)
    ! tp spans the world; dp and pp are this rank alone.
    call check_group(GAAW_GROUP_WORLD, mpi_rank, 2)
    call check_group(GAAW_GROUP_TP, mpi_rank, 2)
    call check_group(GAAW_GROUP_DP, 0, 1)
    call check_group(GAAW_GROUP_PP, 0, 1)
    call check_group(GAAW_GROUP_MP, mpi_rank, 2)
    call check_status("group_rank of group 99", gaaw_topology_group_rank(ctx, 99, grank, gsize), &
                      GAAW_ERR_INVALID_ARG)
    do t = 0, 1
      call check_status("rank_of", gaaw_topology_rank_of(ctx, 0, 0, t, r), GAAW_SUCCESS)
      call check_int("rank_of(0, 0, t)", r, t)
    end do
    call check_status("rank_of(0, 0, 2)", gaaw_topology_rank_of(ctx, 0, 0, 2, r), GAAW_ERR_INVALID_ARG)
  end if

  ! ---- text functions and generated constants
  s = gaaw_version()
  call check_true("gaaw_version non-empty", len(s) > 0)
  call check_true("gaaw_version is GAAW_VERSION_STRING: "//s, s == GAAW_VERSION_STRING)
  call check_int("GAAW_VERSION_NUMBER", GAAW_VERSION_NUMBER, &
                 10000 * GAAW_VERSION_MAJOR + 100 * GAAW_VERSION_MINOR + GAAW_VERSION_PATCH)
  s = gaaw_status_string(GAAW_ERR_TIMEOUT)
  call check_true("status_string(GAAW_ERR_TIMEOUT) non-empty", len(s) > 0)
  call check_true("status_string differs per code", s /= gaaw_status_string(GAAW_SUCCESS))
  call check_name(GAAW_SUCCESS, "GAAW_SUCCESS")
  call check_name(GAAW_ERR_INVALID_ARG, "GAAW_ERR_INVALID_ARG")
  call check_name(GAAW_ERR_TIMEOUT, "GAAW_ERR_TIMEOUT")
  call check_name(GAAW_ERR_NOT_FOUND, "GAAW_ERR_NOT_FOUND")

  ! ---- pipeline schedules (no context needed): 1F1B on 4 stages, 8 microbatches
  call check_status("schedule_summary", gaaw_schedule_summary("1f1b", 4, 8, 1, summary), GAAW_SUCCESS)
  call check_true("1f1b bubble is 3/11", abs(summary%bubble - 3.0_c_double / 11) < 1e-12_c_double)
  call check_int("1f1b makespan", int(summary%makespan), 33)
  call check_int("1f1b peak", summary%peak_in_flight, 4)
  call check_status("schedule_peak_in_flight", gaaw_schedule_peak_in_flight("1f1b", 4, 8, 1, peak), GAAW_SUCCESS)
  call check_true("1f1b peaks 4 3 2 1", all(peak == [4, 3, 2, 1]))
  call check_status("schedule_timeline", gaaw_schedule_timeline("zb-h1", 4, 8, 1, s), GAAW_SUCCESS)
  call check_true("timeline has rank 3's row", index(s, "rank 3 |") > 0)
  call check_status("interleaved with m not a multiple of pp", &
                    gaaw_schedule_summary("interleaved", 4, 6, 2, summary), GAAW_ERR_INVALID_ARG)
  s = gaaw_last_error()
  call check_true("report names m and pp: "//s, index(s, "microbatches (6) to be a multiple of pp (4)") > 0)

  ! ---- tp=3 does not divide a world of 2: both ranks fail, neither hangs
  call check_status("config_create", gaaw_config_create(cfg3), GAAW_SUCCESS)
  call check_status("set backend", gaaw_config_set(cfg3, "backend", "host"), GAAW_SUCCESS)
  call check_status("set tp=3", gaaw_config_set(cfg3, "tp", "3"), GAAW_SUCCESS)
  call check_status("gaaw_init with tp=3", gaaw_init(MPI_COMM_WORLD, cfg3, ctx3), GAAW_ERR_INVALID_ARG)
  call check_true("no context after the failed init", .not. c_associated(ctx3%ptr))
  s = gaaw_last_error()
  call check_true("report of the failed init is non-empty", len(s) > 0)

  ! ---- cp=2: the context-parallel axis spans the world, and so does dp x cp
  call check_status("set tp=1", gaaw_config_set(cfg3, "tp", "1"), GAAW_SUCCESS)
  call check_status("set cp=2", gaaw_config_set(cfg3, "cp", "2"), GAAW_SUCCESS)
  call check_status("gaaw_init with cp=2", gaaw_init(MPI_COMM_WORLD, cfg3, ctx3), GAAW_SUCCESS)
  call check_status("topology_cp", gaaw_topology_cp(ctx3, n, r), GAAW_SUCCESS)
  call check_int("cp", n, 2)
  call check_int("cp_rank", r, mpi_rank)
  call check_status("group_rank cp", gaaw_topology_group_rank(ctx3, GAAW_GROUP_CP, grank, gsize), GAAW_SUCCESS)
  call check_true("the cp group is the world", grank == mpi_rank .and. gsize == 2)
  call check_status("group_rank dp-cp", gaaw_topology_group_rank(ctx3, GAAW_GROUP_DP_CP, grank, gsize), &
                    GAAW_SUCCESS)
  call check_true("the dp-cp group is the world", grank == mpi_rank .and. gsize == 2)
  call check_true("group name dp-cp", gaaw_group_name(GAAW_GROUP_DP_CP) == "dp-cp")
  call check_status("rank_of_cp", gaaw_topology_rank_of_cp(ctx3, 0, 0, 1, 0, r), GAAW_SUCCESS)
  call check_int("rank_of_cp(0, 0, 1, 0)", r, 1)
  call check_status("rank_of_cp(0, 0, 2, 0)", gaaw_topology_rank_of_cp(ctx3, 0, 0, 2, 0, r), GAAW_ERR_INVALID_ARG)
  call check_status("gaaw_finalize cp=2", gaaw_finalize(ctx3), GAAW_SUCCESS)

  ! ---- ep=2: the experts' axis folds onto dp (the world here); expert-dp is each rank
  call check_status("set cp=1", gaaw_config_set(cfg3, "cp", "1"), GAAW_SUCCESS)
  call check_status("set ep=2", gaaw_config_set(cfg3, "ep", "2"), GAAW_SUCCESS)
  call check_status("gaaw_init with ep=2", gaaw_init(MPI_COMM_WORLD, cfg3, ctx3), GAAW_SUCCESS)
  call check_status("topology_ep", gaaw_topology_ep(ctx3, n, r), GAAW_SUCCESS)
  call check_int("ep", n, 2)
  call check_int("ep_rank", r, mpi_rank)
  call check_status("group_rank edp", gaaw_topology_group_rank(ctx3, GAAW_GROUP_EDP, grank, gsize), GAAW_SUCCESS)
  call check_true("each rank is its own expert-dp group", grank == 0 .and. gsize == 1)
  call check_true("group name ep", gaaw_group_name(GAAW_GROUP_EP) == "ep")
  call check_status("gaaw_finalize ep=2", gaaw_finalize(ctx3), GAAW_SUCCESS)
  call check_status("config_destroy", gaaw_config_destroy(cfg3), GAAW_SUCCESS)

  ! ---- teardown: handles become null, a second finalize is a no-op
  call check_status("gaaw_finalize", gaaw_finalize(ctx), GAAW_SUCCESS)
  call check_true("context null after finalize", .not. c_associated(ctx%ptr))
  call check_status("gaaw_finalize again", gaaw_finalize(ctx), GAAW_SUCCESS)
  call check_status("config_destroy", gaaw_config_destroy(cfg), GAAW_SUCCESS)
  call check_true("config null after destroy", .not. c_associated(cfg%ptr))

  deallocate(s) ! else it lives to the end of the program, which LeakSanitizer reports as a leak
  call MPI_Allreduce(failures, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (mpi_rank == 0) print '(a,i0,a)', "fortran_init_np2: ", total, " failures on all ranks"
  call MPI_Finalize(ierr)
  if (total /= 0) stop 1

contains

  subroutine check_status(what, got, want)
    character(len=*), intent(in) :: what
    integer, intent(in) :: got, want
    if (got /= want) then
      failures = failures + 1
      print '(a,i0,5a)', "FAIL rank ", mpi_rank, ": ", what, " returned ", gaaw_status_name(got), &
            ", expected "//gaaw_status_name(want)//new_line("a")//"  last error: "//gaaw_last_error(ctx)
    end if
  end subroutine check_status

  subroutine check_int(what, got, want)
    character(len=*), intent(in) :: what
    integer, intent(in) :: got, want
    if (got /= want) then
      failures = failures + 1
      print '(a,i0,3a,i0,a,i0)', "FAIL rank ", mpi_rank, ": ", what, " is ", got, ", expected ", want
    end if
  end subroutine check_int

  subroutine check_true(what, cond)
    character(len=*), intent(in) :: what
    logical, intent(in) :: cond
    if (.not. cond) then
      failures = failures + 1
      print '(a,i0,2a)', "FAIL rank ", mpi_rank, ": ", what
    end if
  end subroutine check_true

  subroutine check_group(group, want_rank, want_size)
    integer, intent(in) :: group, want_rank, want_size
    integer :: rank, size
    call check_status("group_rank", gaaw_topology_group_rank(ctx, group, rank, size), GAAW_SUCCESS)
    if (rank /= want_rank .or. size /= want_size) then
      failures = failures + 1
      print '(a,i0,a,i0,a,i0,a,i0,a,i0,a,i0)', "FAIL rank ", mpi_rank, ": group ", group, " gives rank ", &
            rank, " of ", size, ", expected ", want_rank, " of ", want_size
    end if
  end subroutine check_group

  ! The generated parameter and the C name table agree.
  subroutine check_name(code, name)
    integer, intent(in) :: code
    character(len=*), intent(in) :: name
    call check_true("gaaw_status_name("//name//") is "//gaaw_status_name(code), gaaw_status_name(code) == name)
  end subroutine check_name

end program fortran_init_np2
