#include "tokenizer/onig_translate.h"

#include <vector>

#include "core/check.h"

namespace nanovllm {

namespace {

// Class bodies (without brackets) of the Oniguruma Unicode meanings.
constexpr std::string_view kSpaceBody = "\\t-\\r\\x{85}\\p{Zs}\\p{Zl}\\p{Zp}";
constexpr std::string_view kWordBody = "\\p{L}\\p{M}\\p{N}\\p{Pc}";
constexpr std::string_view kHexBody = "0-9a-fA-F";

class Translator {
 public:
  explicit Translator(std::string_view pattern) : p_(pattern) {}

  std::string run() {
    caseless_.push_back(false);
    while (i_ < p_.size()) {
      const char c = p_[i_];
      if (c == '\\') {
        escape();
      } else if (c == '[') {
        open_class();
      } else if (c == ']' && in_class_) {
        in_class_ = false;
        out_.push_back(c);
        ++i_;
      } else if (c == '(' && !in_class_) {
        open_group();
      } else if (c == ')' && !in_class_) {
        if (caseless_.size() <= 1) fail("unbalanced ')'");
        caseless_.pop_back();
        out_.push_back(c);
        ++i_;
      } else {
        literal(c);
      }
    }
    if (in_class_) fail("unterminated character class");
    if (caseless_.size() != 1) fail("unbalanced '('");
    return out_;
  }

 private:
  [[noreturn]] void fail(std::string_view what) const {
    throw Error(fmt::format("unsupported regex '{}': {} (at offset {})", p_, what, i_));
  }

  bool caseless() const { return caseless_.back(); }

  void literal(char c) {
    const auto uc = static_cast<unsigned char>(c);
    if (caseless() && uc >= 0x80) fail("non-ASCII text inside a case-insensitive group");
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (caseless() && letter) {
      const char lower = static_cast<char>(c | 0x20), upper = static_cast<char>(c & ~0x20);
      // Only ASCII case pairs: Oniguruma does not fold U+017F or U+212A into 's' and 'k' here.
      if (in_class_) {
        out_ += {lower, upper};
      } else {
        out_ += {'[', lower, upper, ']'};
      }
    } else {
      out_.push_back(c);
    }
    ++i_;
  }

  void open_class() {
    if (in_class_) {
      // POSIX classes like [:alpha:] are the only brackets allowed inside a class.
      const std::size_t close = p_.find(":]", i_);
      if (i_ + 1 < p_.size() && p_[i_ + 1] == ':' && close != std::string_view::npos) {
        out_.append(p_.substr(i_, close + 2 - i_));
        i_ = close + 2;
        return;
      }
      fail("nested character class");
    }
    in_class_ = true;
    out_.push_back('[');
    ++i_;
    if (i_ < p_.size() && p_[i_] == '^') {
      out_.push_back('^');
      ++i_;
    }
    // A ']' right after the opening bracket is a literal in both engines.
    if (i_ < p_.size() && p_[i_] == ']') {
      out_ += "\\]";
      ++i_;
    }
  }

  void open_group() {
    // (?i: ... ), (?-i: ... ) and (?i) change case sensitivity; everything else keeps it.
    const std::string_view rest = p_.substr(i_);
    bool group_caseless = caseless();
    if (rest.starts_with("(?i:")) {
      caseless_.push_back(true);
      out_ += "(?:";
      i_ += 4;
      return;
    }
    if (rest.starts_with("(?-i:")) {
      caseless_.push_back(false);
      out_ += "(?:";
      i_ += 5;
      return;
    }
    if (rest.starts_with("(?i)")) {
      caseless_.back() = true;
      i_ += 4;
      return;
    }
    if (rest.starts_with("(?-i)")) {
      caseless_.back() = false;
      i_ += 5;
      return;
    }
    if (rest.starts_with("(?") && rest.size() > 2) {
      const char kind = rest[2];
      // Other inline option groups would need their own translation.
      const bool known =
          kind == ':' || kind == '=' || kind == '!' || kind == '>' || kind == '<' || kind == '#';
      if (!known) fail("inline option group");
    }
    caseless_.push_back(group_caseless);
    out_.push_back('(');
    ++i_;
  }

  void escape() {
    if (i_ + 1 >= p_.size()) fail("trailing backslash");
    const char e = p_[i_ + 1];
    switch (e) {
      case 's':
        emit_class(kSpaceBody, false);
        break;
      case 'S':
        emit_class(kSpaceBody, true);
        break;
      case 'w':
        emit_class(kWordBody, false);
        break;
      case 'W':
        emit_class(kWordBody, true);
        break;
      case 'h':
        emit_class(kHexBody, false);
        break;
      case 'H':
        emit_class(kHexBody, true);
        break;
      case 'd':
        out_ += "\\p{Nd}";
        break;
      case 'D':
        out_ += "\\P{Nd}";
        break;
      case 'p':
      case 'P': {
        if (caseless()) fail("Unicode property inside a case-insensitive group");
        const std::size_t close = p_.find('}', i_);
        if (i_ + 2 >= p_.size() || p_[i_ + 2] != '{' || close == std::string_view::npos) {
          fail("malformed \\p{...}");
        }
        out_.append(p_.substr(i_, close + 1 - i_));
        i_ = close + 1;
        return;
      }
      case 'x': {
        // \xHH or \x{H...}: copied as is.
        std::size_t end = i_ + 2;
        if (end < p_.size() && p_[end] == '{') {
          end = p_.find('}', end);
          if (end == std::string_view::npos) fail("malformed \\x{...}");
          ++end;
        } else {
          end = std::min(p_.size(), end + 2);
        }
        if (caseless()) fail("escaped character inside a case-insensitive group");
        out_.append(p_.substr(i_, end - i_));
        i_ = end;
        return;
      }
      default:
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) {
          // Escapes that mean the same in both engines (\r \n \t \f \v \b \B \A \z \Z).
          static constexpr std::string_view kSame = "rntfvbBAzZ";
          if (kSame.find(e) == std::string_view::npos) fail("escape sequence");
        }
        out_.push_back('\\');
        out_.push_back(e);
        break;
    }
    i_ += 2;
  }

  void emit_class(std::string_view body, bool negated) {
    if (in_class_) {
      if (negated) fail("negated shorthand class inside a character class");
      out_.append(body);
    } else {
      out_ += negated ? "[^" : "[";
      out_.append(body);
      out_.push_back(']');
    }
  }

  std::string_view p_;
  std::size_t i_ = 0;
  std::string out_;
  bool in_class_ = false;
  std::vector<bool> caseless_;  // one entry per open group
};

}  // namespace

std::string translate_onig_pattern(std::string_view pattern) {
  return Translator(pattern).run();
}

}  // namespace nanovllm
