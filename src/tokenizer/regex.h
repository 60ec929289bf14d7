// A compiled PCRE2 regex (UTF + UCP, JIT) for pre-tokenization. Compiled once, shared by all
// threads; each thread keeps its own match scratch space.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace nanovllm {

class Regex {
 public:
  // Takes a PCRE2 pattern; throws Error naming the pattern if it does not compile.
  explicit Regex(std::string pattern);
  ~Regex();
  Regex(Regex&& other) noexcept;
  Regex& operator=(Regex&& other) noexcept;
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Finds the first match in subject (valid UTF-8) that starts at or after `start`.
  // Returns false if there is none.
  bool search(std::string_view subject, std::size_t start, std::size_t* match_begin,
              std::size_t* match_end) const;

  const std::string& pattern() const { return pattern_; }

 private:
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8*
  bool jit_ = false;
};

}  // namespace nanovllm
