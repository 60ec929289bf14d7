#include "server/api_error.h"

namespace nanovllm {

ApiError::ApiError(int status, std::string message, std::string param)
    : std::runtime_error(std::move(message)), status_(status), param_(std::move(param)) {}

std::string ApiError::type() const {
  switch (status_) {
    case 400:
    case 413:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 404:
      return "not_found_error";
    case 405:
      return "method_not_allowed_error";
    case 503:
      return "service_unavailable_error";
    default:
      return status_ >= 500 ? "internal_server_error" : "invalid_request_error";
  }
}

nlohmann::ordered_json ApiError::body() const {
  nlohmann::ordered_json error = {{"message", what()}, {"type", type()}};
  error["param"] =
      param_.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(param_);
  error["code"] = status_;
  return {{"error", std::move(error)}};
}

}  // namespace nanovllm
