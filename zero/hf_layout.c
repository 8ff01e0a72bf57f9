/* Hugging Face's LLaMA and GPT-2 names for the GPT's parameters, and their
 * config.json (zero/hf_layout.h). */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zero/hf_layout.h"

gaaw_hf_kind gaaw_hf_layout(gaaw_model_t m)
{
  const gaaw_gpt_config_t *g = &m->gpt;
  if (m->kind_ops->kind != GAAW_MODEL_GPT) return GAAW_HF_NONE;
  int mixtral = g->moe_every == 1 && g->router_score == GAAW_ROUTER_SOFTMAX && !g->moe_raw_weights &&
                g->experts <= GAAW_HF_MAX_EXPERTS && !g->shared_ffn;
  if (g->position == GAAW_POSITION_ROPE && g->norm == GAAW_NORM_RMSNORM && g->activation == GAAW_ACT_SWIGLU)
    return !g->experts || mixtral ? GAAW_HF_LLAMA : GAAW_HF_NONE;
  return strcmp(gaaw_ctx_string(m->ctx, "gpt2_names"), "hf") == 0 ? GAAW_HF_GPT2 : GAAW_HF_NONE;
}

gaaw_status_t gaaw_hf_gpt2_check(gaaw_model_t m)
{
  const gaaw_gpt_config_t *g = &m->gpt;
  const char *differs = g->position != GAAW_POSITION_LEARNED ? "its positions are not learned"
                        : g->norm != GAAW_NORM_LAYERNORM     ? "its norm is not layernorm"
                        : g->activation != GAAW_ACT_GELU     ? "its activation is not GELU"
                        : g->no_bias                         ? "it has no biases"
                        : g->kv_heads != g->heads            ? "its kv_heads differ from heads"
                        : g->head_dim * g->heads != g->dim   ? "its head_dim is not dim / heads"
                                                             : NULL;
  if (differs)
    GAAW_FAIL(m->ctx, GAAW_ERR_UNSUPPORTED, "option gpt2_names=hf writes and reads Hugging Face's GPT-2 "
              "(GPT2LMHeadModel), which this GPT is not: %s", differs);
  return GAAW_SUCCESS;
}

static void part(gaaw_hf_parts *p, const char *name, int64_t row0, int64_t rows)
{
  snprintf(p->name[p->n], GAAW_HF_NAME_MAX, "%s", name);
  p->row0[p->n] = row0;
  p->rows[p->n] = rows;
  p->n++;
}

int64_t gaaw_hf_tensor_bound(gaaw_model_t m, int nparams)
{
  return (int64_t)(nparams > 0 ? nparams : 1) * 3 + (int64_t)m->moe_layers * 3 * m->gpt.experts;
}

/* An MoE block's suffix -> Mixtral's pieces under model.layers.I.block_sparse_moe:
 * the router gate.weight (E, C); experts.e.w1 and .w3 (F, C) from w13's rows 2Fe and
 * 2Fe + F; experts.e.w2 (C, F) from w2's rows Ce. */
static int moe_parts(gaaw_model_t m, int i, const char *suffix, gaaw_hf_parts *out)
{
  const int64_t E = m->gpt.experts, F = m->gpt.moe_ffn, C = m->gpt.dim;
  char name[GAAW_HF_NAME_MAX];
  if (!strcmp(suffix, "mlp.gate.weight")) {
    snprintf(name, sizeof name, "model.layers.%d.block_sparse_moe.gate.weight", i);
    part(out, name, 0, E);
    return 1;
  }
  int w13 = !strcmp(suffix, "mlp.experts.w13.weight");
  if (!w13 && strcmp(suffix, "mlp.experts.w2.weight")) return 0;
  for (int64_t e = 0; e < E; e++)
    for (int half = 0; half < (w13 ? 2 : 1); half++) {
      snprintf(name, sizeof name, "model.layers.%d.block_sparse_moe.experts.%lld.%s.weight", i, (long long)e,
               w13 ? (half ? "w3" : "w1") : "w2");
      part(out, name, w13 ? 2 * F * e + half * F : C * e, w13 ? F : C);
    }
  return 1;
}

