/* Every gaaw option, declared once: name, type, default (as text), help.
 * The environment variable is GAAW_ followed by the name in capitals. Add new
 * tunables at the end of the group they belong to. */
#ifndef GAAW_RUNTIME_TUNABLES_H
#define GAAW_RUNTIME_TUNABLES_H

#define GAAW_TUNABLE_LIST(X)                                                                      \
  /* runtime */                                                                                   \
  X(log, STRING, "warn", "log level: none, error, warn, info, debug or trace (stderr)")          \
  X(log_file, STRING, "", "append the log to this file instead of stderr")                        \
  /* device */                                                                                    \
  X(backend, STRING, "auto", "device backend: auto (a CUDA GPU, else an OpenCL GPU or accelerator, else host), host, opencl or cuda") \
  X(device, INT, "-1", "device index on the node; -1 = node-local rank modulo the device count") \
  X(threads, INT, "0",                                                                            \
    "OpenMP threads for host kernels; 0 = OMP_NUM_THREADS if set, else the cores shared among "  \
    "this node's ranks")                                                                         \
  X(trace, STRING, "",                                                                            \
    "write a timeline of this rank (Chrome trace / Perfetto JSON) to this file; %r is the world "  \
    "rank (needed with more than one rank); empty: off")                                          \
  X(trace_kernels, BOOL, "no",                                                                    \
    "with trace on, also a span per kernel call (lane `kernels`, with its shape; gemms with m, n, " \
    "k): the call's host time, which on the host backend is the kernel's run and on CUDA and "    \
    "OpenCL its launch; gaaw-trace summary sums them per kernel and shape")                       \
  X(device_memory_limit, STRING, "",                                                              \
    "the most device memory the allocator holds (in use, cached and pending), as bytes or with K, " \
    "M, G, T (powers of 1024): beyond it an allocation fails with GAAW_ERR_NO_MEMORY; empty: none") \
  X(allocator_cache, BOOL, "yes", "keep freed device memory for reuse instead of releasing it")  \
  X(opencl_platform, STRING, "",                                                                  \
    "OpenCL platform: an index or part of its name; empty = the first platform with a device")  \
  X(opencl_device, INT, "-1", "OpenCL device on that platform; -1 = the `device` choice")          \
  X(peak_tflops, STRING, "",                                                                      \
    "peak TFLOP/s of one rank's device, the denominator of the MFU that gaaw-train reports: a "  \
    "number > 0; measure = time f32 GEMMs through gaaw_gemm at start, on every rank; empty = "   \
    "unknown (no backend reports a peak yet), and no MFU is shown")                               \
  X(compute_slowdown, DOUBLE, "1",                                                                \
    "for benchmarks and tests of planners only: the host backend emulates a device this many "   \
    "times slower, sleeping (factor - 1) x the time of each GEMM after it (a shared core goes to " \
    "the other ranks); a number >= 1, per rank (set GAAW_COMPUTE_SLOWDOWN per rank with an MPMD " \
    "mpiexec); 1 = off")                                                                           \
  /* topology */                                                                                  \
  X(tp, INT, "1", "tensor-parallel size")                                                         \
  X(cp, INT, "1", "context-parallel size: each sequence is split over this many ranks")          \
  X(cp_kind, STRING, "ring",                                                                      \
    "context parallelism's attention: ring (each rank's keys and values pass round the cp group " \
    "while the blocks compute) or a2a (all-to-all between sequence and head shards, DeepSpeed-"   \
    "Ulysses; a rank's heads, heads / tp, must divide by cp)")                                   \
  X(pp, INT, "1", "pipeline-parallel size")                                                       \
  X(ep, INT, "1",                                                                                 \
    "expert-parallel size (mixture-of-experts models): each MoE layer's experts are split over "  \
    "this many ranks, folded onto the tp x cp x dp ranks of a pipeline stage (tp fastest); it "  \
    "must divide them, and the rest (tp x cp x dp / ep) is expert-dp")                           \
  X(dp, INT, "0", "data-parallel size; 0 = world size / (tp * cp * pp)")                         \
  X(rank_order, STRING, "tp-cp-dp-pp",                                                            \
    "order of the rank grid, fastest-varying first (Megatron-LM's default tp-cp-dp-pp; cp may be " \
    "left out, and then varies right after tp)")                                                   \
  /* communication */                                                                             \
  X(zero_bucket_bytes, INT, "16777216",                                                           \
    "ZeRO bucket size: consecutive layers' gradients are reduced together (started as "          \
    "backward completes them) and, at stage 3, their parameters gathered together (one "         \
    "bucket ahead), up to this many bytes; 0 = one bucket per layer")                                         \
  X(nccl, BOOL, "yes",                                                                            \
    "groups whose members all run the CUDA backend, each on its own GPU, communicate through "   \
    "NCCL (else MPI; a group two of whose ranks share a GPU stays on MPI, with a warning)")     \
  X(comm_timeout, DOUBLE, "300",                                                                  \
    "seconds a collective or send/recv waits for its peers before failing with "                 \
    "GAAW_ERR_TIMEOUT and aborting the communicator; 0 = wait forever")                          \
  X(allreduce_ring_bytes, INT, "16384",                                                           \
    "MPI all-reduces of at least this many bytes run gaaw's ring (reduce-scatter + all-gather "  \
    "over reused buffers); smaller f32/i32 ones use MPI_Iallreduce")                              \
  X(zero_keep_gathered, BOOL, "no",                                                               \
    "ZeRO stage 3: a bucket's parameters, once gathered in a step, stay gathered until the "     \
    "optimizer step (one all-gather per bucket and step instead of one per microbatch and pass; " \
    "the parameter memory of the rank's chunks is then whole, as at stage 2)")                    \
  /* offload */                                                                                   \
  X(offload_optimizer, STRING, "none",                                                            \
    "where the optimizer's f32 master weights and moments live: none (the device), host (host "   \
    "memory, ZeRO-Offload: each reduced gradient piece goes to host, CPU Adam updates it, the "   \
    "new compute-dtype piece comes back) or nvme (a file per rank under nvme_path, ZeRO-Infinity: " \
    "pieces read ahead and written behind while CPU Adam runs); every rank the same")            \
  X(offload_params, STRING, "none",                                                               \
    "ZeRO stage 3 with offload_optimizer host or nvme: where each rank's shard of the parameters " \
    "(compute dtype) lives: none (the device), host (host memory; a bucket's piece is uploaded "  \
    "before its all-gather) or nvme (a file per rank under nvme_path); every rank the same")      \
  X(nvme_path, STRING, "",                                                                        \
    "directory of the nvme offload's files (offload_optimizer, offload_params), one each per rank, created at gaaw_optimizer_create " \
    "with their space reserved and unlinked at once (nothing is left behind); may differ across " \
    "ranks (node-local disks)")                                                                   \
  X(cpu_simd, STRING, "auto",                                                                     \
    "the CPU Adam version offload_optimizer=host and nvme run: auto (the widest this CPU runs), avx512, "  \
    "avx2 or scalar; all give the same bits")                                                     \
  /* checkpoints */                                                                               \
  X(checkpoint_keep, INT, "0",                                                                    \
    "gaaw_checkpoint_save keeps the newest this many committed checkpoints of its directory, "    \
    "removing older ones after the new one is committed; 0 = keep all")                           \
  X(checkpoint_fallback, BOOL, "no",                                                              \
    "gaaw_checkpoint_load of a save directory whose newest checkpoint is damaged loads the "      \
    "newest intact one instead, and says so in the log")                                          \
  X(checkpoint_async, BOOL, "no",                                                                 \
    "gaaw_checkpoint_save copies the state into host buffers and returns; a thread writes it "    \
    "while training goes on, committed at the next optimizer step, save or gaaw_checkpoint_wait") \
  X(export_shard_size, STRING, "5000000000",                                                      \
    "gaaw_model_export in Hugging Face's layouts (LLaMA, GPT-2 with gpt2_names=hf) writes at most " \
    "this many bytes of tensors per file, as bytes or with K, M, G, T (powers of 1024); beyond "  \
    "it a sharded set (model-0000K-of-0000N.safetensors and model.safetensors.index.json); the "  \
    "default is Hugging Face's 5 GB")                                                             \
  X(gpt2_names, STRING, "nanogpt",                                                                \
    "the names gaaw_model_export writes and gaaw_model_import reads for a GPT-2 (a GPT that is "  \
    "not LLaMA-class): nanogpt (nanoGPT's: wte.weight, h.N.attn.c_attn.weight as (out, in)) or "   \
    "hf (Hugging Face's GPT2LMHeadModel: transformer.* names, Conv1D weights as (in, out), a "     \
    "config.json beside the file)")                                                               \
  X(export_dtype, STRING, "f32",                                                                  \
    "the dtype gaaw_model_export writes: f32, bf16 (as Hugging Face's LLaMA checkpoints hold "    \
    "their weights) or f16, rounded to nearest even; import reads all three whatever this says")  \
  /* models */                                                                                    \
  X(moe_margins, BOOL, "yes",                                                                     \
    "mixture-of-experts layers measure the smallest gap between a token's k-th and (k+1)-th "    \
    "router score (gaaw_model_moe_metrics' min_margin), reading the scores back to the host in " \
    "every MoE forward; no = not measured (+inf) and no host read")                              \
  X(recompute, STRING, "none",                                                                    \
    "activation recomputation: none; selective (the attention scores and softmax are dropped "  \
    "after forward and recomputed in backward; only the matrix attention core keeps them, see "  \
    "attention); full (a transformer block keeps only its input and re-runs its forward in "     \
    "backward); gradients are bit-identical either way")                                         \
  X(attention, STRING, "auto",                                                                    \
    "the GPT blocks' attention core: blocked (tiles of queries against key blocks with an "       \
    "online softmax; no (T, T) matrix, in forward or backward; selective recomputation then has " \
    "nothing to drop); matrix (the (T, T) probabilities kept for backward, or dropped and "       \
    "recomputed with recompute=selective); auto: blocked for sequences of 512 tokens or more "       \
    "(every backend has it), else matrix (faster at shorter sequences)")                                                                \
  /* pipeline */                                                                                  \
  X(microbatches, INT, "1",                                                                       \
    "microbatches of a step when a batch does not say (gaaw_batch_t.microbatches 0): the "       \
    "arrays hold microbatches x batch rows, run by the pipeline schedule (accumulated at pp 1)")  \
  X(pp_schedule, STRING, "1f1b",                                                                  \
    "pipeline schedule: gpipe, 1f1b, interleaved (needs virtual_stages >= 2 and microbatches a " \
    "multiple of pp) or zb-h1")                                                                   \
  X(virtual_stages, INT, "1",                                                                     \
    "model chunks per pipeline rank: 1, or >= 2 with pp_schedule interleaved (chunk c of rank r " \
    "holds layer block c x pp + r)")                                                              \
  X(pp_layout, STRING, "",                                                                        \
    "transformer layers (MLP: linears) per virtual stage, first to last, e.g. 3,3,2 (or 3:3:2 inside an "  \
    "option list, where ',' separates options); empty = "                                         \
    "balanced by a FLOP estimate (the embedding goes to the first stage, head and loss to the last)")

#endif
