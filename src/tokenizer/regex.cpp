#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/check.h"

namespace nanovllm {

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

// Per-thread match state: PCRE2 match data and a JIT stack big enough for long inputs
// (a 100 KB run of one character class stays far below it).
struct MatchScratch {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* stack = nullptr;

  MatchScratch() {
    data = pcre2_match_data_create(16, nullptr);
    context = pcre2_match_context_create(nullptr);
    stack = pcre2_jit_stack_create(64 * 1024, 16 * 1024 * 1024, nullptr);
    NVLLM_CHECK(data != nullptr && context != nullptr && stack != nullptr);
    pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~MatchScratch() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
};

MatchScratch& scratch() {
  thread_local MatchScratch s;
  return s;
}

}  // namespace

Regex::Regex(std::string pattern) : pattern_(std::move(pattern)) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_compile_context* context = pcre2_compile_context_create(nullptr);
  pcre2_set_newline(context, PCRE2_NEWLINE_LF);
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern_.data()), pattern_.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error, &offset, context);
  pcre2_compile_context_free(context);
  if (code == nullptr) {
    throw Error(fmt::format("cannot compile regex '{}': {} at offset {}", pattern_,
                            pcre2_message(error), offset));
  }
  jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  code_ = code;
}

Regex::~Regex() {
  if (code_ != nullptr) pcre2_code_free(static_cast<pcre2_code*>(code_));
}

Regex::Regex(Regex&& other) noexcept
    : pattern_(std::move(other.pattern_)), code_(other.code_), jit_(other.jit_) {
  other.code_ = nullptr;
}

Regex& Regex::operator=(Regex&& other) noexcept {
  if (this != &other) {
    if (code_ != nullptr) pcre2_code_free(static_cast<pcre2_code*>(code_));
    pattern_ = std::move(other.pattern_);
    code_ = other.code_;
    jit_ = other.jit_;
    other.code_ = nullptr;
  }
  return *this;
}

bool Regex::search(std::string_view subject, std::size_t start, std::size_t* match_begin,
                   std::size_t* match_end) const {
  MatchScratch& s = scratch();
  const auto* code = static_cast<const pcre2_code*>(code_);
  const auto* text = reinterpret_cast<PCRE2_SPTR>(subject.data());
  // Callers pass valid UTF-8 (checked once per encode), so PCRE2 need not check it again.
  const int rc =
      jit_ ? pcre2_jit_match(code, text, subject.size(), start, PCRE2_NO_UTF_CHECK, s.data,
                             s.context)
           : pcre2_match(code, text, subject.size(), start, PCRE2_NO_UTF_CHECK, s.data, s.context);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) {
    throw Error(fmt::format("regex '{}' failed on a {}-byte input: {}", pattern_, subject.size(),
                            pcre2_message(rc)));
  }
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(s.data);
  *match_begin = ovector[0];
  *match_end = ovector[1];
  return true;
}

}  // namespace nanovllm
