// The benchmark workloads nano-vllm measures, drawn from Python's random stream in the same order
// as its scripts, so token counts (and the prompts themselves) match the Python runs exactly.
#pragma once

#include <cstdint>
#include <vector>

namespace nanovllm {

// bench.py: seed(S); prompts = [[randint(0, T) for _ in range(randint(Imin, Imax))] for _ in
// range(N)]; then max_tokens = randint(Omin, Omax) for each of the N requests.
struct BenchWorkloadSpec {
  int num_seqs = 256;
  int min_input_len = 100;
  int max_input_len = 1024;
  int min_output_len = 100;
  int max_output_len = 1024;
  int max_token_id = 10000;  // prompt tokens are uniform in [0, max_token_id]
  uint64_t seed = 0;

  // Throws Error naming the first inconsistent field.
  void validate() const;
};

struct BenchWorkload {
  std::vector<std::vector<int>> prompts;
  std::vector<int> max_tokens;  // one per prompt

  int64_t num_prompt_tokens() const;
  int64_t num_output_tokens() const;
};

BenchWorkload make_bench_workload(const BenchWorkloadSpec& spec);

// run.sh's batch-1 decode: seed(S); one prompt of `prompt_len` randint(0, max_token_id) tokens.
std::vector<int> make_batch1_prompt(int prompt_len, int max_token_id, uint64_t seed);

}  // namespace nanovllm
