! Checks for the Fortran tests: each failed check prints one line naming the rank
! and counts; test_finish sums the counts over MPI_COMM_WORLD so that every rank
! stops with the same verdict (exit 1 on any failure anywhere).
module gaaw_test_util
  use, intrinsic :: iso_c_binding
  use mpi
  use gaaw
  implicit none
  private
  public :: check_status, check_failure, check_true, check_close, check_same, test_finish, world_rank, remove_tree

  integer :: failures = 0

  ! C's system(): flang-new-16 does not implement execute_command_line.
  interface
    integer(c_int) function c_system(command) bind(C, name="system")
      import :: c_int, c_char
      character(kind=c_char), intent(in) :: command(*)
    end function c_system
  end interface

contains

  ! Removes the directory tree path (a test's checkpoint) from rank 0 of the caller.
  subroutine remove_tree(path)
    character(len=*), intent(in) :: path
    integer(c_int) :: rc
    if (world_rank() /= 0) return
    rc = c_system("rm -rf '"//path//"'"//c_null_char)
    if (rc /= 0) print '(3a)', "note: could not remove ", path, " (left for make clean)"
  end subroutine remove_tree

  integer function world_rank()
    integer :: ierr
    call MPI_Comm_rank(MPI_COMM_WORLD, world_rank, ierr)
  end function world_rank

  ! got must be want; the report of ctx (or of the context-free calls) is printed.
  subroutine check_status(what, got, want, ctx)
    character(len=*), intent(in) :: what
    integer, intent(in) :: got, want
    type(gaaw_context), intent(in), optional :: ctx
    if (got == want) return
    failures = failures + 1
    print '(a,i0,5a)', "FAIL rank ", world_rank(), ": ", what, " returned ", gaaw_status_name(got), &
          ", expected "//gaaw_status_name(want)
    if (present(ctx)) then
      print '(2a)', "  last error: ", gaaw_last_error(ctx)
    else
      print '(2a)', "  last error: ", gaaw_last_error()
    end if
  end subroutine check_status

  ! A call that must fail with want, and ctx's report must contain text.
  subroutine check_failure(what, got, want, ctx, text)
    character(len=*), intent(in) :: what, text
    integer, intent(in) :: got, want
    type(gaaw_context), intent(in) :: ctx
    character(len=:), allocatable :: report
    call check_status(what, got, want, ctx)
    report = gaaw_last_error(ctx)
    call check_true(what//": the report names '"//text//"': "//report, index(report, text) > 0)
    deallocate(report) ! else LeakSanitizer reports it
  end subroutine check_failure

  subroutine check_true(what, cond)
    character(len=*), intent(in) :: what
    logical, intent(in) :: cond
    if (cond) return
    failures = failures + 1
    print '(a,i0,2a)', "FAIL rank ", world_rank(), ": ", what
  end subroutine check_true

  ! max |got - want| <= tol, every element finite (a NaN fails: the comparison is
  ! written so that it is false for NaN).
  subroutine check_close(what, got, want, tol)
    character(len=*), intent(in) :: what
    real(c_float), intent(in) :: got(:), want(:)
    real, intent(in) :: tol
    real :: worst
    integer :: i
    if (size(got) /= size(want)) then
      call check_true(what//": sizes differ", .false.)
      return
    end if
    worst = 0
    do i = 1, size(got)
      if (.not. (abs(got(i) - want(i)) <= tol)) then
        worst = max(worst, abs(got(i) - want(i)))
        if (.not. (abs(got(i) - want(i)) >= 0)) worst = huge(worst) ! NaN
      end if
    end do
    if (worst == 0) return
    failures = failures + 1
    print '(a,i0,3a,es10.3,a,es10.3)', "FAIL rank ", world_rank(), ": ", what, ": max difference ", worst, &
          " > tolerance ", tol
  end subroutine check_close

  ! Bit-identical: tolerance 0 and no NaN.
  subroutine check_same(what, got, want)
    character(len=*), intent(in) :: what
    real(c_float), intent(in) :: got(:), want(:)
    call check_close(what, got, want, 0.0)
  end subroutine check_same

  ! Sums the failures over every rank, prints the verdict on rank 0, finalizes MPI
  ! and stops with 1 when any rank failed.
  subroutine test_finish(name)
    character(len=*), intent(in) :: name
    integer :: total, ierr
    call MPI_Allreduce(failures, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
    if (world_rank() == 0) print '(2a,i0,a)', name, ": ", total, " failures on all ranks"
    call MPI_Finalize(ierr)
    if (total /= 0) stop 1
  end subroutine test_finish
end module gaaw_test_util
