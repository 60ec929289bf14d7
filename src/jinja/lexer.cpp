#include "jinja/lexer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "jinja/error.h"
#include "jinja/unicode.h"

namespace nanovllm::jinja {

const char* token_type_name(TokenType type) {
  switch (type) {
    case TokenType::Data:
      return "template data";
    case TokenType::VariableBegin:
      return "begin of print statement";
    case TokenType::VariableEnd:
      return "end of print statement";
    case TokenType::BlockBegin:
      return "begin of statement block";
    case TokenType::BlockEnd:
      return "end of statement block";
    case TokenType::Name:
      return "name";
    case TokenType::String:
      return "string";
    case TokenType::Integer:
      return "integer";
    case TokenType::Float:
      return "float";
    case TokenType::Operator:
      return "operator";
    case TokenType::Eof:
      return "end of template";
  }
  return "token";
}

namespace {

// \r\n and \r become \n; one trailing newline is dropped unless kept.
std::string normalize_newlines(std::string_view source, bool keep_trailing_newline) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!keep_trailing_newline && !out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool is_ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_ident_char(char c) {
  return is_ident_start(c) || (c >= '0' && c <= '9');
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

class Lexer {
 public:
  Lexer(std::string_view source, const LexerOptions& options)
      : src_(normalize_newlines(source, options.keep_trailing_newline)), opt_(options) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      size_t tag = find_tag_start(pos_);
      if (tag == std::string::npos) {
        emit_data(pos_, src_.substr(pos_));
        pos_ = src_.size();
        break;
      }
      char kind = src_[tag + 1];
      char sign = tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+')
                      ? src_[tag + 2]
                      : 0;
      size_t raw_body = 0;
      bool raw = kind == '%' && match_raw_begin(tag, &raw_body);
      emit_data(pos_, strip_before_tag(src_.substr(pos_, tag - pos_), sign, kind != '{'));
      line_starting_ = false;
      if (raw) {
        lex_raw(tag, raw_body);
      } else if (kind == '#') {
        lex_comment(tag, tag + 2 + (sign ? 1 : 0));
      } else {
        lex_tag(tag, kind == '%', tag + 2 + (sign ? 1 : 0));
      }
    }
    Token eof{TokenType::Eof, "", 0, 0, 0, 0};
    set_position(eof, src_.size());
    tokens_.push_back(eof);
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void fail(size_t offset, const std::string& message) const {
    auto [line, column] = position(offset);
    throw TemplateError(message, line, column);
  }

  std::pair<int, int> position(size_t offset) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    size_t line = static_cast<size_t>(it - line_starts_.begin());
    return {static_cast<int>(line), static_cast<int>(offset - line_starts_[line - 1] + 1)};
  }

  void set_position(Token& t, size_t offset) const {
    auto [line, column] = position(offset);
    t.line = line;
    t.column = column;
  }

  void push(TokenType type, size_t offset, std::string text) {
    Token t{type, std::move(text), 0, 0, 0, 0};
    set_position(t, offset);
    tokens_.push_back(std::move(t));
  }

  void emit_data(size_t offset, std::string_view text) {
    if (!text.empty()) push(TokenType::Data, offset, std::string(text));
  }

