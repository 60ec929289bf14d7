// Sampling and logprobs on the GPU: host launchers. The rule is kernels/sampling_math.h's, the
// same one the CPU backend follows.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace nanovllm::cuda {

// Per-row controls, device arrays of `rows` entries (see SamplingTensors in kernels/backend.h).
struct SamplingArgs {
  const float* logits = nullptr;  // [rows, vocab]
  int64_t rows = 0;
  int64_t vocab = 0;
  const float* temperature = nullptr;
  const int32_t* top_k = nullptr;
  const float* top_p = nullptr;
  const int64_t* seed = nullptr;
  const int32_t* position = nullptr;
  int32_t* token_ids = nullptr;  // [rows] out; -1 where every logit is NaN
};

// Workspace bytes sample() needs on the current device: some for batches too small to give
// every SM a row, 0 otherwise.
size_t sample_workspace_bytes(int64_t rows, int64_t vocab);
void sample(const SamplingArgs& args, void* workspace, cudaStream_t stream);

struct LogprobsArgs {
  const float* logits = nullptr;  // [rows, vocab]
  int64_t rows = 0;
  int64_t vocab = 0;
  const int32_t* token_ids = nullptr;  // [rows]
  int num_top = 0;                     // 0 to 20
  float* logprob = nullptr;            // [rows]
  int32_t* rank = nullptr;             // [rows]
  int32_t* top_ids = nullptr;          // [rows, num_top]
  float* top_logprobs = nullptr;       // [rows, num_top]
};

void compute_logprobs(const LogprobsArgs& args, cudaStream_t stream);

}  // namespace nanovllm::cuda
