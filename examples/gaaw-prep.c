/* gaaw-prep: text to a Megatron-LM indexed dataset (PREFIX.bin, PREFIX.idx) that
 * gaaw-train --data-path reads, tokenized by a SentencePiece model (LLaMA 1/2,
 * Mistral) or as bytes, with a sidecar PREFIX.gaaw.json that gaaw checks --vocab
 * against; and --verify, which scans a dataset's tokens against a vocabulary.
 *
 *   gaaw-prep --input FILE [--input FILE ...] --output-prefix PREFIX
 *             [--tokenizer-model MODEL | --bytes] [--json-keys KEY] [--append-eod] [--no-bos]
 *   gaaw-prep --verify PATH --vocab N
 *
 * Inputs: a file ending in .json or .jsonl holds JSON lines, each an object whose
 * --json-keys field (default "text") is one document, as Megatron-LM's
 * preprocess_data.py reads them; any other file is one document, whole. Each
 * document is one sequence: BOS first when the model has one (as LLaMA's
 * tokenizer adds it; --no-bos drops it), its tokens, and EOS with --append-eod.
 * Tokens are uint16 when the vocabulary fits, else int32. The files are written as
 * PREFIX.*.tmp and renamed when all are complete, the index last. A progress line on
 * stderr every 2 seconds on long inputs. Exit 0, 1 (a failure) or 2 (bad usage). */
#include <errno.h>
#include <jansson.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "gaaw.h"
#ifdef GAAW_HAVE_SENTENCEPIECE
#include "examples/prep/spm.h"
#endif

#define MAX_INPUTS 256

typedef struct {
  const char *inputs[MAX_INPUTS];
  int ninputs;
  const char *prefix, *model, *json_key, *verify;
  int bytes, append_eod, no_bos;
  long vocab;
} prep_options;

static void usage(FILE *out)
{
  fprintf(out,
          "usage: gaaw-prep --input FILE [--input FILE ...] --output-prefix PREFIX\n"
          "                 [--tokenizer-model MODEL | --bytes] [--json-keys KEY] [--append-eod] [--no-bos]\n"
          "       gaaw-prep --verify PATH --vocab N\n"
          "  --input FILE            text: .json/.jsonl files are JSON lines (one document each), others one document\n"
          "  --output-prefix PREFIX  writes PREFIX.bin, PREFIX.idx (Megatron-LM's indexed dataset), PREFIX.gaaw.json\n"
          "  --tokenizer-model M     a SentencePiece model (LLaMA 1/2, Mistral)%s\n"
          "  --bytes                 one token per byte (vocabulary 256), no BOS or EOS\n"
          "  --json-keys KEY         the JSON field holding the text [text]\n"
          "  --append-eod            an EOS token after each document\n"
          "  --no-bos                no BOS token before each document\n"
          "  --verify PATH           check every token of a dataset (prefix or file) against --vocab N\n",
#ifdef GAAW_HAVE_SENTENCEPIECE
          ""
#else
          " (not built: configure found no SentencePiece)"
#endif
  );
}

/* 2 after a message on bad usage. */
static int bad_usage(const char *fmt, const char *arg)
{
  fprintf(stderr, "gaaw-prep: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\ngaaw-prep: --help lists the options\n");
  return 2;
}

static int parse(int argc, char **argv, prep_options *o)
{
  memset(o, 0, sizeof *o);
  o->json_key = "text";
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int takes = !strcmp(a, "--input") || !strcmp(a, "--output-prefix") || !strcmp(a, "--tokenizer-model") ||
                !strcmp(a, "--json-keys") || !strcmp(a, "--verify") || !strcmp(a, "--vocab");
    if (takes && i + 1 == argc) return bad_usage("%s needs a value", a);
    const char *v = takes ? argv[++i] : NULL;
    if (!strcmp(a, "--help")) {
      usage(stdout);
      exit(0);
    } else if (!strcmp(a, "--input")) {
      if (o->ninputs == MAX_INPUTS) return bad_usage("more than %s inputs", "256");
      o->inputs[o->ninputs++] = v;
    } else if (!strcmp(a, "--output-prefix")) o->prefix = v;
    else if (!strcmp(a, "--tokenizer-model")) o->model = v;
    else if (!strcmp(a, "--json-keys")) o->json_key = v;
    else if (!strcmp(a, "--verify")) o->verify = v;
    else if (!strcmp(a, "--vocab")) {
      char *end;
      o->vocab = strtol(v, &end, 10);
      if (*end || o->vocab < 1 || o->vocab > 2147483647) return bad_usage("--vocab needs an integer >= 1, got '%s'", v);
    } else if (!strcmp(a, "--bytes")) o->bytes = 1;
    else if (!strcmp(a, "--append-eod")) o->append_eod = 1;
    else if (!strcmp(a, "--no-bos")) o->no_bos = 1;
    else return bad_usage("unknown option '%s'", a);
  }
  if (o->verify) return o->vocab ? 0 : bad_usage("--verify %s needs --vocab N", o->verify);
  if (!o->ninputs || !o->prefix) return bad_usage("give --input and --output-prefix (or --verify)%s", "");
  if (!o->bytes == !o->model) return bad_usage("give one of --tokenizer-model and --bytes%s", "");
  if (o->bytes && o->append_eod) return bad_usage("--append-eod needs a tokenizer with EOS, not --bytes%s", "");
