/* gaaw-train's log lines and metrics file. */
#include "examples/train/report.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static double mib(size_t bytes)
{
  return (double)bytes / (1024.0 * 1024.0);
}

/* Achieved model TFLOP/s per rank: the job's tokens/s x FLOPs per token over the
 * world's ranks; the MFU is that over the peak of one rank. */
static double step_tflops(const train_report *r, const train_step_info *s)
{
  return r->flops_per_token * (s->tokens / (s->ms / 1000)) / r->world / 1e12;
}

void report_step(train_report *r, const train_step_info *s)
{
  const gaaw_step_stats_t *st = s->stats;
  if (r->done++ == 0) r->first_loss = s->loss;
  r->last_loss = s->loss;
  r->seconds += s->ms / 1000;
  r->tokens += s->tokens;
  if (r->done > 1 || r->steps - r->start == 1) {
    r->timed_seconds += s->ms / 1000;
    r->timed_tokens += s->tokens;
  }
  printf("step %5lld/%lld | loss %.4f | lr %.3e | norm %.4f | %8.1f ms | %9.0f tok/s | state %.2f+%.2f+%.2f MiB "
         "| act peak %.2f MiB | device peak %.2f MiB | dp comm %.2f MiB",
         (long long)s->step, (long long)r->steps, s->loss, st->lr, st->grad_norm, s->ms, s->tokens / (s->ms / 1000),
         mib(s->params_bytes), mib(s->grads_bytes), mib(s->optimizer_bytes), mib(s->activation_peak), mib(s->device_peak),
         mib((size_t)st->comm_bytes));
  printf(" | %.3g TFLOP/s", step_tflops(r, s));
  if (r->peak_tflops > 0) printf(" | MFU %.1f%%", 100 * step_tflops(r, s) / r->peak_tflops);
  if (st->loss_scale != 1) printf(" | scale %g", st->loss_scale);
  if (s->ranks > 0) { /* per rank, in world order */
    printf(" | idle");
    for (int k = 0; k < s->ranks; k++) printf("%s%.0f%%", k ? "/" : " ", 100 * s->rank_figures[2 * k]);
    printf(" | act peaks");
    for (int k = 0; k < s->ranks; k++) printf("%s%.2f", k ? "/" : " ", mib((size_t)s->rank_figures[2 * k + 1]));
    printf(" MiB");
  }
  if (s->save_ms >= 0) printf(" | save %.1f ms", s->save_ms);
  printf("%s\n", st->skipped ? " | skipped (overflow)" : "");
  fflush(stdout);
}

void report_eval(train_report *r, int64_t step, float val_loss)
{
  if (step == r->start) r->first_val = val_loss;
  r->last_val = val_loss;
  printf("step %5lld/%lld | val loss %.4f\n", (long long)step, (long long)r->steps, val_loss);
  fflush(stdout);
}

/* A float as JSON: the shortest text that reads back to the same float, and
 * null for inf or nan (which JSON cannot spell). */
static void json_float(FILE *f, const char *key, float x)
{
  if (isfinite(x)) fprintf(f, ",\"%s\":%.9g", key, x);
  else fprintf(f, ",\"%s\":null", key);
}

void report_metrics(train_report *r, const train_step_info *s, int have_val, float val_loss)
{
  FILE *f = r->metrics;
  struct stat info;
  if (!f) return;
  fflush(f);
  r->line_start = fstat(fileno(f), &info) == 0 ? info.st_size : 0; /* appended at the end */
  fprintf(f, "{\"step\":%lld", (long long)s->step);
  json_float(f, "loss", s->loss);
  if (have_val) json_float(f, "val_loss", val_loss);
  json_float(f, "lr", s->stats->lr);
  json_float(f, "grad_norm", s->stats->grad_norm);
  json_float(f, "loss_scale", s->stats->loss_scale);
  fprintf(f, ",\"model_flops_per_token\":%.0f", r->flops_per_token);
  fprintf(f, ",\"ms\":%.3f,\"tokens_per_s\":%.1f,\"tflops\":%.9g", s->ms, s->tokens / (s->ms / 1000),
          step_tflops(r, s));
  if (r->peak_tflops > 0) fprintf(f, ",\"mfu\":%.9g", step_tflops(r, s) / r->peak_tflops);
  if (s->save_ms >= 0) fprintf(f, ",\"save_ms\":%.3f", s->save_ms);
  fprintf(f, ",\"skipped\":%d", s->stats->skipped ? 1 : 0);
  if (s->moe.layers) {
    json_float(f, "moe_aux_loss", (float)s->moe.aux_loss);
    json_float(f, "moe_z_loss", (float)s->moe.z_loss);
    json_float(f, "moe_min_margin", (float)s->moe.min_margin);
    json_float(f, "moe_drop_fraction", (float)s->moe.drop_fraction);
  }
  fprintf(f, ",\"params_bytes\":%zu,\"grads_bytes\":%zu,\"optimizer_bytes\":%zu,\"activation_peak_bytes\":%zu,\"device_peak_bytes\":%zu",
          s->params_bytes, s->grads_bytes, s->optimizer_bytes, s->activation_peak, s->device_peak);
  fprintf(f, ",\"dp_comm_bytes\":%llu}\n", (unsigned long long)s->stats->comm_bytes);
  fflush(f);
}

