#include "tokenizer/tokenizer_config.h"

#include <algorithm>

#include <fmt/format.h>

#include "tokenizer/json_reader.h"

namespace nanovllm {

using nlohmann::json;

namespace {

// A special token is either a string or an AddedToken object {"content": ...}.
std::optional<std::string> token_name(const JsonReader& reader, const json& config,
                                      const char* key) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) return reader.string(*it, "content", key);
  reader.fail(key, fmt::format("expected a string or an object, got {}", it->type_name()));
}

std::optional<std::string> default_chat_template(const JsonReader& reader, const json& config) {
  const auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array()) {
    reader.fail("chat_template", fmt::format("expected a string or a list of {{name, template}}, "
                                             "got {}",
                                             it->type_name()));
  }
  for (std::size_t i = 0; i < it->size(); ++i) {
    const std::string where = fmt::format("chat_template[{}]", i);
    const json& entry = (*it)[i];
    if (reader.string(entry, "name", where) == "default") {
      return reader.string(entry, "template", where);
    }
  }
  return std::nullopt;
}

}  // namespace

TokenizerConfig TokenizerConfig::load(const std::filesystem::path& path) {
  const json config = JsonReader::parse_file(path);
  const JsonReader reader(path);
  reader.object(config, "top level");

  TokenizerConfig out;
  out.bos_token = token_name(reader, config, "bos_token");
  out.eos_token = token_name(reader, config, "eos_token");
  out.pad_token = token_name(reader, config, "pad_token");
  out.unk_token = token_name(reader, config, "unk_token");
  out.add_bos_token = reader.optional_boolean(config, "add_bos_token", "top level");
  out.add_eos_token = reader.optional_boolean(config, "add_eos_token", "top level");
  out.chat_template = default_chat_template(reader, config);

  if (const auto it = config.find("added_tokens_decoder"); it != config.end() && !it->is_null()) {
    reader.object(*it, "added_tokens_decoder");
    for (const auto& [key, value] : it->items()) {
      const std::string where = fmt::format("added_tokens_decoder[\"{}\"]", key);
      AddedToken token;
      std::size_t used = 0;
      try {
        token.id = std::stoi(key, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != key.size() || key.empty() || token.id < 0)
        reader.fail(where, "key is not a token id");
      token.content = reader.string(value, "content", where);
      token.special = reader.boolean(value, "special", where, false);
      token.single_word = reader.boolean(value, "single_word", where, false);
      token.lstrip = reader.boolean(value, "lstrip", where, false);
      token.rstrip = reader.boolean(value, "rstrip", where, false);
      token.normalized = reader.boolean(value, "normalized", where, !token.special);
      out.added_tokens_decoder.push_back(std::move(token));
    }
    std::sort(out.added_tokens_decoder.begin(), out.added_tokens_decoder.end(),
              [](const AddedToken& a, const AddedToken& b) { return a.id < b.id; });
  }
  return out;
}

}  // namespace nanovllm
