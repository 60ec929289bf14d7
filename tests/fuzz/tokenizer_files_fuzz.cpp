// Loading a tokenizer: the input as tokenizer.json alone, and as the tokenizer_config.json
// (special tokens, flags, chat template) next to a small valid tokenizer.json. A tokenizer that
// loads must then encode, decode and stream without anything but clean errors.
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "fuzz_support.h"
#include "llm/chat_prompt.h"
#include "tokenizer_checks.h"

using namespace nanovllm;

namespace {

void exercise(const Tokenizer& tokenizer) {
  for (const char* text :
       {"Hello wörld, 123 <s>\n\tdone", "ab ab c", "", "\xe4\xbd\xa0 \xf0\x9f\xa4\x97"}) {
    try {
      const std::vector<int> ids = tokenizer.encode(text, true);
      for (const int id : ids) FUZZ_ASSERT(id >= 0 && id < tokenizer.vocab_size());
      fuzz::check_streaming_matches_decode(tokenizer, ids);
    } catch (const Error&) {
    }
  }
  std::vector<int> every_id;
  for (int id = -1; id <= tokenizer.vocab_size() + 1 && id < 512; ++id) every_id.push_back(id);
  fuzz::check_streaming_matches_decode(tokenizer, every_id);
  if (!tokenizer.chat_template()) return;
  try {
    const ChatPrompt chat(tokenizer);
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    messages.push_back({{"role", "user"}, {"content", "Hi"}});
    chat.render(messages, true, nlohmann::ordered_json::object());
  } catch (const Error&) {
  }
}

void load_and_exercise(const std::filesystem::path& tokenizer_json,
                       const std::optional<std::filesystem::path>& tokenizer_config) {
  std::optional<Tokenizer> tokenizer;
  try {
    tokenizer = Tokenizer::from_files(tokenizer_json, tokenizer_config);
  } catch (const Error&) {
    return;
  }
  exercise(*tokenizer);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = fuzz::as_text(data, size);
  const std::filesystem::path fuzzed_json = fuzz::scratch() / "tokenizer.json";
  testing::write_file(fuzzed_json, text);
  load_and_exercise(fuzzed_json, std::nullopt);

  const std::filesystem::path valid_json =
      std::filesystem::path(NANOVLLM_FUZZ_DIR) / "corpus/tokenizer_files/bpe_byte_level.json";
  const std::filesystem::path fuzzed_config = fuzz::scratch() / "tokenizer_config.json";
  testing::write_file(fuzzed_config, text);
  load_and_exercise(valid_json, fuzzed_config);
  return 0;
}