#ifndef GAAW_HAVE_SENTENCEPIECE
  if (o->model) return bad_usage("--tokenizer-model: this gaaw-prep was built without SentencePiece%s", "");
#endif
  return 0;
}

/* ---- the dataset being written */

typedef struct {
  FILE *bin;
  char *bin_tmp, *idx_tmp, *side_tmp, *bin_path, *idx_path, *side_path;
  int token_bytes;
  int32_t *lengths;
  int64_t docs, cap, tokens;
  double input_bytes;
  time_t last_progress, started;
} writer;

static char *joined(const char *a, const char *b)
{
  char *s = malloc(strlen(a) + strlen(b) + 1);
  if (s) sprintf(s, "%s%s", a, b);
  return s;
}

static int put(FILE *f, uint64_t v, int bytes)
{
  unsigned char b[8];
  for (int k = 0; k < bytes; k++) b[k] = (unsigned char)(v >> (8 * k));
  return fwrite(b, 1, (size_t)bytes, f) == (size_t)bytes;
}

/* Appends one document's ids as a sequence. */
static int add_document(writer *w, const int32_t *ids, size_t n)
{
  if (n > 2147483647u) {
    fprintf(stderr, "gaaw-prep: a document of %zu tokens is longer than Megatron's int32 lengths\n", n);
    return 0;
  }
  if (w->docs == w->cap) {
    int64_t cap = w->cap * 2 + 1024;
    int32_t *p = realloc(w->lengths, sizeof *p * (size_t)cap);
    if (!p) return fprintf(stderr, "gaaw-prep: out of memory for %lld documents\n", (long long)cap), 0;
    w->lengths = p, w->cap = cap;
  }
  for (size_t i = 0; i < n; i++)
    if (!put(w->bin, (uint64_t)(uint32_t)ids[i], w->token_bytes))
      return fprintf(stderr, "gaaw-prep: cannot write %s: %s\n", w->bin_tmp, strerror(errno)), 0;
  w->lengths[w->docs++] = (int32_t)n;
  w->tokens += (int64_t)n;
  return 1;
}

static void progress(writer *w, int last)
{
  time_t now = time(NULL);
  if (!last && now - w->last_progress < 2) return;
  w->last_progress = now;
  fprintf(stderr, "gaaw-prep: %lld documents, %.1f MB read, %lld tokens, %ld s%s", (long long)w->docs,
          w->input_bytes / 1e6, (long long)w->tokens, (long)(now - w->started), last ? "\n" : "\r");
}

/* PREFIX.idx: Megatron's header, lengths, byte pointers, document indices. */
static int write_index(const writer *w, int code)
{
  FILE *f = fopen(w->idx_tmp, "wb");
  int ok = f && fwrite("MMIDIDX\0\0", 1, 9, f) == 9 && put(f, 1, 8) && put(f, (uint64_t)code, 1) &&
           put(f, (uint64_t)w->docs, 8) && put(f, (uint64_t)w->docs + 1, 8);
  for (int64_t d = 0; ok && d < w->docs; d++) ok = put(f, (uint64_t)(uint32_t)w->lengths[d], 4);
  uint64_t at = 0;
  for (int64_t d = 0; ok && d < w->docs; d++) {
    ok = put(f, at, 8);
    at += (uint64_t)w->lengths[d] * (uint64_t)w->token_bytes;
  }
  for (int64_t d = 0; ok && d <= w->docs; d++) ok = put(f, (uint64_t)d, 8);
  if (f) ok = fclose(f) == 0 && ok;
  if (!ok) fprintf(stderr, "gaaw-prep: cannot write %s: %s\n", w->idx_tmp, strerror(errno));
  return ok;
}

static int write_sidecar(const writer *w, const prep_options *o, long vocab, int bos, int eos)
{
  json_t *j = json_pack("{sIsssssIsIsisi}", "vocab_size", (json_int_t)vocab, "tokenizer",
                        o->model ? o->model : "bytes", "format", "megatron", "documents", (json_int_t)w->docs,
                        "tokens", (json_int_t)w->tokens, "bos", bos, "eos", eos);
  int ok = j && json_dump_file(j, w->side_tmp, JSON_INDENT(2) | JSON_SORT_KEYS) == 0;
  json_decref(j);
  if (!ok) fprintf(stderr, "gaaw-prep: cannot write %s\n", w->side_tmp);
  return ok;
}

