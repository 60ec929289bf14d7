#include "engine/stop_checker.h"

#include <algorithm>

namespace nanovllm {

size_t find_stop_string(const std::string& text, size_t new_text_begin,
                        const std::vector<std::string>& stop_strings) {
  size_t earliest = std::string::npos;
  for (const std::string& stop : stop_strings) {
    // A match ending in the new text starts at most stop.size() - 1 bytes before it.
    const size_t from = new_text_begin >= stop.size() ? new_text_begin - stop.size() + 1 : 0;
    const size_t at = text.find(stop, from);
    if (at != std::string::npos) earliest = std::min(earliest, at);
  }
  return earliest;
}

bool append_token_and_check_stop(Sequence& seq, const SampleResult& sample,
                                 const StopConditions& stop) {
  const int token = sample.token_id;
  seq.token_ids.push_back(token);
  if (seq.params.logprobs && sample.logprobs) seq.logprobs.push_back(*sample.logprobs);

  bool stop_string_hit = false;
  if (seq.decoder) {
    const size_t new_text_begin = seq.text.size();
    seq.text += seq.decoder->push(token);
    if (!seq.params.stop.empty() && seq.text.size() > new_text_begin) {
      const size_t at = find_stop_string(seq.text, new_text_begin, seq.params.stop);
      if (at != std::string::npos) {
        seq.text.resize(at);
        stop_string_hit = true;
      }
    }
  }

  const auto contains = [token](const std::vector<int>& ids) {
    return std::find(ids.begin(), ids.end(), token) != ids.end();
  };
  if (stop_string_hit || (!seq.params.ignore_eos && contains(stop.eos_token_ids)) ||
      contains(seq.params.stop_token_ids)) {
    seq.finish_reason = "stop";
  } else if (seq.num_completion_tokens() >= seq.params.max_tokens ||
             seq.num_tokens() >= stop.max_model_len) {
    seq.finish_reason = "length";
  } else {
    return false;
  }
  // The text was cut before a stop string; otherwise flush what the decoder still holds.
  if (seq.decoder && !stop_string_hit) seq.text += seq.decoder->finish();
  return true;
}

}  // namespace nanovllm
