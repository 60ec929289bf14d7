// Appending a sampled token to a sequence and deciding whether the sequence is done.
#pragma once

#include <string>
#include <vector>

#include "engine/model_executor.h"
#include "engine/sequence.h"

namespace nanovllm {

struct StopConditions {
  std::vector<int> eos_token_ids;  // any of them ends a sequence unless it ignores EOS
  int max_model_len = 0;           // no sequence grows longer
};

// Appends `sample` (token, logprobs, decoded text) to `seq`. Returns true and sets
// seq.finish_reason when the sequence is finished: "stop" for an EOS token, a stop token id or
// a stop string (the text is cut before the stop string, as vLLM does), otherwise "length" at
// max_tokens or max_model_len.
bool append_token_and_check_stop(Sequence& seq, const SampleResult& sample,
                                 const StopConditions& stop);

// Where the earliest stop string starts in `text`, looking only at matches that end after
// `new_text_begin` (earlier text was checked before); std::string::npos when none.
size_t find_stop_string(const std::string& text, size_t new_text_begin,
                        const std::vector<std::string>& stop_strings);

}  // namespace nanovllm