/* ---- reading the inputs */

typedef struct {
  const prep_options *o;
#ifdef GAAW_HAVE_SENTENCEPIECE
  prep_spm *spm;
#endif
  int bos, eos;
  int32_t *ids;
  size_t count, cap;
} tokenizer;

/* One document's text through the tokenizer into the writer. */
static int document(tokenizer *t, writer *w, const char *text, size_t n)
{
  char err[512];
  t->count = 0;
  size_t need = n + 2;
  if (t->o->bytes && need > t->cap) {
    int32_t *p = realloc(t->ids, sizeof *p * need);
    if (!p) return fprintf(stderr, "gaaw-prep: out of memory for a document of %zu bytes\n", n), 0;
    t->ids = p, t->cap = need;
  } else if (!t->o->bytes && t->cap < 2) {
    int32_t *p = realloc(t->ids, sizeof *p * 1024);
    if (!p) return fprintf(stderr, "gaaw-prep: out of memory\n"), 0;
    t->ids = p, t->cap = 1024;
  }
  if (t->bos >= 0) t->ids[t->count++] = t->bos;
  if (t->o->bytes) {
    for (size_t i = 0; i < n; i++) t->ids[t->count++] = (unsigned char)text[i];
  } else {
#ifdef GAAW_HAVE_SENTENCEPIECE
    if (!prep_spm_encode(t->spm, text, n, &t->ids, &t->count, &t->cap, err, sizeof err))
      return fprintf(stderr, "gaaw-prep: %s\n", err), 0;
#endif
  }
  if (t->eos >= 0 && t->o->append_eod) {
    if (t->count == t->cap) {
      int32_t *p = realloc(t->ids, sizeof *p * (t->cap + 1));
      if (!p) return fprintf(stderr, "gaaw-prep: out of memory\n"), 0;
      t->ids = p, t->cap++;
    }
    t->ids[t->count++] = t->eos;
  }
  w->input_bytes += (double)n;
  int ok = add_document(w, t->ids, t->count);
  progress(w, 0);
  return ok;
}

static int has_suffix(const char *s, const char *suffix)
{
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && !strcmp(s + n - k, suffix);
}

static int read_input(tokenizer *t, writer *w, const char *path)
{
  FILE *f = fopen(path, "rb");
  if (!f) return fprintf(stderr, "gaaw-prep: cannot read %s: %s\n", path, strerror(errno)), 0;
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  int ok = 1;
  if (has_suffix(path, ".json") || has_suffix(path, ".jsonl")) {
    for (long number = 1; ok && (n = getline(&line, &cap, f)) > 0; number++) {
      if (strspn(line, " \t\r\n") == (size_t)n) continue; /* a blank line */
      json_error_t e;
      json_t *j = json_loadb(line, (size_t)n, 0, &e), *text = json_object_get(j, t->o->json_key);
      if (!json_is_string(text)) {
        fprintf(stderr, "gaaw-prep: %s:%ld: %s\n", path, number,
                j ? "no string field of that --json-keys name" : e.text);
        ok = 0;
      } else {
        ok = document(t, w, json_string_value(text), json_string_length(text));
      }
      json_decref(j);
    }
  } else { /* the whole file, one document */
    size_t size = 0, room = 1 << 16;
    char *all = malloc(room);
    for (size_t got; all && (got = fread(all + size, 1, room - size, f)) > 0;) {
      size += got;
      if (size == room) {
        char *p = realloc(all, room *= 2);
        if (!p) free(all);
        all = p;
      }
    }
    ok = all != NULL;
    if (!ok) fprintf(stderr, "gaaw-prep: out of memory reading %s\n", path);
    if (ok) ok = document(t, w, all, size);
    free(all);
  }
  if (ferror(f)) ok = 0, fprintf(stderr, "gaaw-prep: cannot read %s: %s\n", path, strerror(errno));
  free(line);
  fclose(f);
  return ok;
}

