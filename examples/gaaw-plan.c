/* gaaw-plan: the layouts of a GPT training job on a cluster, before it runs.
 * Searches dp x pp x cp x tp, virtual stages, microbatch size, schedule, ZeRO
 * stage, recompute, offload and cp_kind with the cost model of gaaw/plan.h
 * (gaaw_plan_create) and prints the fastest layouts that fit the devices' memory,
 * then the families of (dp, pp, cp, tp) it rejected and why; --json prints the layouts as a JSON array.
 * Runs without mpiexec: it initialises MPI as a singleton and gaaw on
 * MPI_COMM_SELF with the host backend (the memory ledger needs a context; nothing
 * is allocated on a device). Exit status: 0, 1 when the search fails, 2 for bad
 * flags. */
#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gaaw.h"

static void usage(FILE *out, const char *prog)
{
  fprintf(out,
          "usage: %s --global-batch B (--device NAME | --device-memory BYTES --peak-tflops T) [options]\n"
          "Prints the fastest layouts of a GPT training job that fit the devices' memory, as\n"
          "the cost model of gaaw/plan.h predicts them (doc/plan.md), then the (dp, pp, cp,\n"
          "tp) families it rejected and why.\n"
          "model (gaaw-train's flags; defaults gaaw_gpt_config_default's):\n"
          "  --layers N --heads N --dim N --seq N --vocab N --ffn N (0: the architecture's)\n"
          "  --arch gpt2|llama             the GPT-2 (default) or a LLaMA-class decoder (RoPE,\n"
          "                                RMSNorm, SwiGLU of 8/3 x dim, no biases, untied)\n"
          "  --kv-heads N --head-dim N     grouped-query attention; a head width (0: defaults)\n"
          "  --dtype bf16|f16|f32          compute dtype (default bf16)\n"
          "job and cluster:\n"
          "  --global-batch B              sequences per optimizer step (required)\n"
          "  --nodes N                     default 1\n"
          "  --devices-per-node N          default 8\n"
          "  --device a100-80g|h100-80g|h200\n"
          "  --device-memory BYTES --peak-tflops T   another device (with --memory-gbps G,\n"
          "                                default 2000, --gemm-efficiency E, default 0.75)\n"
          "  --intra-node-gbps G --inter-node-gbps G  links per device and direction (defaults:\n"
          "                                NVLink and InfiniBand of the device's generation:\n"
          "                                a100-80g 300 and 25, h100-80g and h200 450 and 50)\n"
          "  --speeds LIST                 devices of unequal speed: each world rank's speed\n"
          "                                relative to --device, in world order, as a comma\n"
          "                                list of S or KxS (K ranks at S), e.g. 512x1,512x0.5;\n"
          "                                dp replicas then get rows by speed (printed)\n"
          "search (comma lists; default all):\n"
          "  --zero-stages 0,1,2,3  --schedules gpipe,1f1b,interleaved,zb-h1\n"
          "  --recompute none,selective,full  --offload none,host,nvme\n"
          "  --tp N --pp N --cp N          only this tensor, pipeline or context-parallel size\n"
          "  --cp-kinds ring,a2a           context parallelism's attention (doc/context-parallel.md)\n"
          "output:\n"
          "  --top N                       layouts to print (default 10)\n"
          "  --json                        a JSON array of the layouts instead of the tables\n"
          "  --help                        this text\n",
          prog);
}

typedef struct {
  gaaw_plan_request_t req;
  gaaw_plan_cluster_t cluster;
  const char *device;
  double device_memory, peak_tflops, memory_gbps, gemm_efficiency, intra, inter;
  const char *speeds; /* --speeds as given, expanded by fill_cluster */
  double *speed;      /* world entries, or NULL */
  int json;
  int llama;          /* --arch llama: gaaw_gpt_config_llama after the sizes */
} plan_options;

static int parse_long(const char *prog, const char *flag, const char *text, long lo, long *value)
{
  char *end = NULL;
  errno = 0;
  long x = strtol(text, &end, 10);
  if (!*text || *end || errno || x < lo || x > INT_MAX) {
    fprintf(stderr, "%s: %s wants a whole number >= %ld, got '%s'\n", prog, flag, lo, text);
    return 2;
  }
  *value = x;
  return 0;
}

