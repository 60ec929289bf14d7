#include "jinja/json_dump.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "jinja/error.h"
#include "jinja/unicode.h"
#include "jinja/value_format.h"

namespace nanovllm::jinja {

namespace {

void dump_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (char32_t c : utf8_decode(s)) {
    switch (c) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      default:
        break;
    }
    if (c < 0x20 || (ensure_ascii && c >= 0x7F)) {
      if (c >= 0x10000) {
        char32_t v = c - 0x10000;
        out += fmt::format("\\u{:04x}\\u{:04x}", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
      } else {
        out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
      }
    } else {
      utf8_append(out, c);
    }
  }
  out += '"';
}

std::string float_json(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return format_float_repr(d);
}

// Dict keys become strings the way json.dumps converts them.
std::string key_string(const Value& k) {
  switch (k.kind()) {
    case Value::Kind::String:
      return k.str();
    case Value::Kind::Int:
      return std::to_string(k.as_int());
    case Value::Kind::Float:
      return float_json(k.as_double());
    case Value::Kind::Bool:
      return k.as_bool() ? "true" : "false";
    case Value::Kind::None:
      return "null";
    default:
      runtime_fail("keys must be str, int, float, bool or None, not " + k.type_name());
  }
}

class Dumper {
 public:
  explicit Dumper(const JsonDumpOptions& options) : opt_(options) {}

  void dump(const Value& v, int depth) {
    // Python's json.dumps raises RecursionError long before this.
    if (depth > 500) runtime_fail("maximum nesting depth exceeded while writing JSON");
    switch (v.kind()) {
      case Value::Kind::None:
        out_ += "null";
        return;
      case Value::Kind::Bool:
        out_ += v.as_bool() ? "true" : "false";
        return;
      case Value::Kind::Int:
        out_ += std::to_string(v.as_int());
        return;
      case Value::Kind::Float:
        out_ += float_json(v.as_double());
        return;
      case Value::Kind::String:
        dump_string(out_, v.str(), opt_.ensure_ascii);
        return;
      case Value::Kind::List:
        if (v.list_data().flavor == SeqFlavor::List || v.list_data().flavor == SeqFlavor::Tuple) {
          dump_array(v.items(), depth);
          return;
        }
        break;
      case Value::Kind::Dict:
        dump_object(v.dict_data(), depth);
        return;
      default:
        break;
    }
    runtime_fail("Object of type " + v.type_name() + " is not JSON serializable");
  }

  std::string take() { return std::move(out_); }

 private:
  void newline(int depth) {
    if (!opt_.indent) return;
    check_built_size(out_.size() + 1 + opt_.indent->size() * static_cast<size_t>(depth));
    out_ += '\n';
    for (int i = 0; i < depth; ++i) out_ += *opt_.indent;
  }

  void dump_array(const ValueList& items, int depth) {
    if (items.empty()) {
      out_ += "[]";
      return;
    }
    out_ += '[';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out_ += opt_.item_separator;
      newline(depth + 1);
      dump(items[i], depth + 1);
    }
    newline(depth);
    out_ += ']';
  }

  void dump_object(const DictData& d, int depth) {
    if (d.entries.empty()) {
      out_ += "{}";
      return;
    }
    std::vector<std::pair<std::string, const Value*>> entries;
    entries.reserve(d.entries.size());
    for (const auto& [k, val] : d.entries) entries.emplace_back(key_string(k), &val);
    if (opt_.sort_keys) {
      std::stable_sort(entries.begin(), entries.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
    }
    out_ += '{';
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i) out_ += opt_.item_separator;
      newline(depth + 1);
      dump_string(out_, entries[i].first, opt_.ensure_ascii);
      out_ += opt_.key_separator;
      dump(*entries[i].second, depth + 1);
    }
    newline(depth);
    out_ += '}';
  }

  const JsonDumpOptions& opt_;
  std::string out_;
};

}  // namespace

std::string json_dumps(const Value& v, const JsonDumpOptions& options) {
  Dumper dumper(options);
  dumper.dump(v, 0);
  return dumper.take();
}

}  // namespace nanovllm::jinja