static int prepare(const prep_options *o)
{
  tokenizer t = {.o = o, .bos = -1, .eos = -1};
  long vocab = 256;
  char err[512];
#ifdef GAAW_HAVE_SENTENCEPIECE
  if (o->model) {
    t.spm = prep_spm_load(o->model, err, sizeof err);
    if (!t.spm) return fprintf(stderr, "gaaw-prep: %s\n", err), 1;
    vocab = prep_spm_vocab(t.spm);
    t.bos = o->no_bos ? -1 : prep_spm_bos(t.spm);
    t.eos = prep_spm_eos(t.spm);
    if (o->append_eod && t.eos < 0) {
      fprintf(stderr, "gaaw-prep: --append-eod: the model %s has no EOS token\n", o->model);
      prep_spm_free(t.spm);
      return 2;
    }
  }
#endif
  (void)err;
  writer w = {.token_bytes = vocab <= 65536 ? 2 : 4};
  w.bin_path = joined(o->prefix, ".bin"), w.idx_path = joined(o->prefix, ".idx");
  w.bin_tmp = joined(o->prefix, ".bin.tmp"), w.idx_tmp = joined(o->prefix, ".idx.tmp");
  w.side_path = joined(o->prefix, ".gaaw.json"), w.side_tmp = joined(o->prefix, ".gaaw.json.tmp");
  w.started = w.last_progress = time(NULL);
  int ok = w.bin_path && w.idx_path && w.bin_tmp && w.idx_tmp && w.side_path && w.side_tmp;
  if (ok && !(w.bin = fopen(w.bin_tmp, "wb")))
    ok = 0, fprintf(stderr, "gaaw-prep: cannot write %s: %s\n", w.bin_tmp, strerror(errno));
  for (int i = 0; ok && i < o->ninputs; i++) ok = read_input(&t, &w, o->inputs[i]);
  if (w.bin && fclose(w.bin) != 0) ok = 0, fprintf(stderr, "gaaw-prep: cannot write %s\n", w.bin_tmp);
  if (ok && w.tokens == 0) /* an empty .bin: no dataset a run could read */
    ok = 0, fprintf(stderr, "gaaw-prep: the inputs hold no text: nothing to write\n");
  if (ok) ok = write_index(&w, w.token_bytes == 2 ? 8 : 4); /* Megatron's codes: 8 uint16, 4 int32 */
  if (ok) ok = write_sidecar(&w, o, vocab, t.bos, o->append_eod ? t.eos : -1);
  /* every file complete before any is renamed; the index last, since a reader
   * finds a dataset by it */
  if (ok && (rename(w.side_tmp, w.side_path) != 0 || rename(w.bin_tmp, w.bin_path) != 0 ||
             rename(w.idx_tmp, w.idx_path) != 0))
    ok = 0, fprintf(stderr, "gaaw-prep: cannot rename into %s: %s\n", w.idx_path, strerror(errno));
  if (!ok) remove(w.bin_tmp), remove(w.idx_tmp), remove(w.side_tmp);
  progress(&w, 1);
  if (ok)
    printf("gaaw-prep: %s.bin and .idx: %lld documents, %lld tokens (%d-byte), vocabulary %ld\n", o->prefix,
           (long long)w.docs, (long long)w.tokens, w.token_bytes, vocab);
#ifdef GAAW_HAVE_SENTENCEPIECE
  if (t.spm) prep_spm_free(t.spm);
#endif
  free(t.ids);
  free(w.lengths);
  free(w.bin_path), free(w.idx_path), free(w.bin_tmp), free(w.idx_tmp), free(w.side_path), free(w.side_tmp);
  return ok ? 0 : 1;
}

/* --verify: the dataset opened through the library on this one process. */
static int verify(const prep_options *o)
{
  gaaw_context_t ctx = NULL;
  gaaw_dataset_t d = NULL;
  const char *path = o->verify;
  gaaw_status_t st = gaaw_init(MPI_COMM_WORLD, NULL, &ctx);
  if (st == GAAW_SUCCESS) st = gaaw_dataset_open(ctx, 1, &path, NULL, GAAW_DATA_AUTO, 1, (int)o->vocab, &d);
  if (st == GAAW_SUCCESS) st = gaaw_dataset_verify(d, 0);
  int64_t tokens = 0;
  gaaw_data_format_t format = GAAW_DATA_AUTO;
  if (st == GAAW_SUCCESS) gaaw_dataset_info(d, 0, &format, NULL, &tokens, NULL);
  if (st == GAAW_SUCCESS)
    printf("gaaw-prep: %s (%s): %lld tokens, all below %ld\n", path, gaaw_data_format_name(format),
           (long long)tokens, o->vocab);
  else
    fprintf(stderr, "gaaw-prep: --verify %s: %s\n", path, gaaw_last_error(ctx));
  gaaw_dataset_close(&d);
  if (ctx) gaaw_finalize(&ctx);
  return st == GAAW_SUCCESS ? 0 : 1;
}

int main(int argc, char **argv)
{
  prep_options o;
  int rc = parse(argc, argv, &o);
  if (rc) return rc;
  if (!o.verify) return prepare(&o);
  MPI_Init(&argc, &argv);
  rc = verify(&o);
  MPI_Finalize();
  return rc;
}
