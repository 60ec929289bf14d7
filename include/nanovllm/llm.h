// The offline inference entry point: a model directory in, prompts (text, token ids or chat
// messages) in, outputs in input order out.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nanovllm/engine_config.h"
#include "nanovllm/generate_stats.h"
#include "nanovllm/request_output.h"
#include "nanovllm/sampling_params.h"

namespace nanovllm {

class Tokenizer;
class LLMEngine;          // engine/llm_engine.h
struct DeviceMemoryInfo;  // kernels/backend.h

// One request's prompt: exactly one of the three forms.
struct Prompt {
  enum class Kind { kText, kTokenIds, kMessages };
  Kind kind = Kind::kText;
  std::string text;
  std::vector<int> token_ids;
  nlohmann::ordered_json messages;  // chat messages, rendered with the chat template
  nlohmann::ordered_json chat_template_kwargs =
      nlohmann::ordered_json::object();  // e.g. enable_thinking

  static Prompt from_text(std::string text);
  static Prompt from_token_ids(std::vector<int> ids);
  static Prompt from_messages(nlohmann::ordered_json messages,
                              nlohmann::ordered_json kwargs = nlohmann::ordered_json::object());
};

struct Request {
  Prompt prompt;
  SamplingParams params;
  std::string error;  // when set, the request fails with this message without running
};

// Optional callbacks for one generate() call; both run on the calling thread.
struct GenerateHooks {
  // Called once per request as soon as its output is final (finished, rejected or failed), in
  // completion order; `index` is the request's position in the input.
  std::function<void(size_t index, const RequestOutput& output)> on_output;
  // Polled between engine steps; returning a non-empty reason stops generate(): every unfinished
  // request comes back with `error` set to that reason (and goes through on_output), all of their
  // KV blocks are freed, and the LLM stays usable for the next generate().
  std::function<std::string()> should_stop;
};

class LLM {
 public:
  // Loads config, weights and (when the directory has tokenizer.json) the tokenizer.
  // Throws Error naming the file and the problem for a bad model directory.
  LLM(const std::filesystem::path& model_dir, const EngineConfig& config);
  ~LLM();
  LLM(const LLM&) = delete;
  LLM& operator=(const LLM&) = delete;

  // Runs every request to completion; outputs are in input order. A request that cannot run
  // (its `error` already set, or a prompt that cannot be encoded, or one the engine rejects)
  // or that fails while it runs (its sampling, detokenization or KV blocks) comes back with
  // `error` set; the others are unaffected. A failure of the engine as a whole (the device,
  // memory for a batch) gives every unfinished request an error naming it.
  std::vector<RequestOutput> generate(const std::vector<Request>& requests,
                                      bool use_progress = true, const GenerateHooks& hooks = {});

  // Why generate() would reject a request with these prompt tokens and params (invalid params,
  // an empty or too long prompt, ids outside the vocabulary), or nullopt.
  std::optional<std::string> check_request(const std::vector<int>& prompt_token_ids,
                                           const SamplingParams& params) const;

  // What the last generate() did (all zeros when it ran no request).
  const GenerateStats& last_generate_stats() const;
  // The backend's memory use (all zeros on the CPU); include kernels/backend.h to use it.
  DeviceMemoryInfo memory_info() const;
  // The device and compute dtype the engine runs on, "auto" resolved ("cuda", "bfloat16", ...).
  const std::string& device() const;
  const std::string& dtype() const;

  // nullptr when the model directory has no tokenizer (token-id prompts still work).
  const Tokenizer* tokenizer() const;
  // Renders chat messages with the tokenizer's chat template (with add_generation_prompt).
  std::string apply_chat_template(const nlohmann::ordered_json& messages,
                                  const nlohmann::ordered_json& kwargs) const;
  // The token ids generate() runs for `prompt`; throws Error when it cannot be encoded (no
  // tokenizer or chat template, invalid UTF-8, a template error). Safe from many threads.
  std::vector<int> prompt_token_ids(const Prompt& prompt) const;

  // The step-level engine, for callers that drive requests themselves (a server's engine
  // thread). Only one thread may use it at a time, and never during generate().
  LLMEngine& engine();
  const LLMEngine& engine() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace nanovllm
