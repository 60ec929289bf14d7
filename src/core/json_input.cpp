#include "core/json_input.h"

#include <fmt/format.h>

#include "core/check.h"

namespace nanovllm {
namespace {

constexpr size_t kMaxExcerpt = 80;

std::string ascii_only(std::string text) {
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  }
  return text;
}

// A scalar as JSON text; a string is cut to about kMaxExcerpt bytes before it is escaped.
template <typename Json>
std::string scalar_excerpt(const Json& value) {
  if (!value.is_string()) return value.dump();
  const auto& text = value.template get_ref<const std::string&>();
  const auto quote = [](const std::string& s) {
    return Json(s).dump(-1, ' ', false, Json::error_handler_t::replace);
  };
  if (text.size() <= kMaxExcerpt) return quote(text);
  size_t end = kMaxExcerpt;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;  // UTF-8
  return quote(text.substr(0, end)) + "...";
}

template <typename Json>
std::string item_excerpt(const Json& item) {
  if (item.is_array()) return item.empty() ? "[]" : "[...]";
  if (item.is_object()) return item.empty() ? "{}" : "{...}";
  return scalar_excerpt(item);
}

}  // namespace

template <typename Json>
Json parse_json(std::string_view text, int max_depth) {
  // The callback sees each container as it opens, `depth` being the containers already open:
  // refusing there stops the parse before any deeper value exists.
  auto limit_depth = [&](int depth, typename Json::parse_event_t event, Json&) {
    if ((event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start) &&
        depth >= max_depth) {
      throw Error(fmt::format("the JSON nests deeper than {} levels, the limit", max_depth));
    }
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), limit_depth);
  } catch (const typename Json::out_of_range& error) {  // 1e400
    throw Error(ascii_only(fmt::format("a number in the JSON is out of range: {}", error.what())));
  } catch (const typename Json::exception& error) {
    throw Error(ascii_only(fmt::format("invalid JSON: {}", error.what())));
  }
}

template <typename Json>
std::string json_excerpt(const Json& value) {
  if (!value.is_array() && !value.is_object()) return scalar_excerpt(value);
  const bool array = value.is_array();
  std::string text = array ? "[" : "{";
  bool first = true;
  for (auto it = value.begin(); it != value.end(); ++it) {
    if (text.size() > kMaxExcerpt) {
      text += ", ...";
      break;
    }
    if (!first) text += ", ";
    first = false;
    if (!array) text += scalar_excerpt(Json(it.key())) + ": ";
    text += item_excerpt(*it);
  }
  return text + (array ? "]" : "}");
}

template nlohmann::json parse_json<nlohmann::json>(std::string_view, int);
template nlohmann::ordered_json parse_json<nlohmann::ordered_json>(std::string_view, int);
template std::string json_excerpt<nlohmann::json>(const nlohmann::json&);
template std::string json_excerpt<nlohmann::ordered_json>(const nlohmann::ordered_json&);

}  // namespace nanovllm
