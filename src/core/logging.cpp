#include "core/logging.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "core/check.h"

namespace nanovllm {
namespace {

LogLevel level_from_env() {
  const char* value = std::getenv("NANOVLLM_LOG_LEVEL");
  if (value == nullptr) return LogLevel::kInfo;
  const std::string name(value);
  if (name == "debug") return LogLevel::kDebug;
  if (name == "info") return LogLevel::kInfo;
  if (name == "warn" || name == "warning") return LogLevel::kWarn;
  if (name == "error") return LogLevel::kError;
  std::fprintf(stderr, "[nanovllm warn] unknown NANOVLLM_LOG_LEVEL '%s', using info\n", value);
  return LogLevel::kInfo;
}

std::atomic<LogLevel>& current_level() {
  static std::atomic<LogLevel> level{level_from_env()};
  return level;
}

const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "?";
}

}  // namespace

LogLevel log_level() {
  return current_level().load(std::memory_order_relaxed);
}
void set_log_level(LogLevel level) {
  current_level().store(level);
}

void log_write(LogLevel level, std::string_view message) {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  std::fprintf(stderr, "[nanovllm %s] %.*s\n", level_name(level), static_cast<int>(message.size()),
               message.data());
}

void fail_check(const char* file, int line, const std::string& message) {
  throw Error(fmt::format("{} ({}:{})", message, file, line));
}

}  // namespace nanovllm