/* block i's suffix (after "h.I.") -> its pieces under model.layers.I. */
static int block_parts(gaaw_model_t m, int i, const char *suffix, int64_t rows, gaaw_hf_parts *out)
{
  const gaaw_gpt_config_t *g = &m->gpt;
  int64_t q = (int64_t)g->heads * g->head_dim, kv = (int64_t)g->kv_heads * g->head_dim, f = g->ffn;
  static const struct {
    const char *gaaw, *hf;
  } whole[] = {
    {"ln_1.weight", "input_layernorm.weight"},         {"ln_2.weight", "post_attention_layernorm.weight"},
    {"attn.c_proj.weight", "self_attn.o_proj.weight"}, {"attn.c_proj.bias", "self_attn.o_proj.bias"},
    {"mlp.c_proj.weight", "mlp.down_proj.weight"},     {"mlp.c_proj.bias", "mlp.down_proj.bias"},
  };
  char name[GAAW_HF_NAME_MAX];
  for (size_t k = 0; k < sizeof whole / sizeof whole[0]; k++)
    if (!strcmp(suffix, whole[k].gaaw)) {
      snprintf(name, sizeof name, "model.layers.%d.%s", i, whole[k].hf);
      part(out, name, 0, rows);
      return 1;
    }
  const char *kind = strchr(suffix, '.') ? strrchr(suffix, '.') + 1 : ""; /* weight or bias */
  if (!strncmp(suffix, "attn.c_attn.", 12)) {
    const char *proj[3] = {"q_proj", "k_proj", "v_proj"};
    int64_t at[3] = {0, q, q + kv}, n[3] = {q, kv, kv};
    for (int k = 0; k < 3; k++) {
      snprintf(name, sizeof name, "model.layers.%d.self_attn.%s.%s", i, proj[k], kind);
      part(out, name, at[k], n[k]);
    }
    return 1;
  }
  if (!strncmp(suffix, "mlp.c_fc.", 9)) {
    snprintf(name, sizeof name, "model.layers.%d.mlp.gate_proj.%s", i, kind);
    part(out, name, 0, f);
    snprintf(name, sizeof name, "model.layers.%d.mlp.up_proj.%s", i, kind);
    part(out, name, f, f);
    return 1;
  }
  return moe_parts(m, i, suffix, out);
}

/* Whether `name` ends in suffix. */
static int ends_with(const char *name, const char *suffix)
{
  size_t n = strlen(name), k = strlen(suffix);
  return n >= k && !strcmp(name + n - k, suffix);
}

/* GPT-2: nanoGPT's names under "transformer." (lm_head.weight as it is), the
 * Conv1D weights (c_attn, c_proj, c_fc) transposed. */
static int gpt2_parts(const char *name, int64_t rows, gaaw_hf_parts *out)
{
  char full[GAAW_HF_NAME_MAX];
  snprintf(full, sizeof full, "%s%s", strcmp(name, "lm_head.weight") ? "transformer." : "", name);
  part(out, full, 0, rows);
  out->transposed = ends_with(name, ".c_attn.weight") || ends_with(name, ".c_proj.weight") ||
                    ends_with(name, ".c_fc.weight");
  return 1;
}

int gaaw_hf_parts_of(gaaw_model_t m, gaaw_hf_kind kind, const char *name, int64_t rows, gaaw_hf_parts *out)
{
  memset(out, 0, sizeof *out);
  if (kind == GAAW_HF_GPT2) return gpt2_parts(name, rows, out);
  if (!strcmp(name, "wte.weight")) part(out, "model.embed_tokens.weight", 0, rows);
  else if (!strcmp(name, "ln_f.weight")) part(out, "model.norm.weight", 0, rows);
  else if (!strcmp(name, "lm_head.weight")) part(out, "lm_head.weight", 0, rows);
  else {
    int i, used = 0;
    if (sscanf(name, "h.%d.%n", &i, &used) != 1 || used == 0) return 0;
    return block_parts(m, i, name + used, rows, out);
  }
  return 1;
}

