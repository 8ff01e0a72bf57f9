/* Shared by every gaaw OpenCL kernel: tensors as (buffer, byte offset, dtype)
 * triples, loads of any float dtype as f32 and stores with rounding to nearest even,
 * and work-group reductions in a fixed tree order (bit-identical run to run).
 * ROW_WG (work-group size of row kernels) and EW_WG come from the build options. */

/* dtype codes: gaaw_dtype_t */
#define DT_F32 0
#define DT_BF16 1
#define DT_F16 2
#define DT_I32 3

/* A tensor argument and its accessors. */
#define TEN(x) __global uchar *x##_b, ulong x##_o, int x##_t
#define BASE(x) (x##_b + x##_o)
#define LD(x, i) gaaw_ld(BASE(x), (i), x##_t)
#define ST(x, i, v) gaaw_st(BASE(x), (i), x##_t, (v))
#define F32(x) ((__global float *)BASE(x))
#define I32(x) ((__global int *)BASE(x))
/* A TEN(x) argument passed on to a helper function that takes TEN(x). */
#define PASS(x) x##_b, x##_o, x##_t

float gaaw_bf16_to_f32(ushort h)
{
  return as_float((uint)h << 16);
}

ushort gaaw_f32_to_bf16(float f)
{
  uint u = as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)((u >> 16) | 0x40u); /* quiet nan */
  u += 0x7fffu + ((u >> 16) & 1u);                                         /* nearest even */
  return (ushort)(u >> 16);
}

/* Element i as f32 (i32 converts). f16 uses the core vload_half; the host side
 * refuses f16 tensors on devices without cl_khr_fp16. */
float gaaw_ld(__global const uchar *p, long i, int dt)
{
  if (dt == DT_BF16) return gaaw_bf16_to_f32(((__global const ushort *)p)[i]);
  if (dt == DT_F16) return vload_half((size_t)i, (__global const half *)p);
  if (dt == DT_I32) return (float)((__global const int *)p)[i];
  return ((__global const float *)p)[i];
}

/* Stores v as element i (i32: toward zero). */
void gaaw_st(__global uchar *p, long i, int dt, float v)
{
  if (dt == DT_BF16)
    ((__global ushort *)p)[i] = gaaw_f32_to_bf16(v);
  else if (dt == DT_F16)
    vstore_half_rte(v, (size_t)i, (__global half *)p);
  else if (dt == DT_I32)
    ((__global int *)p)[i] = (int)v;
  else
    ((__global float *)p)[i] = v;
}

/* v rounded to dtype dt, as storing and loading it again would (fused kernels round
 * an intermediate that the unfused sequence stores). */
float gaaw_round(float v, int dt)
{
  if (dt == DT_BF16) return gaaw_bf16_to_f32(gaaw_f32_to_bf16(v));
  if (dt == DT_F16) {
    ushort h;
    vstore_half_rte(v, 0, (__private half *)&h);
    return vload_half(0, (__private const half *)&h);
  }
  return v;
}

/* Sum and max over the ROW_WG work-items of a group; every item gets the result. */
float wg_sum(float v, __local float *scratch)
{
  int l = get_local_id(0);
  scratch[l] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = ROW_WG / 2; s > 0; s >>= 1) {
    if (l < s) scratch[l] += scratch[l + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  float r = scratch[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}

float wg_max(float v, __local float *scratch)
{
  int l = get_local_id(0);
  scratch[l] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = ROW_WG / 2; s > 0; s >>= 1) {
    if (l < s) scratch[l] = fmax(scratch[l], scratch[l + s]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  float r = scratch[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}