void report_metrics_amend(train_report *r, const train_step_info *s, int have_val, float val_loss)
{
  if (!r->metrics || fflush(r->metrics) || ftruncate(fileno(r->metrics), r->line_start) != 0) return;
  report_metrics(r, s, have_val, val_loss);
}

void report_sample(const unsigned char *text, size_t n, size_t prompt_len, double temperature)
{
  if (temperature > 0)
    printf("sample (%zu bytes after a %zu-byte prompt, temperature %g):\n", n - prompt_len, prompt_len, temperature);
  else
    printf("sample (%zu bytes after a %zu-byte prompt, greedy):\n", n - prompt_len, prompt_len);
  /* printable ASCII and newlines as they are, any other byte as '.' */
  for (size_t i = 0; i < n; i++) putchar((text[i] >= 32 && text[i] < 127) || text[i] == '\n' ? text[i] : '.');
  putchar('\n');
  fflush(stdout);
}

void report_summary(const train_report *r)
{
  if (r->done == 0) /* an evaluation only: --steps 0, or a checkpoint at the last step already */
    printf("done: 0 steps (at step %lld) | val loss %.4f\n", (long long)r->start, r->last_val);
  else if (r->start > 0)
    printf("done: %lld steps (%lld-%lld) in %.1f s | train loss %.4f -> %.4f | val loss %.4f -> %.4f | %.0f tok/s "
           "mean%s\n",
           (long long)r->done, (long long)r->start + 1, (long long)r->steps, r->seconds, r->first_loss, r->last_loss,
           r->first_val, r->last_val, r->timed_seconds > 0 ? r->timed_tokens / r->timed_seconds : 0.0,
           r->done > 1 ? " (after the first step)" : "");
  else
    printf("done: %lld steps in %.1f s | train loss %.4f -> %.4f | val loss %.4f -> %.4f | %.0f tok/s mean%s\n",
           (long long)r->done, r->seconds, r->first_loss, r->last_loss, r->first_val, r->last_val,
           r->timed_seconds > 0 ? r->timed_tokens / r->timed_seconds : 0.0,
           r->done > 1 ? " (after the first step)" : "");
  fflush(stdout);
}

/* The step of a metrics line, -1 when it is not one. */
static int64_t line_step(const char *line)
{
  long long step;
  int n = 0;
  if (sscanf(line, "{\"step\":%lld%n", &step, &n) != 1 || n == 0) return -1;
  return step;
}

int report_metrics_restart(FILE *f, const char *path, int64_t start, char *err, size_t len)
{
  char *kept = NULL, *line = NULL;
  size_t size = 0, cap = 0;
  ssize_t n;
  int ok = 1;
  if (start > 0) { /* the lines to keep, into memory */
    FILE *in = fopen(path, "r");
    FILE *out = in ? open_memstream(&kept, &size) : NULL;
    ok = in && out;
    while (ok && (n = getline(&line, &cap, in)) > 0) {
      int64_t step = line_step(line);
      if (line[n - 1] == '\n' && step >= 1 && step <= start) fwrite(line, 1, (size_t)n, out);
    }
    if (in && ferror(in)) ok = 0;
    if (in) fclose(in);
    if (out && fclose(out)) ok = 0;
  }
  if (ok && (fflush(f) || ftruncate(fileno(f), 0) != 0)) ok = 0;
  if (ok && size && (fwrite(kept, 1, size, f) != size || fflush(f))) ok = 0;
  if (!ok) snprintf(err, len, "cannot rewrite the metrics file '%s' to continue after step %lld: %s", path,
                    (long long)start, strerror(errno ? errno : EIO));
  free(line);
  free(kept);
  return ok;
}
