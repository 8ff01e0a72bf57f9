! Fortran module gaaw: the whole C API through iso_c_binding, with the same names.
!
! Handles are derived types wrapping the C pointer (gaaw_context, gaaw_config,
! gaaw_model, gaaw_optimizer, gaaw_comm, gaaw_request, gaaw_buffer); a fresh one is
! null, so an uncreated type(gaaw_config) passed to gaaw_init means "defaults". The
! C structs (gaaw_batch_t, gaaw_tensor_t, the configs, the statistics) are bind(C)
! derived types of the same name and layout. Every procedure is a function
! returning the gaaw status (integer(c_int)), except those that return text or a
! number as their C function does (gaaw_version, gaaw_status_string, gaaw_last_error,
! gaaw_tunable_count, gaaw_dtype_size, ...) and the subroutines that fill in a
! config's defaults (gaaw_gpt_config_default, gaaw_optimizer_config_default), void
! in C. Strings going in are trimmed; strings coming out are
! allocatable characters. Indices (parameters, layers, tunables, backends) count from
! 0 as in C, so that they match the library's messages. The parameters (status codes,
! groups, dtypes, activations, version) are generated from the C headers at build
! time into gaaw_constants.inc.
!
! Arrays: a Fortran array x(features, samples) is, in memory, C's row-major
! (samples, features), so models take them as they are, without copies or
! transposes (a non-contiguous section is made contiguous by the compiler). Models
! compute in f32: real(c_double) arrays are accepted too and converted to f32 once
! per call (and predictions back to f64), which costs one copy of each array.
!
!   use mpi
!   use gaaw
!   type(gaaw_context) :: ctx
!   type(gaaw_model) :: model
!   type(gaaw_optimizer) :: opt
!   st = gaaw_init(MPI_COMM_WORLD, ctx=ctx)
!   st = gaaw_model_create_mlp(ctx, [nin, 64, 64, nout], model, activation=GAAW_ACT_GELU)
!   st = gaaw_optimizer_create(model, opt, zero_stage=1, lr=1e-3)
!   st = gaaw_model_forward_backward(model, x, y, loss)
!   st = gaaw_optimizer_step(opt)
!   if (st /= GAAW_SUCCESS) print *, gaaw_last_error(ctx)
!
! Layout: one include file per C header (gaaw_<header>.inc; a long one goes on in
! gaaw_<header>_<part>.inc, included right after it: gaaw_model_access.inc), each
! with its declarations under GAAW_FORTRAN_DECLARATIONS and its procedures
! otherwise; this file includes every one twice, in the specification part and
! after `contains`. A new C header gets a new include file listed in both places
! below (and in GAAW_FORTRAN_INCLUDES of ports/Makefile.inc). Every C
! function has its bind(C) interface somewhere here (tests/fortran/
! test_fortran_coverage.sh checks it), except:
! - the device kernels of gaaw/kernels.h: they run on tensors of a device backend
!   from inside the library's layers and take C function-pointer tables; a Fortran
!   code drives them through models, optimizers and communicators instead;
! - gaaw_init_version, which takes a C MPI_Comm: the module binds
!   gaaw_init_fortran, which takes the Fortran integer handle.
module gaaw
  use, intrinsic :: iso_c_binding
  implicit none
  private

#include "gaaw_constants.inc"

  ! strlen, for the C strings the library returns
  interface
    function c_strlen(s) bind(C, name="strlen")
      import :: c_ptr, c_size_t
      type(c_ptr), value :: s
      integer(c_size_t) :: c_strlen
    end function c_strlen
  end interface

#define GAAW_FORTRAN_DECLARATIONS
#include "gaaw_status.inc"
#include "gaaw_config.inc"
#include "gaaw_context.inc"
#include "gaaw_tensor.inc"
#include "gaaw_comm.inc"
#include "gaaw_topology.inc"
#include "gaaw_model.inc"
#include "gaaw_model_access.inc"
#include "gaaw_optimizer.inc"
#include "gaaw_estimate.inc"
#include "gaaw_info.inc"
#include "gaaw_schedule.inc"
#include "gaaw_sampler.inc"
#include "gaaw_checkpoint.inc"
#include "gaaw_checkpoint_safetensors.inc"
#include "gaaw_plan.inc"
#include "gaaw_data.inc"
#undef GAAW_FORTRAN_DECLARATIONS

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

  ! A Fortran copy of a NUL-terminated character array (a C char[] field).
  function f_chars(chars) result(s)
    character(kind=c_char), intent(in) :: chars(:)
    character(len=:), allocatable :: s
    integer :: n, i
    n = 0
    do i = 1, size(chars)
      if (chars(i) == c_null_char) exit
      n = i
    end do
    allocate(character(len=n) :: s)
    do i = 1, n
      s(i:i) = chars(i)
    end do
  end function f_chars

#include "gaaw_status.inc"
#include "gaaw_config.inc"
#include "gaaw_context.inc"
#include "gaaw_tensor.inc"
#include "gaaw_comm.inc"
#include "gaaw_topology.inc"
#include "gaaw_model.inc"
#include "gaaw_model_access.inc"
#include "gaaw_optimizer.inc"
#include "gaaw_estimate.inc"
#include "gaaw_info.inc"
#include "gaaw_schedule.inc"
#include "gaaw_sampler.inc"
#include "gaaw_checkpoint.inc"
#include "gaaw_checkpoint_safetensors.inc"
#include "gaaw_plan.inc"
#include "gaaw_data.inc"

end module gaaw
