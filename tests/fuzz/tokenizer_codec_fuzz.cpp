// Qwen3's tokenizer on arbitrary bytes: as text, encoding gives valid ids (or a clean error for
// invalid UTF-8), and text without added tokens decodes back to its normalized form; as token
// ids (past the vocabulary too, as a padded model may sample), decoding and streaming agree.
#include "core/check.h"
#include "fuzz_support.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer_checks.h"

using namespace nanovllm;

namespace {

const Tokenizer& qwen() {
  static const Tokenizer tokenizer = Tokenizer::from_dir(fuzz::test_data("qwen3-tokenizer"));
  return tokenizer;
}

// Qwen3's embedding has 151,936 rows: ids up to there can be sampled.
constexpr int kModelVocab = 151936;

void check_text(std::string_view text) {
  std::vector<int> ids;
  try {
    ids = qwen().encode(text);
  } catch (const Error&) {
    return;  // not UTF-8
  }
  for (const int id : ids) FUZZ_ASSERT(id >= 0 && id < qwen().vocab_size());
  // Every added token of Qwen3 starts with '<'; without one the text is a single normalized
  // segment, which byte-level BPE reproduces exactly.
  if (text.find('<') == std::string_view::npos) {
    FUZZ_ASSERT(qwen().decode(ids) == qwen().impl().normalizer.normalize(text));
  }
  fuzz::check_streaming_matches_decode(qwen(), ids);
}

void check_ids(const uint8_t* data, size_t size) {
  std::vector<int> ids;
  for (size_t i = 0; i + 3 <= size; i += 3) {
    const uint32_t value = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16);
    ids.push_back(static_cast<int>(value % (kModelVocab + 16)));
  }
  fuzz::check_streaming_matches_decode(qwen(), ids);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte picks the reading; the rest is the input.
  if (data[0] & 1) {
    check_ids(data + 1, size - 1);
  } else {
    check_text(fuzz::as_text(data + 1, size - 1));
  }
  return 0;
}
