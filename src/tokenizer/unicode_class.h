// Character classes with the meaning Hugging Face tokenizers gives them in added-token
// matching (Rust regex's Unicode \w and \s).
#pragma once

namespace nanovllm {

// Unicode White_Space.
bool is_white_space(char32_t cp);

// Alphabetic, marks, decimal digits, connector punctuation and the joiners (Rust's \w).
bool is_word_char(char32_t cp);

}  // namespace nanovllm
