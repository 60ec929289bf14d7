#include "nanovllm/llm.h"

#include <chrono>
#include <exception>
#include <optional>
#include <set>
#include <thread>

#include "core/check.h"
#include "core/logging.h"
#include "dist/in_process_group.h"
#include "engine/llm_engine.h"
#include "engine/model_runner.h"
#include "engine/tensor_parallel_executor.h"
#include "kernels/backend.h"
#include "llm/chat_prompt.h"
#include "model/model_config.h"
#include "model/model_registry.h"
#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace nanovllm {
namespace {

// "auto" is the GPU when there is one.
std::string resolve_device(const std::string& device) {
  if (device == "auto") return cuda_available() ? "cuda" : "cpu";
  return device;
}

// "auto" is the checkpoint's dtype on CUDA and float32 on the CPU, which computes only in fp32.
DType resolve_dtype(const std::string& dtype, const std::string& device, const ModelConfig& model) {
  DType resolved = DType::kF32;
  if (dtype == "auto") {
    resolved = device == "cpu" ? DType::kF32 : model.torch_dtype;
  } else if (dtype == "bfloat16") {
    resolved = DType::kBF16;
  } else if (dtype == "float16") {
    resolved = DType::kF16;
  } else if (dtype != "float32") {
    throw Error(
        fmt::format("unknown dtype '{}' (expected auto, bfloat16, float16 or float32)", dtype));
  }
  if (device == "cpu" && resolved != DType::kF32) {
    throw Error(
        fmt::format("the CPU backend computes in float32 only, not {}; use --dtype auto "
                    "or float32",
                    dtype));
  }
  return resolved;
}

std::unique_ptr<Backend> make_backend(const std::string& device, DType dtype) {
  if (device == "cpu") return make_cpu_backend();
  if (device == "cuda") return make_cuda_backend(dtype);
  throw Error(fmt::format("unknown device '{}' (expected cpu, cuda or auto)", device));
}

// The ranks of a tensor-parallel group: GPUs 0 to N - 1 through NCCL, or threads over the CPU
// backend sharing its cores.
std::unique_ptr<TensorParallelExecutor> make_tensor_parallel_executor(
    const EngineConfig& config, const std::filesystem::path& model_dir,
    const ModelConfig& model_config, DType dtype, LoadFormat format) {
  const int size = config.tensor_parallel_size;
  if (config.device == "cuda") {
    return std::make_unique<TensorParallelExecutor>(
        config, model_dir, model_config, format, make_gpu_group(size),
        [dtype](int rank, std::shared_ptr<Communicator> group) {
          return make_cuda_backend(dtype, rank, std::move(group));
        });
  }
  const int threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / size);
  return std::make_unique<TensorParallelExecutor>(
      config, model_dir, model_config, format, make_in_process_group(size),
      [threads](int, std::shared_ptr<Communicator> group) {
        return make_cpu_backend(threads, std::move(group));
      });
}

LoadFormat parse_load_format(const std::string& name) {
  if (name == "safetensors") return LoadFormat::kSafetensors;
  if (name == "dummy") return LoadFormat::kDummy;
  throw Error(fmt::format("unknown load format '{}' (expected safetensors or dummy)", name));
}

// Streams generated text; special tokens are left out of the text, as vLLM does by default.
class DetokenizerAdapter final : public TokenTextDecoder {
 public:
  explicit DetokenizerAdapter(const Tokenizer& tokenizer) : detokenizer_(tokenizer, true) {}
  std::string push(int token_id) override { return detokenizer_.push(token_id); }
  std::string finish() override { return detokenizer_.finish(); }

 private:
  IncrementalDetokenizer detokenizer_;
};

std::vector<int> eos_ids(const GenerationConfig& generation, const Tokenizer* tokenizer) {
  std::set<int> ids(generation.eos_token_ids.begin(), generation.eos_token_ids.end());
  if (tokenizer != nullptr) {
    if (auto id = tokenizer->eos_token_id()) ids.insert(*id);
  }
  return {ids.begin(), ids.end()};
}

}  // namespace

Prompt Prompt::from_text(std::string text) {
  Prompt prompt;
  prompt.kind = Kind::kText;
  prompt.text = std::move(text);
  return prompt;
}

Prompt Prompt::from_token_ids(std::vector<int> ids) {
  Prompt prompt;
  prompt.kind = Kind::kTokenIds;
  prompt.token_ids = std::move(ids);
  return prompt;
}

Prompt Prompt::from_messages(nlohmann::ordered_json messages, nlohmann::ordered_json kwargs) {
  Prompt prompt;
  prompt.kind = Kind::kMessages;
  prompt.messages = std::move(messages);
  prompt.chat_template_kwargs = std::move(kwargs);
  return prompt;
}

struct LLM::State {
  // One rank: the backend and model its runner drives. Several: the executor owns them (the
  // engine owns the executor).
  std::unique_ptr<Backend> backend;
  std::unique_ptr<CausalLM> model;
  const TensorParallelExecutor* tensor_parallel = nullptr;
  std::optional<Tokenizer> tokenizer;
  std::optional<ChatPrompt> chat;  // when the tokenizer has a chat template
  std::unique_ptr<LLMEngine> engine;
  GenerateStats last_stats;
  std::string device;
  std::string dtype;

