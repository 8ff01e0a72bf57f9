! The planner from Fortran (gaaw/plan.h through module gaaw), on each of 2 ranks
! alone (nothing here is collective): the named device as C fills it, a layout's
! prediction read back through the bind(C) types (the FLOPs per token it implies
! are 6 N + 12 L s h computed here; a cp layout's), the search's best layouts fitting the device,
! a rejected family's reason, a layout applied to a config, and a bad layout; then
! the collective calibration of this machine (its figures the same on both ranks)
! and the shares of rows by speed.
program fortran_plan_np2
  use, intrinsic :: iso_c_binding
  use mpi
  use gaaw
  use gaaw_test_util
  implicit none
  type(gaaw_config) :: cfg, layout_cfg
  type(gaaw_context) :: ctx
  type(gaaw_plan) :: plan
  type(gaaw_plan_request_t) :: req
  type(gaaw_plan_cluster_t) :: cluster
  type(gaaw_plan_layout_t) :: l, best
  type(gaaw_plan_rejected_t) :: rej
  integer :: ierr, i
  integer(c_int64_t) :: tp, shares(4), rows8(8)
  type(gaaw_plan_cluster_t) :: measured
  real(c_double) :: root(2)
  real(c_double) :: h, f, block, n, want, got

  call MPI_Init(ierr)
  call check_status("config_create", gaaw_config_create(cfg), GAAW_SUCCESS, ctx)
  call check_status("set backend", gaaw_config_set(cfg, "backend", "host"), GAAW_SUCCESS, ctx)
  call check_status("init", gaaw_init(MPI_COMM_WORLD, cfg, ctx), GAAW_SUCCESS, ctx)

  call check_status("device_named", gaaw_plan_device_named(ctx, "h100-80g", cluster%device), GAAW_SUCCESS, ctx)
  call check_true("device name", gaaw_plan_device_name(cluster%device) == "h100-80g")
  call check_true("device peak 989", abs(cluster%device%peak_tflops - 989d0) < 1d-9)
  call check_true("device memory 80 GB", abs(cluster%device%memory_bytes - 80d9) < 1d0)
  call check_failure("unknown device", gaaw_plan_device_named(ctx, "v100", cluster%device), &
                     GAAW_ERR_INVALID_ARG, ctx, "a100-80g")
  call check_status("device again", gaaw_plan_device_named(ctx, "h100-80g", cluster%device), GAAW_SUCCESS, ctx)
  cluster%nodes = 1
  cluster%devices_per_node = 8
  cluster%intra_node_gbps = 450
  cluster%inter_node_gbps = 50
  cluster%host_update_gbps = 50
  cluster%nvme_gbps = 25

  call gaaw_gpt_config_default(req%model)
  req%model%layers = 8
  req%model%heads = 16
  req%model%dim = 1024
  req%model%max_seq = 512
  req%model%vocab = 8192
  req%model%dtype = GAAW_BF16
  req%global_batch = 64
  req%max_layouts = 4

  ! dp 2 x pp 2 x tp 2, 1F1B, 8 microbatches of 4 rows
  l = gaaw_plan_layout_t(dp=2, pp=2, tp=2, microbatch=4, microbatches=8, schedule=GAAW_PLAN_1F1B, zero_stage=1)
  call check_status("predict", gaaw_plan_predict(ctx, req, cluster, l), GAAW_SUCCESS, ctx)
  h = 1024d0
  f = 4 * h
  block = 2*h + 3*h*h + 3*h + h*h + h + 2*h + h*f + f + f*h + h
  n = 8 * block + 8192d0 * h + 2 * h
  want = 6 * n + 12d0 * 8 * 512 * h
  got = l%tflops_per_device * 1d12 * 8 * l%step_seconds / (64d0 * 512)
  call check_true("6N + 12 L s h per token", abs(got - want) <= 1d-9 * want)
  call check_true("memory predicted", l%memory_bytes_per_rank > 0 .and. l%memory_bytes_per_rank < 80d9)
  call check_true("mfu", abs(l%mfu - l%tflops_per_device / 989d0) < 1d-12)
  call check_true("schedule name", gaaw_plan_schedule_name(l%schedule) == "1f1b")

  ! the same at cp 2 (a2a) x tp 2 x dp 2: half the tokens per rank, the same job
  best = gaaw_plan_layout_t(dp=2, pp=1, tp=2, cp=2, cp_kind=1, microbatch=4, microbatches=8, &
                            schedule=GAAW_PLAN_1F1B, zero_stage=1)
  call check_status("predict cp", gaaw_plan_predict(ctx, req, cluster, best), GAAW_SUCCESS, ctx)
  call check_true("cp: tokens/s", abs(best%tokens_per_s * best%step_seconds - 64d0 * 512) < 1d-6 * 64 * 512)
  call check_true("cp: memory", best%memory_bytes_per_rank > 0 .and. best%memory_bytes_per_rank < 80d9)
  best%cp = 3 ! 2 x 1 x 3 x 2 is not 8
  call check_failure("bad cp", gaaw_plan_predict(ctx, req, cluster, best), GAAW_ERR_INVALID_ARG, ctx, "cp 3")

  l%microbatches = 7 ! 2 x 4 x 7 is not 64
  call check_failure("bad layout", gaaw_plan_predict(ctx, req, cluster, l), GAAW_ERR_INVALID_ARG, ctx, "global batch")

  call check_status("create", gaaw_plan_create(ctx, req, cluster, plan), GAAW_SUCCESS, ctx)
  call check_true("some layouts", gaaw_plan_count(plan) >= 1 .and. gaaw_plan_count(plan) <= 4)
  do i = 0, gaaw_plan_count(plan) - 1
    call check_status("layout", gaaw_plan_layout(plan, i, best), GAAW_SUCCESS, ctx)
    call check_true("fits", best%memory_bytes_per_rank <= cluster%device%memory_bytes)
    call check_true("divides", best%dp * best%pp * best%cp * best%tp == 8 .and. &
                    best%dp * best%microbatch * best%microbatches == 64)
  end do
  ! families rejected (by batch, divisibility or memory) carry a reason
  do i = 0, gaaw_plan_rejected_count(plan) - 1
    call check_status("rejected", gaaw_plan_rejected(plan, i, rej), GAAW_SUCCESS, ctx)
    call check_true("reason", len(gaaw_plan_rejected_reason(rej)) > 0 .and. rej%dp * rej%pp * rej%cp * rej%tp == 8)
  end do
  call check_status("layout 0", gaaw_plan_layout(plan, 0, best), GAAW_SUCCESS, ctx)
  call check_status("layout config", gaaw_config_create(layout_cfg), GAAW_SUCCESS, ctx)
  call check_status("apply", gaaw_plan_apply(best, layout_cfg), GAAW_SUCCESS, ctx)
  call check_status("get tp", gaaw_config_get_int(layout_cfg, "tp", tp), GAAW_SUCCESS, ctx)
  call check_true("applied tp", tp == best%tp)
  call gaaw_plan_destroy(plan)
  call check_true("destroyed", .not. c_associated(plan%ptr))

  call check_status("config_destroy", gaaw_config_destroy(layout_cfg), GAAW_SUCCESS, ctx)

  ! this machine calibrated, every rank at once: plausible and the same everywhere
  req%model%dim = 64
  req%model%heads = 4
  req%model%max_seq = 32
  req%model%vocab = 256
  call check_status("calibrate", gaaw_plan_calibrate(ctx, req%model, measured), GAAW_SUCCESS, ctx)
  call check_true("calibrated peak", measured%device%peak_tflops > 0 .and. measured%device%memory_gbps > 0)
  call check_true("calibrated world", measured%nodes == 1 .and. measured%devices_per_node == 2)
  root = [measured%device%peak_tflops, measured%intra_node_gbps]
  call MPI_Bcast(root, 2, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD, ierr)
  call check_true("the same on every rank", root(1) == measured%device%peak_tflops .and. &
                  root(2) == measured%intra_node_gbps)
  call check_status("shares", gaaw_plan_shares(ctx, [1d0, 1d0, 0.5d0, 0.5d0], 16_c_int64_t, shares), &
                    GAAW_SUCCESS, ctx)
  call check_true("shares 5 5 3 3", all(shares == [5, 5, 3, 3]))
  l = gaaw_plan_layout_t(dp=8, pp=1, tp=1, microbatch=2, microbatches=4, schedule=GAAW_PLAN_1F1B)
  call check_status("replica rows", gaaw_plan_replica_rows(ctx, cluster, l, rows8), GAAW_SUCCESS, ctx)
  call check_true("replica rows without speeds", all(rows8 == 2))
  call check_failure("more consumers than rows", gaaw_plan_shares(ctx, [1d0, 1d0, 1d0, 1d0], 3_c_int64_t, shares), &
                     GAAW_ERR_INVALID_ARG, ctx, "rows")

  call check_status("finalize", gaaw_finalize(ctx), GAAW_SUCCESS)
  call check_status("config_destroy", gaaw_config_destroy(cfg), GAAW_SUCCESS)
  call test_finish("fortran_plan_np2")
end program fortran_plan_np2
