/* Table entries of the causal softmax and of attention, on (BH, T, D) tensors and on
 * the QKV projection's layout, composed as on the host: scores = q k^T (CLBlast
 * batched GEMMs), probs = causal softmax of scores / sqrt(D), out = probs v; 16-bit
 * tensors through f32 copies (ocl_stage). */
#include <math.h>

#include "backends/opencl/opencl.h"

/* (batch, T) of a (..., T, T) tensor. */
static void square_dims(const gaaw_tensor_t *t, int64_t *batch, int64_t *T)
{
  *T = ocl_cols(t);
  *batch = *T ? ocl_rows(t) / *T : 0;
}

static gaaw_status_t softmax_forward(gaaw_context_t ctx, float scale, gaaw_cten x, gaaw_cten y)
{
  int64_t batch, T;
  square_dims(x, &batch, &T);
  cl_long t = T;
  return OCL_RUN(ctx, OCL_K_causal_softmax_forward, (size_t)(batch * T), OCL_ROW_WG, OCL_VAL(scale), OCL_TEN(x),
                 OCL_TEN(y), OCL_VAL(t));
}

static gaaw_status_t softmax_backward(gaaw_context_t ctx, float scale, gaaw_cten y, gaaw_cten dy, gaaw_cten dx,
                                      cl_int accumulate)
{
  int64_t batch, T;
  square_dims(y, &batch, &T);
  cl_long t = T;
  return OCL_RUN(ctx, OCL_K_causal_softmax_backward, (size_t)(batch * T), OCL_ROW_WG, OCL_VAL(scale), OCL_TEN(y),
                 OCL_TEN(dy), OCL_TEN(dx), OCL_VAL(t), OCL_VAL(accumulate));
}

gaaw_status_t ocl_causal_softmax_forward(gaaw_context_t ctx, float scale, gaaw_cten x, gaaw_ten y)
{
  OCL_CHECK_F16("causal_softmax_forward", x, y);
  return softmax_forward(ctx, scale, x, y);
}

gaaw_status_t ocl_causal_softmax_backward(gaaw_context_t ctx, float scale, gaaw_cten y, gaaw_cten dy, gaaw_ten dx)
{
  OCL_CHECK_F16("causal_softmax_backward", y, dy, dx);
  return softmax_backward(ctx, scale, y, dy, dx, 1);
}

/* ---------------------------------------------------------------- the attention core */

/* Where each head's rows lie (as the host's att_layout): `seqs` sequences of `heads`
 * heads; q, k, v, dq, dk, dv in the "in" layout, out and dout in the "out" one, head
 * h of sequence b starting at b seq + h head, its rows ld apart; probs and dprobs
 * (seqs heads, T, T) packed. One batched GEMM per sequence over its heads (those of
 * a sequence are equally spaced, those of different sequences need not be):
 *   (BH, T, D) tensors (gaaw_attention_*): 1 sequence of BH heads, ld D, head T D;
 *   the QKV projection's (B, T, 3H, D) and the merged (B, T, H, D) (attention_qkv_*):
 *   B sequences of H heads D apart, ld_in 3 H D, seq_in T 3 H D, ld_out H D,
 *   seq_out T H D; q, k and v are the same tensor, H D apart. */
typedef struct {
  int64_t seqs, heads, T, D, ld_in, head_in, seq_in, ld_out, head_out, seq_out;
} att_layout;

/* An f32 tensor and the element of it where head 0 of sequence 0 starts. */
typedef struct {
  const gaaw_tensor_t *t;
  int64_t at;
} att_operand;

static ocl_matrices in_heads(const att_layout *l, att_operand x, int64_t b)
{
  return (ocl_matrices){x.t, x.at + b * l->seq_in, l->ld_in, l->head_in};
}

static ocl_matrices out_heads(const att_layout *l, const gaaw_tensor_t *t, int64_t b)
{
  return (ocl_matrices){t, b * l->seq_out, l->ld_out, l->head_out};
}

static ocl_matrices square_heads(const att_layout *l, const gaaw_tensor_t *t, int64_t b)
{
  return (ocl_matrices){t, b * l->heads * l->T * l->T, l->T, l->T * l->T};
}

