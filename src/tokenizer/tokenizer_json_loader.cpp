#include "tokenizer/tokenizer_json_loader.h"

#include <fstream>
#include <map>
#include <sstream>

#include "core/check.h"
#include "tokenizer/json_reader.h"
#include "tokenizer/tokenizer_impl.h"

namespace nanovllm {

using nlohmann::json;

namespace {

std::string type_of(const JsonReader& r, const json& j, std::string_view where) {
  return r.string(j, "type", where);
}

[[noreturn]] void unsupported(const JsonReader& r, std::string_view where, std::string_view what,
                              std::string_view type) {
  r.fail(where, fmt::format("unsupported {} type '{}'", what, type));
}

// ---- normalizer ----

void read_normalizer(const JsonReader& r, const json& j, const std::string& where,
                     std::vector<NormalizationForm>& forms) {
  if (j.is_null()) return;
  const std::string type = type_of(r, j, where);
  if (type == "NFC") {
    forms.push_back(NormalizationForm::kNFC);
  } else if (type == "NFD") {
    forms.push_back(NormalizationForm::kNFD);
  } else if (type == "NFKC") {
    forms.push_back(NormalizationForm::kNFKC);
  } else if (type == "NFKD") {
    forms.push_back(NormalizationForm::kNFKD);
  } else if (type == "Sequence") {
    const json& list = r.array(r.field(j, "normalizers", where), where + ".normalizers");
    for (std::size_t i = 0; i < list.size(); ++i) {
      read_normalizer(r, list[i], fmt::format("{}.normalizers[{}]", where, i), forms);
    }
  } else {
    unsupported(r, where, "normalizer", type);
  }
}

// ---- pre-tokenizer ----

SplitBehavior read_behavior(const JsonReader& r, const json& j, const std::string& where) {
  const std::string b = r.string(j, "behavior", where);
  if (b == "Removed") return SplitBehavior::kRemoved;
  if (b == "Isolated") return SplitBehavior::kIsolated;
  if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (b == "Contiguous") return SplitBehavior::kContiguous;
  r.fail(where, fmt::format("unknown split behavior '{}'", b));
}

void read_pre_tokenizer(const JsonReader& r, const json& j, const std::string& where,
                        PreTokenizer& out) {
  if (j.is_null()) return;
  const std::string type = type_of(r, j, where);
  if (out.byte_level()) r.fail(where, "only ByteLevel may come last in the pre-tokenizer");
  if (type == "Sequence") {
    const json& list = r.array(r.field(j, "pretokenizers", where), where + ".pretokenizers");
    for (std::size_t i = 0; i < list.size(); ++i) {
      read_pre_tokenizer(r, list[i], fmt::format("{}.pretokenizers[{}]", where, i), out);
    }
  } else if (type == "Split") {
    const json& pattern = r.object(r.field(j, "pattern", where), where + ".pattern");
    const SplitBehavior behavior = read_behavior(r, j, where);
    const bool invert = r.boolean(j, "invert", where, false);
    if (pattern.contains("Regex")) {
      const std::string regex = r.string(pattern, "Regex", where + ".pattern");
      try {
        out.add_regex_split(regex, behavior, invert);
      } catch (const Error& e) {
        r.fail(where, e.what());
      }
    } else if (pattern.contains("String")) {
      out.add_literal_split(r.string(pattern, "String", where + ".pattern"), behavior, invert);
    } else {
      r.fail(where + ".pattern", "expected {\"Regex\": ...} or {\"String\": ...}");
    }
  } else if (type == "ByteLevel") {
    out.set_byte_level(r.boolean(j, "add_prefix_space", where, true),
                       r.boolean(j, "use_regex", where, true));
  } else {
    unsupported(r, where, "pre_tokenizer", type);
  }
}

// ---- model ----

std::unique_ptr<BpeModel> read_model(const JsonReader& r, const json& j, bool byte_level) {
  const std::string where = "model";
  r.object(j, where);
  const std::string type = j.contains("type") ? type_of(r, j, where) : "BPE";
  if (type != "BPE") unsupported(r, where, "model", type);
  if (j.contains("dropout") && !j["dropout"].is_null()) {
    if (!j["dropout"].is_number()) r.fail(where, "field 'dropout' must be a number or null");
    if (j["dropout"].get<double>() != 0.0) r.fail(where, "BPE dropout is not supported");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const std::optional<std::string> v = r.optional_string(j, key, where);
    if (v && !v->empty()) r.fail(where, fmt::format("a non-empty {} is not supported", key));
  }
  if (r.boolean(j, "byte_fallback", where, false)) r.fail(where, "byte_fallback is not supported");

  BpeOptions options;
  options.unk_token = r.optional_string(j, "unk_token", where);
  options.fuse_unk = r.boolean(j, "fuse_unk", where, false);
  options.ignore_merges = r.boolean(j, "ignore_merges", where, false);
  options.byte_level = byte_level;

  const json& vocab_json = r.object(r.field(j, "vocab", where), "model.vocab");
  std::vector<std::pair<std::string, int>> vocab;
  vocab.reserve(vocab_json.size());
  for (const auto& [token, id] : vocab_json.items()) {
    vocab.emplace_back(token, r.integer(id, fmt::format("model.vocab[\"{}\"]", token)));
  }

  // Merges are "left right" strings (split at the one space) or [left, right] pairs.
  const json& merges_json = r.array(r.field(j, "merges", where), "model.merges");
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(merges_json.size());
  for (std::size_t i = 0; i < merges_json.size(); ++i) {
    const json& m = merges_json[i];
    const std::string at = fmt::format("model.merges[{}]", i);
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const std::size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
        r.fail(at, fmt::format("merge '{}' is not two tokens separated by one space", s));
      }
      merges.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      r.fail(at, "a merge must be a \"left right\" string or a [left, right] pair");
    }
  }
  try {
    return std::make_unique<BpeModel>(std::move(vocab), merges, std::move(options));
  } catch (const Error& e) {
    r.fail(where, e.what());
  }
}

