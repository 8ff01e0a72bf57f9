/* gaaw checkpoints: the whole training state, sharded over the ranks that own it,
 * committed atomically, checksummed, and loadable into any other layout; and the
 * model's weights in and out as one safetensors file.
 *
 * A save directory holds (DESIGN.md section 7a):
 *   latest                 "step-00001200\n", replaced last (temp file, fsync, rename)
 *   step-00001200/         one committed checkpoint
 *     meta.json            the model config, the layout it was saved with, the
 *                          training state, the normalisation statistics, the
 *                          caller's entries, every tensor and every stored run
 *                          (file, offset, global box, flat range, XXH3-64), and
 *                          its own XXH3-64
 *     rank-00003.bin       what world rank 3 owns and writes, once per replica:
 *                          its fp32 values and optimizer moments (at ZeRO 1-3
 *                          its shard; at ZeRO 0 dp rank 0 writes the replica's)
 *   .tmp-step-00001300-XXXXXX   a save in progress, never read
 * A kill at any instant of a save leaves the previous checkpoint loadable.
 *
 * Options (gaaw_init's config; the same on every rank):
 *   checkpoint_keep      keep the newest K committed checkpoints (0: all)
 *   checkpoint_fallback  a load of a save directory whose newest checkpoint is
 *                        damaged loads the newest intact one instead, and logs it
 *   checkpoint_async     gaaw_checkpoint_save copies the state into host buffers
 *                        and returns; a thread writes it while training goes on,
 *                        and the checkpoint is committed at the next
 *                        gaaw_optimizer_step, gaaw_checkpoint_save or
 *                        gaaw_checkpoint_wait (collective calls all). A save still
 *                        uncommitted at gaaw_optimizer_destroy is dropped. */
#ifndef GAAW_CHECKPOINT_H
#define GAAW_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "gaaw/optimizer.h"
#include "gaaw/sampler.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Saves the training state of opt (its model's parameters, the optimizer's fp32
 * values and moments, its counters and loss scale, the model's normalisation
 * statistics and the entries set with gaaw_checkpoint_set_entry) as
 * dir/step-NNNNNNNN, NNNNNNNN the optimizer's step count, and points dir/latest at
 * it. dir is created if missing. Collective over world: dir must be the same on
 * every rank; every rank returns the same status. A save between a step's
 * backward and its gaaw_optimizer_step is GAAW_ERR_STATE (the gradients in flight
 * are not state). Failures: GAAW_ERR_IO naming the file and the call. */
gaaw_status_t gaaw_checkpoint_save(gaaw_optimizer_t opt, const char *dir);

/* Loads the training state into opt from path: a save directory (its `latest`,
 * or with no `latest` its newest step-* checkpoint) or one step-* directory. The
 * checkpoint may have been saved with any other dp, pp, tp, virtual stages, pp
 * layout or schedule, ZeRO stage, compute dtype or backend: each rank reads only
 * the stored runs that meet what it owns now. Collective over world: path must be
 * the same on every rank. Every rank returns the same status, and on failure
 * nothing of the model or the optimizer has changed:
 *   GAAW_ERR_NOT_FOUND   path holds no checkpoint (a fresh start)
 *   GAAW_ERR_CORRUPT     a checksum, a size, a missing file or metadata that does not
 *                        match: the message names the file, the tensor and the offset
 *                        (with checkpoint_fallback a damaged newest checkpoint of a
 *                        save directory gives way to the newest intact one)
 *   GAAW_ERR_INVALID_ARG the checkpoint is of another model ("dim is 16 there, 32
 *                        here") or another optimizer kind */
gaaw_status_t gaaw_checkpoint_load(gaaw_optimizer_t opt, const char *path);

/* Loads only the model's parameters from a checkpoint (inference: a model without
 * an optimizer; with one, use gaaw_checkpoint_load). path as for
 * gaaw_checkpoint_load; the normalisation statistics are loaded too. Collective
 * over world. */
gaaw_status_t gaaw_model_load(gaaw_model_t model, const char *path);

/* Waits for an asynchronous save (checkpoint_async) and commits it; a no-op when
 * none is pending. Collective over world. */
gaaw_status_t gaaw_checkpoint_wait(gaaw_optimizer_t opt);

/* The caller's own entries (a simulation's time step): key = value strings saved
 * with the next gaaw_checkpoint_save and restored by gaaw_checkpoint_load. Keys
 * are 1-63 characters of [A-Za-z0-9_.-], values UTF-8 of at most 4095 bytes;
 * setting a key again replaces its value. get copies the value into value[size]
 * (NUL-terminated; GAAW_ERR_INVALID_ARG when it does not fit) or returns
 * GAAW_ERR_NOT_FOUND. Not collective (but every rank should set the same). */
