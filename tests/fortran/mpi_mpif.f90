! The module `mpi` for the Fortran tests, made of mpif.h, for a Fortran compiler that
! the system's MPI has no module for (flang-new next to Debian's gfortran-built MPICH:
! a .mod file is specific to the compiler that wrote it). It declares the constants
! and the MPI_* functions of mpif.h; the routines are called without explicit
! interfaces, as from mpif.h.
module mpi
  implicit none
  include 'mpif.h'
end module mpi
