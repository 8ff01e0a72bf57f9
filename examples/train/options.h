/* gaaw-train's own options (the library's, such as tp and backend, live in the
 * gaaw_config). Each option is declared once below: name, type, default, help.
 * On the command line an option is --name VALUE or --name=VALUE with '_' written
 * as '-' (--eval-every); in a config file it is a "name = value" line; in the
 * environment it is GAAW_<NAME> in capitals (GAAW_EVAL_EVERY).
 *
 * Precedence, lowest first: default < config file < environment < command line,
 * for the trainer's options and the library's alike. */
#ifndef GAAW_TRAIN_OPTIONS_H
#define GAAW_TRAIN_OPTIONS_H

#include <stddef.h>
#include <stdio.h>

#include "gaaw.h"

#define TRAIN_OPTION_LIST(X)                                                                         \
  X(config, STRING, "", "FILE", "read options from FILE: name = value lines, # comments")           \
  X(data, STRING, "", "FILE", "training text, one token per byte (--data-path FILE --data-format bytes)") \
  X(data_path, STRING, "", "PATHS", "a dataset (Megatron prefix, llm.c file or text), or weights and datasets: 0.7 a 0.3 b; empty = --data, else the shipped corpus") \
  X(data_format, STRING, "auto", "F", "auto, megatron, llmc or bytes (auto: by the file)") \
  /* model */                                                                                        \
  X(layers, INT, "4", "N", "transformer blocks")                                                    \
  X(heads, INT, "4", "N", "attention heads (divisible by tp)")                                      \
  X(dim, INT, "128", "N", "embedding width (divisible by heads)")                                   \
  X(seq, INT, "128", "N", "tokens per sequence (the model's context)")                              \
  X(vocab, INT, "256", "N", "vocabulary; every byte of the data must be below it")                  \
  X(arch, STRING, "gpt2", "A", "gpt2 (learned positions, layernorm, GELU, biases, tied head) or llama (RoPE, RMSNorm, SwiGLU, no biases, untied head)") \
  X(kv_heads, INT, "0", "N", "key/value heads for grouped-query attention (dividing --heads; 1 = multi-query); 0 = --heads") \
  X(ffn, INT, "0", "N", "MLP hidden width (divisible by tp); 0 = 4 x --dim for gpt2, 8/3 x --dim rounded up to 32 (256 from --dim 1024) for llama") \
  X(head_dim, INT, "0", "N", "width of one attention head; 0 = --dim / --heads")                    \
  X(rope_theta, DOUBLE, "10000", "X", "RoPE's base with --arch llama")                              \
  X(norm_eps, DOUBLE, "1e-5", "X", "the norms' epsilon")                                           \
  X(experts, INT, "0", "N", "mixture of experts: N SwiGLU experts in place of the MLP of blocks 0, --moe-every, 2 x --moe-every, ... (doc/moe.md); 0 = dense") \
  X(top_k, INT, "2", "K", "with --experts: the experts each token visits, 1..N")                  \
  X(moe_every, INT, "1", "N", "with --experts: every N-th block (from block 0) has an MoE MLP")   \
  X(moe_ffn, INT, "0", "N", "with --experts: an expert's hidden width; 0 = --ffn's")               \
  X(router_score, STRING, "softmax", "S", "with --experts: the router's scores, softmax or sigmoid (DeepSeek-V3)") \
  X(aux_loss, DOUBLE, "0.01", "X", "with --experts: the load-balancing loss's coefficient (per MoE layer, summed)") \
  X(z_loss, DOUBLE, "0", "X", "with --experts: the router z-loss's coefficient")                  \
  X(capacity_factor, DOUBLE, "0", "X", "with --experts: an expert takes at most ceil(K x tokens x X / N) of a microbatch's assignments, the rest skip it; 0 = dropless") \
  X(shared_ffn, INT, "0", "N", "with --experts: a shared expert of width N that every token passes through; 0 = none") \
  X(shared_gate, INT, "0", "0|1", "with --shared-ffn: 1 = its output scaled per token by a learned sigmoid gate (Qwen2-MoE)") \
  X(drop_policy, STRING, "probs", "P", "with --capacity-factor: which assignments go first, probs (the lowest weights) or position (the latest tokens)") \
  X(dtype, STRING, "f32", "T", "compute dtype: f32, bf16 or f16 (f16 with dynamic loss scaling)")   \
  X(layout, STRING, "", "auto", "auto = the planner (gaaw-plan) chooses tp, pp, dp, virtual stages, microbatches, schedule, --zero, recompute and --batch for the global batch --batch x --accum x microbatches x dp, after calibrating this machine, and prints its choice; empty = the layout options as given") \
  /* optimization */                                                                                 \
  X(zero, INT, "0", "S", "ZeRO stage 0..3")                                                         \
  X(optimizer, STRING, "adamw", "NAME", "adamw or sgd")                                             \
  X(offload_optimizer, STRING, "", "WHERE", "the optimizer state on none (the device), host or nvme (files under --nvme-path) (the library option offload_optimizer); empty = its default") \
  X(cpu_simd, STRING, "", "V", "the CPU Adam version with --offload-optimizer host or nvme: auto, avx512, avx2 or scalar (the library option cpu_simd)") \
  X(offload_params, STRING, "", "WHERE", "ZeRO 3 with --offload-optimizer host or nvme: the parameter shard on none (the device), host or nvme (the library option offload_params)") \
  X(nvme_path, STRING, "", "DIR", "an existing directory for the nvme offload's files, one per rank, removed at the end (the library option nvme_path)") \
  X(device_memory_limit, STRING, "", "BYTES", "the most device memory per rank, as bytes or with K, M, G, T (the library option device_memory_limit)") \
  X(batch, INT, "8", "N", "sequences per microbatch on each data-parallel rank")                    \
  X(accum, INT, "1", "N", "microbatches accumulated per step")                                      \
  X(steps, INT, "200", "N", "optimizer steps of the whole run (a resumed run does the rest); 0 with --resume or --import: evaluate once") \
  X(lr, DOUBLE, "0.001", "X", "peak learning rate")                                                 \
  X(min_lr, DOUBLE, "0.0001", "X", "learning rate at the end of the cosine decay")                  \
  X(warmup, INT, "20", "N", "linear warmup steps")                                                  \
  X(weight_decay, DOUBLE, "0.1", "X", "decoupled weight decay (AdamW) or L2 (SGD)")                 \
  X(clip, DOUBLE, "1", "X", "clip the global gradient norm to X; 0 = off")                          \
  X(seed, INT, "1337", "N", "initial weights, data order and sampling")                             \
  /* evaluation and output */                                                                       \
  X(eval_every, INT, "50", "N", "validation loss every N steps (always at the start and end); 0 = start and end only") \
  X(eval_batches, INT, "4", "N", "validation global batches (dp x accum x microbatches x batch windows) per evaluation") \
  X(metrics, STRING, "", "FILE", "write one JSON object per step to FILE (rank 0)")                 \
  X(progress, STRING, "auto", "WHEN", "rank 0 redraws a progress line (step, %, elapsed, ETA, loss, tok/s) on stderr: auto = when stderr is a terminal (under mpiexec it is a pipe: use yes), yes, no; --no-progress = no") \
  X(plot, STRING, "", "DIR", "at the end, rank 0 draws the metrics into DIR with gaaw-plot (SVG and PNG, needs gnuplot); without --metrics they are written to DIR/metrics.jsonl") \
  X(sample, INT, "64", "N", "bytes to generate at the end; 0 = none")                               \
  X(prompt, STRING, "The ", "TEXT", "the generated sample starts from TEXT")                        \
  X(temperature, DOUBLE, "0", "X", "sampling temperature of the sample; 0 = greedy")                 \
  /* checkpoints */                                                                                  \
  X(save_dir, STRING, "", "DIR", "save checkpoints into DIR (DIR/step-NNNNNNNN, DIR/latest)")        \
  X(save_every, INT, "50", "N", "with --save-dir: a checkpoint after every N-th step and after the last") \
  X(keep, STRING, "", "K", "keep the newest K checkpoints, 0 = all (the library option checkpoint_keep); empty = its default") \
  X(resume, STRING, "", "auto|DIR", "load a checkpoint first: auto = the newest intact one in --save-dir, or a fresh start if none; DIR = that save directory or step-* directory") \
  X(import, STRING, "", "FILE", "start from the weights of a safetensors FILE (a fresh optimizer; with --resume auto only if there is no checkpoint)")  \
  X(export, STRING, "", "FILE", "write the trained weights to a safetensors FILE at the end")

