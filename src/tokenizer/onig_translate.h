// Rewrites a pre-tokenizer regex written for Oniguruma (what Hugging Face tokenizers uses)
// into an equivalent PCRE2 pattern. The two engines agree on most syntax; they differ in
// what \s, \w, \d and \h mean under Unicode, and in how (?i) folds case: Oniguruma's \s is
// exactly White_Space (PCRE2's also takes U+180E), its \w includes marks, its \h is a hex
// digit, and its case-insensitive groups do not fold U+017F into 's'.
#pragma once

#include <string>
#include <string_view>

namespace nanovllm {

// Throws Error naming the construct when the pattern uses something that cannot be
// translated faithfully.
std::string translate_onig_pattern(std::string_view pattern);

}  // namespace nanovllm