  std::vector<int> to_token_ids(const Prompt& prompt) const {
    switch (prompt.kind) {
      case Prompt::Kind::kTokenIds:
        return prompt.token_ids;
      case Prompt::Kind::kText:
        if (!tokenizer) throw Error("text prompts need tokenizer.json in the model directory");
        return tokenizer->encode(prompt.text);
      case Prompt::Kind::kMessages:
        if (!chat) throw Error("chat messages need a tokenizer with a chat_template");
        // The template writes the special tokens itself, as transformers' chat pipeline does.
        return tokenizer->encode(chat->render(prompt.messages, true, prompt.chat_template_kwargs));
    }
    return {};
  }
};

LLM::LLM(const std::filesystem::path& model_dir, const EngineConfig& requested)
    : state_(std::make_unique<State>()) {
  const auto start = std::chrono::steady_clock::now();
  requested.validate();
  EngineConfig config = requested;
  config.device = resolve_device(requested.device);
  const ModelConfig model_config = load_model_config(model_dir);
  const DType dtype = resolve_dtype(config.dtype, config.device, model_config);
  const GenerationConfig generation = load_generation_config(model_dir, model_config);
  if (std::filesystem::exists(model_dir / "tokenizer.json")) {
    state_->tokenizer = Tokenizer::from_dir(model_dir);
    if (state_->tokenizer->chat_template()) state_->chat.emplace(*state_->tokenizer);
  }
  state_->device = config.device;
  state_->dtype = dtype_name(dtype);
  std::unique_ptr<ModelExecutor> runner;
  const LoadFormat format = parse_load_format(config.load_format);
  if (config.tensor_parallel_size > 1) {
    auto executor = make_tensor_parallel_executor(config, model_dir, model_config, dtype, format);
    state_->tensor_parallel = executor.get();
    runner = std::move(executor);
  } else {
    state_->backend = make_backend(config.device, dtype);
    state_->model = load_causal_lm(model_dir, model_config, *state_->backend, format);
    runner = std::make_unique<ModelRunner>(config, *state_->backend, *state_->model);
  }
  TokenTextDecoderFactory decoders;
  if (state_->tokenizer) {
    const Tokenizer* tokenizer = &*state_->tokenizer;
    decoders = [tokenizer](std::span<const int>) {
      return std::make_unique<DetokenizerAdapter>(*tokenizer);
    };
  }
  state_->engine = std::make_unique<LLMEngine>(
      config, std::move(runner), eos_ids(generation, tokenizer()), std::move(decoders));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  NVLLM_LOG_INFO(
      "loaded {} ({}, {} layers, hidden {}, vocab {}) on {} in {} in {:.2f} s; KV cache {} "
      "blocks of {} tokens",
      model_dir.string(), model_config.architecture, model_config.num_hidden_layers,
      model_config.hidden_size, model_config.vocab_size, config.device, dtype_name(dtype), seconds,
      state_->engine->limits().num_kvcache_blocks, state_->engine->limits().block_size);
}

LLM::~LLM() = default;

const GenerateStats& LLM::last_generate_stats() const {
  return state_->last_stats;
}

DeviceMemoryInfo LLM::memory_info() const {
  if (state_->tensor_parallel != nullptr) return state_->tensor_parallel->memory_info();
  return state_->backend->memory_info();
}

const std::string& LLM::device() const {
  return state_->device;
}

const std::string& LLM::dtype() const {
  return state_->dtype;
}

const Tokenizer* LLM::tokenizer() const {
  return state_->tokenizer ? &*state_->tokenizer : nullptr;
}

std::string LLM::apply_chat_template(const nlohmann::ordered_json& messages,
                                     const nlohmann::ordered_json& kwargs) const {
  if (!state_->chat) throw Error("the model directory has no tokenizer with a chat_template");
  return state_->chat->render(messages, true, kwargs);
}

std::vector<int> LLM::prompt_token_ids(const Prompt& prompt) const {
  return state_->to_token_ids(prompt);
}

LLMEngine& LLM::engine() {
  return *state_->engine;
}

const LLMEngine& LLM::engine() const {
  return *state_->engine;
}

std::optional<std::string> LLM::check_request(const std::vector<int>& prompt_token_ids,
                                              const SamplingParams& params) const {
  return state_->engine->check_request(prompt_token_ids, params);
}

std::vector<RequestOutput> LLM::generate(const std::vector<Request>& requests, bool use_progress,
                                         const GenerateHooks& hooks) {
  std::vector<RequestOutput> outputs(requests.size());
  std::vector<std::vector<int>> prompts;
  std::vector<SamplingParams> params;
  std::vector<size_t> runnable;  // input index of each prompt that runs
  for (size_t i = 0; i < requests.size(); ++i) {
    outputs[i].error = requests[i].error;
    if (outputs[i].ok()) {
      try {
        prompts.push_back(state_->to_token_ids(requests[i].prompt));
        params.push_back(requests[i].params);
        runnable.push_back(i);
        continue;
      } catch (const std::exception& error) {
        outputs[i].error = error.what();
      }
    }
    if (hooks.on_output) hooks.on_output(i, outputs[i]);
  }
  state_->last_stats = GenerateStats{};
  if (!prompts.empty()) {
    GenerateCallbacks callbacks;
    callbacks.should_stop = hooks.should_stop;
    if (hooks.on_output) {
      callbacks.on_output = [&](size_t k, const RequestOutput& output) {
        hooks.on_output(runnable[k], output);
      };
    }
    std::vector<RequestOutput> ran =
        state_->engine->generate(prompts, params, use_progress, callbacks);
    state_->last_stats = state_->engine->last_generate_stats();
    for (size_t k = 0; k < ran.size(); ++k) outputs[runnable[k]] = std::move(ran[k]);
  }
  return outputs;
}

}  // namespace nanovllm