/* ---- config.json */

/* The file's directory's config.json. */
static char *config_path(const char *path)
{
  const char *slash = strrchr(path, '/');
  size_t dir = slash ? (size_t)(slash - path) + 1 : 0, len = dir + sizeof "config.json";
  char *out = malloc(len);
  if (out) snprintf(out, len, "%.*sconfig.json", (int)dir, path);
  return out;
}

/* An f32 as the shortest decimal that reads back as it (1e-5, not the double
 * 9.99999974738e-06 of its bits), as PyTorch writes its configs. */
static json_t *float_json(float x)
{
  char text[32];
  for (int digits = 1; digits <= 9; digits++) {
    snprintf(text, sizeof text, "%.*g", digits, x);
    if ((float)strtod(text, NULL) == x) break;
  }
  return json_real(strtod(text, NULL));
}

static json_t *gpt2_config_of(const gaaw_gpt_config_t *g, const char *dtype_name)
{
  json_t *j = json_object();
  json_object_set_new(j, "architectures", json_pack("[s]", "GPT2LMHeadModel"));
  json_object_set_new(j, "model_type", json_string("gpt2"));
  json_object_set_new(j, "vocab_size", json_integer(g->vocab));
  json_object_set_new(j, "n_positions", json_integer(g->max_seq));
  json_object_set_new(j, "n_embd", json_integer(g->dim));
  json_object_set_new(j, "n_layer", json_integer(g->layers));
  json_object_set_new(j, "n_head", json_integer(g->heads));
  json_object_set_new(j, "n_inner", json_integer(g->ffn));
  json_object_set_new(j, "activation_function", json_string("gelu_new"));
  json_object_set_new(j, "layer_norm_epsilon", float_json(g->norm_eps));
  json_object_set_new(j, "tie_word_embeddings", json_boolean(g->tied_embeddings));
  json_object_set_new(j, "scale_attn_weights", json_true());
  json_object_set_new(j, "scale_attn_by_inverse_layer_idx", json_false());
  json_object_set_new(j, "reorder_and_upcast_attn", json_false());
  json_object_set_new(j, "torch_dtype", json_string(dtype_name));
  return j;
}

/* Mixtral's fields: its intermediate_size is an expert's; its router_aux_loss_coef
 * scales a loss k / L times ours (doc/moe.md): ours times L / k. */
static void mixtral_fields(const gaaw_gpt_config_t *g, json_t *j)
{
  json_object_set_new(j, "architectures", json_pack("[s]", "MixtralForCausalLM"));
  json_object_set_new(j, "model_type", json_string("mixtral"));
  json_object_set_new(j, "intermediate_size", json_integer(g->moe_ffn));
  json_object_set_new(j, "num_local_experts", json_integer(g->experts));
  json_object_set_new(j, "num_experts_per_tok", json_integer(g->top_k));
  json_object_set_new(j, "router_aux_loss_coef", float_json(g->aux_loss_coef * (float)g->layers / (float)g->top_k));
  json_object_set_new(j, "output_router_logits", json_false());
  json_object_set_new(j, "sliding_window", json_null());
}

