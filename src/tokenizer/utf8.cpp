#include "tokenizer/utf8.h"

#include <cstdint>
#include <cstring>

namespace nanovllm::utf8 {

Step next(std::string_view s) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char b0 = byte(0);
  if (b0 < 0x80) return {Step::kValid, 1, b0};
  // Expected length and the allowed range of the second byte (Unicode Table 3-7).
  int need = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 == 0xE0) {
    need = 3, lo = 0xA0;
  } else if ((b0 >= 0xE1 && b0 <= 0xEC) || b0 == 0xEE || b0 == 0xEF) {
    need = 3;
  } else if (b0 == 0xED) {
    need = 3, hi = 0x9F;
  } else if (b0 == 0xF0) {
    need = 4, lo = 0x90;
  } else if (b0 >= 0xF1 && b0 <= 0xF3) {
    need = 4;
  } else if (b0 == 0xF4) {
    need = 4, hi = 0x8F;
  } else {
    return {Step::kInvalid, 1, 0};
  }
  for (int i = 1; i < need; ++i) {
    if (static_cast<std::size_t>(i) >= s.size()) return {Step::kTruncated, i, 0};
    const unsigned char b = byte(i);
    const bool ok = i == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) return {Step::kInvalid, i, 0};
  }
  int length = 0;
  const char32_t cp = decode(s, &length);
  return {Step::kValid, need, cp};
}

std::optional<std::size_t> find_invalid(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    // Skip ASCII quickly, eight bytes at a time; it is most of typical text.
    uint64_t chunk;
    if (i + 8 <= s.size() &&
        (std::memcpy(&chunk, s.data() + i, 8), (chunk & 0x8080808080808080ull) == 0)) {
      i += 8;
      continue;
    }
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const Step step = next(s.substr(i));
    if (step.kind != Step::kValid) return i;
    i += step.length;
  }
  return std::nullopt;
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

namespace {
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

std::size_t append_lossy_impl(std::string& out, std::string_view bytes, bool keep_truncated) {
  std::size_t i = 0;
  while (i < bytes.size()) {
    // Copy the longest valid run in one go.
    std::size_t run = i;
    Step step{Step::kValid, 0, 0};
    while (run < bytes.size()) {
      if (static_cast<unsigned char>(bytes[run]) < 0x80) {
        ++run;
        continue;
      }
      step = next(bytes.substr(run));
      if (step.kind != Step::kValid) break;
      run += step.length;
    }
    out.append(bytes.substr(i, run - i));
    i = run;
    if (i == bytes.size()) break;
    if (step.kind == Step::kTruncated && keep_truncated) return i;
    out.append(kReplacement);
    i += step.length;
  }
  return i;
}
}  // namespace

void append_lossy(std::string& out, std::string_view bytes) {
  append_lossy_impl(out, bytes, /*keep_truncated=*/false);
}

std::size_t append_lossy_complete(std::string& out, std::string_view bytes) {
  return append_lossy_impl(out, bytes, /*keep_truncated=*/true);
}

}  // namespace nanovllm::utf8