  size_t find_tag_start(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '%' || src_[i + 1] == '{' || src_[i + 1] == '#'))
        return i;
    }
    return std::string::npos;
  }

  bool starts_with(size_t at, std::string_view s) const {
    return src_.compare(at, s.size(), s) == 0;
  }

  // Python's `\s`, which includes Unicode spaces.
  size_t space_length(size_t at) const {
    unsigned char c = static_cast<unsigned char>(src_[at]);
    if (c < 0x80) return is_py_space(c) ? 1 : 0;
    size_t n = 1;
    while (at + n < src_.size() && (static_cast<unsigned char>(src_[at + n]) & 0xC0) == 0x80) ++n;
    std::u32string cp = utf8_decode(std::string_view(src_).substr(at, n));
    return cp.size() == 1 && is_py_space(cp[0]) ? n : 0;
  }

  size_t skip_spaces(size_t at) const {
    while (at < src_.size()) {
      size_t n = space_length(at);
      if (n == 0) break;
      at += n;
    }
    return at;
  }

  static bool all_spaces(std::string_view s) {
    for (char32_t c : utf8_decode(s)) {
      if (!is_py_space(c)) return false;
    }
    return true;
  }

  // `-` strips all whitespace before the tag; lstrip_blocks strips the line's indentation
  // before a block or comment tag unless it is marked with `+`.
  std::string_view strip_before_tag(std::string_view text, char sign, bool block_or_comment) {
    if (sign == '-') {
      size_t end = text.size();
      std::u32string cps = utf8_decode(text);
      size_t keep = cps.size();
      while (keep > 0 && is_py_space(cps[keep - 1])) --keep;
      end = utf8_encode(std::u32string_view(cps).substr(0, keep)).size();
      return text.substr(0, end);
    }
    if (sign != '+' && opt_.lstrip_blocks && block_or_comment) {
      size_t nl = text.rfind('\n');
      size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting_) && l_pos < text.size() && all_spaces(text.substr(l_pos)))
        return text.substr(0, l_pos);
    }
    return text;
  }

  // {% raw %} / {%- raw -%}: returns where the raw body starts.
  bool match_raw_begin(size_t tag, size_t* body) const {
    size_t p = tag + 2;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
    p = skip_spaces(p);
    if (!starts_with(p, "raw")) return false;
    p = skip_spaces(p + 3);
    if (starts_with(p, "-%}")) {
      *body = skip_spaces(p + 3);
      return true;
    }
    if (starts_with(p, "%}")) {
      *body = p + 2;
      return true;
    }
    return false;
  }

  // Consumes `+%}`, `-%}` plus whitespace, or `%}` plus one newline under trim_blocks.
  size_t block_end_length(size_t at) const {
    if (starts_with(at, "+%}")) return 3;
    if (starts_with(at, "-%}")) return skip_spaces(at + 3) - at;
    if (starts_with(at, "%}")) {
      return opt_.trim_blocks && at + 2 < src_.size() && src_[at + 2] == '\n' ? 3 : 2;
    }
    return 0;
  }

  void finish_tag(size_t end) {
    line_starting_ = end > 0 && src_[end - 1] == '\n';
    pos_ = end;
  }

  void lex_raw(size_t tag, size_t body) {
    for (size_t i = src_.find("{%", body); i != std::string::npos; i = src_.find("{%", i + 1)) {
      size_t p = i + 2;
      char sign = 0;
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) sign = src_[p++];
      p = skip_spaces(p);
      if (!starts_with(p, "endraw")) continue;
      p = skip_spaces(p + 6);
      size_t end_len = block_end_length(p);
      if (end_len == 0) continue;
      emit_data(body, strip_before_tag(std::string_view(src_).substr(body, i - body), sign, true));
      finish_tag(p + end_len);
      return;
    }
    fail(tag, "Missing end of raw directive");
  }

  void lex_comment(size_t tag, size_t from) {
    for (size_t i = from; i + 1 < src_.size(); ++i) {
      if ((src_[i] == '+' || src_[i] == '-') && starts_with(i + 1, "#}")) {
        finish_tag(src_[i] == '-' ? skip_spaces(i + 3) : i + 3);
        return;
      }
      if (starts_with(i, "#}")) {
        size_t end = i + 2;
        if (opt_.trim_blocks && end < src_.size() && src_[end] == '\n') ++end;
        finish_tag(end);
        return;
      }
    }
    fail(tag, "Missing end of comment tag");
  }

  void lex_tag(size_t tag, bool block, size_t p) {
    push(block ? TokenType::BlockBegin : TokenType::VariableBegin, tag, "");
    std::vector<char> balance;
    while (true) {
      if (p >= src_.size()) {
        fail(tag, block ? "unexpected end of template, the statement block is not closed"
                        : "unexpected end of template, the print statement is not closed");
      }
      if (balance.empty()) {
        size_t end_len = 0;
        if (block) {
          end_len = block_end_length(p);
        } else if (starts_with(p, "-}}")) {
          end_len = skip_spaces(p + 3) - p;
        } else if (starts_with(p, "}}")) {
          end_len = 2;
        }
        if (end_len) {
          push(block ? TokenType::BlockEnd : TokenType::VariableEnd, p, "");
          finish_tag(p + end_len);
          return;
        }
      }
      size_t spaces = skip_spaces(p);
      if (spaces != p) {
        p = spaces;
        continue;
      }
      p = lex_expression_token(p, balance);
    }
  }

  size_t lex_expression_token(size_t p, std::vector<char>& balance) {
    char c = src_[p];
    if (size_t n = match_float(p)) {
      std::string text = strip_underscores(src_.substr(p, n));
      Token t{TokenType::Float, text, 0, std::strtod(text.c_str(), nullptr), 0, 0};
      set_position(t, p);
      tokens_.push_back(std::move(t));
      return p + n;
    }
    if (is_digit(c)) return lex_integer(p);
    if (is_ident_start(c)) {
      size_t e = p + 1;
      while (e < src_.size() && is_ident_char(src_[e])) ++e;
      push(TokenType::Name, p, src_.substr(p, e - p));
      return e;
    }
    if (c == '\'' || c == '"') return lex_string(p);
    static const char* kTwoCharOps[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* op : kTwoCharOps) {
      if (starts_with(p, op)) {
        push(TokenType::Operator, p, op);
        return p + 2;
      }
    }
    static const std::string_view kOneCharOps = "+-/*%~[](){}><=.:|,;";
    if (kOneCharOps.find(c) == std::string_view::npos) {
      fail(p, fmt::format("unexpected char '{}'", c));
    }
    if (c == '(' || c == '[' || c == '{') {
      balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (balance.empty()) fail(p, fmt::format("unexpected '{}'", c));
      if (balance.back() != c)
        fail(p, fmt::format("unexpected '{}', expected '{}'", c, balance.back()));
      balance.pop_back();
    }
    push(TokenType::Operator, p, std::string(1, c));
    return p + 1;
  }

  static std::string strip_underscores(std::string s) {
    s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
    return s;
  }

  // Digits with single underscores between them; returns the length matched.
  size_t match_digits(size_t p) const {
    size_t e = p;
    if (e >= src_.size() || !is_digit(src_[e])) return 0;
    while (e < src_.size()) {
      if (is_digit(src_[e])) {
        ++e;
      } else if (src_[e] == '_' && e + 1 < src_.size() && is_digit(src_[e + 1])) {
        e += 2;
      } else {
        break;
      }
    }
    return e - p;
  }

  // jinja2's float_re: digits, then a fraction and/or an exponent; not right after a '.'.
  size_t match_float(size_t p) const {
    if (p > 0 && src_[p - 1] == '.') return 0;
    size_t n = match_digits(p);
    if (n == 0) return 0;
    size_t e = p + n;
    bool fraction = false;
    if (e < src_.size() && src_[e] == '.') {
      if (size_t f = match_digits(e + 1)) {
        e += 1 + f;
        fraction = true;
      }
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t x = e + 1;
      if (x < src_.size() && (src_[x] == '+' || src_[x] == '-')) ++x;
      if (size_t d = match_digits(x)) return x + d - p;
    }
    return fraction ? e - p : 0;
  }

  size_t lex_integer(size_t p) {
    int base = 10;
    size_t start = p;
    if (src_[p] == '0' && p + 1 < src_.size()) {
      char b = static_cast<char>(src_[p + 1] | 0x20);
      base = b == 'x' ? 16 : b == 'o' ? 8 : b == 'b' ? 2 : 10;
      if (base != 10) start = p + 2;
    }
    size_t e = start;
    auto is_base_digit = [&](char ch) {
      if (base == 16) return std::isxdigit(static_cast<unsigned char>(ch)) != 0;
      if (base == 8) return ch >= '0' && ch <= '7';
      if (base == 2) return ch == '0' || ch == '1';
      return is_digit(ch);
    };
    while (e < src_.size() && (is_base_digit(src_[e]) || (src_[e] == '_' && e + 1 < src_.size() &&
                                                          is_base_digit(src_[e + 1])))) {
      ++e;
    }
    if (base != 10 && e == start) {  // "0x" without digits lexes as 0 followed by a name
      base = 10;
      e = p + 1;
    }
    std::string digits = strip_underscores(src_.substr(start, e - start));
    errno = 0;
    long long v = std::strtoll(digits.c_str(), nullptr, base);
    if (errno == ERANGE) fail(p, "integer literal does not fit in 64 bits");
    Token t{TokenType::Integer, src_.substr(p, e - p), v, 0, 0, 0};
    set_position(t, p);
    tokens_.push_back(std::move(t));
    return e;
  }

  size_t lex_string(size_t p) {
    char quote = src_[p];
    std::string value;
    size_t i = p + 1;
    while (true) {
      if (i >= src_.size()) fail(p, "unexpected end of string");
      char c = src_[i];
      if (c == quote) break;
      if (c != '\\') {
        value += c;
        ++i;
        continue;
      }
      if (i + 1 >= src_.size()) fail(p, "unexpected end of string");
      i = decode_escape(i, value);
    }
    push(TokenType::String, p, std::move(value));
    return i + 1;
  }

  // Python's unicode-escape decoding of one backslash sequence at `i`; returns the next index.
  size_t decode_escape(size_t i, std::string& value) {
    char e = src_[i + 1];
    auto hex = [&](size_t at, size_t count) -> char32_t {
      if (at + count > src_.size()) fail(i, "truncated \\x, \\u or \\U escape in string literal");
      char32_t cp = 0;
      for (size_t k = 0; k < count; ++k) {
        char h = src_[at + k];
        if (!std::isxdigit(static_cast<unsigned char>(h)))
          fail(i, "truncated \\x, \\u or \\U escape in string literal");
        cp = cp * 16 + static_cast<char32_t>(std::strtol(std::string(1, h).c_str(), nullptr, 16));
      }
      return cp;
    };
    switch (e) {
      case '\n':
        return i + 2;
      case '\\':
      case '\'':
      case '"':
        value += e;
        return i + 2;
      case 'a':
        value += '\a';
        return i + 2;
      case 'b':
        value += '\b';
        return i + 2;
      case 'f':
        value += '\f';
        return i + 2;
      case 'n':
        value += '\n';
        return i + 2;
      case 'r':
        value += '\r';
        return i + 2;
      case 't':
        value += '\t';
        return i + 2;
      case 'v':
        value += '\v';
        return i + 2;
      case 'x':
        utf8_append(value, hex(i + 2, 2));
        return i + 4;
      case 'u':
        utf8_append(value, hex(i + 2, 4));
        return i + 6;
      case 'U': {
        char32_t cp = hex(i + 2, 8);
        if (cp > 0x10FFFF) fail(i, "\\U escape out of the Unicode range");
        utf8_append(value, cp);
        return i + 10;
      }
      case 'N':
        fail(i, "\\N{...} escapes in string literals are not supported");
      default:
        break;
    }
    if (e >= '0' && e <= '7') {
      char32_t cp = 0;
      size_t k = i + 1;
      for (int n = 0; n < 3 && k < src_.size() && src_[k] >= '0' && src_[k] <= '7'; ++n, ++k) {
        cp = cp * 8 + static_cast<char32_t>(src_[k] - '0');
      }
      utf8_append(value, cp);
      return k;
    }
    value += '\\';  // unknown escapes stay as written
    return i + 1;
  }

  std::string src_;
  LexerOptions opt_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  bool line_starting_ = true;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source, const LexerOptions& options) {
  return Lexer(source, options).run();
}

}  // namespace nanovllm::jinja
