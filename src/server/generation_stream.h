// The hand-over of one HTTP call's outputs from the engine thread to the connection's I/O
// thread. The engine thread never waits on a client: updates for a choice that the I/O side has
// not taken yet are merged into one, so a slow reader costs at most its own not-yet-sent output
// (bounded by its max_tokens) and never stalls the engine or other clients.
#pragma once

#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nanovllm/request_output.h"

namespace nanovllm {

// What one choice (one engine request) produced since the I/O side last looked.
struct ChoiceUpdate {
  std::string text;
  std::vector<int> token_ids;
  std::vector<PositionLogprobs> logprobs;  // when the request asked for logprobs
  bool finished = false;                   // the last update of this choice
  std::string finish_reason;               // "stop" | "length" when it finished normally
  std::string error;                       // why it failed, when it did
  int error_status = 500;                  // the HTTP status that error maps to
  int num_prompt_tokens = 0;               // set on the last update
  int num_completion_tokens = 0;           // set on the last update

  // Appends a later update to this one.
  void merge(ChoiceUpdate&& later);
};

class GenerationStream {
 public:
  explicit GenerationStream(size_t num_choices) : pending_(num_choices) {}

  size_t num_choices() const { return pending_.size(); }

  // Set before the stream is submitted. Called on the engine thread when an update arrives
  // while the I/O side is not already due to look; it must only schedule work.
  void set_notifier(std::function<void()> notifier) { notifier_ = std::move(notifier); }

  // Engine thread.
  void publish(size_t choice, ChoiceUpdate update);

  // I/O side: the updates pending now, in choice order; re-arms the notifier.
  std::vector<std::pair<size_t, ChoiceUpdate>> take();

 private:
  std::mutex mutex_;
  std::vector<std::optional<ChoiceUpdate>> pending_;
  bool notify_ = true;  // whether the next publish() calls the notifier
  std::function<void()> notifier_;
};

}  // namespace nanovllm
