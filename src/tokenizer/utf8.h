// UTF-8 validation, decoding and lossy conversion (invalid sequences become U+FFFD, one per
// maximal subpart, as Rust's String::from_utf8_lossy and Python's errors="replace" do).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace nanovllm::utf8 {

// Result of looking at the sequence that starts at one byte.
struct Step {
  enum Kind { kValid, kInvalid, kTruncated } kind;
  // kValid: bytes in the character; kInvalid: bytes in the maximal invalid subpart;
  // kTruncated: bytes present of a sequence that the input ends inside of.
  int length;
  char32_t codepoint;  // only for kValid
};

// Classifies the sequence starting at s[0] (s must not be empty).
Step next(std::string_view s);

// Offset of the first byte that is not part of valid UTF-8, or nullopt if all of s is valid.
std::optional<std::size_t> find_invalid(std::string_view s);

// Decodes the character at s[0]; s must be valid UTF-8 and not empty.
inline char32_t decode(std::string_view s, int* length) {
  const auto b0 = static_cast<unsigned char>(s[0]);
  if (b0 < 0x80) {
    *length = 1;
    return b0;
  }
  const auto b = [&](int i) {
    return static_cast<char32_t>(static_cast<unsigned char>(s[i]) & 0x3F);
  };
  if (b0 < 0xE0) {
    *length = 2;
    return (static_cast<char32_t>(b0 & 0x1F) << 6) | b(1);
  }
  if (b0 < 0xF0) {
    *length = 3;
    return (static_cast<char32_t>(b0 & 0x0F) << 12) | (b(1) << 6) | b(2);
  }
  *length = 4;
  return (static_cast<char32_t>(b0 & 0x07) << 18) | (b(1) << 12) | (b(2) << 6) | b(3);
}

// Length in bytes of the character whose first byte is b0 (valid UTF-8 assumed).
inline int sequence_length(unsigned char b0) {
  return b0 < 0x80 ? 1 : b0 < 0xE0 ? 2 : b0 < 0xF0 ? 3 : 4;
}

void append(std::string& out, char32_t codepoint);

// Appends bytes to out, replacing every maximal invalid subpart (including a truncated
// sequence at the end) with U+FFFD.
void append_lossy(std::string& out, std::string_view bytes);

// Like append_lossy, but stops before a truncated sequence at the end of bytes and returns how
// many bytes were consumed; the rest may still become a valid character with more input.
std::size_t append_lossy_complete(std::string& out, std::string_view bytes);

}  // namespace nanovllm::utf8
