#include "py_json.h"

#include <fmt/format.h>

#include <string>

#include "core/json_input.h"
#include "py_values.h"

namespace nb = nanobind;

namespace nanovllm::python {

namespace {

nlohmann::ordered_json to_json_at(nb::handle value, std::string_view name, int depth) {
  PyObject* object = value.ptr();
  if (object == Py_None) return nullptr;
  if (PyBool_Check(object)) return object == Py_True;
  if (PyLong_Check(object)) return to_int64(value, name);
  if (PyFloat_Check(object)) return PyFloat_AsDouble(object);
  if (PyUnicode_Check(object)) return to_string(value, name);
  const bool container = is_list_or_tuple(value) || PyDict_Check(object);
  // Bounded like parsed JSON (core/json_input.h); a container that holds itself ends here too.
  if (container && depth >= kMaxJsonDepth) {
    throw_value_error(
        fmt::format("{}: nested deeper than {} levels, the limit", name, kMaxJsonDepth));
  }
  if (is_list_or_tuple(value)) {
    nlohmann::ordered_json array = nlohmann::ordered_json::array();
    size_t i = 0;
    for (nb::handle item : value)
      array.push_back(to_json_at(item, fmt::format("{}[{}]", name, i++), depth + 1));
    return array;
  }
  if (PyDict_Check(object)) {
    nlohmann::ordered_json dict = nlohmann::ordered_json::object();
    for (auto [key, item] : nb::borrow<nb::dict>(value)) {
      if (!PyUnicode_Check(key.ptr())) throw_type_error(fmt::format("{} keys", name), "str", key);
      const std::string key_string = to_string(key, name);
      dict[key_string] = to_json_at(item, fmt::format("{}['{}']", name, key_string), depth + 1);
    }
    return dict;
  }
  throw_type_error(name, "a dict, list, str, int, float, bool or None", value);
}

}  // namespace

nlohmann::ordered_json to_json(nb::handle value, std::string_view name) {
  return to_json_at(value, name, 0);
}

nb::object from_json(const nlohmann::ordered_json& value) {
  switch (value.type()) {
    case nlohmann::ordered_json::value_t::null:
      return nb::none();
    case nlohmann::ordered_json::value_t::boolean:
      return nb::bool_(value.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return nb::int_(value.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned:
      return nb::steal(PyLong_FromUnsignedLongLong(value.get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float:
      return nb::float_(value.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return nb::str(value.get_ref<const std::string&>().data(),
                     value.get_ref<const std::string&>().size());
    case nlohmann::ordered_json::value_t::array: {
      nb::list list;
      for (const auto& item : value) list.append(from_json(item));
      return list;
    }
    case nlohmann::ordered_json::value_t::object: {
      nb::dict dict;
      for (const auto& [key, item] : value.items())
        dict[nb::str(key.data(), key.size())] = from_json(item);
      return dict;
    }
    default:
      throw nb::type_error(
          fmt::format("cannot convert JSON {} to Python", value.type_name()).c_str());
  }
}

}  // namespace nanovllm::python