static int parse_double(const char *prog, const char *flag, const char *text, double *value)
{
  char *end = NULL;
  errno = 0;
  double x = strtod(text, &end);
  if (!*text || *end || errno || !(x > 0)) {
    fprintf(stderr, "%s: %s wants a number > 0, got '%s'\n", prog, flag, text);
    return 2;
  }
  *value = x;
  return 0;
}

/* A comma list of names (their index in names[]) or numbers 0..n-1 as a bit mask. */
static int parse_list(const char *prog, const char *flag, const char *text, const char *const *names, int n,
                      unsigned *mask)
{
  char buf[256];
  snprintf(buf, sizeof buf, "%s", text);
  *mask = 0;
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    int found = -1;
    for (int i = 0; i < n && found < 0; i++) {
      char digit[8];
      snprintf(digit, sizeof digit, "%d", i);
      if ((names && strcasecmp(tok, names[i]) == 0) || strcmp(tok, digit) == 0) found = i;
    }
    if (found < 0) {
      fprintf(stderr, "%s: %s: '%s' is not one of", prog, flag, tok);
      for (int i = 0; i < n; i++) fprintf(stderr, " %s", names ? names[i] : (char[]){(char)('0' + i), 0});
      fprintf(stderr, "\n");
      return 2;
    }
    *mask |= 1u << found;
  }
  if (!*mask) {
    fprintf(stderr, "%s: %s wants a comma list, got '%s'\n", prog, flag, text);
    return 2;
  }
  return 0;
}

static const char *const recompute_names[] = {"none", "selective", "full"};
static const char *const offload_names[] = {"none", "host", "nvme"};
static const char *const cp_kind_names[] = {"ring", "a2a"};

static int cp_of(const gaaw_plan_layout_t *l)
{
  return l->cp > 1 ? l->cp : 1;
}

/* "-" at cp 1, where the kind is not read */
static const char *cp_kind_of(const gaaw_plan_layout_t *l)
{
  return l->cp > 1 ? cp_kind_names[l->cp_kind] : "-";
}

