// A small leveled logger writing to stderr. The level comes from NANOVLLM_LOG_LEVEL
// (debug, info, warn, error; default info).
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace nanovllm {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

LogLevel log_level();
void set_log_level(LogLevel level);
void log_write(LogLevel level, std::string_view message);

template <typename... Args>
void log(LogLevel level, fmt::format_string<Args...> format, Args&&... args) {
  if (level < log_level()) return;
  log_write(level, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace nanovllm

#define NVLLM_LOG_DEBUG(...) ::nanovllm::log(::nanovllm::LogLevel::kDebug, __VA_ARGS__)
#define NVLLM_LOG_INFO(...) ::nanovllm::log(::nanovllm::LogLevel::kInfo, __VA_ARGS__)
#define NVLLM_LOG_WARN(...) ::nanovllm::log(::nanovllm::LogLevel::kWarn, __VA_ARGS__)
#define NVLLM_LOG_ERROR(...) ::nanovllm::log(::nanovllm::LogLevel::kError, __VA_ARGS__)
