// GPT-2's reversible mapping between bytes and printable characters, used by byte-level BPE:
// every byte of the text becomes one character of the model's alphabet, so the vocabulary
// can spell any byte string.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace nanovllm {

class ByteLevelAlphabet {
 public:
  static const ByteLevelAlphabet& get();

  // The alphabet character for a byte, as UTF-8 (1 or 2 bytes).
  std::string_view encode_byte(unsigned char byte) const { return encoded_[byte]; }

  // Maps every byte of text to its alphabet character.
  std::string encode(std::string_view bytes) const;

  // The bytes a token spelled in the alphabet stands for, or nullopt if the token contains
  // a character outside the alphabet.
  std::optional<std::string> decode(std::string_view token) const;

 private:
  ByteLevelAlphabet();
  std::array<std::string, 256> encoded_;
  // Alphabet characters are all below U+0144; -1 marks characters outside the alphabet.
  std::array<int, 0x144> byte_of_char_;
};

}  // namespace nanovllm