static int parse_args(int argc, char **argv, plan_options *o)
{
  const char *prog = argv[0];
  const char *schedule_names[GAAW_PLAN_SCHEDULE_COUNT];
  for (int i = 0; i < GAAW_PLAN_SCHEDULE_COUNT; i++) schedule_names[i] = gaaw_plan_schedule_name(i);
  long x = 0;
  int rc = 0;
  for (int i = 1; i < argc && !rc; i++) {
    const char *f = argv[i];
    if (!strcmp(f, "--help")) {
      usage(stdout, prog);
      exit(0);
    }
    if (!strcmp(f, "--json")) {
      o->json = 1;
      continue;
    }
    if (strncmp(f, "--", 2) != 0) {
      fprintf(stderr, "%s: unexpected argument '%s' (see --help)\n", prog, f);
      return 2;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "%s: %s wants a value\n", prog, f);
      return 2;
    }
    const char *v = argv[++i];
    gaaw_gpt_config_t *g = &o->req.model;
#define INT_FLAG(name, lo, field)                                          \
  if (!strcmp(f, name)) {                                                  \
    if (!(rc = parse_long(prog, f, v, lo, &x))) field = (int)x;            \
    continue;                                                              \
  }
    INT_FLAG("--layers", 1, g->layers)
    INT_FLAG("--heads", 1, g->heads)
    INT_FLAG("--dim", 1, g->dim)
    INT_FLAG("--seq", 1, g->max_seq)
    INT_FLAG("--vocab", 1, g->vocab)
    INT_FLAG("--ffn", 0, g->ffn)
    INT_FLAG("--kv-heads", 0, g->kv_heads)
    INT_FLAG("--head-dim", 0, g->head_dim)
    INT_FLAG("--global-batch", 1, o->req.global_batch)
    INT_FLAG("--nodes", 1, o->cluster.nodes)
    INT_FLAG("--devices-per-node", 1, o->cluster.devices_per_node)
    INT_FLAG("--top", 1, o->req.max_layouts)
    INT_FLAG("--tp", 1, o->req.tp)
    INT_FLAG("--pp", 1, o->req.pp)
    INT_FLAG("--cp", 1, o->req.cp)
#undef INT_FLAG
    if (!strcmp(f, "--dtype")) {
      if (!strcmp(v, "bf16")) g->dtype = GAAW_BF16;
      else if (!strcmp(v, "f16")) g->dtype = GAAW_F16;
      else if (!strcmp(v, "f32")) g->dtype = GAAW_F32;
      else {
        fprintf(stderr, "%s: --dtype must be bf16, f16 or f32, got '%s'\n", prog, v);
        rc = 2;
      }
    } else if (!strcmp(f, "--arch")) {
      o->llama = !strcmp(v, "llama");
      if (!o->llama && strcmp(v, "gpt2")) {
        fprintf(stderr, "%s: --arch must be gpt2 or llama, got '%s'\n", prog, v);
        rc = 2;
      }
    } else if (!strcmp(f, "--device")) o->device = v;
    else if (!strcmp(f, "--device-memory")) rc = parse_double(prog, f, v, &o->device_memory);
    else if (!strcmp(f, "--peak-tflops")) rc = parse_double(prog, f, v, &o->peak_tflops);
    else if (!strcmp(f, "--memory-gbps")) rc = parse_double(prog, f, v, &o->memory_gbps);
    else if (!strcmp(f, "--gemm-efficiency")) rc = parse_double(prog, f, v, &o->gemm_efficiency);
    else if (!strcmp(f, "--intra-node-gbps")) rc = parse_double(prog, f, v, &o->intra);
    else if (!strcmp(f, "--inter-node-gbps")) rc = parse_double(prog, f, v, &o->inter);
    else if (!strcmp(f, "--speeds")) o->speeds = v;
    else if (!strcmp(f, "--zero-stages")) rc = parse_list(prog, f, v, NULL, 4, &o->req.zero_stages);
    else if (!strcmp(f, "--schedules"))
      rc = parse_list(prog, f, v, schedule_names, GAAW_PLAN_SCHEDULE_COUNT, &o->req.schedules);
    else if (!strcmp(f, "--recompute")) rc = parse_list(prog, f, v, recompute_names, 3, &o->req.recompute);
    else if (!strcmp(f, "--offload")) rc = parse_list(prog, f, v, offload_names, 3, &o->req.offload);
    else if (!strcmp(f, "--cp-kinds")) rc = parse_list(prog, f, v, cp_kind_names, 2, &o->req.cp_kinds);
    else {
      fprintf(stderr, "%s: unknown flag '%s' (see --help)\n", prog, f);
      rc = 2;
    }
  }
  if (rc) return rc;
  if (o->llama) gaaw_gpt_config_llama(&o->req.model); /* keeps --kv-heads, --head-dim, a given --ffn */
  if (o->req.global_batch < 1) {
    fprintf(stderr, "%s: --global-batch is required\n", prog);
    return 2;
  }
  if (!o->device && !(o->device_memory > 0 && o->peak_tflops > 0)) {
    fprintf(stderr, "%s: give --device NAME, or --device-memory BYTES with --peak-tflops T\n", prog);
    return 2;
  }
  return 0;
}

/* --speeds "S,KxS,...": one speed per world rank, in world order. */
static int expand_speeds(const char *prog, plan_options *o)
{
  const long world = (long)o->cluster.nodes * o->cluster.devices_per_node;
  long n = 0;
  if (!(o->speed = malloc(sizeof(double) * (size_t)world))) {
    fprintf(stderr, "%s: --speeds: out of memory\n", prog);
    return 1;
  }
  for (const char *p = o->speeds; *p;) {
    char *end;
    long count = 1;
    double speed = strtod(p, &end);
    if (*end == 'x') { /* K x S */
      count = (long)speed;
      if (count < 1 || (double)count != speed) break;
      speed = strtod(end + 1, &end);
    }
    if (end == p || !(speed > 0) || speed > 1e6 || (*end && *end != ',') || n + count > world) {
      fprintf(stderr, "%s: --speeds: '%s' is not a comma list of S or KxS (S > 0) for %ld ranks\n", prog, o->speeds,
              world);
      return 2;
    }
    while (count-- > 0) o->speed[n++] = speed;
    p = *end ? end + 1 : end;
  }
  if (n != world) {
    fprintf(stderr, "%s: --speeds gives %ld speeds; the cluster has %ld ranks (--nodes x --devices-per-node)\n",
            prog, n, world);
    return 2;
  }
  o->cluster.speeds = o->speed;
  return 0;
}

/* The cluster of the flags: the named device (or the one described), and the
 * links of its generation unless given. */
