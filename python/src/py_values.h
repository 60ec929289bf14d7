// Reading Python values into C++ ones with errors that name the argument: TypeError for a value
// of the wrong type, ValueError for one out of range. bool is not accepted where a number is
// expected (it is an int subclass, but passing one there is a mistake).
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace nanovllm::python {

// The Python type's name, for error messages.
std::string python_type_name(nanobind::handle value);

[[noreturn]] void throw_type_error(std::string_view name, std::string_view expected,
                                   nanobind::handle value);
[[noreturn]] void throw_value_error(const std::string& message);

int64_t to_int64(nanobind::handle value, std::string_view name);
int to_int(nanobind::handle value, std::string_view name);
uint64_t to_uint64(nanobind::handle value, std::string_view name);
double to_double(nanobind::handle value, std::string_view name);
bool to_bool(nanobind::handle value, std::string_view name);
std::string to_string(nanobind::handle value, std::string_view name);
// A str or os.PathLike naming a file or directory.
std::string to_path(nanobind::handle value, std::string_view name);

// A list or tuple (not a str, bytes or other iterable, which are more likely mistakes).
bool is_list_or_tuple(nanobind::handle value);
// A list or tuple of ints, e.g. token ids.
std::vector<int> to_int_list(nanobind::handle value, std::string_view name);

}  // namespace nanovllm::python