static json_t *config_of(const gaaw_gpt_config_t *g, gaaw_hf_kind kind, const char *dtype_name)
{
  if (kind == GAAW_HF_GPT2) return gpt2_config_of(g, dtype_name);
  json_t *j = json_object();
  json_object_set_new(j, "architectures", json_pack("[s]", "LlamaForCausalLM"));
  json_object_set_new(j, "model_type", json_string("llama"));
  json_object_set_new(j, "hidden_size", json_integer(g->dim));
  json_object_set_new(j, "intermediate_size", json_integer(g->ffn));
  if (g->experts) mixtral_fields(g, j);
  json_object_set_new(j, "num_hidden_layers", json_integer(g->layers));
  json_object_set_new(j, "num_attention_heads", json_integer(g->heads));
  json_object_set_new(j, "num_key_value_heads", json_integer(g->kv_heads));
  json_object_set_new(j, "head_dim", json_integer(g->head_dim));
  json_object_set_new(j, "vocab_size", json_integer(g->vocab));
  json_object_set_new(j, "max_position_embeddings", json_integer(g->max_seq));
  json_object_set_new(j, "rms_norm_eps", float_json(g->norm_eps));
  json_object_set_new(j, "rope_theta", json_real(g->rope_theta));
  json_object_set_new(j, "rope_scaling", json_null());
  json_object_set_new(j, "tie_word_embeddings", json_boolean(g->tied_embeddings));
  json_object_set_new(j, "attention_bias", json_boolean(!g->no_bias));
  json_object_set_new(j, "mlp_bias", json_boolean(!g->no_bias));
  json_object_set_new(j, "hidden_act", json_string("silu"));
  json_object_set_new(j, "torch_dtype", json_string(dtype_name));
  return j;
}

gaaw_status_t gaaw_hf_config_write(gaaw_model_t m, gaaw_hf_kind kind, const char *path, const char *dtype_name)
{
  gaaw_context_t ctx = m->ctx;
  char *file = config_path(path), *tmp = file ? malloc(strlen(file) + 16) : NULL;
  json_t *j = config_of(&m->gpt, kind, dtype_name);
  gaaw_status_t st = file && tmp && j ? GAAW_SUCCESS
                                      : gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__,
                                                         "cannot build the config.json beside %s", path);
  if (st == GAAW_SUCCESS) {
    sprintf(tmp, "%s.tmp-XXXXXX", file);
    int fd = mkstemp(tmp);
    FILE *out = fd >= 0 ? fdopen(fd, "w") : NULL;
    int ok = out && fchmod(fd, 0644) == 0 && json_dumpf(j, out, JSON_INDENT(2) | JSON_SORT_KEYS) == 0 &&
             fputc('\n', out) != EOF && fflush(out) == 0 && fsync(fd) == 0;
    if (out) ok = fclose(out) == 0 && ok;
    else if (fd >= 0) close(fd);
    if (!ok || rename(tmp, file) != 0) {
      st = gaaw_error_raise(ctx, GAAW_ERR_IO, __FILE__, __LINE__, __func__, "cannot write %s: %s", file,
                            strerror(errno));
      if (fd >= 0) unlink(tmp);
    }
  }
  json_decref(j);
  free(tmp);
  free(file);
  return st;
}

/* field of the file against the model's value (integers, or reals compared as
 * the f32 or f64 gaaw keeps); absent fields are not checked. */
static gaaw_status_t check_number(gaaw_context_t ctx, const char *file, json_t *j, const char *field, double want,
                                  int f32)
{
  json_t *v = json_object_get(j, field);
  if (!v || json_is_null(v)) return GAAW_SUCCESS;
  if (!json_is_number(v))
    GAAW_FAIL(ctx, GAAW_ERR_INVALID_ARG, "%s: \"%s\" is not a number", file, field);
  double got = json_number_value(v);
  int same = f32 ? (float)got == (float)want : got == want;
  GAAW_ARG_CHECK(ctx, same, "%s: \"%s\" is %.9g, the model's is %.9g", file, field, got, want);
  return GAAW_SUCCESS;
}

/* A boolean field of the file that must be `want` when given: else unsupported
 * (what gaaw does not compute) or invalid (the model's own choice, e.g. a tie). */
static gaaw_status_t check_flag(gaaw_context_t ctx, const char *file, json_t *j, const char *field, int want,
                                gaaw_status_t otherwise)
{
  json_t *v = json_object_get(j, field);
  if (!v || json_is_null(v)) return GAAW_SUCCESS;
  if (!json_is_boolean(v)) GAAW_FAIL(ctx, GAAW_ERR_INVALID_ARG, "%s: \"%s\" is not true or false", file, field);
  if (json_is_true(v) != (want != 0))
    GAAW_FAIL(ctx, otherwise, "%s: \"%s\" is %s, %s %s", file, field, json_is_true(v) ? "true" : "false",
              otherwise == GAAW_ERR_UNSUPPORTED ? "gaaw computes" : "the model's is",
              want ? "true" : "false");
  return GAAW_SUCCESS;
}