#define TRAIN_STRING_MAX 1024

#define TRAIN_FIELD_INT(name) long name;
#define TRAIN_FIELD_DOUBLE(name) double name;
#define TRAIN_FIELD_STRING(name) char name[TRAIN_STRING_MAX];
#define TRAIN_FIELD(name, type, def, meta, help) TRAIN_FIELD_##type(name)
typedef struct {
  TRAIN_OPTION_LIST(TRAIN_FIELD)
} train_options;
#undef TRAIN_FIELD

/* Exit statuses of gaaw-train. */
enum { TRAIN_EXIT_OK = 0, TRAIN_EXIT_FAILURE = 1, TRAIN_EXIT_USAGE = 2 };

/* What the options are checked against: the world, this node's share of it and the
 * node's physical memory (0 = unknown: the memory is not checked). */
typedef struct {
  int world;            /* ranks in MPI_COMM_WORLD */
  int node_ranks;       /* of which on this node */
  double node_memory;   /* bytes: sysconf(_SC_PHYS_PAGES) x the page size */
} train_machine;

/* Fills opts and the library's cfg (already created: defaults + environment) from
 * the config file, the environment and the command line, then checks every value
 * that can be checked without other ranks: the trainer's options (ranges, choices,
 * finite numbers, divisibility by tp), the library's (gaaw_config_check), the
 * layout against the world size, sizes gaaw holds as int, and the memory estimate
 * of train_memory_estimate against the node's memory. Returns TRAIN_EXIT_OK, or
 * TRAIN_EXIT_USAGE with the reason in err. *help is set when --help was given
 * (nothing else is checked). */
int train_options_load(train_options *opts, gaaw_config_t cfg, int argc, char **argv, const train_machine *machine,
                       int *help, char *err, size_t errlen);

/* What one rank holds at least, in bytes, training opts' GPT at tp x pp x dp: its
 * share of the parameters, gradients and optimizer state (f32 master weights and
 * moments; each sharded over dp from ZeRO stage 3, 2 and 1), and the activations
 * its microbatches in flight keep for backward (one at pp 1; with a pipeline, of
 * the first or the last stage, whichever holds more, the schedule's in-flight
 * count of `microbatches`). A lower bound: workspace and the allocator's cache
 * come on top. */
typedef struct {
  double params, grads, optimizer, activations;
} train_memory;
void train_memory_estimate(const train_options *opts, int tp, int pp, int dp, int microbatches, const char *schedule,
                           train_memory *mem);

/* --help: every trainer option and every library option with its default. */
void train_options_usage(FILE *out, const char *prog);

/* The GPT configuration the options describe (--arch and the model sizes). */
void train_gpt_config(const train_options *o, gaaw_gpt_config_t *g);

#endif
