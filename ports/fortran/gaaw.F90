! Fortran module gaaw: the C API through iso_c_binding, with the same names.
!
! Handles are derived types wrapping the C pointer; a fresh one is null, so an
! uncreated type(gaaw_config) passed to gaaw_init means "defaults". Every
! procedure is a function returning the gaaw status (integer(c_int)), except those
! that return text (gaaw_version, gaaw_status_string, gaaw_status_name,
! gaaw_last_error). Strings going in are trimmed; strings coming out are
! allocatable characters. The parameters (status codes, groups, dtypes, version)
! are generated from the C headers at build time into gaaw_constants.inc.
!
!   use mpi
!   use gaaw
!   type(gaaw_config) :: cfg
!   type(gaaw_context) :: ctx
!   st = gaaw_config_create(cfg)
!   st = gaaw_config_set(cfg, "tp", "2")
!   st = gaaw_init(MPI_COMM_WORLD, cfg, ctx)
!   if (st /= GAAW_SUCCESS) print *, gaaw_last_error()
module gaaw
  use, intrinsic :: iso_c_binding
  implicit none
  private

#include "gaaw_constants.inc"

  type, public :: gaaw_context
    type(c_ptr) :: ptr = c_null_ptr
  end type gaaw_context

  type, public :: gaaw_config
    type(c_ptr) :: ptr = c_null_ptr
  end type gaaw_config

  ! The figures of a pipeline schedule (gaaw_schedule_summary_t of gaaw/schedule.h).
  type, public, bind(C) :: gaaw_schedule_summary_t
    integer(c_int) :: pp, microbatches, virtual_stages
    integer(c_int) :: peak_in_flight
    real(c_double) :: makespan, idle, bubble
    integer(c_int64_t) :: actions
  end type gaaw_schedule_summary_t

  public :: gaaw_init, gaaw_finalize, gaaw_version, gaaw_status_string, gaaw_status_name
  public :: gaaw_last_error, gaaw_last_status, gaaw_clear_error
  public :: gaaw_config_create, gaaw_config_destroy, gaaw_config_set, gaaw_config_parse, gaaw_config_check
  public :: gaaw_config_set_int, gaaw_config_set_double, gaaw_config_set_bool, gaaw_config_set_string
  public :: gaaw_config_get_int, gaaw_config_get_double, gaaw_config_get_bool, gaaw_config_get_string
  public :: gaaw_world_rank, gaaw_world_size, gaaw_backend_name
  public :: gaaw_topology_sizes, gaaw_topology_coords, gaaw_topology_group_rank, gaaw_topology_rank_of
  public :: gaaw_schedule_summary, gaaw_schedule_peak_in_flight, gaaw_schedule_timeline

  ! Low-level: these take the C handles as C pointers (comm, model, req; t a
  ! gaaw_tensor_t and batch a gaaw_batch_t, by c_loc), for codes that build them in
  ! C; the typed Fortran wrappers for tensors, communicators and models are yet to
  ! come.
  public :: gaaw_comm_send_start, gaaw_comm_recv_start, gaaw_comm_wait, gaaw_model_predict
  interface
    function gaaw_model_predict(model, batch, outputs) bind(C, name="gaaw_model_predict")
      import :: c_int, c_ptr, c_float
      type(c_ptr), value :: model, batch
      real(c_float) :: outputs(*)
      integer(c_int) :: gaaw_model_predict
    end function gaaw_model_predict
    function gaaw_comm_send_start(comm, t, peer, tag, req) bind(C, name="gaaw_comm_send_start")
      import :: c_int, c_ptr
      type(c_ptr), value :: comm, t
      integer(c_int), value :: peer, tag
      type(c_ptr) :: req
      integer(c_int) :: gaaw_comm_send_start
    end function gaaw_comm_send_start
    function gaaw_comm_recv_start(comm, t, peer, tag, req) bind(C, name="gaaw_comm_recv_start")
      import :: c_int, c_ptr
      type(c_ptr), value :: comm, t
      integer(c_int), value :: peer, tag
      type(c_ptr) :: req
      integer(c_int) :: gaaw_comm_recv_start
    end function gaaw_comm_recv_start
    function gaaw_comm_wait(req) bind(C, name="gaaw_comm_wait")
      import :: c_int, c_ptr
      type(c_ptr) :: req
      integer(c_int) :: gaaw_comm_wait
    end function gaaw_comm_wait
  end interface

  ! surrogate models
  ! Low-level, as above: ctx and model are C pointers, specs the c_loc of an array of
  ! gaaw_layer_spec_t (gaaw/model.h; kinds GAAW_SPEC_*, activations GAAW_ACT_*, losses
  ! GAAW_LOSS_*). The device kernels (gaaw/kernels.h: gaaw_activation_forward and the
  ! others) have no Fortran interface: they take device tensors, which Fortran codes
  ! do not build.
  type, public, bind(C) :: gaaw_layer_spec_t
    integer(c_int) :: kind = 0, size = 0, activation = 0, loss = 0
    real(c_float) :: huber_delta = 0
  end type gaaw_layer_spec_t
  public :: gaaw_model_create, gaaw_model_forward_outputs, gaaw_model_backward_from
  public :: gaaw_mlp_config_parse, gaaw_model_create_from_spec
  public :: gaaw_model_normalization_update, gaaw_model_normalization_stats
  interface
    function gaaw_model_normalization_update(model, batch) bind(C, name="gaaw_model_normalization_update")
      import :: c_int, c_ptr
      type(c_ptr), value :: model, batch
      integer(c_int) :: gaaw_model_normalization_update
    end function gaaw_model_normalization_update
    ! mean and std: inputs + outputs values each (or c_null_ptr through c_loc)
    function gaaw_model_normalization_stats(model, count, mean, std) bind(C, name="gaaw_model_normalization_stats")
      import :: c_int, c_ptr, c_double
      type(c_ptr), value :: model, mean, std
      real(c_double) :: count
      integer(c_int) :: gaaw_model_normalization_stats
    end function gaaw_model_normalization_stats
    ! spec: a NUL-terminated string (trim(s) // c_null_char); cfg: the c_loc of a
    ! gaaw_mlp_config_t
    function gaaw_mlp_config_parse(ctx, spec, cfg) bind(C, name="gaaw_mlp_config_parse")
      import :: c_int, c_ptr, c_char
      type(c_ptr), value :: ctx, cfg
      character(kind=c_char), intent(in) :: spec(*)
      integer(c_int) :: gaaw_mlp_config_parse
    end function gaaw_mlp_config_parse
    function gaaw_model_create_from_spec(ctx, spec, model) bind(C, name="gaaw_model_create_from_spec")
      import :: c_int, c_ptr, c_char
      type(c_ptr), value :: ctx
      character(kind=c_char), intent(in) :: spec(*)
      type(c_ptr) :: model
      integer(c_int) :: gaaw_model_create_from_spec
    end function gaaw_model_create_from_spec
    ! batch: the c_loc of a gaaw_batch_t; outputs and d_outputs (batch, outputs) in C
    ! order, so (outputs, batch) in Fortran
    function gaaw_model_forward_outputs(model, batch, outputs) bind(C, name="gaaw_model_forward_outputs")
      import :: c_int, c_ptr, c_float
      type(c_ptr), value :: model, batch
      real(c_float) :: outputs(*)
      integer(c_int) :: gaaw_model_forward_outputs
    end function gaaw_model_forward_outputs
    function gaaw_model_backward_from(model, d_outputs) bind(C, name="gaaw_model_backward_from")
      import :: c_int, c_ptr, c_float
      type(c_ptr), value :: model
      real(c_float), intent(in) :: d_outputs(*)
      integer(c_int) :: gaaw_model_backward_from
    end function gaaw_model_backward_from
    function gaaw_model_create(ctx, inputs, specs, nspecs, seed, dtype, model) bind(C, name="gaaw_model_create")
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: ctx, specs
      integer(c_int), value :: inputs, nspecs
      integer(c_int64_t), value :: seed
      integer(c_int), value :: dtype
      type(c_ptr) :: model
      integer(c_int) :: gaaw_model_create
    end function gaaw_model_create
  end interface

  ! Integers of either kind for the int64 options.
  interface gaaw_config_set_int
    module procedure config_set_int32, config_set_int64
  end interface gaaw_config_set_int
  interface gaaw_config_get_int
    module procedure config_get_int32, config_get_int64
  end interface gaaw_config_get_int

  ! The C functions, by their C names.
  interface
    function c_strlen(s) bind(C, name="strlen")
      import :: c_ptr, c_size_t
      type(c_ptr), value :: s
      integer(c_size_t) :: c_strlen
    end function c_strlen
    function c_init_fortran(comm, cfg, ctx, header_version) bind(C, name="gaaw_init_fortran")
      import :: c_int, c_ptr
      integer(c_int), value :: comm
      type(c_ptr), value :: cfg
      type(c_ptr) :: ctx
      integer(c_int), value :: header_version
      integer(c_int) :: c_init_fortran
    end function c_init_fortran
    function c_finalize(ctx) bind(C, name="gaaw_finalize")
      import :: c_int, c_ptr
      type(c_ptr) :: ctx
      integer(c_int) :: c_finalize
    end function c_finalize
    function c_version() bind(C, name="gaaw_version")
      import :: c_ptr
      type(c_ptr) :: c_version
    end function c_version
    function c_status_string(st) bind(C, name="gaaw_status_string")
      import :: c_int, c_ptr
      integer(c_int), value :: st
      type(c_ptr) :: c_status_string
    end function c_status_string
    function c_status_name(st) bind(C, name="gaaw_status_name")
      import :: c_int, c_ptr
      integer(c_int), value :: st
      type(c_ptr) :: c_status_name
    end function c_status_name
    function c_last_error(ctx) bind(C, name="gaaw_last_error")
      import :: c_ptr
      type(c_ptr), value :: ctx
      type(c_ptr) :: c_last_error
    end function c_last_error
    function c_last_status(ctx) bind(C, name="gaaw_last_status")
      import :: c_int, c_ptr
      type(c_ptr), value :: ctx
      integer(c_int) :: c_last_status
    end function c_last_status
    function c_clear_error(ctx) bind(C, name="gaaw_clear_error")
      import :: c_int, c_ptr
      type(c_ptr), value :: ctx
      integer(c_int) :: c_clear_error
    end function c_clear_error
    function c_config_create(cfg) bind(C, name="gaaw_config_create")
      import :: c_int, c_ptr
      type(c_ptr) :: cfg
      integer(c_int) :: c_config_create
    end function c_config_create
    function c_config_destroy(cfg) bind(C, name="gaaw_config_destroy")
      import :: c_int, c_ptr
      type(c_ptr) :: cfg
      integer(c_int) :: c_config_destroy
    end function c_config_destroy
    function c_config_set(cfg, key, value) bind(C, name="gaaw_config_set")
      import :: c_int, c_ptr, c_char
      type(c_ptr), value :: cfg
      character(kind=c_char), dimension(*) :: key, value
      integer(c_int) :: c_config_set
    end function c_config_set
    function c_config_set_string(cfg, key, value) bind(C, name="gaaw_config_set_string")
      import :: c_int, c_ptr, c_char
      type(c_ptr), value :: cfg
      character(kind=c_char), dimension(*) :: key, value
      integer(c_int) :: c_config_set_string
    end function c_config_set_string
    function c_config_set_int(cfg, key, value) bind(C, name="gaaw_config_set_int")
      import :: c_int, c_int64_t, c_ptr, c_char
      type(c_ptr), value :: cfg
      character(kind=c_char), dimension(*) :: key
      integer(c_int64_t), value :: value
      integer(c_int) :: c_config_set_int
    end function c_config_set_int
    function c_config_set_double(cfg, key, value) bind(C, name="gaaw_config_set_double")
      import :: c_int, c_double, c_ptr, c_char
      type(c_ptr), value :: cfg
      character(kind=c_char), dimension(*) :: key
      real(c_double), value :: value
      integer(c_int) :: c_config_set_double
    end function c_config_set_double
    function c_config_set_bool(cfg, key, value) bind(C, name="gaaw_config_set_bool")
      import :: c_int, c_ptr, c_char
      type(c_ptr), value :: cfg
      character(kind=c_char), dimension(*) :: key
      integer(c_int), value :: value
      integer(c_int) :: c_config_set_bool
    end function c_config_set_bool
    function c_config_get_int(cfg, key, value) bind(C, name="gaaw_config_get_int")
      import :: c_int, c_int64_t, c_ptr, c_char
      type(c_ptr), value :: cfg
      character(kind=c_char), dimension(*) :: key
      integer(c_int64_t) :: value
      integer(c_int) :: c_config_get_int
    end function c_config_get_int
    function c_config_get_double(cfg, key, value) bind(C, name="gaaw_config_get_double")
      import :: c_int, c_double, c_ptr, c_char
      type(c_ptr), value :: cfg
      character(kind=c_char), dimension(*) :: key
      real(c_double) :: value
      integer(c_int) :: c_config_get_double
    end function c_config_get_double
    function c_config_get_bool(cfg, key, value) bind(C, name="gaaw_config_get_bool")
      import :: c_int, c_ptr, c_char
      type(c_ptr), value :: cfg
      character(kind=c_char), dimension(*) :: key
      integer(c_int) :: value
      integer(c_int) :: c_config_get_bool
    end function c_config_get_bool
    function c_config_get_string(cfg, key, value, len) bind(C, name="gaaw_config_get_string")
      import :: c_int, c_ptr, c_char, c_size_t
      type(c_ptr), value :: cfg
      character(kind=c_char), dimension(*) :: key, value
      integer(c_size_t), value :: len
      integer(c_int) :: c_config_get_string
    end function c_config_get_string
    function c_config_parse(cfg, list) bind(C, name="gaaw_config_parse")
      import :: c_int, c_ptr, c_char
      type(c_ptr), value :: cfg
      character(kind=c_char), dimension(*) :: list
      integer(c_int) :: c_config_parse
    end function c_config_parse
    function c_config_check(cfg) bind(C, name="gaaw_config_check")
      import :: c_int, c_ptr
      type(c_ptr), value :: cfg
      integer(c_int) :: c_config_check
    end function c_config_check
    function c_world_rank(ctx, rank) bind(C, name="gaaw_world_rank")
      import :: c_int, c_ptr
      type(c_ptr), value :: ctx
      integer(c_int) :: rank
      integer(c_int) :: c_world_rank
    end function c_world_rank
    function c_world_size(ctx, size) bind(C, name="gaaw_world_size")
      import :: c_int, c_ptr
      type(c_ptr), value :: ctx
      integer(c_int) :: size
      integer(c_int) :: c_world_size
    end function c_world_size
    function c_backend_name(ctx, name) bind(C, name="gaaw_backend_name")
      import :: c_int, c_ptr
      type(c_ptr), value :: ctx
      type(c_ptr) :: name
      integer(c_int) :: c_backend_name
    end function c_backend_name
    function c_topology_sizes(ctx, dp, pp, tp) bind(C, name="gaaw_topology_sizes")
      import :: c_int, c_ptr
      type(c_ptr), value :: ctx
      integer(c_int) :: dp, pp, tp
      integer(c_int) :: c_topology_sizes
    end function c_topology_sizes
    function c_topology_coords(ctx, dp_rank, pp_rank, tp_rank) bind(C, name="gaaw_topology_coords")
      import :: c_int, c_ptr
      type(c_ptr), value :: ctx
      integer(c_int) :: dp_rank, pp_rank, tp_rank
      integer(c_int) :: c_topology_coords
    end function c_topology_coords
    function c_topology_rank_of(ctx, dp_rank, pp_rank, tp_rank, world_rank) &
        bind(C, name="gaaw_topology_rank_of")
      import :: c_int, c_ptr
      type(c_ptr), value :: ctx
      integer(c_int), value :: dp_rank, pp_rank, tp_rank
      integer(c_int) :: world_rank
      integer(c_int) :: c_topology_rank_of
    end function c_topology_rank_of
    function c_topology_group_rank(ctx, group, rank, size) bind(C, name="gaaw_topology_group_rank")
      import :: c_int, c_ptr
      type(c_ptr), value :: ctx
      integer(c_int), value :: group
      integer(c_int) :: rank, size
      integer(c_int) :: c_topology_group_rank
    end function c_topology_group_rank
    function c_schedule_summary(name, pp, microbatches, virtual_stages, summary) &
        bind(C, name="gaaw_schedule_summary")
      import :: c_int, c_char, gaaw_schedule_summary_t
      character(kind=c_char), dimension(*) :: name
      integer(c_int), value :: pp, microbatches, virtual_stages
      type(gaaw_schedule_summary_t) :: summary
      integer(c_int) :: c_schedule_summary
    end function c_schedule_summary
    function c_schedule_peak_in_flight(name, pp, microbatches, virtual_stages, peak, len) &
        bind(C, name="gaaw_schedule_peak_in_flight")
      import :: c_int, c_char
      character(kind=c_char), dimension(*) :: name
      integer(c_int), value :: pp, microbatches, virtual_stages, len
      integer(c_int) :: peak(*)
      integer(c_int) :: c_schedule_peak_in_flight
    end function c_schedule_peak_in_flight
    function c_schedule_timeline(name, pp, microbatches, virtual_stages, text, len, needed) &
        bind(C, name="gaaw_schedule_timeline")
      import :: c_int, c_char, c_ptr, c_size_t
      character(kind=c_char), dimension(*) :: name
      integer(c_int), value :: pp, microbatches, virtual_stages
      type(c_ptr), value :: text
      integer(c_size_t), value :: len
      integer(c_size_t) :: needed
      integer(c_int) :: c_schedule_timeline
    end function c_schedule_timeline
  end interface

contains

  ! ------------------------------------------------------------------ strings
  ! A NUL-terminated copy of a Fortran string, trailing blanks dropped.
  function c_str(s) result(c)
    character(len=*), intent(in) :: s
    character(kind=c_char, len=len_trim(s) + 1) :: c
    c = trim(s) // c_null_char
  end function c_str

  ! A Fortran copy of a C string ("" for NULL).
  function f_str(p) result(s)
    type(c_ptr), intent(in) :: p
    character(len=:), allocatable :: s
    character(kind=c_char), pointer :: chars(:)
    integer(c_size_t) :: n, i
    if (.not. c_associated(p)) then
      s = ""
      return
    end if
    n = c_strlen(p)
    call c_f_pointer(p, chars, [n])
    allocate(character(len=n) :: s)
    do i = 1, n
      s(i:i) = chars(i)
    end do
  end function f_str

  ! ------------------------------------------------------------------ context
  ! Starts gaaw on every rank of comm, an integer MPI handle such as MPI_COMM_WORLD
  ! from `use mpi`; cfg absent or never created: defaults and GAAW_* environment.
  ! Collective over comm. (The version passed is the one this module was compiled
  ! with, which is the library's own: the module is built into libgaaw.)
  integer(c_int) function gaaw_init(comm, cfg, ctx) result(st)
    integer, intent(in) :: comm
    type(gaaw_config), intent(in), optional :: cfg
    type(gaaw_context), intent(out) :: ctx
    type(c_ptr) :: c_cfg
    c_cfg = c_null_ptr
    if (present(cfg)) c_cfg = cfg%ptr
    st = c_init_fortran(int(comm, c_int), c_cfg, ctx%ptr, GAAW_VERSION_NUMBER)
  end function gaaw_init

  ! Collective over the comm given to gaaw_init; ctx is null afterwards.
  integer(c_int) function gaaw_finalize(ctx) result(st)
    type(gaaw_context), intent(inout) :: ctx
    st = c_finalize(ctx%ptr)
  end function gaaw_finalize

  function gaaw_version() result(s)
    character(len=:), allocatable :: s
    s = f_str(c_version())
  end function gaaw_version

  function gaaw_status_string(st) result(s)
    integer, intent(in) :: st
    character(len=:), allocatable :: s
    s = f_str(c_status_string(int(st, c_int)))
  end function gaaw_status_string

  function gaaw_status_name(st) result(s)
    integer, intent(in) :: st
    character(len=:), allocatable :: s
    s = f_str(c_status_name(int(st, c_int)))
  end function gaaw_status_name

  ! The report of the last failure on ctx; without ctx, of the last failure that
  ! happened without a context (config, init) on this thread.
  function gaaw_last_error(ctx) result(s)
    type(gaaw_context), intent(in), optional :: ctx
    character(len=:), allocatable :: s
    if (present(ctx)) then
      s = f_str(c_last_error(ctx%ptr))
    else
      s = f_str(c_last_error(c_null_ptr))
    end if
  end function gaaw_last_error

  integer(c_int) function gaaw_last_status(ctx) result(st)
    type(gaaw_context), intent(in), optional :: ctx
    if (present(ctx)) then
      st = c_last_status(ctx%ptr)
    else
      st = c_last_status(c_null_ptr)
    end if
  end function gaaw_last_status

  integer(c_int) function gaaw_clear_error(ctx) result(st)
    type(gaaw_context), intent(in), optional :: ctx
    if (present(ctx)) then
      st = c_clear_error(ctx%ptr)
    else
      st = c_clear_error(c_null_ptr)
    end if
  end function gaaw_clear_error

  integer(c_int) function gaaw_world_rank(ctx, rank) result(st)
    type(gaaw_context), intent(in) :: ctx
    integer, intent(out) :: rank
    integer(c_int) :: r
    r = -1
    st = c_world_rank(ctx%ptr, r)
    rank = r
  end function gaaw_world_rank

  integer(c_int) function gaaw_world_size(ctx, size) result(st)
    type(gaaw_context), intent(in) :: ctx
    integer, intent(out) :: size
    integer(c_int) :: n
    n = 0
    st = c_world_size(ctx%ptr, n)
    size = n
  end function gaaw_world_size

  integer(c_int) function gaaw_backend_name(ctx, name) result(st)
    type(gaaw_context), intent(in) :: ctx
    character(len=:), allocatable, intent(out) :: name
    type(c_ptr) :: p
    p = c_null_ptr
    st = c_backend_name(ctx%ptr, p)
    name = f_str(p)
  end function gaaw_backend_name

  ! ------------------------------------------------------------------ config
  integer(c_int) function gaaw_config_create(cfg) result(st)
    type(gaaw_config), intent(out) :: cfg
    st = c_config_create(cfg%ptr)
  end function gaaw_config_create

  integer(c_int) function gaaw_config_destroy(cfg) result(st)
    type(gaaw_config), intent(inout) :: cfg
    st = c_config_destroy(cfg%ptr)
  end function gaaw_config_destroy

  ! Unknown keys: GAAW_ERR_NOT_FOUND; values of the wrong type: GAAW_ERR_INVALID_ARG.
  integer(c_int) function gaaw_config_set(cfg, key, value) result(st)
    type(gaaw_config), intent(in) :: cfg
    character(len=*), intent(in) :: key, value
    st = c_config_set(cfg%ptr, c_str(key), c_str(value))
  end function gaaw_config_set

  integer(c_int) function gaaw_config_set_string(cfg, key, value) result(st)
    type(gaaw_config), intent(in) :: cfg
    character(len=*), intent(in) :: key, value
    st = c_config_set_string(cfg%ptr, c_str(key), c_str(value))
  end function gaaw_config_set_string

  integer(c_int) function config_set_int32(cfg, key, value) result(st)
    type(gaaw_config), intent(in) :: cfg
    character(len=*), intent(in) :: key
    integer(c_int), intent(in) :: value
    st = c_config_set_int(cfg%ptr, c_str(key), int(value, c_int64_t))
  end function config_set_int32

  integer(c_int) function config_set_int64(cfg, key, value) result(st)
    type(gaaw_config), intent(in) :: cfg
    character(len=*), intent(in) :: key
    integer(c_int64_t), intent(in) :: value
    st = c_config_set_int(cfg%ptr, c_str(key), value)
  end function config_set_int64

  integer(c_int) function gaaw_config_set_double(cfg, key, value) result(st)
    type(gaaw_config), intent(in) :: cfg
    character(len=*), intent(in) :: key
    real(c_double), intent(in) :: value
    st = c_config_set_double(cfg%ptr, c_str(key), value)
  end function gaaw_config_set_double

  integer(c_int) function gaaw_config_set_bool(cfg, key, value) result(st)
    type(gaaw_config), intent(in) :: cfg
    character(len=*), intent(in) :: key
    logical, intent(in) :: value
    st = c_config_set_bool(cfg%ptr, c_str(key), merge(1_c_int, 0_c_int, value))
  end function gaaw_config_set_bool

  ! A value outside the range of a default integer is GAAW_ERR_INVALID_ARG.
  integer(c_int) function config_get_int32(cfg, key, value) result(st)
    type(gaaw_config), intent(in) :: cfg
    character(len=*), intent(in) :: key
    integer(c_int), intent(out) :: value
    integer(c_int64_t) :: v
    v = 0
    value = 0
    st = c_config_get_int(cfg%ptr, c_str(key), v)
    if (st /= GAAW_SUCCESS) return
    if (v > huge(value) .or. v < -huge(value) - 1) then
      st = GAAW_ERR_INVALID_ARG
      return
    end if
    value = int(v, c_int)
  end function config_get_int32

  integer(c_int) function config_get_int64(cfg, key, value) result(st)
    type(gaaw_config), intent(in) :: cfg
    character(len=*), intent(in) :: key
    integer(c_int64_t), intent(out) :: value
    value = 0
    st = c_config_get_int(cfg%ptr, c_str(key), value)
  end function config_get_int64

  integer(c_int) function gaaw_config_get_double(cfg, key, value) result(st)
    type(gaaw_config), intent(in) :: cfg
    character(len=*), intent(in) :: key
    real(c_double), intent(out) :: value
    value = 0
    st = c_config_get_double(cfg%ptr, c_str(key), value)
  end function gaaw_config_get_double

  integer(c_int) function gaaw_config_get_bool(cfg, key, value) result(st)
    type(gaaw_config), intent(in) :: cfg
    character(len=*), intent(in) :: key
    logical, intent(out) :: value
    integer(c_int) :: v
    v = 0
    st = c_config_get_bool(cfg%ptr, c_str(key), v)
    value = v /= 0
  end function gaaw_config_get_bool

  ! value is blank-padded; a value longer than len(value) is GAAW_ERR_INVALID_ARG.
  integer(c_int) function gaaw_config_get_string(cfg, key, value) result(st)
    type(gaaw_config), intent(in) :: cfg
    character(len=*), intent(in) :: key
    character(len=*), intent(out) :: value
    character(kind=c_char) :: buf(len(value) + 1)
    integer :: i
    buf = c_null_char
    value = ""
    st = c_config_get_string(cfg%ptr, c_str(key), buf, int(size(buf), c_size_t))
    if (st /= GAAW_SUCCESS) return
    do i = 1, len(value)
      if (buf(i) == c_null_char) exit
      value(i:i) = buf(i)
    end do
  end function gaaw_config_get_string

  ! "key=value" pairs separated by commas, semicolons or blanks, e.g. "tp=2, pp=1".
  integer(c_int) function gaaw_config_parse(cfg, list) result(st)
    type(gaaw_config), intent(in) :: cfg
    character(len=*), intent(in) :: list
    st = c_config_parse(cfg%ptr, c_str(list))
  end function gaaw_config_parse

  ! Checks every option's value on its own, without MPI or a device (gaaw_config_check
  ! in gaaw/config.h): the first bad one is GAAW_ERR_INVALID_ARG (or
  ! GAAW_ERR_UNSUPPORTED for a backend not built), named by gaaw_last_error().
  integer(c_int) function gaaw_config_check(cfg) result(st)
    type(gaaw_config), intent(in) :: cfg
    st = c_config_check(cfg%ptr)
  end function gaaw_config_check

  ! ------------------------------------------------------------------ topology
  ! None of these is collective.
  integer(c_int) function gaaw_topology_sizes(ctx, dp, pp, tp) result(st)
    type(gaaw_context), intent(in) :: ctx
    integer, intent(out) :: dp, pp, tp
    integer(c_int) :: d, p, t
    d = 0; p = 0; t = 0
    st = c_topology_sizes(ctx%ptr, d, p, t)
    dp = d; pp = p; tp = t
  end function gaaw_topology_sizes

  integer(c_int) function gaaw_topology_coords(ctx, dp_rank, pp_rank, tp_rank) result(st)
    type(gaaw_context), intent(in) :: ctx
    integer, intent(out) :: dp_rank, pp_rank, tp_rank
    integer(c_int) :: d, p, t
    d = -1; p = -1; t = -1
    st = c_topology_coords(ctx%ptr, d, p, t)
    dp_rank = d; pp_rank = p; tp_rank = t
  end function gaaw_topology_coords

  integer(c_int) function gaaw_topology_rank_of(ctx, dp_rank, pp_rank, tp_rank, world_rank) result(st)
    type(gaaw_context), intent(in) :: ctx
    integer, intent(in) :: dp_rank, pp_rank, tp_rank
    integer, intent(out) :: world_rank
    integer(c_int) :: r
    r = -1
    st = c_topology_rank_of(ctx%ptr, int(dp_rank, c_int), int(pp_rank, c_int), int(tp_rank, c_int), r)
    world_rank = r
  end function gaaw_topology_rank_of

  ! group: GAAW_GROUP_WORLD, _TP, _DP, _PP or _MP.
  integer(c_int) function gaaw_topology_group_rank(ctx, group, rank, size) result(st)
    type(gaaw_context), intent(in) :: ctx
    integer, intent(in) :: group
    integer, intent(out) :: rank, size
    integer(c_int) :: r, n
    r = -1; n = 0
    st = c_topology_group_rank(ctx%ptr, int(group, c_int), r, n)
    rank = r; size = n
  end function gaaw_topology_group_rank

  ! ------------------------------------------------------------------ schedules
  ! Pipeline schedules by name ("gpipe", "1f1b", "interleaved", "zb-h1"), generated
  ! and verified (gaaw/schedule.h). None of these needs a context; none is collective.
  integer(c_int) function gaaw_schedule_summary(name, pp, microbatches, virtual_stages, summary) result(st)
    character(len=*), intent(in) :: name
    integer, intent(in) :: pp, microbatches, virtual_stages
    type(gaaw_schedule_summary_t), intent(out) :: summary
    st = c_schedule_summary(c_str(name), int(pp, c_int), int(microbatches, c_int), int(virtual_stages, c_int), &
                            summary)
  end function gaaw_schedule_summary

  ! peak(r + 1) gets rank r's peak activations in flight; size(peak) must be >= pp.
  integer(c_int) function gaaw_schedule_peak_in_flight(name, pp, microbatches, virtual_stages, peak) result(st)
    character(len=*), intent(in) :: name
    integer, intent(in) :: pp, microbatches, virtual_stages
    integer, intent(out) :: peak(:)
    integer(c_int) :: buf(max(size(peak), 1))
    buf = 0
    st = c_schedule_peak_in_flight(c_str(name), int(pp, c_int), int(microbatches, c_int), &
                                   int(virtual_stages, c_int), buf, int(size(peak), c_int))
    peak = buf(1:size(peak))
  end function gaaw_schedule_peak_in_flight

  ! text: the timeline, lines ended by new_line("a"); "" on failure.
  integer(c_int) function gaaw_schedule_timeline(name, pp, microbatches, virtual_stages, text) result(st)
    character(len=*), intent(in) :: name
    integer, intent(in) :: pp, microbatches, virtual_stages
    character(len=:), allocatable, intent(out) :: text
    character(kind=c_char), allocatable, target :: buf(:)
    integer(c_size_t) :: need, i
    need = 0
    text = ""
    st = c_schedule_timeline(c_str(name), int(pp, c_int), int(microbatches, c_int), int(virtual_stages, c_int), &
                             c_null_ptr, 0_c_size_t, need)
    if (st /= GAAW_SUCCESS) return
    allocate(buf(need))
    st = c_schedule_timeline(c_str(name), int(pp, c_int), int(microbatches, c_int), int(virtual_stages, c_int), &
                             c_loc(buf), need, need)
    if (st /= GAAW_SUCCESS) return
    deallocate(text)
    allocate(character(len=need - 1) :: text)
    do i = 1, need - 1
      text(i:i) = buf(i)
    end do
  end function gaaw_schedule_timeline

end module gaaw