static int fill_cluster(const char *prog, plan_options *o)
{
  gaaw_plan_cluster_t *c = &o->cluster;
  gaaw_plan_device_t *d = &c->device;
  double intra = 300, inter = 25;
  if (o->device) {
    if (gaaw_plan_device_named(NULL, o->device, d) != GAAW_SUCCESS) {
      fprintf(stderr, "%s: --device: %s\n", prog, gaaw_last_error(NULL));
      return 2;
    }
    if (strcmp(d->name, "a100-80g") != 0) intra = 450, inter = 50; /* NVLink 4, NDR InfiniBand */
  } else {
    snprintf(d->name, sizeof d->name, "custom");
    d->memory_gbps = 2000;
    d->host_link_gbps = 25;
    d->gemm_efficiency = 0.75;
  }
  if (o->device_memory > 0) d->memory_bytes = o->device_memory;
  if (o->peak_tflops > 0) d->peak_tflops = o->peak_tflops;
  if (o->memory_gbps > 0) d->memory_gbps = o->memory_gbps;
  if (o->gemm_efficiency > 0) d->gemm_efficiency = o->gemm_efficiency;
  c->intra_node_gbps = o->intra > 0 ? o->intra : intra;
  c->inter_node_gbps = o->inter > 0 ? o->inter : inter;
  c->intra_node_latency_us = 3;
  c->inter_node_latency_us = 8;
  c->host_update_gbps = 50; /* a device's share of its node's CPU Adam */
  c->nvme_gbps = 25;        /* a node's NVMe drives together */
  return o->speeds ? expand_speeds(prog, o) : 0;
}

static void print_json(gaaw_plan_t plan)
{
  printf("[");
  for (int i = 0; i < gaaw_plan_count(plan); i++) {
    gaaw_plan_layout_t l;
    gaaw_plan_layout(plan, i, &l);
    printf("%s\n  {\"dp\": %d, \"pp\": %d, \"tp\": %d, \"cp\": %d, \"cp_kind\": \"%s\", \"virtual_stages\": %d, "
           "\"microbatch\": %d, "
           "\"microbatches\": %d, \"schedule\": \"%s\", \"zero_stage\": %d, \"recompute\": \"%s\", "
           "\"offload\": \"%s\", \"memory_bytes_per_rank\": %.0f, \"step_seconds\": %.6g, "
           "\"compute_seconds\": %.6g, \"bubble_seconds\": %.6g, \"comm_seconds\": %.6g, "
           "\"optimizer_seconds\": %.6g, \"tokens_per_s\": %.6g, \"tflops_per_device\": %.6g, \"mfu\": %.6g}",
           i ? "," : "", l.dp, l.pp, l.tp, cp_of(&l), cp_kind_of(&l), l.virtual_stages, l.microbatch, l.microbatches,
           gaaw_plan_schedule_name(l.schedule), l.zero_stage, recompute_names[l.recompute], offload_names[l.offload],
           l.memory_bytes_per_rank, l.step_seconds, l.compute_seconds, l.bubble_seconds, l.comm_seconds,
           l.optimizer_seconds, l.tokens_per_s, l.tflops_per_device, l.mfu);
  }
  printf("\n]\n");
}

/* With speeds: the rows per microbatch each dp replica of the first layout takes. */
static void print_replica_rows(const gaaw_plan_cluster_t *c, gaaw_plan_t plan)
{
  gaaw_plan_layout_t l;
  gaaw_plan_layout(plan, 0, &l);
  int64_t *rows = malloc(sizeof(int64_t) * (size_t)l.dp);
  if (!rows || gaaw_plan_replica_rows(NULL, c, &l, rows) != GAAW_SUCCESS) {
    free(rows);
    return;
  }
  printf("\nrows per microbatch of layout 1's dp replicas (gaaw_batch_t.batch), by speed:");
  for (int d = 0; d < l.dp; d++) {
    int k = d;
    while (k + 1 < l.dp && rows[k + 1] == rows[d]) k++;
    if (k > d) printf(" %d-%d: %lld", d, k, (long long)rows[d]);
    else printf(" %d: %lld", d, (long long)rows[d]);
    d = k;
  }
  printf("\n");
  free(rows);
}