// ---- added tokens ----

AddedToken read_added_token(const JsonReader& r, const json& j, const std::string& where) {
  AddedToken t;
  t.id = r.integer(j, "id", where);
  if (t.id < 0) r.fail(where, fmt::format("negative id {}", t.id));
  t.content = r.string(j, "content", where);
  if (t.content.empty()) r.fail(where, "empty content");
  t.special = r.boolean(j, "special", where, false);
  t.single_word = r.boolean(j, "single_word", where, false);
  t.lstrip = r.boolean(j, "lstrip", where, false);
  t.rstrip = r.boolean(j, "rstrip", where, false);
  t.normalized = r.boolean(j, "normalized", where, !t.special);
  return t;
}

// Tokens that tokenizer_config.json's added_tokens_decoder lists but tokenizer.json lacks
// are added as transformers does; the same id with different content is an error.
void merge_config_tokens(const JsonReader& config_reader, const TokenizerConfig& config,
                         std::vector<AddedToken>& tokens) {
  std::map<int, const AddedToken*> by_id;
  for (const AddedToken& t : tokens) by_id[t.id] = &t;
  std::vector<AddedToken> extra;
  for (const AddedToken& t : config.added_tokens_decoder) {
    const auto it = by_id.find(t.id);
    if (it == by_id.end()) {
      extra.push_back(t);
    } else if (it->second->content != t.content) {
      config_reader.fail(fmt::format("added_tokens_decoder[\"{}\"]", t.id),
                         fmt::format("content '{}' differs from tokenizer.json's '{}'", t.content,
                                     it->second->content));
    }
  }
  tokens.insert(tokens.end(), extra.begin(), extra.end());
}

// ---- post-processor ----

PostProcessor read_template(const JsonReader& r, const json& j, const std::string& where) {
  const json& single = r.array(r.field(j, "single", where), where + ".single");
  const json& specials = r.object(r.field(j, "special_tokens", where), where + ".special_tokens");
  std::vector<int> prefix, suffix;
  bool seen_sequence = false;
  for (std::size_t i = 0; i < single.size(); ++i) {
    const std::string at = fmt::format("{}.single[{}]", where, i);
    const json& piece = r.object(single[i], at);
    if (piece.contains("Sequence")) {
      const std::string id = r.string(piece["Sequence"], "id", at + ".Sequence");
      if (id != "A" || seen_sequence) r.fail(at, "a single-sequence template takes $A once");
      seen_sequence = true;
    } else if (piece.contains("SpecialToken")) {
      const std::string name = r.string(piece["SpecialToken"], "id", at + ".SpecialToken");
      const std::string key = fmt::format("{}.special_tokens[\"{}\"]", where, name);
      if (!specials.contains(name))
        r.fail(at, fmt::format("special token '{}' is not defined", name));
      const json& ids = r.array(r.field(specials[name], "ids", key), key + ".ids");
      for (const json& id : ids) (seen_sequence ? suffix : prefix).push_back(r.integer(id, key));
    } else {
      r.fail(at, "expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
    }
  }
  if (!seen_sequence) r.fail(where + ".single", "the template has no $A");
  return PostProcessor(std::move(prefix), std::move(suffix));
}

PostProcessor read_post_processor(const JsonReader& r, const json& j, const std::string& where) {
  if (j.is_null()) return {};
  const std::string type = type_of(r, j, where);
  if (type == "ByteLevel") return {};  // only adjusts offsets
  if (type == "TemplateProcessing") return read_template(r, j, where);
  if (type == "Sequence") {
    const json& list = r.array(r.field(j, "processors", where), where + ".processors");
    PostProcessor out;
    for (std::size_t i = 0; i < list.size(); ++i) {
      out = out.then(read_post_processor(r, list[i], fmt::format("{}.processors[{}]", where, i)));
    }
    return out;
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    // "cls": [token, id], "sep": [token, id]: [CLS] A [SEP].
    const auto id_of = [&](const char* key) {
      const json& pair = r.array(r.field(j, key, where), where + "." + key);
      if (pair.size() != 2) r.fail(where + "." + key, "expected [token, id]");
      return r.integer(pair[1], where + "." + key);
    };
    return PostProcessor({id_of("cls")}, {id_of("sep")});
  }
  unsupported(r, where, "post_processor", type);
}

// ---- decoder ----

TokenDecoder::Kind read_decoder(const JsonReader& r, const json& j, const std::string& where) {
  if (j.is_null()) return TokenDecoder::Kind::kJoinWithSpaces;
  const std::string type = type_of(r, j, where);
  if (type == "ByteLevel") return TokenDecoder::Kind::kByteLevel;
  if (type == "Sequence") {
    const json& list = r.array(r.field(j, "decoders", where), where + ".decoders");
    if (list.size() == 1) return read_decoder(r, list[0], where + ".decoders[0]");
    r.fail(where, "only a Sequence of one ByteLevel decoder is supported");
  }
  unsupported(r, where, "decoder", type);
}

std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("{}: cannot open file", path.string()));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace

