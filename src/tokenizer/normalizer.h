// Unicode normalization of text before pre-tokenization (tokenizer.json "normalizer").
// Uses utf8proc's current Unicode tables. Hugging Face tokenizers normalizes with Unicode 9.0
// tables, so for the few combining marks and decompositions added since 2016 (e.g. U+1DF6,
// U+16FF0, U+10780..U+107BA) the two differ; everything older is identical.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace nanovllm {

enum class NormalizationForm { kNFC, kNFD, kNFKC, kNFKD };

// A sequence of normalization forms applied in order; empty means text passes unchanged.
class Normalizer {
 public:
  Normalizer() = default;
  explicit Normalizer(std::vector<NormalizationForm> forms) : forms_(std::move(forms)) {}

  bool empty() const { return forms_.empty(); }

  // Normalizes valid UTF-8 text.
  std::string normalize(std::string_view text) const;

 private:
  std::vector<NormalizationForm> forms_;
};

// Plain utf8proc normalization of the whole text, without the fast paths (tests compare
// the fast paths with it).
std::string normalize_reference(std::string_view text, NormalizationForm form);

}  // namespace nanovllm