gaaw_status_t gaaw_checkpoint_set_entry(gaaw_optimizer_t opt, const char *key, const char *value);
gaaw_status_t gaaw_checkpoint_get_entry(gaaw_optimizer_t opt, const char *key, char *value, size_t size);

/* Adds sampler to what opt's checkpoints hold from now on: each dp replica's sample
 * buffer (its rows and its streams' counters, written once per replica) is saved by
 * gaaw_checkpoint_save and restored by gaaw_checkpoint_load, so that the draws after
 * a resume are those of the uninterrupted run. A load then needs the same dp and
 * the same sampler config (a replica's buffer and streams belong to its dp
 * coordinate): another is GAAW_ERR_INVALID_ARG naming it. A checkpoint's sample
 * buffers are ignored by an optimizer that added none. Not collective, but every
 * rank must add the same samplers in the same order (checked at the next save or
 * load). The sampler must outlive opt's saves and loads. */
gaaw_status_t gaaw_checkpoint_add_sampler(gaaw_optimizer_t opt, gaaw_sampler_t sampler);

/* Weights out and in as one safetensors file (8-byte little-endian header size,
 * a JSON header {name: {dtype, shape, data_offsets}}, the raw data), with
 * nanoGPT's names and layouts for the GPT (DESIGN.md section 6a), Hugging Face's
 * LLaMA names for a LLaMA-class GPT (RoPE, RMSNorm, SwiGLU), its fused QKV and
 * gate/up weights split into q_proj, k_proj, v_proj and gate_proj, up_proj, with a
 * config.json written beside the file and checked on import when present
 * (doc/c-api.md), and fc.I.* for sequential models. export writes F32; import reads F32, BF16 or F16 written by
 * gaaw or by PyTorch into any layout, checking every name, shape and dtype (a
 * nanoGPT "transformer." prefix and a tied lm_head.weight are accepted).
 * Collective over world; path the same on every rank.
 *
 * gaaw_model_export: every parameter of the registry (gaaw_model_param_info), in
 * registry order and its global layout, as F32, with __metadata__ {"format":
 * "pt"}; a tied GPT writes no lm_head.weight. Every rank gathers each parameter
 * (gaaw_model_get_param: with an optimizer at ZeRO 3 the gathers span dp, at
 * pp > 1 the owning stage sends it); world rank 0 writes path.tmp-XXXXXX, fsyncs
 * it and renames it to path, so path is the old file or the whole new one. A model
 * with a bf16 or f16 compute dtype exports its compute-dtype values (not an
 * optimizer's f32 master weights). Failures: GAAW_ERR_IO naming the file and the
 * call (the temporary file is removed).
 *
 * gaaw_model_import: world rank 0 reads the file and checks it whole, then sends
 * each parameter to every rank (gaaw_model_set_param). Every parameter of the
 * model must be in the file, once, with its shape; the file may hold nothing
 * else but, for a GPT, a "lm_head.weight" equal to wte.weight when the model ties
 * them (untied, lm_head.weight is a parameter like any other) and the causal-mask
 * buffers h.N.attn.bias and h.N.attn.masked_bias of nanoGPT and Hugging Face
 * checkpoints (skipped). A model with an optimizer is GAAW_ERR_STATE: the
 * optimizer's f32 master weights (bf16, f16 models) and moments would keep the
 * old values; import before gaaw_optimizer_create (which copies the parameters),
 * or resume training with gaaw_checkpoint_load. Every rank returns the same
 * status, and on failure no parameter has changed:
 *   GAAW_ERR_IO          the file cannot be opened or read (named, with the reason)
 *   GAAW_ERR_CORRUPT     not a safetensors file: a header length past the end, a
 *                        header that is not JSON, an unknown dtype, data offsets
 *                        that do not match the shape or do not tile the data, a
 *                        truncated file (the message names the file, the tensor
 *                        and the offset)
 *   GAAW_ERR_UNSUPPORTED a parameter stored in a dtype other than F32, BF16, F16
 *   GAAW_ERR_INVALID_ARG the file is of another model: a parameter missing, one of
 *                        another shape, a tensor the model does not have, a tied
 *                        lm_head.weight unlike wte.weight, a name twice; or path
 *                        differs between ranks
 * A failure after the ranks agreed (a device or communication error) aborts the
 * context (gaaw/comm.h). */
gaaw_status_t gaaw_model_export(gaaw_model_t model, const char *path);
gaaw_status_t gaaw_model_import(gaaw_model_t model, const char *path);

#ifdef __cplusplus
}
#endif
#endif
