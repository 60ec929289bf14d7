#include "server/generation_stream.h"

namespace nanovllm {

void ChoiceUpdate::merge(ChoiceUpdate&& later) {
  text += later.text;
  token_ids.insert(token_ids.end(), later.token_ids.begin(), later.token_ids.end());
  logprobs.insert(logprobs.end(), std::make_move_iterator(later.logprobs.begin()),
                  std::make_move_iterator(later.logprobs.end()));
  if (later.finished) {
    finished = true;
    finish_reason = std::move(later.finish_reason);
    error = std::move(later.error);
    error_status = later.error_status;
    num_prompt_tokens = later.num_prompt_tokens;
    num_completion_tokens = later.num_completion_tokens;
  }
}

void GenerationStream::publish(size_t choice, ChoiceUpdate update) {
  bool notify = false;
  {
    std::lock_guard lock(mutex_);
    std::optional<ChoiceUpdate>& pending = pending_.at(choice);
    if (pending) {
      pending->merge(std::move(update));
    } else {
      pending = std::move(update);
    }
    notify = std::exchange(notify_, false);
  }
  if (notify && notifier_) notifier_();
}

std::vector<std::pair<size_t, ChoiceUpdate>> GenerationStream::take() {
  std::vector<std::pair<size_t, ChoiceUpdate>> updates;
  std::lock_guard lock(mutex_);
  for (size_t i = 0; i < pending_.size(); ++i) {
    if (pending_[i]) updates.emplace_back(i, std::move(*std::exchange(pending_[i], std::nullopt)));
  }
  notify_ = true;
  return updates;
}

}  // namespace nanovllm