static gaaw_status_t check_llama(gaaw_context_t ctx, const gaaw_gpt_config_t *g, const char *file, json_t *j)
{
  json_t *scaling = json_object_get(j, "rope_scaling");
  if (scaling && !json_is_null(scaling)) {
    json_t *kind = json_is_object(scaling) ? json_object_get(scaling, "rope_type") : NULL;
    if (!kind && json_is_object(scaling)) kind = json_object_get(scaling, "type");
    GAAW_FAIL(ctx, GAAW_ERR_UNSUPPORTED, "%s: \"rope_scaling\" of type %s is not implemented in gaaw (its RoPE is "
              "the plain one of rope_theta)", file, json_is_string(kind) ? json_string_value(kind) : "(unnamed)");
  }
  GAAW_CHECK(check_number(ctx, file, j, "hidden_size", g->dim, 0));
  GAAW_CHECK(check_number(ctx, file, j, "intermediate_size", g->experts ? g->moe_ffn : g->ffn, 0));
  GAAW_CHECK(check_number(ctx, file, j, "num_local_experts", g->experts, 0));
  GAAW_CHECK(check_number(ctx, file, j, "num_experts_per_tok", g->top_k, 0));
  GAAW_CHECK(check_number(ctx, file, j, "num_hidden_layers", g->layers, 0));
  GAAW_CHECK(check_number(ctx, file, j, "num_attention_heads", g->heads, 0));
  GAAW_CHECK(check_number(ctx, file, j, "num_key_value_heads", g->kv_heads, 0));
  GAAW_CHECK(check_number(ctx, file, j, "head_dim", g->head_dim, 0));
  GAAW_CHECK(check_number(ctx, file, j, "vocab_size", g->vocab, 0));
  GAAW_CHECK(check_number(ctx, file, j, "rms_norm_eps", g->norm_eps, 1));
  GAAW_CHECK(check_number(ctx, file, j, "rope_theta", g->rope_theta, 0));
  return GAAW_SUCCESS;
}

static gaaw_status_t check_gpt2(gaaw_context_t ctx, const gaaw_gpt_config_t *g, const char *file, json_t *j)
{
  json_t *act = json_object_get(j, "activation_function");
  if (act && !json_is_null(act)) {
    const char *a = json_is_string(act) ? json_string_value(act) : "not a string";
    GAAW_ARG_CHECK(ctx, json_is_string(act), "%s: \"activation_function\" is not a string", file);
    if (strcmp(a, "gelu_new") != 0 && strcmp(a, "gelu_pytorch_tanh") != 0)
      GAAW_FAIL(ctx, GAAW_ERR_UNSUPPORTED, "%s: \"activation_function\" is \"%s\"; gaaw's GELU is the tanh form "
                "(\"gelu_new\")", file, a);
  }
  GAAW_CHECK(check_flag(ctx, file, j, "scale_attn_weights", 1, GAAW_ERR_UNSUPPORTED));
  GAAW_CHECK(check_flag(ctx, file, j, "scale_attn_by_inverse_layer_idx", 0, GAAW_ERR_UNSUPPORTED));
  GAAW_CHECK(check_flag(ctx, file, j, "reorder_and_upcast_attn", 0, GAAW_ERR_UNSUPPORTED));
  GAAW_CHECK(check_number(ctx, file, j, "n_embd", g->dim, 0));
  GAAW_CHECK(check_number(ctx, file, j, "n_inner", g->ffn, 0));
  GAAW_CHECK(check_number(ctx, file, j, "n_layer", g->layers, 0));
  GAAW_CHECK(check_number(ctx, file, j, "n_head", g->heads, 0));
  GAAW_CHECK(check_number(ctx, file, j, "n_positions", g->max_seq, 0));
  GAAW_CHECK(check_number(ctx, file, j, "vocab_size", g->vocab, 0));
  GAAW_CHECK(check_number(ctx, file, j, "layer_norm_epsilon", g->norm_eps, 1));
  return GAAW_SUCCESS;
}