/* probs = causal softmax of q k^T / sqrt(D);  out = probs v */
static gaaw_status_t attention_forward(gaaw_context_t ctx, const att_layout *l, att_operand q, att_operand k,
                                       att_operand v, gaaw_tensor_t *probs, gaaw_tensor_t *out)
{
  int64_t T = l->T, D = l->D, H = l->heads;
  for (int64_t b = 0; b < l->seqs; b++)
    GAAW_CHECK(gaaw_ocl_sgemm_strided(ctx, GAAW_OP_N, GAAW_OP_T, H, T, T, D, 1.0f, in_heads(l, q, b),
                                      in_heads(l, k, b), 0.0f, square_heads(l, probs, b)));
  GAAW_CHECK(softmax_forward(ctx, 1.0f / sqrtf((float)D), probs, probs));
  for (int64_t b = 0; b < l->seqs; b++)
    GAAW_CHECK(gaaw_ocl_sgemm_strided(ctx, GAAW_OP_N, GAAW_OP_N, H, T, D, T, 1.0f, square_heads(l, probs, b),
                                      in_heads(l, v, b), 0.0f, out_heads(l, out, b)));
  return GAAW_SUCCESS;
}

/* dq, dk, dv (+)= their gradients: grad_beta 1 adds, 0 overwrites; dprobs: workspace. */
static gaaw_status_t attention_backward(gaaw_context_t ctx, const att_layout *l, const gaaw_tensor_t *dout,
                                        att_operand q, att_operand k, att_operand v, const gaaw_tensor_t *probs,
                                        gaaw_tensor_t *dprobs, att_operand dq, att_operand dk, att_operand dv,
                                        float grad_beta)
{
  int64_t T = l->T, D = l->D, H = l->heads;
  /* dv (+)= probs^T dout;  dprobs = dout v^T */
  for (int64_t b = 0; b < l->seqs; b++) {
    GAAW_CHECK(gaaw_ocl_sgemm_strided(ctx, GAAW_OP_T, GAAW_OP_N, H, T, D, T, 1.0f, square_heads(l, probs, b),
                                      out_heads(l, dout, b), grad_beta, in_heads(l, dv, b)));
    GAAW_CHECK(gaaw_ocl_sgemm_strided(ctx, GAAW_OP_N, GAAW_OP_T, H, T, T, D, 1.0f, out_heads(l, dout, b),
                                      in_heads(l, v, b), 0.0f, square_heads(l, dprobs, b)));
  }
  /* dscores (in dprobs) = scale probs (dprobs - rowsum(dprobs probs)) */
  GAAW_CHECK(softmax_backward(ctx, 1.0f / sqrtf((float)D), probs, dprobs, dprobs, 0));
  /* dq (+)= dscores k;  dk (+)= dscores^T q */
  for (int64_t b = 0; b < l->seqs; b++) {
    GAAW_CHECK(gaaw_ocl_sgemm_strided(ctx, GAAW_OP_N, GAAW_OP_N, H, T, D, T, 1.0f, square_heads(l, dprobs, b),
                                      in_heads(l, k, b), grad_beta, in_heads(l, dq, b)));
    GAAW_CHECK(gaaw_ocl_sgemm_strided(ctx, GAAW_OP_T, GAAW_OP_N, H, T, D, T, 1.0f, square_heads(l, dprobs, b),
                                      in_heads(l, q, b), grad_beta, in_heads(l, dk, b)));
  }
  return GAAW_SUCCESS;
}

/* ---------------------------------------------------------------- table entries */

/* (BH, T, D) tensors of the probs' (BH, T, T). */
static att_layout head_major_layout(gaaw_cten probs, int64_t D)
{
  int64_t BH, T;
  square_dims(probs, &BH, &T);
  return (att_layout){1, BH, T, D, D, T * D, 0, D, T * D, 0};
}

/* qkv (B, T, 3H, D), out and dout (B, T, H, D). */
static att_layout qkv_layout(gaaw_cten qkv)
{
  int64_t B = qkv->shape[0], T = qkv->shape[1], H = qkv->shape[2] / 3, D = qkv->shape[3];
  return (att_layout){B, H, T, D, 3 * H * D, D, T * 3 * H * D, H * D, D, T * H * D};
}

static att_operand whole(const gaaw_tensor_t *t)
{
  return (att_operand){t, 0};
}