static void print_tables(const plan_options *o, gaaw_plan_t plan)
{
  const gaaw_gpt_config_t *g = &o->req.model;
  const gaaw_plan_cluster_t *c = &o->cluster;
  printf("GPT (%s): %d layers, %d heads (%d kv), dim %d, ffn %d, seq %d, vocab %d, %s; global batch %lld\n",
         o->llama ? "llama" : "gpt2", g->layers, g->heads, g->kv_heads ? g->kv_heads : g->heads, g->dim,
         g->ffn ? g->ffn : 4 * g->dim, g->max_seq, g->vocab, gaaw_dtype_name(g->dtype),
         (long long)o->req.global_batch);
  printf("cluster: %d nodes x %d %s (%.0f TFLOP/s, %.1f GB), links %.0f GB/s intra-node, %.0f GB/s inter-node\n\n",
         c->nodes, c->devices_per_node, c->device.name, c->device.peak_tflops, c->device.memory_bytes / 1e9,
         c->intra_node_gbps, c->inter_node_gbps);
  printf("%3s %5s %4s %4s %4s %-4s %3s %4s %5s %-11s %4s %-9s %-7s %8s %8s %7s %7s %10s %8s %6s\n", "#", "dp", "pp",
         "tp", "cp", "kind", "v", "mb", "m", "schedule", "zero", "recompute", "offload", "mem GB", "step s", "bubble", "comm s", "tokens/s",
         "TFLOP/s", "MFU");
  for (int i = 0; i < gaaw_plan_count(plan); i++) {
    gaaw_plan_layout_t l;
    gaaw_plan_layout(plan, i, &l);
    printf("%3d %5d %4d %4d %4d %-4s %3d %4d %5d %-11s %4d %-9s %-7s %8.1f %8.3f %6.1f%% %7.3f %10.0f %8.1f %5.1f%%\n",
           i + 1, l.dp, l.pp, l.tp, cp_of(&l), cp_kind_of(&l), l.virtual_stages, l.microbatch, l.microbatches, gaaw_plan_schedule_name(l.schedule),
           l.zero_stage, recompute_names[l.recompute], offload_names[l.offload], l.memory_bytes_per_rank / 1e9,
           l.step_seconds, 100 * l.bubble_seconds / l.step_seconds, l.comm_seconds, l.tokens_per_s,
           l.tflops_per_device, 100 * l.mfu);
  }
  if (gaaw_plan_count(plan) == 0) printf("(no layout fits)\n");
  else if (c->speeds) print_replica_rows(c, plan);
  printf("\nrejected families (dp x pp x cp x tp):\n");
  for (int i = 0; i < gaaw_plan_rejected_count(plan); i++) {
    gaaw_plan_rejected_t r;
    gaaw_plan_rejected(plan, i, &r);
    printf("  %5d x %4d x %4d x %4d  %s\n", r.dp, r.pp, r.cp, r.tp, r.reason);
  }
}

int main(int argc, char **argv)
{
  plan_options o;
  memset(&o, 0, sizeof o);
  gaaw_gpt_config_default(&o.req.model);
  o.req.model.dtype = GAAW_BF16;
  o.cluster.nodes = 1;
  o.cluster.devices_per_node = 8;
  int rc = parse_args(argc, argv, &o);
  if (!rc) rc = fill_cluster(argv[0], &o);
  if (rc) {
    free(o.speed);
    return rc;
  }

  MPI_Init(&argc, &argv);
  gaaw_config_t cfg = NULL;
  gaaw_context_t ctx = NULL;
  gaaw_plan_t plan = NULL;
  gaaw_status_t st;
  if (gaaw_config_create(&cfg) != GAAW_SUCCESS || gaaw_config_set(cfg, "backend", "host") != GAAW_SUCCESS ||
      gaaw_init(MPI_COMM_SELF, cfg, &ctx) != GAAW_SUCCESS) {
    fprintf(stderr, "%s: cannot start gaaw: %s\n", argv[0], gaaw_last_error(ctx));
    rc = 1;
  } else if ((st = gaaw_plan_create(ctx, &o.req, &o.cluster, &plan)) != GAAW_SUCCESS) {
    fprintf(stderr, "%s: %s\n", argv[0], gaaw_last_error(ctx));
    rc = st == GAAW_ERR_INVALID_ARG ? 2 : 1; /* 2: flags that make no GPT or no cluster */
  } else if (o.json)
    print_json(plan);
  else
    print_tables(&o, plan);
  gaaw_plan_destroy(&plan);
  gaaw_finalize(&ctx);
  gaaw_config_destroy(&cfg);
  free(o.speed);
  MPI_Finalize();
  return rc;
}
