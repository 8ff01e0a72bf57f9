/* gaaw-train's log lines and metrics file. */
#include "examples/train/report.h"

#include <math.h>

static double mib(size_t bytes)
{
  return (double)bytes / (1024.0 * 1024.0);
}

void report_step(train_report *r, const train_step_info *s)
{
  const gaaw_step_stats_t *st = s->stats;
  if (s->step == 1) r->first_loss = s->loss;
  r->last_loss = s->loss;
  r->seconds += s->ms / 1000;
  r->tokens += s->tokens;
  if (s->step > 1 || r->steps == 1) {
    r->timed_seconds += s->ms / 1000;
    r->timed_tokens += s->tokens;
  }
  printf("step %5lld/%lld | loss %.4f | lr %.3e | norm %.4f | %8.1f ms | %9.0f tok/s | state %.2f+%.2f+%.2f MiB "
         "| act peak %.2f MiB | dp comm %.2f MiB",
         (long long)s->step, (long long)r->steps, s->loss, st->lr, st->grad_norm, s->ms, s->tokens / (s->ms / 1000),
         mib(s->params_bytes), mib(s->grads_bytes), mib(s->optimizer_bytes), mib(s->activation_peak),
         mib((size_t)st->comm_bytes));
  if (st->loss_scale != 1) printf(" | scale %g", st->loss_scale);
  if (s->ranks > 0) { /* per rank, in world order */
    printf(" | idle");
    for (int k = 0; k < s->ranks; k++) printf("%s%.0f%%", k ? "/" : " ", 100 * s->rank_figures[2 * k]);
    printf(" | act peaks");
    for (int k = 0; k < s->ranks; k++) printf("%s%.2f", k ? "/" : " ", mib((size_t)s->rank_figures[2 * k + 1]));
    printf(" MiB");
  }
  printf("%s\n", st->skipped ? " | skipped (overflow)" : "");
  fflush(stdout);
}

void report_eval(train_report *r, int64_t step, float val_loss)
{
  if (step == 0) r->first_val = val_loss;
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
  if (!f) return;
  fprintf(f, "{\"step\":%lld", (long long)s->step);
  json_float(f, "loss", s->loss);
  if (have_val) json_float(f, "val_loss", val_loss);
  json_float(f, "lr", s->stats->lr);
  json_float(f, "grad_norm", s->stats->grad_norm);
  json_float(f, "loss_scale", s->stats->loss_scale);
  fprintf(f, ",\"ms\":%.3f,\"tokens_per_s\":%.1f,\"skipped\":%d", s->ms, s->tokens / (s->ms / 1000),
          s->stats->skipped ? 1 : 0);
  fprintf(f, ",\"params_bytes\":%zu,\"grads_bytes\":%zu,\"optimizer_bytes\":%zu,\"activation_peak_bytes\":%zu",
          s->params_bytes, s->grads_bytes, s->optimizer_bytes, s->activation_peak);
  fprintf(f, ",\"dp_comm_bytes\":%llu}\n", (unsigned long long)s->stats->comm_bytes);
  fflush(f);
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
  printf("done: %lld steps in %.1f s | train loss %.4f -> %.4f | val loss %.4f -> %.4f | %.0f tok/s mean%s\n",
         (long long)r->steps, r->seconds, r->first_loss, r->last_loss, r->first_val, r->last_val,
         r->timed_seconds > 0 ? r->timed_tokens / r->timed_seconds : 0.0,
         r->steps > 1 ? " (after the first step)" : "");
  fflush(stdout);
}
