/* The model's parameters as a safetensors file's tensors (gaaw_model_export and
 * gaaw_model_import, zero/safetensors.c): the names, shapes, row ranges and
 * orientation each parameter takes in the file, by gaaw's names or Hugging Face's
 * layouts (zero/hf_layout.h). */
#ifndef GAAW_ZERO_SAFETENSORS_REGISTRY_H
#define GAAW_ZERO_SAFETENSORS_REGISTRY_H

#include "parallel/model_impl.h"
#include "zero/hf_layout.h"
#include "zero/safetensors_header.h"

/* The prefix of nanoGPT's names, which their import strips. */
#define GAAW_ST_NANOGPT_PREFIX "transformer."

/* The model's parameters as the file's tensors: one per parameter, in registry
 * order, under its own name; or in Hugging Face's layouts (zero/hf_layout.h): for
 * a LLaMA-class GPT its LLaMA names, the fused QKV and gate/up weights each as
 * their pieces one after the other; for a GPT-2 with gpt2_names=hf its GPT-2
 * names, Conv1D weights transposed. For each file tensor: the parameter it is part
 * of, its first row there and whether it is the transpose. Also the largest
 * parameter's size and a digest of the file's names and shapes. */
typedef struct {
  gaaw_st_tensor *t;
  int *param;        /* the parameter (registry index) of each file tensor */
  int64_t *row0;     /* its first row in the parameter */
  char *transposed;  /* the file tensor is the (whole, 2-D) parameter's transpose */
  const char **param_name;
  int64_t *param_numel;
  int n, nparams;
  int64_t max_numel;
  uint64_t digest;
  int tied;          /* a GPT whose LM head is wte.weight: it has no lm_head.weight */
  int gpt;
  gaaw_hf_kind hf;   /* Hugging Face's names, or NONE: gaaw's own */
} st_registry;

/* Reads m's registry into r. Not collective;
 * GAAW_ERR_UNSUPPORTED when gpt2_names=hf names a model that is no GPT-2. */
gaaw_status_t gaaw_st_registry_read(gaaw_model_t m, st_registry *r);
void gaaw_st_registry_free(st_registry *r);
/* The file tensor holding (the first rows of) parameter `name`, or -1. */
int gaaw_st_registry_find(const st_registry *r, const char *name);
/* The file tensor named `name` in the file, or -1. */
int gaaw_st_registry_find_file(const st_registry *r, const char *name);
/* The registry's name of the file's tensor `name` (buf: room for a prefixed copy). */
const char *gaaw_st_registry_key(const st_registry *r, const char *name, char *buf, size_t size);
/* name without GAAW_ST_NANOGPT_PREFIX. */
const char *gaaw_st_strip_prefix(const char *name);
/* Elements of t. */
int64_t gaaw_st_numel(const gaaw_st_tensor *t);
/* Where element e of file tensor k is in its parameter's row-major values. */
int64_t gaaw_st_param_index(const st_registry *r, int k, int64_t e);
/* "[3, 4]" */
const char *gaaw_st_shape_text(const gaaw_st_tensor *t, char *out, size_t size);

#endif
