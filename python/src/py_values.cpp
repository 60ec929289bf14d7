#include "py_values.h"

#include <fmt/format.h>
#include <nanobind/stl/string.h>

#include <limits>

namespace nb = nanobind;

namespace nanovllm::python {

std::string python_type_name(nb::handle value) {
  return nb::cast<std::string>(
      nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(value.ptr()))).attr("__name__"));
}

void throw_type_error(std::string_view name, std::string_view expected, nb::handle value) {
  throw nb::type_error(
      fmt::format("{} must be {}, got {}", name, expected, python_type_name(value)).c_str());
}

void throw_value_error(const std::string& message) {
  throw nb::value_error(message.c_str());
}

int64_t to_int64(nb::handle value, std::string_view name) {
  // __index__ accepts Python ints and integer scalars such as numpy.int64.
  if (PyBool_Check(value.ptr()) || !PyIndex_Check(value.ptr()))
    throw_type_error(name, "an int", value);
  nb::object index = nb::steal(PyNumber_Index(value.ptr()));
  if (!index.is_valid()) throw nb::python_error();
  int overflow = 0;
  const long long result = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (overflow != 0)
    throw_value_error(fmt::format("{} is out of range: {}", name, nb::str(index).c_str()));
  return result;
}

int to_int(nb::handle value, std::string_view name) {
  const int64_t result = to_int64(value, name);
  if (result < std::numeric_limits<int>::min() || result > std::numeric_limits<int>::max())
    throw_value_error(fmt::format("{} is out of range: {}", name, result));
  return static_cast<int>(result);
}

uint64_t to_uint64(nb::handle value, std::string_view name) {
  if (PyBool_Check(value.ptr()) || !PyIndex_Check(value.ptr()))
    throw_type_error(name, "an int", value);
  nb::object index = nb::steal(PyNumber_Index(value.ptr()));
  if (!index.is_valid()) throw nb::python_error();
  const unsigned long long result = PyLong_AsUnsignedLongLong(index.ptr());
  if (PyErr_Occurred()) {
    PyErr_Clear();
    throw_value_error(
        fmt::format("{} must be in [0, 2**64), got {}", name, nb::str(index).c_str()));
  }
  return result;
}

double to_double(nb::handle value, std::string_view name) {
  PyObject* object = value.ptr();
  const PyNumberMethods* number = Py_TYPE(object)->tp_as_number;
  const bool is_number = PyFloat_Check(object) || PyIndex_Check(object) ||
                         (number != nullptr && number->nb_float != nullptr);
  if (PyBool_Check(object) || !is_number) throw_type_error(name, "a float", value);
  const double result = PyFloat_AsDouble(object);
  if (result == -1.0 && PyErr_Occurred()) throw nb::python_error();
  return result;
}

bool to_bool(nb::handle value, std::string_view name) {
  if (!PyBool_Check(value.ptr())) throw_type_error(name, "a bool", value);
  return value.ptr() == Py_True;
}

std::string to_string(nb::handle value, std::string_view name) {
  if (!PyUnicode_Check(value.ptr())) throw_type_error(name, "a str", value);
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(value.ptr(), &size);
  if (data == nullptr) throw nb::python_error();  // lone surrogates: UnicodeEncodeError
  return std::string(data, static_cast<size_t>(size));
}

std::string to_path(nb::handle value, std::string_view name) {
  if (!PyUnicode_Check(value.ptr()) && !PyObject_HasAttrString(value.ptr(), "__fspath__"))
    throw_type_error(name, "a str or os.PathLike", value);
  nb::object path = nb::steal(PyOS_FSPath(value.ptr()));
  if (!path.is_valid()) throw nb::python_error();
  return to_string(path, name);  // a bytes path is refused here
}

bool is_list_or_tuple(nb::handle value) {
  return PyList_Check(value.ptr()) || PyTuple_Check(value.ptr());
}

std::vector<int> to_int_list(nb::handle value, std::string_view name) {
  if (!is_list_or_tuple(value)) throw_type_error(name, "a list of ints", value);
  std::vector<int> result;
  result.reserve(nb::len(value));
  size_t i = 0;
  for (nb::handle item : value) {
    // Plain ints take the fast path; the element's name is formatted only for other types.
    int overflow = 0;
    const long id = PyLong_CheckExact(item.ptr()) ? PyLong_AsLongAndOverflow(item.ptr(), &overflow)
                                                  : to_int64(item, fmt::format("{}[{}]", name, i));
    if (overflow != 0 || id < std::numeric_limits<int>::min() ||
        id > std::numeric_limits<int>::max()) {
      throw_value_error(fmt::format("{}[{}] is out of range: {}", name, i, nb::str(item).c_str()));
    }
    result.push_back(static_cast<int>(id));
    ++i;
  }
  return result;
}

}  // namespace nanovllm::python
