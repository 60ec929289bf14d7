#include "nanovllm/bench_workload.h"

#include "core/check.h"
#include "nanovllm/python_random.h"

namespace nanovllm {

void BenchWorkloadSpec::validate() const {
  if (num_seqs < 1) throw Error(fmt::format("--num-seqs must be at least 1, got {}", num_seqs));
  if (min_input_len < 1)
    throw Error(fmt::format("--min-input-len must be at least 1, got {}", min_input_len));
  if (max_input_len < min_input_len)
    throw Error(fmt::format("--max-input-len {} is below --min-input-len {}", max_input_len,
                            min_input_len));
  if (min_output_len < 1)
    throw Error(fmt::format("--min-output-len must be at least 1, got {}", min_output_len));
  if (max_output_len < min_output_len)
    throw Error(fmt::format("--max-output-len {} is below --min-output-len {}", max_output_len,
                            min_output_len));
  if (max_token_id < 0)
    throw Error(fmt::format("--max-token-id must be non-negative, got {}", max_token_id));
}

int64_t BenchWorkload::num_prompt_tokens() const {
  int64_t total = 0;
  for (const std::vector<int>& prompt : prompts) total += static_cast<int64_t>(prompt.size());
  return total;
}

int64_t BenchWorkload::num_output_tokens() const {
  int64_t total = 0;
  for (int tokens : max_tokens) total += tokens;
  return total;
}

BenchWorkload make_bench_workload(const BenchWorkloadSpec& spec) {
  spec.validate();
  PythonRandom random(spec.seed);
  BenchWorkload workload;
  workload.prompts.resize(spec.num_seqs);
  for (std::vector<int>& prompt : workload.prompts) {
    // Python evaluates range(randint(...)) before the tokens of the list.
    prompt.resize(random.randint(spec.min_input_len, spec.max_input_len));
    for (int& token : prompt) token = static_cast<int>(random.randint(0, spec.max_token_id));
  }
  workload.max_tokens.resize(spec.num_seqs);
  for (int& tokens : workload.max_tokens) {
    tokens = static_cast<int>(random.randint(spec.min_output_len, spec.max_output_len));
  }
  return workload;
}

std::vector<int> make_batch1_prompt(int prompt_len, int max_token_id, uint64_t seed) {
  if (prompt_len < 1)
    throw Error(fmt::format("--batch-1-prompt-len must be at least 1, got {}", prompt_len));
  if (max_token_id < 0)
    throw Error(fmt::format("--max-token-id must be non-negative, got {}", max_token_id));
  PythonRandom random(seed);
  std::vector<int> prompt(prompt_len);
  for (int& token : prompt) token = static_cast<int>(random.randint(0, max_token_id));
  return prompt;
}

}  // namespace nanovllm
