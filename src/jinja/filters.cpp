#include "jinja/filters.h"

#include <string>

#include "jinja/error.h"

namespace nanovllm::jinja {

namespace {

template <size_t N>
struct Unsupported {
  static Value fn(Evaluator&, const Value&, CallArgs&);
};

// jinja2 builtin filters this engine does not implement: known names, so templates that never
// run them still parse, and a clear error when one runs.
const char* const kUnsupportedFilters[] = {"attr",      "filesizeformat", "groupby",   "pprint",
                                           "random",    "slice",          "striptags", "truncate",
                                           "urlencode", "urlize",         "wordwrap",  "xmlattr"};

template <size_t N>
Value Unsupported<N>::fn(Evaluator&, const Value&, CallArgs&) {
  runtime_fail(std::string("the '") + kUnsupportedFilters[N] +
               "' filter is not supported by this template engine");
}

template <size_t... I>
FilterFn unsupported_filter(std::string_view name, std::index_sequence<I...>) {
  FilterFn found = nullptr;
  ((name == kUnsupportedFilters[I] ? (found = &Unsupported<I>::fn, 0) : 0), ...);
  return found;
}

}  // namespace

FilterFn find_filter(std::string_view name) {
  for (const FilterTable* table : {&string_filters(), &sequence_filters()}) {
    for (const auto& [n, fn] : *table) {
      if (name == n) return fn;
    }
  }
  return unsupported_filter(name, std::make_index_sequence<std::size(kUnsupportedFilters)>{});
}

}  // namespace nanovllm::jinja
