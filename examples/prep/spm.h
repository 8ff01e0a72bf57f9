/* gaaw-prep's SentencePiece tokenizer behind a C interface (spm.cc: the library is
 * C++). Built only with SentencePiece (configure --with-sentencepiece). */
#ifndef GAAW_PREP_SPM_H
#define GAAW_PREP_SPM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct prep_spm prep_spm;

/* Loads a SentencePiece model file; NULL with the reason in err. */
prep_spm *prep_spm_load(const char *model, char *err, size_t len);
void prep_spm_free(prep_spm *s);
/* The model's vocabulary size, and its BOS and EOS ids (-1: none). */
int prep_spm_vocab(const prep_spm *s);
int prep_spm_bos(const prep_spm *s);
int prep_spm_eos(const prep_spm *s);
/* The ids of text (n bytes, UTF-8) appended to *ids (capacity *cap, count *count,
 * grown with realloc). Returns 0 with the reason in err on failure. */
int prep_spm_encode(prep_spm *s, const char *text, size_t n, int32_t **ids, size_t *count, size_t *cap, char *err,
                    size_t len);

#ifdef __cplusplus
}
#endif

#endif
