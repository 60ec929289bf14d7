#include "nanovllm/sampling_params.h"

#include <fmt/format.h>

#include <cmath>

#include "core/check.h"

namespace nanovllm {
namespace {

[[noreturn]] void reject(const std::string& message) {
  throw Error("invalid sampling params: " + message);
}

}  // namespace

void SamplingParams::validate() const {
  if (!std::isfinite(temperature) || temperature < 0.0f)
    reject(fmt::format("temperature must be a finite number >= 0, got {}", temperature));
  if (!std::isfinite(top_p) || top_p <= 0.0f || top_p > 1.0f)
    reject(fmt::format("top_p must be in (0, 1], got {}", top_p));
  if (max_tokens < 1) reject(fmt::format("max_tokens must be at least 1, got {}", max_tokens));
  if (top_k < -1) reject(fmt::format("top_k must be -1 or 0 (off) or positive, got {}", top_k));
  if (logprobs && (*logprobs < 0 || *logprobs > kMaxLogprobs))
    reject(fmt::format("logprobs must be in [0, {}], got {}", kMaxLogprobs, *logprobs));
  for (int id : stop_token_ids)
    if (id < 0) reject(fmt::format("stop_token_ids must be token ids >= 0, got {}", id));
  for (const std::string& text : stop)
    if (text.empty()) reject("stop strings must not be empty");
}

}  // namespace nanovllm
