// Special tokens added around one encoded sequence when encode() is asked to add them
// (tokenizer.json "post_processor", or tokenizer_config.json's add_bos_token/add_eos_token).
#pragma once

#include <vector>

namespace nanovllm {

class PostProcessor {
 public:
  PostProcessor() = default;
  PostProcessor(std::vector<int> prefix, std::vector<int> suffix)
      : prefix_(std::move(prefix)), suffix_(std::move(suffix)) {}

  // The processor that runs this one and then `after`.
  PostProcessor then(const PostProcessor& after) const {
    std::vector<int> prefix = after.prefix_, suffix = suffix_;
    prefix.insert(prefix.end(), prefix_.begin(), prefix_.end());
    suffix.insert(suffix.end(), after.suffix_.begin(), after.suffix_.end());
    return PostProcessor(std::move(prefix), std::move(suffix));
  }

  std::vector<int> apply(std::vector<int> ids) const {
    if (prefix_.empty() && suffix_.empty()) return ids;
    std::vector<int> out;
    out.reserve(prefix_.size() + ids.size() + suffix_.size());
    out.insert(out.end(), prefix_.begin(), prefix_.end());
    out.insert(out.end(), ids.begin(), ids.end());
    out.insert(out.end(), suffix_.begin(), suffix_.end());
    return out;
  }

  const std::vector<int>& prefix() const { return prefix_; }
  const std::vector<int>& suffix() const { return suffix_; }

 private:
  std::vector<int> prefix_, suffix_;
};

}  // namespace nanovllm
