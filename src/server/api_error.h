// An error answered to an HTTP client in the OpenAI shape:
// {"error": {"message", "type", "param", "code"}}.
#pragma once

#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>

namespace nanovllm {

class ApiError : public std::runtime_error {
 public:
  // `param` names the request field at fault ("" = none).
  ApiError(int status, std::string message, std::string param = "");

  int status() const { return status_; }
  const std::string& param() const { return param_; }
  // The OpenAI error type for the status ("invalid_request_error", "not_found_error", ...).
  std::string type() const;
  nlohmann::ordered_json body() const;

  static ApiError bad_request(std::string message, std::string param = "") {
    return ApiError(400, std::move(message), std::move(param));
  }

 private:
  int status_;
  std::string param_;
};

}  // namespace nanovllm
