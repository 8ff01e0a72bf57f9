! The rest of the Fortran module on 2 ranks (tp 2), each wrapper against an
! independent reference:
!  - tensors and buffers: values written, read back and seen through the host
!    pointer; the memory accounting; dtype and category names;
!  - communicators: all-reduce in place, all-gather, broadcast and a non-blocking
!    send/recv pair give the sums and copies computed here, and the traffic
!    counters count them;
!  - the GPT on Fortran token arrays (seq, batch) gives the loss of the same batch
!    passed as C pointers, its predicted logits (vocab, seq, batch) equal the
!    logits of the forward, and targets of the wrong shape on one rank fail on both;
!    with mixture-of-experts MLPs, capacity refused at tp 2, a step's metrics on one rank;
!  - the parameter registry (get, set, round trip, all as one vector), gradients, layer timing, the
!    optimizer's statistics and memory;
!  - the build description, the tunables table, option sources, the context's
!    options, and an empty command line;
!  - weights out and in as safetensors, and a checkpoint saved and loaded back
!    (weights, an entry, a sample buffer added);
!  - a dataset: an llm.c token file written here opens with its token count, a
!    training batch holds the file's tokens where gaaw_dataset_sample_source says,
!    the blend counts of one dataset are n, and the format's name.
program fortran_api_np2
  use, intrinsic :: iso_c_binding
  use mpi
  use gaaw
  use gaaw_test_util
  implicit none
  integer, parameter :: vocab = 32, seq = 8, nbatch = 2
  type(gaaw_config) :: cfg, ctx_cfg
  type(gaaw_context) :: ctx
  integer :: ierr, n
  character(len=:), allocatable :: s, source

  call MPI_Init(ierr)
  call check_status("config_create", gaaw_config_create(cfg), GAAW_SUCCESS)
  call check_status("parse", gaaw_config_parse(cfg, "backend=host, tp=2, trace=fortran_api_np2-%r.json"), GAAW_SUCCESS)
  call check_status("gaaw_init", gaaw_init(MPI_COMM_WORLD, cfg, ctx), GAAW_SUCCESS)

  ! ---- options and the build
  call check_status("context_config", gaaw_context_config(ctx, ctx_cfg), GAAW_SUCCESS, ctx)
  call check_status("tp of the context", gaaw_config_get_int(ctx_cfg, "tp", n), GAAW_SUCCESS)
  call check_true("the context's tp is 2", n == 2)
  call check_status("describe tp", gaaw_config_describe(cfg, "tp", s, source), GAAW_SUCCESS)
  call check_true("tp is 2, set: "//s//" "//source, s == "2" .and. source == "set")
  call check_true("tunables listed", gaaw_tunable_count() > 10)
  call check_status("tunable_info 0", gaaw_tunable_info(0, s), GAAW_SUCCESS)
  call check_true("tunable 0 has a name", len(s) > 0)
  call check_status("tunable_info -1", gaaw_tunable_info(-1, s), GAAW_ERR_INVALID_ARG)
  call check_command_line()
  call check_build()

  call check_tensors_and_comm()
  call check_gpt()
  call check_mlp_state()
  call check_dataset()

  call check_status("finalize", gaaw_finalize(ctx), GAAW_SUCCESS)
  call check_trace()
  call check_status("config_destroy", gaaw_config_destroy(cfg), GAAW_SUCCESS)
  deallocate(s, source) ! else LeakSanitizer reports them
  call test_finish("fortran_api_np2")

contains

  ! An llm.c file of 2000 uint16 tokens t(k) = mod(7 k, 500), k = 0..1999.
  subroutine check_dataset()
    integer, parameter :: ntok = 2000, dseq = 16
    character(len=*), parameter :: path = "fortran_api_np2.llmc"
    integer(c_int32_t) :: header(256), tok(dseq, 2), tgt(dseq, 2)
    integer(c_int16_t) :: stream(0:ntok - 1)
    integer(c_int64_t) :: tokens, start, counts(1)
    type(gaaw_dataset) :: d
    integer :: rank, u, k, which
    call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
    do k = 0, ntok - 1
      stream(k) = int(mod(7 * k, 500), c_int16_t)
    end do
    if (rank == 0) then
      header = 0
      header(1:3) = [20240520, 1, ntok]
      open(newunit=u, file=path, access="stream", form="unformatted", status="replace")
      write(u) header, stream
      close(u)
    end if
    call MPI_Barrier(MPI_COMM_WORLD, ierr)
    call check_status("dataset_open", gaaw_dataset_open(ctx, [path], dseq, 500, d), GAAW_SUCCESS, ctx)
    call check_status("dataset_info", gaaw_dataset_info(d, 1, tokens=tokens), GAAW_SUCCESS, ctx)
    call check_true("the dataset holds its 2000 tokens", tokens == ntok)
    call check_status("train_batch", gaaw_dataset_train_batch(d, 5_c_int64_t, 3_c_int64_t, 4_c_int64_t, &
                      int(2 * rank, c_int64_t), tok, tgt), GAAW_SUCCESS, ctx)
    call check_status("sample_source", gaaw_dataset_sample_source(d, 5_c_int64_t, int(3 * 4 + 2 * rank + 1, &
                      c_int64_t), which, start), GAAW_SUCCESS, ctx)
    call check_true("row 2 of the batch is the file's window", which == 1 .and. &
                    all(tok(:, 2) == stream(start:start + dseq - 1)) .and. &
                    all(tgt(:, 2) == stream(start + 1:start + dseq)))
    call check_status("blend_counts", gaaw_dataset_blend_counts(d, 1000_c_int64_t, counts), GAAW_SUCCESS, ctx)
    call check_true("one dataset gives every sample", counts(1) == 1000)
    call check_true("format name", gaaw_data_format_name(GAAW_DATA_LLMC) == "llmc")
    call check_status("dataset_verify", gaaw_dataset_verify(d, 1), GAAW_SUCCESS, ctx)
    call check_status("dataset_close", gaaw_dataset_close(d), GAAW_SUCCESS)
    call MPI_Barrier(MPI_COMM_WORLD, ierr)
    if (rank == 0) then
      open(newunit=u, file=path, status="old")
      close(u, status="delete")
    end if
  end subroutine check_dataset

  ! The option trace, set like any other: gaaw_finalize left this rank's timeline,
  ! a JSON array closed by its last line.
  subroutine check_trace()
    character(len=64) :: path
    character(len=256) :: line, last
    integer :: unit, ios
    logical :: there
    write (path, '(a,i0,a)') "fortran_api_np2-", world_rank(), ".json"
    inquire (file=trim(path), exist=there)
    call check_true("trace=fortran_api_np2-%r.json wrote "//trim(path), there)
    if (.not. there) return
    last = ""
    open (newunit=unit, file=trim(path), status="old", action="read")
    do
      read (unit, '(a)', iostat=ios) line
      if (ios /= 0) exit
      last = line
    end do
    close (unit, status="delete")
    call check_true(trim(path)//" ends with ']': "//trim(last), trim(last) == "]")
  end subroutine check_trace

  ! This test runs without arguments: none is taken, none is left.
  subroutine check_command_line()
    character(len=:), allocatable :: rest(:)
    call check_status("parse_args", gaaw_config_parse_args(cfg, rest), GAAW_SUCCESS)
    call check_true("no arguments left", size(rest) == 0)
  end subroutine check_command_line

  subroutine check_build()
    type(gaaw_device_info_t) :: info
    character(len=:), allocatable :: name
    logical :: on
    integer :: devices
    call check_status("feature fortran", gaaw_info_feature_by_name("fortran", on), GAAW_SUCCESS)
    call check_true("this build has the Fortran module", on)
    call check_status("feature by code", gaaw_info_feature(GAAW_FEATURE_FORTRAN, on, name), GAAW_SUCCESS)
    call check_true("feature GAAW_FEATURE_FORTRAN is fortran, on", on .and. name == "fortran")
    call check_status("unknown feature", gaaw_info_feature_by_name("no-such", on), GAAW_ERR_NOT_FOUND)
    call check_true("a backend", gaaw_info_backend_count() >= 1)
    n = gaaw_info_backend_count() - 1 ! the host backend comes last (cuda > opencl > host)
    call check_status("backend", gaaw_info_backend(n, name, devices), GAAW_SUCCESS)
    call check_true("the last backend is host with 1 device: "//name, name == "host" .and. devices == 1)
    call check_status("device", gaaw_info_device(n, 0, info), GAAW_SUCCESS)
    call check_true("the host device has a name and cores", len(gaaw_device_name(info)) > 0 .and. &
                    info%compute_units > 0)
    call check_true("f32 is 4 bytes", gaaw_dtype_size(GAAW_F32) == 4 .and. gaaw_dtype_name(GAAW_BF16) == "bf16")
    call check_true("category names", gaaw_mem_category_name(GAAW_MEM_GRADS) == "grads")
    call check_true("group names", gaaw_group_name(GAAW_GROUP_TP) == "tp")
    call check_true("op names", gaaw_comm_op_name(GAAW_COMM_OP_ALLGATHER) == "allgather")
    call check_true("library version", gaaw_library_version_number() == GAAW_VERSION_NUMBER)
  end subroutine check_build

  subroutine check_tensors_and_comm()
    type(gaaw_comm) :: comm
    type(gaaw_tensor_t) :: t, all, part
    type(gaaw_buffer) :: raw
    type(gaaw_request) :: req
    real(c_float), target :: v(4), got(8)
    real(c_float), pointer :: host(:)
    type(c_ptr) :: p
    integer(c_size_t) :: bytes, current, peak
    integer(c_int64_t) :: calls, traffic, sc(2), rc(2)
    integer :: me, members, peer
    call check_status("topology_comm", gaaw_topology_comm(ctx, GAAW_GROUP_WORLD, comm), GAAW_SUCCESS, ctx)
    call check_status("comm_rank", gaaw_comm_rank(comm, me), GAAW_SUCCESS, ctx)
    call check_status("comm_size", gaaw_comm_size(comm, members), GAAW_SUCCESS, ctx)
    call check_true("2 members", members == 2 .and. me == world_rank())
    call check_status("comm_backend", gaaw_comm_backend(comm, s), GAAW_SUCCESS, ctx)
    call check_true("the MPI communicator", s == "mpi")
    peer = 1 - me

    ! tensors: write, read, host pointer, accounting
    call check_status("tensor_alloc", gaaw_tensor_alloc(ctx, GAAW_F32, [4_c_int64_t], GAAW_MEM_WORKSPACE, t), &
                      GAAW_SUCCESS, ctx)
    call check_true("numel 4", gaaw_tensor_numel(t) == 4)
    v = [1, 2, 3, 4] * real(me + 1, c_float)
    call check_status("buffer_write", gaaw_buffer_write(ctx, t%buf, 0_c_size_t, c_loc(v), 16_c_size_t), &
                      GAAW_SUCCESS, ctx)
    call check_status("buffer_host_ptr", gaaw_buffer_host_ptr(t%buf, p), GAAW_SUCCESS, ctx)
    call c_f_pointer(p, host, [4])
    call check_same("host pointer sees the values", host, v)
    call check_status("memory_usage", gaaw_memory_usage(ctx, GAAW_MEM_WORKSPACE, current, peak), GAAW_SUCCESS, ctx)
    call check_true("16 workspace bytes at least", current >= 16 .and. peak >= current)

    ! all-reduce in place: 1+2 times [1, 2, 3, 4]
    call check_status("stats_reset", gaaw_comm_stats_reset(comm), GAAW_SUCCESS, ctx)
    call check_status("allreduce", gaaw_comm_allreduce(comm, t, t, GAAW_SUM), GAAW_SUCCESS, ctx)
    call check_status("buffer_read", gaaw_buffer_read(ctx, t%buf, 0_c_size_t, c_loc(got), 16_c_size_t), &
                      GAAW_SUCCESS, ctx)
    call check_same("all-reduce sums", got(1:4), [3, 6, 9, 12] * 1.0_c_float)
    call check_status("stats", gaaw_comm_stats(comm, GAAW_COMM_OP_ALLREDUCE, calls, traffic), GAAW_SUCCESS, ctx)
    call check_true("one all-reduce of 2 x 16 bytes counted", calls == 1 .and. traffic == 32)

    ! all-gather into a view of a raw buffer: member r's block r
    call check_status("buffer_alloc", gaaw_buffer_alloc(ctx, 32_c_size_t, GAAW_MEM_WORKSPACE, raw), &
                      GAAW_SUCCESS, ctx)
    call check_status("buffer_size", gaaw_buffer_size(raw, bytes), GAAW_SUCCESS, ctx)
    call check_true("32 bytes", bytes == 32)
    call check_status("view", gaaw_tensor_view(raw, 0_c_size_t, GAAW_F32, [2_c_int64_t, 4_c_int64_t], all), &
                      GAAW_SUCCESS, ctx)
    call check_status("buffer_write", gaaw_buffer_write(ctx, t%buf, 0_c_size_t, c_loc(v), 16_c_size_t), &
                      GAAW_SUCCESS, ctx)
    call check_status("allgather", gaaw_comm_allgather(comm, t, all), GAAW_SUCCESS, ctx)
    call check_status("buffer_read", gaaw_buffer_read(ctx, raw, 0_c_size_t, c_loc(got), 32_c_size_t), &
                      GAAW_SUCCESS, ctx)
    call check_same("all-gather blocks", got, [1, 2, 3, 4, 2, 4, 6, 8] * 1.0_c_float)

    ! alltoallv of t (rank r holds (r + 1) [1, 2, 3, 4]): rank 0 keeps 1 element and
    ! sends 3, rank 1 sends 2 and keeps 2; the counts exchanged first
    sc = [1_c_int64_t, 3_c_int64_t]
    if (me == 1) sc = [2_c_int64_t, 2_c_int64_t]
    call check_status("alltoall_counts", gaaw_comm_alltoall_counts(comm, 1_c_int64_t, sc, rc), GAAW_SUCCESS, ctx)
    if (me == 0) call check_true("counts to rank 0", rc(1) == 1 .and. rc(2) == 2)
    if (me == 1) call check_true("counts to rank 1", rc(1) == 3 .and. rc(2) == 2)
    call check_status("alltoallv", gaaw_comm_alltoallv(comm, t, sc, all, rc), GAAW_SUCCESS, ctx)
    call check_status("buffer_read", gaaw_buffer_read(ctx, raw, 0_c_size_t, c_loc(got), 32_c_size_t), &
                      GAAW_SUCCESS, ctx)
    if (me == 0) call check_same("alltoallv blocks on rank 0", got(1:3), [1, 2, 4] * 1.0_c_float)
    if (me == 1) call check_same("alltoallv blocks on rank 1", got(1:5), [2, 3, 4, 6, 8] * 1.0_c_float)

    ! broadcast from rank 1, then a non-blocking pair: each sends its rank to the other
    call check_status("broadcast", gaaw_comm_broadcast(comm, t, 1), GAAW_SUCCESS, ctx)
    call check_status("buffer_read", gaaw_buffer_read(ctx, t%buf, 0_c_size_t, c_loc(got), 16_c_size_t), &
                      GAAW_SUCCESS, ctx)
    call check_same("broadcast from rank 1", got(1:4), [2, 4, 6, 8] * 1.0_c_float)
    call check_status("view of block", gaaw_tensor_view(raw, 16_c_size_t, GAAW_F32, [4_c_int64_t], part), &
                      GAAW_SUCCESS, ctx)
    v = real(me, c_float)
    call check_status("buffer_write", gaaw_buffer_write(ctx, t%buf, 0_c_size_t, c_loc(v), 16_c_size_t), &
                      GAAW_SUCCESS, ctx)
    if (me == 0) then
      call check_status("send_start", gaaw_comm_send_start(comm, t, peer, 7, req), GAAW_SUCCESS, ctx)
      call check_status("wait", gaaw_comm_wait(req), GAAW_SUCCESS, ctx)
      call check_status("recv", gaaw_comm_recv(comm, part, peer, 8), GAAW_SUCCESS, ctx)
    else
      call check_status("recv_start", gaaw_comm_recv_start(comm, part, peer, 7, req), GAAW_SUCCESS, ctx)
      call check_status("wait", gaaw_comm_wait(req), GAAW_SUCCESS, ctx)
      call check_status("send", gaaw_comm_send(comm, t, peer, 8), GAAW_SUCCESS, ctx)
    end if
    call check_true("the request is null after the wait", .not. c_associated(req%ptr))
    call check_status("buffer_read", gaaw_buffer_read(ctx, raw, 16_c_size_t, c_loc(got), 16_c_size_t), &
                      GAAW_SUCCESS, ctx)
    call check_same("the peer's rank arrived", got(1:4), spread(real(peer, c_float), 1, 4))
    call check_status("barrier", gaaw_comm_barrier(comm), GAAW_SUCCESS, ctx)

    call check_status("buffer_free", gaaw_buffer_free(ctx, raw), GAAW_SUCCESS, ctx)
    call check_status("buffer_free", gaaw_buffer_free(ctx, t%buf), GAAW_SUCCESS, ctx)
    call check_true("freed buffers are null", .not. c_associated(raw%ptr) .and. .not. c_associated(t%buf%ptr))
    call check_status("memory_cached", gaaw_memory_cached(ctx, bytes), GAAW_SUCCESS, ctx)
    call check_true("the freed bytes are cached", bytes >= 48)
    call check_status("release_cached", gaaw_memory_release_cached(ctx), GAAW_SUCCESS, ctx)
    call check_status("memory_cached", gaaw_memory_cached(ctx, bytes), GAAW_SUCCESS, ctx)
    call check_true("nothing cached after the release", bytes == 0)
    call check_status("reset_peak", gaaw_memory_reset_peak(ctx), GAAW_SUCCESS, ctx)
  end subroutine check_tensors_and_comm

  ! A small GPT at tp 2: Fortran arrays against C pointers, predict against forward.
  subroutine check_gpt()
    type(gaaw_model) :: gpt
    type(gaaw_batch_t) :: b
    integer(c_int32_t), target :: tokens(seq, nbatch), targets(seq, nbatch), short(seq - 1, nbatch)
    real(c_float), target :: logits(vocab, seq, nbatch), forward_logits(vocab, seq, nbatch)
    real(c_float) :: loss, loss_c
    integer :: i, st
    call check_status("create_gpt", gaaw_model_create_gpt(ctx, gpt, vocab=vocab, max_seq=seq, layers=1, heads=2, &
                                                          dim=16, seed=7), GAAW_SUCCESS, ctx)
    tokens = reshape([(int(mod(i * 7, vocab), c_int32_t), i = 1, seq * nbatch)], [seq, nbatch])
    targets = cshift(tokens, 1, dim=1)
    short = 0
    call check_status("forward on arrays", gaaw_model_forward(gpt, tokens, targets, loss), GAAW_SUCCESS, ctx)
    call check_status("get_logits", gaaw_model_get_logits(gpt, forward_logits), GAAW_SUCCESS, ctx)
    b%batch = nbatch
    b%seq = seq
    b%tokens = c_loc(tokens)
    b%targets = c_loc(targets)
    call check_status("forward on a batch", gaaw_model_forward(gpt, b, loss_c), GAAW_SUCCESS, ctx)
    call check_same("the same loss either way", [loss], [loss_c])
    call check_true("a loss near log(vocab)", abs(loss - log(real(vocab))) < 1)
    call check_status("predict", gaaw_model_predict(gpt, tokens, logits), GAAW_SUCCESS, ctx)
    call check_same("predicted logits are the forward's", reshape(logits, [size(logits)]), &
                    reshape(forward_logits, [size(logits)]))
    if (world_rank() == 1) then
      st = gaaw_model_forward_backward(gpt, tokens, short, loss)
    else
      st = gaaw_model_forward_backward(gpt, tokens, targets, loss)
    end if
    call check_failure("targets (seq - 1, batch) on rank 1", st, GAAW_ERR_INVALID_ARG, ctx, &
                       "targets hold 2 samples of 7 features")
    call check_status("destroy gpt", gaaw_model_destroy(gpt), GAAW_SUCCESS)
    call check_llama()
    call check_moe()
  end subroutine check_gpt

  ! Mixture-of-experts MLPs by keyword: capacity refused by name at tp 2; on one rank (a
  ! context of its own), a step's metrics: one MoE layer of 4 experts, top-2, every
  ! token counted twice, a load-balancing loss near its balanced value 0.01.
  subroutine check_moe()
    type(gaaw_model) :: m
    type(gaaw_gpt_config_t) :: c
    type(gaaw_config) :: one_cfg
    type(gaaw_context) :: one
    type(gaaw_moe_metrics_t) :: metrics
    integer(c_int32_t) :: tokens(seq, nbatch), targets(seq, nbatch)
    integer(c_int64_t) :: counts(4, 1)
    real(c_float) :: loss
    integer :: i
    call gaaw_gpt_config_default(c)
    call check_true("moe defaults: dense, top-2, softmax, aux 0.01", c%experts == 0 .and. c%top_k == 2 .and. &
                    c%router_score == GAAW_ROUTER_SOFTMAX .and. abs(c%aux_loss_coef - 0.01) < 1e-7)
    call check_failure("capacity at tp 2", gaaw_model_create_gpt(ctx, m, vocab=vocab, max_seq=seq, layers=1, &
                       heads=2, dim=16, llama=.true., experts=4, capacity_factor=1.0), GAAW_ERR_UNSUPPORTED, ctx, &
                       "capacity_factor 1 at tp = 2")
    call check_status("config_create", gaaw_config_create(one_cfg), GAAW_SUCCESS)
    call check_status("parse", gaaw_config_parse(one_cfg, "backend=host"), GAAW_SUCCESS)
    call check_status("gaaw_init on one rank", gaaw_init(MPI_COMM_SELF, one_cfg, one), GAAW_SUCCESS)
    call check_status("create moe", gaaw_model_create_gpt(one, m, vocab=vocab, max_seq=seq, layers=1, heads=2, &
                                                          dim=16, seed=7, llama=.true., experts=4, top_k=2, &
                                                          moe_ffn=8, router_score=GAAW_ROUTER_SOFTMAX, &
                                                          aux_loss_coef=0.01, z_loss_coef=1e-3), GAAW_SUCCESS, one)
    tokens = reshape([(int(mod(i * 3, vocab), c_int32_t), i = 1, seq * nbatch)], [seq, nbatch])
    targets = cshift(tokens, 1, dim=1)
    call check_status("moe forward_backward", gaaw_model_forward_backward(m, tokens, targets, loss), GAAW_SUCCESS, one)
    call check_status("moe metrics", gaaw_model_moe_metrics(m, metrics, counts), GAAW_SUCCESS, one)
    call check_true("moe metrics: 1 layer, 4 experts, top-2, every token", metrics%layers == 1 .and. &
                    metrics%experts == 4 .and. metrics%top_k == 2 .and. metrics%tokens == seq * nbatch)
    call check_true("moe counts: every token twice", sum(counts) == 2 * seq * nbatch .and. all(counts >= 0))
    call check_true("moe: aux loss near 0.01, a z loss, a margin, dropless", abs(metrics%aux_loss - 0.01d0) < 5d-3 &
                    .and. metrics%z_loss > 0 .and. metrics%min_margin > 0 .and. metrics%drop_fraction == 0)
    call check_status("destroy moe", gaaw_model_destroy(m), GAAW_SUCCESS)
    call check_status("finalize one", gaaw_finalize(one), GAAW_SUCCESS)
    call check_status("config_destroy", gaaw_config_destroy(one_cfg), GAAW_SUCCESS)
  end subroutine check_moe

  ! A LLaMA-class GPT at tp 2 with one kv head (replicated on both ranks), by the
  ! keywords and by a config that gaaw_gpt_config_llama filled: the same model.
  subroutine check_llama()
    type(gaaw_model) :: a, b
    type(gaaw_gpt_config_t) :: c
    integer(c_int32_t) :: tokens(seq, nbatch), targets(seq, nbatch)
    real(c_float) :: loss_a, loss_b
    integer(c_int64_t) :: n_a, n_b, local
    integer :: i
    call check_status("create llama", gaaw_model_create_gpt(ctx, a, vocab=vocab, max_seq=seq, layers=1, heads=2, &
                                                            dim=16, seed=7, llama=.true., kv_heads=1, head_dim=6, &
                                                            rope_theta=5d5, norm_eps=1e-6), GAAW_SUCCESS, ctx)
    call gaaw_gpt_config_default(c)
    c%vocab = vocab
    c%max_seq = seq
    c%layers = 1
    c%heads = 2
    c%dim = 16
    c%seed = 7
    c%ffn = 0
    call gaaw_gpt_config_llama(c)
    call check_true("llama: RoPE, no biases, untied, ffn 8/3 x 16 rounded up to 64", &
                    c%position == GAAW_POSITION_ROPE .and. c%no_bias == 1 .and. c%tied_embeddings == 0 .and. &
                    c%ffn == 64)
    c%kv_heads = 1
    c%head_dim = 6
    c%rope_theta = 5d5
    c%norm_eps = 1e-6
    call check_status("create llama from a config", gaaw_model_create_gpt(ctx, b, config=c), GAAW_SUCCESS, ctx)
    call check_status("num_params", gaaw_model_num_params(a, n_a, local), GAAW_SUCCESS, ctx)
    call check_status("num_params", gaaw_model_num_params(b, n_b, local), GAAW_SUCCESS, ctx)
    ! wte and lm_head 2 x vocab x 16; q 12 x 16, k and v 6 x 16, o 16 x 12; 2 x 64 x 16 + 16 x 64; 3 norms of 16
    call check_true("llama: the parameter count", n_a == n_b .and. n_a == 2 * vocab * 16 + 36 * 16 + &
                    3 * 64 * 16 + 3 * 16)
    tokens = reshape([(int(mod(i * 5, vocab), c_int32_t), i = 1, seq * nbatch)], [seq, nbatch])
    targets = cshift(tokens, 1, dim=1)
    call check_status("llama forward", gaaw_model_forward(a, tokens, targets, loss_a), GAAW_SUCCESS, ctx)
    call check_status("llama forward", gaaw_model_forward(b, tokens, targets, loss_b), GAAW_SUCCESS, ctx)
    call check_same("the same llama either way", [loss_a], [loss_b])
    call check_status("destroy llama", gaaw_model_destroy(a), GAAW_SUCCESS)
    call check_status("destroy llama", gaaw_model_destroy(b), GAAW_SUCCESS)
  end subroutine check_llama

  ! The parameter registry, gradients, timing and the optimizer's figures.
  subroutine check_mlp_state()
    type(gaaw_model) :: mlp
    type(gaaw_optimizer) :: opt
    type(gaaw_step_stats_t) :: stats
    real(c_float) :: x(3, 4), y(2, 4), loss, loss2
    real(c_float), allocatable :: w(:), w2(:), g(:), all_params(:)
    integer(c_int64_t) :: shape(2), global, local
    integer(c_size_t) :: params, grads, state
    real(c_double) :: fwd, bwd, flops
    character(len=:), allocatable :: name, kind
    integer :: count, ndim, layers, i
    call check_status("create_mlp", gaaw_model_create_mlp(ctx, [3, 8, 2], mlp, activation=GAAW_ACT_GELU), &
                      GAAW_SUCCESS, ctx)
    call check_status("param_count", gaaw_model_param_count(mlp, count), GAAW_SUCCESS, ctx)
    call check_true("weights and biases of 2 linears", count == 4)
    call check_status("param_info 0", gaaw_model_param_info(mlp, 0, name, ndim, shape), GAAW_SUCCESS, ctx)
    call check_true("the first weight is 2-D, 3 x 8 in some order: "//name, ndim == 2 .and. product(shape) == 24)
    call check_status("num_params", gaaw_model_num_params(mlp, global, local), GAAW_SUCCESS, ctx)
    call check_true("3*8+8+8*2+2 = 50 parameters, split over tp", global == 50 .and. local < global)
    call check_status("flops_per_token", gaaw_model_flops_per_token(mlp, flops), GAAW_SUCCESS, ctx)
    call check_true("an MLP's training FLOPs per sample: 6 x 50", flops == 300)
    allocate(w(product(shape)), w2(product(shape)), g(product(shape)))
    call check_status("get_param", gaaw_model_get_param(mlp, name, w), GAAW_SUCCESS, ctx)
    w2 = w * 2
    call check_status("set_param", gaaw_model_set_param(mlp, name, w2), GAAW_SUCCESS, ctx)
    call check_status("get_param", gaaw_model_get_param(mlp, name, w), GAAW_SUCCESS, ctx)
    call check_same("set then get", w, w2)
    allocate(all_params(global))
    call check_status("get_params", gaaw_model_get_params(mlp, all_params), GAAW_SUCCESS, ctx)
    call check_same("the vector starts with parameter 0", all_params(1:size(w)), w)
    all_params = all_params + 1
    call check_status("set_params", gaaw_model_set_params(mlp, all_params), GAAW_SUCCESS, ctx)
    call check_status("get_param", gaaw_model_get_param(mlp, name, w), GAAW_SUCCESS, ctx)
    call check_same("set_params reached parameter 0", w, w2 + 1)
    ! weights out and back in as safetensors
    call check_status("export", gaaw_model_export(mlp, "fortran_api_np2.safetensors"), GAAW_SUCCESS, ctx)
    call check_status("set_params", gaaw_model_set_params(mlp, all_params * 0), GAAW_SUCCESS, ctx)
    call check_status("import", gaaw_model_import(mlp, "fortran_api_np2.safetensors"), GAAW_SUCCESS, ctx)
    call check_status("get_param", gaaw_model_get_param(mlp, name, w), GAAW_SUCCESS, ctx)
    call check_same("import gave the exported weights back", w, w2 + 1)
    call check_status("import of a missing file", gaaw_model_import(mlp, "no-such.safetensors"), GAAW_ERR_IO, ctx)

    x = reshape([(real(i, c_float) / 10, i = 1, 12)], [3, 4])
    y = 0.5
    call check_status("forward", gaaw_model_forward(mlp, x, y, loss), GAAW_SUCCESS, ctx)
    call check_status("backward", gaaw_model_backward(mlp), GAAW_SUCCESS, ctx)
    call check_status("forward_backward", gaaw_model_forward_backward(mlp, x, y, loss2), GAAW_SUCCESS, ctx)
    call check_same("forward and forward_backward give one loss", [loss], [loss2])
    call check_status("get_grad", gaaw_model_get_grad(mlp, name, g), GAAW_SUCCESS, ctx)
    call check_true("two passes accumulated a gradient", maxval(abs(g)) > 0)
    call check_status("zero_grad", gaaw_model_zero_grad(mlp), GAAW_SUCCESS, ctx)
    call check_status("get_grad", gaaw_model_get_grad(mlp, name, g), GAAW_SUCCESS, ctx)
    call check_true("zeroed", maxval(abs(g)) == 0)
    call check_status("check_arrays, outputs of 3", gaaw_model_check_arrays(mlp, .true., [4_c_int64_t, 3_c_int64_t], &
                      [4_c_int64_t, 3_c_int64_t]), GAAW_ERR_INVALID_ARG, ctx)

    call check_status("layer_count", gaaw_model_layer_count(mlp, layers), GAAW_SUCCESS, ctx)
    call check_true("2 linears and the loss", layers == 3)
    call check_status("layer_times", gaaw_model_layer_times(mlp, 0, kind, fwd, bwd), GAAW_SUCCESS, ctx)
    call check_true("layer 0 is a linear that took time: "//kind, kind == "linear" .and. fwd > 0 .and. bwd > 0)
    call check_status("reset_times", gaaw_model_reset_times(mlp), GAAW_SUCCESS, ctx)
    call check_status("layer_times", gaaw_model_layer_times(mlp, 0, forward_seconds=fwd), GAAW_SUCCESS, ctx)
    call check_true("reset to 0", fwd == 0)

    call check_status("optimizer_create", gaaw_optimizer_create(mlp, opt, kind=GAAW_SGD, lr=0.1, momentum=0.0, &
                                                                weight_decay=0.0), GAAW_SUCCESS, ctx)
    call check_status("forward_backward", gaaw_model_forward_backward(mlp, x, y, loss), GAAW_SUCCESS, ctx)
    call check_status("step", gaaw_optimizer_step(opt), GAAW_SUCCESS, ctx)
    call check_status("stats", gaaw_optimizer_stats(opt, stats), GAAW_SUCCESS, ctx)
    call check_true("one step at lr 0.1 with a gradient", stats%step == 1 .and. stats%lr == 0.1_c_float .and. &
                    stats%grad_norm > 0 .and. stats%skipped == 0)
    call check_status("memory", gaaw_optimizer_memory(opt, params, grads, state), GAAW_SUCCESS, ctx)
    call check_true("this rank's parameters are counted", params >= 4 * local)
    call check_status("step without backward", gaaw_optimizer_step(opt), GAAW_ERR_STATE, ctx)
    call check_checkpoints(mlp, opt, name)
    call check_status("optimizer_destroy", gaaw_optimizer_destroy(opt), GAAW_SUCCESS)
    call check_status("destroy mlp", gaaw_model_destroy(mlp), GAAW_SUCCESS)
    deallocate(name, kind)
  end subroutine check_mlp_state

  ! A checkpoint of the trained MLP: saved with an entry and a sample buffer, the
  ! weights changed, loaded back (weights, entry); gaaw_model_load is refused with
  ! an optimizer; an empty directory holds no checkpoint.
  subroutine check_checkpoints(mlp, opt, name)
    type(gaaw_model), intent(in) :: mlp
    type(gaaw_optimizer), intent(in) :: opt
    character(len=*), intent(in) :: name
    type(gaaw_sampler) :: samples
    real(c_float) :: w(24), saved(24)
    character(len=16) :: value
    character(len=2) :: small
    call check_status("sampler_create", gaaw_sampler_create(ctx, samples, 3, 2), GAAW_SUCCESS, ctx)
    call check_status("add_sampler", gaaw_checkpoint_add_sampler(opt, samples), GAAW_SUCCESS, ctx)
    call check_status("set_entry", gaaw_checkpoint_set_entry(opt, "timestep", "1200"), GAAW_SUCCESS, ctx)
    call check_status("get_param", gaaw_model_get_param(mlp, name, saved), GAAW_SUCCESS, ctx)
    call check_status("checkpoint_save", gaaw_checkpoint_save(opt, "fortran_api_np2.ckpt"), GAAW_SUCCESS, ctx)
    call check_status("checkpoint_wait", gaaw_checkpoint_wait(opt), GAAW_SUCCESS, ctx)
    call check_status("set_param", gaaw_model_set_param(mlp, name, saved * 0), GAAW_SUCCESS, ctx)
    call check_status("set_entry", gaaw_checkpoint_set_entry(opt, "timestep", "0"), GAAW_SUCCESS, ctx)
    call check_status("checkpoint_load", gaaw_checkpoint_load(opt, "fortran_api_np2.ckpt"), GAAW_SUCCESS, ctx)
    call check_status("get_param", gaaw_model_get_param(mlp, name, w), GAAW_SUCCESS, ctx)
    call check_same("the load gave the saved weights back", w, saved)
    call check_status("get_entry", gaaw_checkpoint_get_entry(opt, "timestep", value), GAAW_SUCCESS, ctx)
    call check_true("the entry came back: "//trim(value), value == "1200")
    call check_status("get_entry too small", gaaw_checkpoint_get_entry(opt, "timestep", small), &
                      GAAW_ERR_INVALID_ARG, ctx)
    call check_status("model_load with an optimizer", gaaw_model_load(mlp, "fortran_api_np2.ckpt"), GAAW_ERR_STATE, ctx)
    call check_status("no checkpoint", gaaw_checkpoint_load(opt, "no-such-checkpoint"), GAAW_ERR_NOT_FOUND, ctx)
    call check_status("sampler_destroy", gaaw_sampler_destroy(samples), GAAW_SUCCESS)
    call MPI_Barrier(MPI_COMM_WORLD, ierr)
    call remove_tree("fortran_api_np2.ckpt")
  end subroutine check_checkpoints
end program fortran_api_np2