std::shared_ptr<TokenizerImpl> load_tokenizer_files(
    const std::filesystem::path& tokenizer_json,
    const std::optional<std::filesystem::path>& tokenizer_config,
    const std::optional<std::filesystem::path>& chat_template_file) {
  auto impl = std::make_shared<TokenizerImpl>();
  const json j = JsonReader::parse_file(tokenizer_json);
  const JsonReader r(tokenizer_json);
  r.object(j, "top level");

  std::optional<JsonReader> config_reader;
  if (tokenizer_config) {
    impl->config = TokenizerConfig::load(*tokenizer_config);
    config_reader.emplace(*tokenizer_config);
  }
  if (!impl->config.chat_template && chat_template_file) {
    impl->config.chat_template = read_text_file(*chat_template_file);
  }

  std::vector<NormalizationForm> forms;
  read_normalizer(r, j.value("normalizer", json()), "normalizer", forms);
  impl->normalizer = Normalizer(std::move(forms));
  read_pre_tokenizer(r, j.value("pre_tokenizer", json()), "pre_tokenizer", impl->pre_tokenizer);
  impl->model = read_model(r, r.field(j, "model", "top level"), impl->pre_tokenizer.byte_level());

  if (j.contains("added_tokens") && !j["added_tokens"].is_null()) {
    const json& list = r.array(j["added_tokens"], "added_tokens");
    for (std::size_t i = 0; i < list.size(); ++i) {
      impl->added_tokens.push_back(
          read_added_token(r, list[i], fmt::format("added_tokens[{}]", i)));
    }
  }
  if (config_reader) merge_config_tokens(*config_reader, impl->config, impl->added_tokens);

  impl->finish(read_decoder(r, j.value("decoder", json()), "decoder"));

  // tokenizer.json's post-processor alone decides what add_special_tokens adds: transformers 5
  // does not rebuild it from tokenizer_config.json's add_bos_token/add_eos_token.
  impl->post_processor =
      read_post_processor(r, j.value("post_processor", json()), "post_processor");
  // encode() hands these ids out as they are: each must name a token.
  for (const std::vector<int>* ids :
       {&impl->post_processor.prefix(), &impl->post_processor.suffix()}) {
    for (const int id : *ids) {
      if (!impl->decoder.has_token(id)) {
        r.fail("post_processor", fmt::format("adds token id {}, which no token has", id));
      }
    }
  }
  return impl;
}

std::shared_ptr<TokenizerImpl> load_tokenizer_dir(const std::filesystem::path& dir) {
  const std::filesystem::path json_path = dir / "tokenizer.json";
  if (!std::filesystem::exists(json_path)) {
    throw Error(fmt::format("{}: no tokenizer.json in the model directory", dir.string()));
  }
  std::optional<std::filesystem::path> config = dir / "tokenizer_config.json";
  if (!std::filesystem::exists(*config)) config.reset();
  std::optional<std::filesystem::path> chat_template = dir / "chat_template.jinja";
  if (!std::filesystem::exists(*chat_template)) chat_template.reset();
  return load_tokenizer_files(json_path, config, chat_template);
}

}  // namespace nanovllm
