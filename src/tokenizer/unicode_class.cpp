#include "tokenizer/unicode_class.h"

#include <string>

#include "tokenizer/regex.h"
#include "tokenizer/utf8.h"

namespace nanovllm {

bool is_white_space(char32_t cp) {
  if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
  switch (cp) {
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

bool is_word_char(char32_t cp) {
  if (cp < 0x80) {
    return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9') ||
           cp == '_';
  }
  // Alphabetic is a derived property that utf8proc does not expose; PCRE2 knows it.
  static const Regex word(R"(\A[\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}])");
  std::string encoded;
  utf8::append(encoded, cp);
  std::size_t begin = 0, end = 0;
  return word.search(encoded, 0, &begin, &end);
}

}  // namespace nanovllm
