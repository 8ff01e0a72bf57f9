// gaaw-prep's SentencePiece tokenizer (spm.h): a C interface over the C++ library.
#include "examples/prep/spm.h"

#include <sentencepiece_processor.h>

#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

struct prep_spm {
  sentencepiece::SentencePieceProcessor processor;
};

prep_spm *prep_spm_load(const char *model, char *err, size_t len)
{
  prep_spm *s = new (std::nothrow) prep_spm;
  if (!s) {
    std::snprintf(err, len, "out of memory");
    return nullptr;
  }
  const auto status = s->processor.Load(model);
  if (!status.ok()) {
    std::snprintf(err, len, "cannot load the SentencePiece model '%s': %s", model, status.ToString().c_str());
    delete s;
    return nullptr;
  }
  return s;
}

void prep_spm_free(prep_spm *s)
{
  delete s;
}

int prep_spm_vocab(const prep_spm *s)
{
  return s->processor.GetPieceSize();
}

int prep_spm_bos(const prep_spm *s)
{
  return s->processor.bos_id();
}

int prep_spm_eos(const prep_spm *s)
{
  return s->processor.eos_id();
}

int prep_spm_encode(prep_spm *s, const char *text, size_t n, int32_t **ids, size_t *count, size_t *cap, char *err,
                    size_t len)
{
  std::vector<int> out;
  const auto status = s->processor.Encode(std::string(text, n), &out);
  if (!status.ok()) {
    std::snprintf(err, len, "SentencePiece cannot encode a document: %s", status.ToString().c_str());
    return 0;
  }
  if (*count + out.size() > *cap) {
    size_t grown = (*count + out.size()) * 2 + 1024;
    int32_t *p = static_cast<int32_t *>(std::realloc(*ids, grown * sizeof **ids));
    if (!p) {
      std::snprintf(err, len, "out of memory for %zu token ids", grown);
      return 0;
    }
    *ids = p;
    *cap = grown;
  }
  for (int id : out) (*ids)[(*count)++] = id;
  return 1;
}