gaaw_status_t gaaw_hf_config_check_text(gaaw_context_t ctx, const gaaw_gpt_config_t *g, gaaw_hf_kind kind,
                                        const char *file, const char *text, size_t size)
{
  json_error_t e;
  json_t *j = json_loadb(text, size, JSON_REJECT_DUPLICATES, &e);
  if (!j) GAAW_FAIL(ctx, GAAW_ERR_CORRUPT, "%s is not JSON: %s (line %d)", file, e.text, e.line);
  const char *want = kind == GAAW_HF_GPT2 ? "gpt2" : g->experts ? "mixtral" : "llama";
  json_t *type = json_object_get(j, "model_type");
  gaaw_status_t st = GAAW_SUCCESS;
  if (!json_is_object(j))
    st = gaaw_error_raise(ctx, GAAW_ERR_INVALID_ARG, __FILE__, __LINE__, __func__, "%s is not a JSON object", file);
  else if (type && !(json_is_string(type) && !strcmp(json_string_value(type), want)))
    st = gaaw_error_raise(ctx, GAAW_ERR_INVALID_ARG, __FILE__, __LINE__, __func__,
                          "%s: \"model_type\" is %s, this model reads \"%s\"", file,
                          json_is_string(type) ? json_string_value(type) : "not a string", want);
  if (st == GAAW_SUCCESS) st = kind == GAAW_HF_GPT2 ? check_gpt2(ctx, g, file, j) : check_llama(ctx, g, file, j);
  if (st == GAAW_SUCCESS)
    st = check_flag(ctx, file, j, "tie_word_embeddings", g->tied_embeddings, GAAW_ERR_INVALID_ARG);
  json_decref(j);
  return st;
}

gaaw_status_t gaaw_hf_config_check(gaaw_model_t m, gaaw_hf_kind kind, const char *path)
{
  gaaw_context_t ctx = m->ctx;
  char *file = config_path(path), *text = NULL;
  if (!file) GAAW_FAIL(ctx, GAAW_ERR_NO_MEMORY, "cannot name the config.json beside %s", path);
  FILE *in = fopen(file, "rb");
  if (!in && errno == ENOENT) { /* none: the tensors' names and shapes are checked anyway */
    free(file);
    return GAAW_SUCCESS;
  }
  gaaw_status_t st = GAAW_SUCCESS;
  long size = -1;
  struct stat fs;
  if (in && (fstat(fileno(in), &fs) != 0 || !S_ISREG(fs.st_mode)))
    st = gaaw_error_raise(ctx, GAAW_ERR_IO, __FILE__, __LINE__, __func__, "%s is not a regular file", file);
  else if (!in || fseek(in, 0, SEEK_END) != 0 || (size = ftell(in)) < 0 || fseek(in, 0, SEEK_SET) != 0)
    st = gaaw_error_raise(ctx, GAAW_ERR_IO, __FILE__, __LINE__, __func__, "cannot read %s: %s", file, strerror(errno));
  if (st == GAAW_SUCCESS && !(text = malloc((size_t)size + 1)))
    st = gaaw_error_raise(ctx, GAAW_ERR_NO_MEMORY, __FILE__, __LINE__, __func__, "cannot hold %s", file);
  if (st == GAAW_SUCCESS && fread(text, 1, (size_t)size, in) != (size_t)size)
    st = gaaw_error_raise(ctx, GAAW_ERR_IO, __FILE__, __LINE__, __func__, "cannot read the %ld bytes of %s", size,
                          file);
  if (in) fclose(in);
  if (st == GAAW_SUCCESS) st = gaaw_hf_config_check_text(ctx, &m->gpt, kind, file, text, (size_t)size);
  free(text);
  free(file);
  return st;
}
