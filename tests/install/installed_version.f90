! installed_version: the Fortran twin of installed_version.c, built against an
! installed gaaw.mod and libgaaw (pkg-config and CMake). Starts gaaw on one rank and
! checks that the library is the version the module was compiled for.
program installed_version
  use mpi
  use gaaw
  implicit none
  type(gaaw_config) :: cfg
  type(gaaw_context) :: ctx
  integer :: ierr, st, n
  call MPI_Init(ierr)
  st = gaaw_config_create(cfg)
  if (st == GAAW_SUCCESS) st = gaaw_config_set(cfg, "backend", "host")
  if (st == GAAW_SUCCESS) st = gaaw_init(MPI_COMM_WORLD, cfg, ctx)
  if (st == GAAW_SUCCESS) st = gaaw_world_size(ctx, n)
  if (st /= GAAW_SUCCESS) then
    print *, gaaw_status_name(st), " ", gaaw_last_error()
    stop 1
  end if
  if (n /= 1 .or. gaaw_version() /= GAAW_VERSION_STRING) then
    print *, "size ", n, " version ", gaaw_version()
    stop 1
  end if
  st = gaaw_finalize(ctx)
  st = gaaw_config_destroy(cfg)
  call MPI_Finalize(ierr)
  print '(2a)', "installed Fortran: gaaw ", gaaw_version()
end program installed_version
