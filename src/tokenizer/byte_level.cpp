#include "tokenizer/byte_level.h"

#include "tokenizer/utf8.h"

namespace nanovllm {

const ByteLevelAlphabet& ByteLevelAlphabet::get() {
  static const ByteLevelAlphabet alphabet;
  return alphabet;
}

ByteLevelAlphabet::ByteLevelAlphabet() {
  byte_of_char_.fill(-1);
  // Printable Latin-1 bytes stand for themselves; the others are shifted to U+0100 and up,
  // in byte order.
  const auto printable = [](int b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  };
  int shifted = 0;
  for (int b = 0; b < 256; ++b) {
    const char32_t ch = printable(b) ? static_cast<char32_t>(b) : 256 + shifted++;
    std::string encoded;
    utf8::append(encoded, ch);
    encoded_[b] = encoded;
    byte_of_char_[ch] = b;
  }
}

std::string ByteLevelAlphabet::encode(std::string_view bytes) const {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) out.append(encoded_[static_cast<unsigned char>(c)]);
  return out;
}

std::optional<std::string> ByteLevelAlphabet::decode(std::string_view token) const {
  std::string out;
  out.reserve(token.size());
  std::size_t i = 0;
  while (i < token.size()) {
    const utf8::Step step = utf8::next(token.substr(i));
    if (step.kind != utf8::Step::kValid) return std::nullopt;
    if (step.codepoint >= byte_of_char_.size() || byte_of_char_[step.codepoint] < 0) {
      return std::nullopt;
    }
    out.push_back(static_cast<char>(byte_of_char_[step.codepoint]));
    i += step.length;
  }
  return out;
}

}  // namespace nanovllm
