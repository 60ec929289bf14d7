#include "nanovllm/bench_command.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/check.h"
#include "kernels/backend.h"
#include "nanovllm/llm.h"

namespace nanovllm {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Runs the requests; a rejected one aborts the benchmark, since its numbers would be meaningless.
std::vector<RequestOutput> generate_all(LLM& llm, const std::vector<Request>& requests,
                                        bool use_progress) {
  std::vector<RequestOutput> outputs = llm.generate(requests, use_progress);
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].ok()) {
      throw Error(fmt::format("benchmark request {} was rejected: {}", i, outputs[i].error));
    }
  }
  return outputs;
}

int64_t count_output_tokens(const std::vector<RequestOutput>& outputs) {
  int64_t total = 0;
  for (const RequestOutput& output : outputs)
    total += static_cast<int64_t>(output.token_ids.size());
  return total;
}

// bench.py's warm-up: generate(["Benchmark: "], SamplingParams()). Without a tokenizer the text
// cannot be encoded, so a short token-id prompt stands in for it.
void warm_up(LLM& llm) {
  const Prompt prompt = llm.tokenizer() != nullptr ? Prompt::from_text("Benchmark: ")
                                                   : Prompt::from_token_ids({1, 2, 3, 4});
  generate_all(llm, {Request{prompt, SamplingParams{}, ""}}, true);
}

nlohmann::ordered_json settings_json(const BenchOptions& options) {
  const EngineConfig& engine = options.engine.config;
  nlohmann::ordered_json settings = {
      {"model", options.model},
      {"load_format", engine.load_format},
      {"temperature", options.temperature},
      {"ignore_eos", true},
      {"max_num_seqs", engine.max_num_seqs},
      {"max_num_batched_tokens", engine.max_num_batched_tokens},
      {"max_model_len", engine.max_model_len},
      // As written on the command line (0.9), not the float's widened binary value.
      {"gpu_memory_utilization", std::stod(fmt::format("{}", engine.gpu_memory_utilization))},
      {"tensor_parallel_size", engine.tensor_parallel_size},
      {"enforce_eager", engine.enforce_eager},
      {"kvcache_block_size", engine.kvcache_block_size},
      {"num_kvcache_blocks", engine.num_kvcache_blocks},
      {"enable_prefix_caching", !options.engine.no_prefix_caching},
      {"async_scheduling", !options.engine.no_async_scheduling},
      {"seed", options.workload.seed},
      {"max_token_id", options.workload.max_token_id},
  };
  if (options.batch1) {
    settings["prompt_len"] = options.batch1_prompt_len;
    settings["warmup_tokens"] = options.batch1_warmup_tokens;
    settings["output_len"] = options.batch1_output_len;
  } else {
    settings["num_seqs"] = options.workload.num_seqs;
    settings["min_input_len"] = options.workload.min_input_len;
    settings["max_input_len"] = options.workload.max_input_len;
    settings["min_output_len"] = options.workload.min_output_len;
    settings["max_output_len"] = options.workload.max_output_len;
  }
  return settings;
}

// The details shared by both modes: the timed generate's statistics and the run's context.
nlohmann::ordered_json details_json(const LLM& llm, const BenchOptions& options,
                                    int64_t prompt_tokens, int64_t output_tokens, double seconds,
                                    double startup_seconds) {
  const GenerateStats& stats = llm.last_generate_stats();
  return {
      {"mode", options.batch1 ? "batch-1" : "throughput"},
      {"prompt_tokens", prompt_tokens},
      {"output_tokens", output_tokens},
      {"seconds", seconds},
      {"output_tok_s", seconds > 0 ? output_tokens / seconds : 0.0},
      {"prefill_seconds", stats.prefill_seconds},
      {"prefill_tokens", stats.prefill_tokens},
      {"prefill_steps", stats.prefill_steps},
      {"decode_seconds", stats.decode_seconds},
      {"decode_steps", stats.decode_steps},
      {"steps", stats.steps},
      {"mean_decode_batch_size", stats.mean_decode_batch_size()},
      {"host_ms_per_step", stats.host_ms_per_step()},
      {"device_wait_seconds", stats.device_wait_seconds},
      {"peak_memory_bytes", llm.memory_info().peak_allocated},
      {"startup_seconds", startup_seconds},
      {"device", llm.device()},
      {"dtype", llm.dtype()},
      {"settings", settings_json(options)},
  };
}

SamplingParams timed_params(const BenchOptions& options, int max_tokens) {
  SamplingParams params;
  params.temperature = static_cast<float>(options.temperature);
  params.ignore_eos = true;
  params.max_tokens = max_tokens;
  return params;
}

// Rejects bad settings before the model loads.
void validate(const BenchOptions& options) {
  timed_params(options, 1).validate();
  if (options.batch1) {
    if (options.batch1_prompt_len < 1 || options.batch1_warmup_tokens < 1 ||
        options.batch1_output_len < 1) {
      throw Error(fmt::format(
          "--batch-1-prompt-len, --batch-1-warmup-tokens and --batch-1-output-len must be at "
          "least 1, got {}, {} and {}",
          options.batch1_prompt_len, options.batch1_warmup_tokens, options.batch1_output_len));
    }
    if (options.workload.max_token_id < 0) {
      throw Error(fmt::format("--max-token-id must be non-negative, got {}",
                              options.workload.max_token_id));
    }
  } else {
    options.workload.validate();
  }
}

