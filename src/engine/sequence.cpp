#include "engine/sequence.h"

#include <algorithm>

#include "core/check.h"

namespace nanovllm {

Sequence::Sequence(int64_t id, std::vector<int> prompt_token_ids, SamplingParams params,
                   uint64_t seed)
    : id(id),
      token_ids(std::move(prompt_token_ids)),
      num_prompt_tokens(static_cast<int>(token_ids.size())),
      params(std::move(params)),
      seed(seed) {
  NVLLM_CHECK_GT(num_prompt_tokens, 0);
}

std::span<const int> Sequence::block_tokens(int i, int block_size) const {
  const int begin = i * block_size;
  NVLLM_CHECK_MSG(begin < num_tokens(), "block {} of a {}-token sequence", i, num_tokens());
  const int end = std::min(begin + block_size, num_tokens());
  return std::span<const int>(token_ids).subspan(begin, end - begin);
}

std::span<const int> Sequence::prompt_token_ids() const {
  return std::span<const int>(token_ids).first(num_prompt_tokens);
}

std::span<const int> Sequence::completion_token_ids() const {
  return std::span<const int>(token_ids).subspan(num_prompt_tokens);
}

}  // namespace nanovllm