gaaw_status_t ocl_attention_forward(gaaw_context_t ctx, gaaw_cten q, gaaw_cten k, gaaw_cten v, gaaw_ten probs,
                                    gaaw_ten out)
{
  OCL_CHECK_F16("attention_forward", q, k, v, probs, out);
  att_layout l = head_major_layout(probs, ocl_cols(q));
  ocl_stage s;
  ocl_stage_init(&s, ctx);
  gaaw_tensor_t fq, fk, fv, fp, fo;
  ocl_in(&s, q, &fq);
  ocl_in(&s, k, &fk);
  ocl_in(&s, v, &fv);
  ocl_out(&s, probs, &fp);
  ocl_out(&s, out, &fo);
  if (s.status == GAAW_SUCCESS) s.status = attention_forward(ctx, &l, whole(&fq), whole(&fk), whole(&fv), &fp, &fo);
  return ocl_stage_end(&s);
}

gaaw_status_t ocl_attention_backward(gaaw_context_t ctx, gaaw_cten dout, gaaw_cten q, gaaw_cten k, gaaw_cten v,
                                     gaaw_cten probs, gaaw_ten dprobs, gaaw_ten dq, gaaw_ten dk, gaaw_ten dv)
{
  OCL_CHECK_F16("attention_backward", dout, q, k, v, probs, dprobs, dq, dk, dv);
  att_layout l = head_major_layout(probs, ocl_cols(q));
  ocl_stage s;
  ocl_stage_init(&s, ctx);
  gaaw_tensor_t fdo, fq, fk, fv, fp, fdp, fdq, fdk, fdv;
  ocl_in(&s, dout, &fdo);
  ocl_in(&s, q, &fq);
  ocl_in(&s, k, &fk);
  ocl_in(&s, v, &fv);
  ocl_in(&s, probs, &fp);
  ocl_out(&s, dprobs, &fdp);
  ocl_inout(&s, dq, &fdq);
  ocl_inout(&s, dk, &fdk);
  ocl_inout(&s, dv, &fdv);
  if (s.status == GAAW_SUCCESS)
    s.status = attention_backward(ctx, &l, &fdo, whole(&fq), whole(&fk), whole(&fv), &fp, &fdp, whole(&fdq),
                                  whole(&fdk), whole(&fdv), 1.0f);
  return ocl_stage_end(&s);
}

/* The attention on the QKV projection's layout (backends/fused.h): the same core on
 * the heads where they lie in qkv, out written merged, dqkv overwritten. */
gaaw_status_t ocl_attention_qkv_forward(gaaw_context_t ctx, gaaw_cten qkv, gaaw_ten probs, gaaw_ten out)
{
  OCL_CHECK_F16("attention_qkv_forward", qkv, probs, out);
  att_layout l = qkv_layout(qkv);
  int64_t HD = l.heads * l.D;
  ocl_stage s;
  ocl_stage_init(&s, ctx);
  gaaw_tensor_t fqkv, fp, fo;
  ocl_in(&s, qkv, &fqkv);
  ocl_out(&s, probs, &fp);
  ocl_out(&s, out, &fo);
  if (s.status == GAAW_SUCCESS)
    s.status = attention_forward(ctx, &l, (att_operand){&fqkv, 0}, (att_operand){&fqkv, HD},
                                 (att_operand){&fqkv, 2 * HD}, &fp, &fo);
  return ocl_stage_end(&s);
}

gaaw_status_t ocl_attention_qkv_backward(gaaw_context_t ctx, gaaw_cten dout, gaaw_cten qkv, gaaw_cten probs,
                                         gaaw_ten dprobs, gaaw_ten dqkv)
{
  OCL_CHECK_F16("attention_qkv_backward", dout, qkv, probs, dprobs, dqkv);
  att_layout l = qkv_layout(qkv);
  int64_t HD = l.heads * l.D;
  ocl_stage s;
  ocl_stage_init(&s, ctx);
  gaaw_tensor_t fdo, fqkv, fp, fdp, fd;
  ocl_in(&s, dout, &fdo);
  ocl_in(&s, qkv, &fqkv);
  ocl_in(&s, probs, &fp);
  ocl_out(&s, dprobs, &fdp);
  ocl_out(&s, dqkv, &fd); /* every element is written (beta 0) */
  if (s.status == GAAW_SUCCESS)
    s.status = attention_backward(ctx, &l, &fdo, (att_operand){&fqkv, 0}, (att_operand){&fqkv, HD},
                                  (att_operand){&fqkv, 2 * HD}, &fp, &fdp, (att_operand){&fd, 0},
                                  (att_operand){&fd, HD}, (att_operand){&fd, 2 * HD}, 0.0f);
  return ocl_stage_end(&s);
}