// bench.py: the whole workload in one generate() after the warm-up.
void run_throughput(LLM& llm, const BenchOptions& options, double startup_seconds) {
  const BenchWorkload workload = make_bench_workload(options.workload);
  std::vector<Request> requests;
  requests.reserve(workload.prompts.size());
  for (size_t i = 0; i < workload.prompts.size(); ++i) {
    requests.push_back({Prompt::from_token_ids(workload.prompts[i]),
                        timed_params(options, workload.max_tokens[i]), ""});
  }
  warm_up(llm);
  const Clock::time_point start = Clock::now();
  const std::vector<RequestOutput> outputs = generate_all(llm, requests, false);
  const double seconds = seconds_since(start);
  const int64_t total = workload.num_output_tokens();
  fmt::print("Total: {}tok, Time: {:.2f}s, Throughput: {:.2f}tok/s\n", total, seconds,
             total / seconds);
  // Out now, not at exit: a reader of the pipe (tools/gpu_energy.py) times the run by it.
  std::fflush(stdout);
  nlohmann::ordered_json details =
      details_json(llm, options, workload.num_prompt_tokens(), count_output_tokens(outputs),
                   seconds, startup_seconds);
  details["num_seqs"] = workload.prompts.size();
  fmt::print("{}\n", details.dump());
}

// run.sh's batch-1 decode: one prompt, a short warm-up generate, then the timed one.
void run_batch1(LLM& llm, const BenchOptions& options, double startup_seconds) {
  const std::vector<int> prompt = make_batch1_prompt(
      options.batch1_prompt_len, options.workload.max_token_id, options.workload.seed);
  const Prompt request_prompt = Prompt::from_token_ids(prompt);
  generate_all(llm,
               {Request{request_prompt, timed_params(options, options.batch1_warmup_tokens), ""}},
               false);
  const std::vector<Request> timed = {
      Request{request_prompt, timed_params(options, options.batch1_output_len), ""}};
  const Clock::time_point start = Clock::now();
  const std::vector<RequestOutput> outputs = generate_all(llm, timed, false);
  const double seconds = seconds_since(start);
  fmt::print("batch-1 decode: {} tokens in {:.3f} s = {:.1f} tok/s\n", options.batch1_output_len,
             seconds, options.batch1_output_len / seconds);
  nlohmann::ordered_json details =
      details_json(llm, options, static_cast<int64_t>(prompt.size()), count_output_tokens(outputs),
                   seconds, startup_seconds);
  details["ms_per_token"] = 1e3 * seconds / options.batch1_output_len;
  fmt::print("{}\n", details.dump());
}

}  // namespace

CLI::App* add_bench_command(CLI::App& app, BenchOptions& options) {
  CLI::App* command = app.add_subcommand(
      "bench", "Benchmark throughput on nano-vllm's bench.py workload, or batch-1 decode");
  command->add_option("--model", options.model, "Hugging Face model directory")->required();
  BenchWorkloadSpec& workload = options.workload;
  command->add_option("--num-seqs", workload.num_seqs, "sequences in the workload")
      ->capture_default_str();
  command->add_option("--min-input-len", workload.min_input_len, "shortest prompt")
      ->capture_default_str();
  command->add_option("--max-input-len", workload.max_input_len, "longest prompt")
      ->capture_default_str();
  command->add_option("--min-output-len", workload.min_output_len, "fewest tokens to generate")
      ->capture_default_str();
  command->add_option("--max-output-len", workload.max_output_len, "most tokens to generate")
      ->capture_default_str();
  command
      ->add_option("--max-token-id", workload.max_token_id,
                   "prompt tokens are uniform in [0, this]")
      ->capture_default_str();
  command->add_option("--seed", workload.seed, "Python random.seed() of the workload")
      ->capture_default_str();
  command->add_option("--temperature", options.temperature, "sampling temperature")
      ->capture_default_str();
  command->add_flag("--batch-1", options.batch1,
                    "batch-1 decode instead: one prompt, a warm-up, then a timed generate");
  command->add_option("--batch-1-prompt-len", options.batch1_prompt_len, "batch-1 prompt tokens")
      ->capture_default_str();
  command
      ->add_option("--batch-1-warmup-tokens", options.batch1_warmup_tokens,
                   "tokens the batch-1 warm-up generates")
      ->capture_default_str();
  command
      ->add_option("--batch-1-output-len", options.batch1_output_len,
                   "tokens the timed batch-1 generate decodes")
      ->capture_default_str();
  options.engine.add_to(*command);
  return command;
}

int run_bench(const BenchOptions& options) {
  const EngineConfig config = options.engine.resolve();
  validate(options);
  LLM llm(options.model, config);
  const double startup_seconds = seconds_since(options.process_start);
  fmt::print("start-up (process start to ready): {:.2f} s\n", startup_seconds);
  std::fflush(stdout);
  if (options.batch1) {
    run_batch1(llm, options, startup_seconds);
  } else {
    run_throughput(llm, options, startup_seconds);
  }
  return 0;
}

}  // namespace nanovllm
