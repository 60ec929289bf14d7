// Python str operations on UTF-8 strings, by code point: strip, split, replace, case changes.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace nanovllm::jinja {

// str.strip/lstrip/rstrip; no chars: Unicode whitespace.
std::string py_strip(const std::string& s, const std::optional<std::string>& chars, bool left,
                     bool right);
// str.split / str.rsplit; no separator: runs of whitespace. maxsplit < 0: no limit.
std::vector<std::string> py_split(const std::string& s, const std::optional<std::string>& sep,
                                  int64_t maxsplit, bool from_right);
std::vector<std::string> py_splitlines(const std::string& s, bool keepends);
std::string py_replace(const std::string& s, const std::string& old, const std::string& with,
                       int64_t count);
std::string py_title(const std::string& s);       // str.title
std::string py_capitalize(const std::string& s);  // str.capitalize
std::string jinja_title(const std::string& s);    // the `title` filter's word splitting
// Code-point index of `sub` in s[start:end] (Python indices, None as nullopt); -1 if absent.
int64_t py_find(const std::string& s, const std::string& sub, std::optional<int64_t> start,
                std::optional<int64_t> end, bool from_right);
int64_t py_count(const std::string& s, const std::string& sub, std::optional<int64_t> start,
                 std::optional<int64_t> end);

// slice.indices(length): bounds clamped the way Python does before selecting.
struct SliceBounds {
  int64_t start, stop, step;
};
SliceBounds normalize_slice(size_t length, std::optional<int64_t> start,
                            std::optional<int64_t> stop, std::optional<int64_t> step);

// Python slice semantics: the indices selected by [start:stop:step] in a sequence of `length`.
std::vector<size_t> slice_indices(size_t length, std::optional<int64_t> start,
                                  std::optional<int64_t> stop, std::optional<int64_t> step);

}  // namespace nanovllm::jinja
